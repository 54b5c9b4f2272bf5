package operator

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
)

// The controller with the aws provider, against the fake AWS and a real API
// server: a pending pod gets a NodeClaim launched as an EC2 instance, and deleting
// the NodeClaim terminates the instance.

// awsWait bounds each step of the tests of the controller on the fake AWS. The
// first launch reads and builds EC2's 1,200-type catalog, which under the race
// detector on a loaded 2-core machine (CI runs the e2e suites beside these) takes
// tens of seconds: a liveness bound, not a performance target.
const awsWait = 3 * time.Minute

func TestAWSProviderLaunchesAndTerminates(t *testing.T) {
	fake := startFakeAWS(t, fakeaws.Options{TerminationDelay: 100 * time.Millisecond})
	cluster := runAWSController(t, fake, func(o *Options) { o.FeatureGates.CapacityBuffer = true })
	kube := env.kube
	nc, pool := awsNodePool(t, "aws-e2e", cluster, v1.CapacityTypeOnDemand)
	ns := newNamespace(t)
	// A CapacityBuffer Tailor refuses (it keeps no room, so no other instance is
	// launched): its status conditions are on the endpoint, with the CapacityBuffer
	// gate on and the API server serving the kind.
	buffer := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "rollout", Namespace: ns},
		Spec: cb.CapacityBufferSpec{ScalableRef: &cb.ScalableRef{APIGroup: "argoproj.io", Kind: "Rollout", Name: "web"}, Replicas: ptr.To[int32](1)}}
	if err := kube.Create(t.Context(), buffer); err != nil {
		t.Fatal(err)
	}
	pod := unschedulablePod(t, ns, "web")

	var claim v1.NodeClaim
	var instanceID string
	eventually(t, awsWait, func() (bool, string) {
		claims := &v1.NodeClaimList{}
		if err := kube.List(t.Context(), claims); err != nil {
			return false, err.Error()
		}
		for _, c := range claims.Items {
			if c.Labels[v1.NodePoolLabelKey] != pool.Name || c.Status.ProviderID == "" {
				continue
			}
			id, err := awscloud.ParseProviderID(c.Status.ProviderID)
			if err != nil {
				return false, err.Error()
			}
			claim, instanceID = c, id
			return true, ""
		}
		return false, "no launched NodeClaim of the NodePool; NodeClass " + nodeClassReady(t, nc.Name)
	})
	// The launch is an Event on the claim in the API server, as `kubectl describe
	// nodeclaim` shows it.
	eventually(t, awsWait, func() (bool, string) {
		events := &corev1.EventList{}
		if err := kube.List(t.Context(), events, client.MatchingFields{"involvedObject.name": claim.Name}); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "NodeClaim" && e.Reason == "Launched" && strings.Contains(e.Message, claim.Status.ProviderID) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, fmt.Sprintf("no Launched event for NodeClaim %s among %q", claim.Name, seen)
	})
	// The status-condition families of Karpenter's AWS provider on the endpoint:
	// the EC2NodeClass's conditions (also in the kind-less families, as Karpenter
	// still reports them) and its transitions, and the claim's conditions labeled
	// with its EC2NodeClass and NodePool; and the CapacityBuffer's conditions and
	// transitions, in both the per-kind and the kind-less families.
	eventually(t, awsWait, func() (bool, string) {
		want := []struct{ family, labels string }{
			{"operator_ec2nodeclass_status_condition_count", "name=" + nc.Name + " namespace= reason=Ready status=True type=Ready "},
			{"operator_status_condition_count", "group=karpenter.k8s.aws kind=EC2NodeClass name=" + nc.Name + " namespace= reason=Ready status=True type=Ready "},
			{"operator_ec2nodeclass_status_condition_transitions_total", "reason=Ready status=True type=Ready "},
			{"operator_nodeclaim_status_condition_count", "karpenter_k8s_aws_ec2nodeclass=" + nc.Name + " karpenter_sh_nodepool=" + pool.Name + " name=" + claim.Name + " namespace= reason=Launched status=True type=Launched "},
			{"operator_capacitybuffer_status_condition_count", "name=rollout namespace=" + ns + " reason=UnsupportedScalableRef status=False type=ReadyForProvisioning "},
			{"operator_status_condition_count", "group=autoscaling.x-k8s.io kind=CapacityBuffer name=rollout namespace=" + ns + " reason=UnsupportedScalableRef status=False type=ReadyForProvisioning "},
			{"operator_capacitybuffer_status_condition_transitions_total", "reason=UnsupportedScalableRef status=False type=ReadyForProvisioning "},
			{"operator_status_condition_transitions_total", "group=autoscaling.x-k8s.io kind=CapacityBuffer reason=UnsupportedScalableRef status=False type=ReadyForProvisioning "},
		}
		for _, w := range want {
			series := endpointSeries(t, w.family)
			if series[w.labels] < 1 {
				return false, fmt.Sprintf("%s{%s} not on the endpoint; it has %v", w.family, w.labels, series)
			}
		}
		return true, ""
	})
	inst, ok := fake.Instance(instanceID)
	if !ok {
		t.Fatalf("NodeClaim %s records instance %s, which the fake does not have", claim.Name, instanceID)
	}
	if inst.Tags[awscloud.TagNodeClaim] != claim.Name || inst.Tags[awscloud.TagNodePool] != pool.Name ||
		inst.Type != claim.Labels[v1.LabelInstanceType] {
		t.Errorf("instance %+v does not match NodeClaim %s (%v)", inst, claim.Name, claim.Labels)
	}
	if n := len(fake.Instances()); n != 1 {
		t.Errorf("%d instances for one pod, want 1", n)
	}

	// The pod goes first, so that nothing asks for a replacement; then the claim.
	if err := kube.Delete(t.Context(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(t.Context(), &claim); err != nil {
		t.Fatal(err)
	}
	eventually(t, awsWait, func() (bool, string) {
		inst, _ := fake.Instance(instanceID)
		err := kube.Get(t.Context(), client.ObjectKeyFromObject(&claim), &v1.NodeClaim{})
		return inst.State == "terminated" && client.IgnoreNotFound(err) == nil && err != nil,
			"instance " + inst.State + ", NodeClaim lookup: " + errString(err)
	})
	for _, i := range fake.Instances() {
		if i.State != "terminated" && i.State != "shutting-down" {
			t.Errorf("instance %s (NodeClaim %s) is %s after its pod and claim went", i.ID, i.Tags[awscloud.TagNodeClaim], i.State)
		}
	}
	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: pool.Name}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 {
		t.Errorf("%d NodeClaims of NodePool %s left", len(claims.Items), pool.Name)
	}
}

