package testobj_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
)

// Each builder and option makes what it says: every case reads one part of a
// built object and names what it must be.
func TestBuilders(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := resource.MustParse
	ptr := func(i int32) *int32 { return &i }
	yes := true
	pod := func(opts ...testobj.PodOption) *corev1.Pod { return testobj.Pod("web", "1", "2Gi", opts...) }
	pool := func(opts ...testobj.NodePoolOption) *v1.NodePool { return testobj.NodePool("pool", opts...) }
	node := func(opts ...testobj.NodeOption) *corev1.Node { return testobj.Node("n", "4", "8Gi", opts...) }
	claim := func(opts ...testobj.NodeClaimOption) *v1.NodeClaim { return testobj.NodeClaim("c", opts...) }
	selector := map[string]string{"app": "web"}
	anyTerm := []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpExists}}
	zoneA := corev1.NodeSelectorRequirement{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	conds := func(nc *v1.NodeClaim) map[string]metav1.ConditionStatus {
		out := map[string]metav1.ConditionStatus{}
		for _, c := range nc.Status.Conditions {
			if c.Reason != c.Type || !c.LastTransitionTime.Time.Equal(since) {
				out[c.Type] = "reason or time wrong"
				continue
			}
			out[c.Type] = c.Status
		}
		return out
	}

	for _, tc := range []struct {
		name      string
		got, want any
	}{
		// Pods.
		{"Pod: name, namespace default, UID its name", pod().ObjectMeta,
			metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web"}},
		{"Pod: one pause container requesting cpu and memory", pod().Spec,
			corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: testobj.Image,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("2Gi")}}}}}},
		{"Pod: an empty quantity is not requested", testobj.Pod("p", "", "1Gi").Spec.Containers[0].Resources.Requests,
			corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		{"Pod: no status", pod().Status, corev1.PodStatus{}},
		{"Pods: n, named prefix-i", []string{testobj.Pods(2, "w", "1", "1Gi")[0].Name, testobj.Pods(2, "w", "1", "1Gi")[1].Name},
			[]string{"w-0", "w-1"}},
		{"Pods: options apply to each", testobj.Pods(2, "w", "1", "1Gi", testobj.NodeName("n"))[1].Spec.NodeName, "n"},
		{"Namespace", pod(testobj.Namespace("ns")).Namespace, "ns"},
		{"UID", pod(testobj.UID("")).UID, metav1.ObjectMeta{}.UID},
		{"Labels merge", pod(testobj.Labels("a", "1"), testobj.Labels("b", "2", "a", "3")).Labels, map[string]string{"a": "3", "b": "2"}},
		{"Annotations", pod(testobj.Annotations("a", "1")).Annotations, map[string]string{"a": "1"}},
		{"NodeSelector merges", pod(testobj.NodeSelector("a", "1"), testobj.NodeSelector("b", "2")).Spec.NodeSelector,
			map[string]string{"a": "1", "b": "2"}},
		{"Toleration", pod(testobj.Toleration("k", "v", corev1.TaintEffectNoExecute)).Spec.Tolerations,
			[]corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoExecute}}},
		{"Tolerations add", pod(testobj.Toleration("a", "", ""), testobj.Tolerations(corev1.Toleration{Operator: corev1.TolerationOpExists})).Spec.Tolerations,
			[]corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpEqual}, {Operator: corev1.TolerationOpExists}}},
		{"NodeName", pod(testobj.NodeName("n1")).Spec.NodeName, "n1"},
		{"OwnedBy a ReplicaSet", pod(testobj.OwnedBy("ReplicaSet", "rs", "u")).OwnerReferences,
			[]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: &yes}}},
		{"OwnedBy a Job", pod(testobj.OwnedBy("Job", "j", "u")).OwnerReferences[0].APIVersion, "batch/v1"},
		{"Phase", pod(testobj.Phase(corev1.PodRunning)).Status.Phase, corev1.PodRunning},
		{"Unschedulable", pod(testobj.Unschedulable()).Status.Conditions,
			[]corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
		{"Priority", pod(testobj.Priority(7)).Spec.Priority, ptr(7)},
		{"Request adds to the first container", pod(testobj.Request("example.com/gpu", "1")).Spec.Containers[0].Resources.Requests,
			corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("2Gi"), "example.com/gpu": q("1")}},
		{"Request on a pod of no requests", testobj.Pod("p", "", "", testobj.Request(corev1.ResourceCPU, "1")).Spec.Containers[0].Resources.Requests,
			corev1.ResourceList{corev1.ResourceCPU: q("1")}},
		{"Spread", pod(testobj.Spread(v1.LabelZone, 1, corev1.DoNotSchedule, selector)).Spec.TopologySpreadConstraints,
			[]corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}},
		{"PodAffinity", pod(testobj.PodAffinity(v1.LabelZone, selector)).Spec.Affinity,
			&corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: v1.LabelZone, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}}}},
		{"PodAntiAffinity", pod(testobj.PodAntiAffinity(corev1.LabelHostname, selector)).Spec.Affinity,
			&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}}}},
		{"NodeAffinity: a term per list, and the preferred terms kept",
			pod(testobj.PreferredNodeAffinity(5, zoneA), testobj.NodeAffinity(anyTerm, []corev1.NodeSelectorRequirement{zoneA})).Spec.Affinity,
			&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: anyTerm}, {MatchExpressions: []corev1.NodeSelectorRequirement{zoneA}}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneA}}}}}}},
		{"HostPort", pod(testobj.HostPort(8080)).Spec.Containers[0].Ports, []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}},
		{"a literal option", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }).Spec.HostNetwork, true},

		// NodePools.
		{"NodePool: its name and the SimNodeClass default, nothing else", pool(),
			&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{
				Spec: v1.NodeClaimTemplateSpec{NodeClassRef: &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}}}}}},
		{"NodeClassRef", pool(testobj.NodeClassRef(testobj.SimClass("other"))).Spec.Template.Spec.NodeClassRef.Name, "other"},
		{"Requirement", pool(testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, "spot", "on-demand")).Spec.Template.Spec.Requirements,
			[]v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}}},
		{"MinValues", pool(testobj.MinValues(v1.LabelInstanceType, 2, "a", "b")).Spec.Template.Spec.Requirements[0].MinValues, func() *int { n := 2; return &n }()},
		{"Limit", pool(testobj.Limit(corev1.ResourceCPU, "10"), testobj.Limit("nodes", "3")).Spec.Limits,
			v1.Limits{corev1.ResourceCPU: q("10"), "nodes": q("3")}},
		{"Weight", pool(testobj.Weight(10)).Spec.Weight, ptr(10)},
		{"TemplateLabels", pool(testobj.TemplateLabels("pool", "a")).Spec.Template.Labels, map[string]string{"pool": "a"}},
		{"TemplateTaint", pool(testobj.TemplateTaint("dedicated", "db", corev1.TaintEffectNoSchedule)).Spec.Template.Spec.Taints, []corev1.Taint{taint}},
		{"PoolAnnotations", pool(testobj.PoolAnnotations(v1.NodePoolHashAnnotationKey, "h1")).Annotations,
			map[string]string{v1.NodePoolHashAnnotationKey: "h1"}},
		{"ConsolidateAfter", pool(testobj.ConsolidateAfter("30s")).Spec.Disruption.ConsolidateAfter, v1.MustParseNillableDuration("30s")},
		{"ConsolidateAfter Never", pool(testobj.ConsolidateAfter("Never")).Spec.Disruption.ConsolidateAfter, v1.MustParseNillableDuration("Never")},
		{"ConsolidationPolicy", pool(testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmpty)).Spec.Disruption.ConsolidationPolicy,
			v1.ConsolidationPolicyWhenEmpty},
		{"Budgets replace", pool(testobj.Budgets("1"), testobj.Budgets("10%", "0")).Spec.Disruption.Budgets, []v1.Budget{{Nodes: "10%"}, {Nodes: "0"}}},
		{"ExpireAfter", pool(testobj.ExpireAfter("1h")).Spec.Template.Spec.ExpireAfter, v1.MustParseNillableDuration("1h")},
		{"Replicas", pool(testobj.Replicas(3)).Spec.Replicas, func() *int64 { n := int64(3); return &n }()},

		// Nodes.
		{"Node: Ready, its hostname label, room for cpu, memory and 110 pods", node(),
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{corev1.LabelHostname: "n"}},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("110")},
					Capacity:    corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("110")},
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}},
		{"Node: empty quantities leave room for pods only", testobj.Node("n", "", "").Status.Allocatable, corev1.ResourceList{corev1.ResourcePods: q("110")}},
		{"NodeLabels", node(testobj.NodeLabels(v1.NodePoolLabelKey, "p")).Labels, map[string]string{corev1.LabelHostname: "n", v1.NodePoolLabelKey: "p"}},
		{"NodeTaints", node(testobj.NodeTaints(taint), testobj.NodeTaints(taint)).Spec.Taints, []corev1.Taint{taint, taint}},
		{"ProviderID", node(testobj.ProviderID("fake:///n")).Spec.ProviderID, "fake:///n"},
		{"NodeReady replaces the condition", node(testobj.NodeReady(corev1.ConditionFalse, since)).Status.Conditions,
			[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
				LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}}},
		{"NodeCapacity", node(testobj.NodeCapacity(corev1.ResourceList{corev1.ResourceCPU: q("8")}, corev1.ResourceList{corev1.ResourceCPU: q("7")})).Status.Allocatable,
			corev1.ResourceList{corev1.ResourceCPU: q("7")}},

		// NodeClaims.
		{"NodeClaim: its name, the SimNodeClass default, no status", claim(),
			&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1.NodeClaimSpec{NodeClassRef: testobj.SimClass("default")}}},
		{"ClaimLabels", claim(testobj.ClaimLabels(v1.NodePoolLabelKey, "p")).Labels, map[string]string{v1.NodePoolLabelKey: "p"}},
		{"ClaimAnnotations", claim(testobj.ClaimAnnotations("a", "1")).Annotations, map[string]string{"a": "1"}},
		{"ClaimNodeClassRef", claim(testobj.ClaimNodeClassRef(&v1.NodeClassReference{Kind: "EC2NodeClass"})).Spec.NodeClassRef.Kind, "EC2NodeClass"},
		{"ClaimRequirement", claim(testobj.ClaimRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, "m5.large")).Spec.Requirements,
			[]v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large"}}}},
		{"ClaimNode", claim(testobj.ClaimNode("fake:///n", "n")).Status, v1.NodeClaimStatus{ProviderID: "fake:///n", NodeName: "n"}},
		{"ClaimCondition replaces its type", conds(claim(testobj.ClaimCondition(v1.ConditionTypeLaunched, metav1.ConditionFalse, since),
			testobj.ClaimCondition(v1.ConditionTypeLaunched, metav1.ConditionTrue, since))),
			map[string]metav1.ConditionStatus{v1.ConditionTypeLaunched: metav1.ConditionTrue}},
		{"Initialized", conds(claim(testobj.Initialized(since))), map[string]metav1.ConditionStatus{
			v1.ConditionTypeLaunched: metav1.ConditionTrue, v1.ConditionTypeRegistered: metav1.ConditionTrue, v1.ConditionTypeInitialized: metav1.ConditionTrue}},

		// Deployments.
		{"Deployment: app=name selects its pods, of the pod's spec", testobj.Deployment("web", 3, "1", "2Gi").Spec,
			func() any {
				d := testobj.Deployment("x", 0, "", "").Spec
				d.Replicas = func() *int32 { n := int32(3); return &n }()
				d.Selector = &metav1.LabelSelector{MatchLabels: selector}
				d.Template.Labels = selector
				d.Template.Spec = pod().Spec
				return d
			}()},
		{"Deployment: in namespace default", testobj.Deployment("web", 1, "1", "1Gi").ObjectMeta, metav1.ObjectMeta{Name: "web", Namespace: "default"}},
		{"Template applies pod options to the template",
			testobj.Deployment("web", 1, "1", "1Gi", testobj.Template(testobj.NodeSelector("pool", "a"), testobj.Labels("tier", "x"),
				testobj.Annotations("a", "1"), testobj.Namespace("ignored"))).Spec.Template,
			func() corev1.PodTemplateSpec {
				spec := testobj.Pod("x", "1", "1Gi").Spec
				spec.NodeSelector = map[string]string{"pool": "a"}
				return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "x"},
					Annotations: map[string]string{"a": "1"}}, Spec: spec}
			}()},
		{"SelectorLabels: the selector and the pods", func() []map[string]string {
			d := testobj.Deployment("web", 1, "1", "1Gi", testobj.SelectorLabels("workload", "w"))
			return []map[string]string{d.Spec.Selector.MatchLabels, d.Spec.Template.Labels}
		}(), []map[string]string{{"app": "web", "workload": "w"}, {"app": "web", "workload": "w"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !equality.Semantic.DeepEqual(tc.got, tc.want) {
				t.Errorf("got (-want +got):\n%s", cmp.Diff(tc.want, tc.got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })))
			}
		})
	}
}

// Objects built from the same arguments share nothing: changing one leaves the
// next alone.
func TestBuildersShareNothing(t *testing.T) {
	a := testobj.Node("n", "1", "1Gi")
	a.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("9")
	if cpu := a.Status.Capacity[corev1.ResourceCPU]; cpu.Value() != 1 {
		t.Errorf("the node's capacity changed with its allocatable: %s", cpu.String())
	}
	d := testobj.Deployment("web", 1, "1", "1Gi")
	d.Spec.Template.Labels["extra"] = "x"
	if len(d.Spec.Selector.MatchLabels) != 1 {
		t.Errorf("the selector changed with the pods' labels: %v", d.Spec.Selector.MatchLabels)
	}
	if b := testobj.Pod("p", "1", "1Gi"); b.Labels != nil {
		t.Errorf("a fresh pod has labels %v", b.Labels)
	}
}

func TestOddKeyValuesPanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Labels with an odd number of strings did not panic")
		}
	}()
	testobj.Pod("p", "1", "1Gi", testobj.Labels("a"))
}
