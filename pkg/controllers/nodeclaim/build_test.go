package nodeclaim

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A claim carries the termination finalizer from its creation.
func TestNodeClaimHasTheFinalizer(t *testing.T) {
	nc := New(testobj.NodePool("default"), &scheduling.NewNode{NodePool: "default"})
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != v1.TerminationFinalizer {
		t.Errorf("finalizers %v, want [%s]", nc.Finalizers, v1.TerminationFinalizer)
	}
}

// A template claim is the pool's template, pinned to the pool, owned by it and
// carrying its hash; a template the scheduler cannot read is an error naming it.
func TestFromTemplate(t *testing.T) {
	pool := testobj.NodePool("static", testobj.PoolAnnotations(v1.NodePoolHashAnnotationKey, "123", "other", "x"),
		testobj.TemplateLabels("tier", "static"), testobj.TemplateTaint("dedicated", "", corev1.TaintEffectNoSchedule),
		testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
	pool.UID = "u1"
	pool.Spec.Template.Annotations = map[string]string{"note": "kept"}
	nc, err := FromTemplate(pool)
	if err != nil {
		t.Fatal(err)
	}
	if nc.GenerateName != "static-" || nc.Labels[v1.NodePoolLabelKey] != "static" || nc.Labels["tier"] != "static" {
		t.Errorf("name %q, labels %v", nc.GenerateName, nc.Labels)
	}
	if nc.Annotations["note"] != "kept" || nc.Annotations[v1.NodePoolHashAnnotationKey] != "123" || nc.Annotations["other"] != "" {
		t.Errorf("annotations %v: want the template's and the pool hash only", nc.Annotations)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].UID != "u1" || len(nc.Spec.Taints) != 1 {
		t.Errorf("owners %v, taints %v", nc.OwnerReferences, nc.Spec.Taints)
	}
	for _, want := range []string{v1.NodePoolLabelKey, v1.CapacityTypeLabelKey} {
		if !slices.ContainsFunc(nc.Spec.Requirements, func(r v1.NodeSelectorRequirementWithMinValues) bool { return r.Key == want }) {
			t.Errorf("requirements %v lack %s", nc.Spec.Requirements, want)
		}
	}
	pool.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: "example.com/gen", Operator: v1.NodeSelectorOpGt, Values: []string{"a", "b"}}}
	if _, err := FromTemplate(pool); err == nil {
		t.Error("a Gt requirement with two values made a claim, want an error")
	}
}

// A claim records the instance-type options, the well-known keys and the keys its
// NodePool constrains, but not the lists of families, sizes and processor counts
// the options imply; the types those requirements allow are still exactly the
// options, so a launch picks from the same list.
func TestNodeClaimRequirementsLeaveOutWhatTheOptionsImply(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	pool := testobj.NodePool("default", testobj.Requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r"),
		testobj.Requirement("karpenter.k8s.aws/instance-generation", v1.NodeSelectorOpGt, "5"))
	pod := testobj.Pod("p", "3", "4Gi", testobj.Namespace("d"))
	plan, err := scheduling.Solve(&scheduling.Input{Pods: []*corev1.Pod{pod},
		NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: types}}}, scheduling.Options{})
	if err != nil || len(plan.NewNodes) != 1 {
		t.Fatalf("plan: %v, %d new nodes", err, len(plan.NewNodes))
	}
	planned := plan.NewNodes[0]
	nc := New(pool, planned)
	keys := map[string]bool{}
	for _, r := range nc.Spec.Requirements {
		keys[r.Key] = true
	}
	for _, key := range []string{v1.LabelInstanceType, v1.CapacityTypeLabelKey, v1.LabelArch, v1.NodePoolLabelKey,
		"karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-generation"} {
		if !keys[key] {
			t.Errorf("the claim has no requirement on %s: %v", key, nc.Spec.Requirements)
		}
	}
	for _, key := range []string{"karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-size"} {
		if !keys[key] {
			continue
		}
		t.Errorf("the claim lists %s, which its options imply", key)
	}
	reqs, err := scheduling.FromNodePool(nc.Spec.Requirements, nil)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, options []string
	for _, it := range types {
		if _, ok := reqs.Intersects(it.Requirements); ok {
			allowed = append(allowed, it.Name)
		}
	}
	for _, it := range planned.InstanceTypes {
		options = append(options, it.Name)
	}
	slices.Sort(allowed)
	slices.Sort(options)
	if !slices.Equal(allowed, options) {
		t.Errorf("the claim allows %d types %v, the plan offered %d %v", len(allowed), allowed, len(options), options)
	}
}

// A claim planned with its NodePool's minValues relaxed (--min-values-policy
// BestEffort) says so, and records the relaxed minValues.
func TestNodeClaimMinValuesRelaxed(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	pool := testobj.NodePool("default", testobj.MinValues(v1.LabelInstanceType, 3, "m5.large", "m5.xlarge", "m5.24xlarge"))
	pod := testobj.Pod("p", "20", "4Gi", testobj.Namespace("d"))
	in := &scheduling.Input{Pods: []*corev1.Pod{pod}, NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: types}}}
	if plan, err := scheduling.Solve(in, scheduling.Options{}); err != nil || len(plan.Unschedulable) != 1 {
		t.Fatalf("strict plan: %v, want the pod unschedulable (only m5.24xlarge holds 20 cpu)", err)
	}
	plan, err := scheduling.Solve(in, scheduling.Options{MinValuesPolicy: scheduling.MinValuesPolicyBestEffort})
	if err != nil || len(plan.NewNodes) != 1 {
		t.Fatalf("best-effort plan: %v, %d new nodes", err, len(plan.NewNodes))
	}
	nc := New(pool, plan.NewNodes[0])
	if nc.Annotations[v1.NodeClaimMinValuesRelaxedAnnotationKey] != "true" {
		t.Errorf("annotations %v, want %s=true", nc.Annotations, v1.NodeClaimMinValuesRelaxedAnnotationKey)
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key == v1.LabelInstanceType && (r.MinValues == nil || *r.MinValues != 1) {
			t.Errorf("instance-type requirement %+v, want minValues relaxed to 1", r)
		}
	}
}