// endpointSeries gathers controller-runtime's registry, which the metrics endpoint
// serves, and returns the series of the family name (gauge or counter) by their
// labels (name=value, sorted).
func endpointSeries(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			out[labelString(m)] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

func nodeClassReady(t *testing.T, name string) string {
	nc := &awsv1.EC2NodeClass{}
	if err := env.kube.Get(t.Context(), client.ObjectKey{Name: name}, nc); err != nil {
		return err.Error()
	}
	if nc.IsReady() {
		return "ready"
	}
	return "not ready"
}

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}

// startFakeAWS serves a fake AWS for the test.
func startFakeAWS(t *testing.T, opts fakeaws.Options) *fakeaws.Server {
	t.Helper()
	fake, err := fakeaws.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	return fake
}

// runAWSController runs the controller with the aws provider against fake until
// the test ends, and returns the fake's cluster name; edit changes its options.
func runAWSController(t *testing.T, fake *fakeaws.Server, edit func(*Options)) string {
	t.Helper()
	cluster := fake.Cluster().Name
	cfg := fake.AWSConfig()
	opts := DefaultOptions()
	opts.CloudProvider = "aws"
	opts.AWS.ClusterName, opts.AWS.Region, opts.AWS.Config = cluster, fake.Region(), &cfg
	opts.LeaderElection, opts.MetricsAddr, opts.HealthAddr = false, "0", "0"
	opts.BatchIdle, opts.BatchMax = 100*time.Millisecond, time.Second
	if edit != nil {
		edit(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, env.cluster.Config, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
		if t.Failed() && env.logPath != "" {
			t.Logf("the end of the controllers' log (%s), errors first:\n%s", env.logPath, logErrorsAndTail(env.logPath, 40))
		}
	})
	return cluster
}

// logErrorsAndTail is the last 40 error lines of the log at path, then its last n
// lines.
func logErrorsAndTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var errs []string
	for _, l := range lines {
		if strings.Contains(l, `"level":"error"`) {
			errs = append(errs, l)
		}
	}
	errs = errs[max(0, len(errs)-40):]
	return strings.Join(errs, "\n") + "\n--- last lines:\n" + strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// awsNodePool creates an EC2NodeClass as Karpenter's examples have it and a
// NodePool of m5.large and m5.xlarge of the capacity type on it, both named name.
func awsNodePool(t *testing.T, name, cluster, capacityType string) (*awsv1.EC2NodeClass, *v1.NodePool) {
	t.Helper()
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			Role:                       "KarpenterNodeRole-" + cluster,
		},
	}
	pool := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
				{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{capacityType}},
			},
		}}},
	}
	for _, o := range []client.Object{nc, pool} {
		if err := env.kube.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.kube.Delete(context.Background(), o) })
	}
	return nc, pool
}

// unschedulablePod creates a pod of 1 cpu and 1Gi marked unschedulable, as the
// kube-scheduler (which does not run here) would mark it.
func unschedulablePod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
	}
	if err := env.kube.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}}
	if err := env.kube.Status().Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
