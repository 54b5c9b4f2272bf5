package operator

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// A condition new or of another status counts as a transition, labeled by its new
// status and reason and the claim's NodePool and EC2NodeClass; one that changed
// status observes how long it held the old one; an update that changes no status
// counts nothing; a deletion observes the termination's length; a standby counts
// nothing.
func TestConditionTransitions(t *testing.T) {
	c := newConditionTransitions("nodeclaim", transitionBuckets(), "karpenter.k8s.aws/ec2nodeclass", v1.NodePoolLabelKey)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claim := func(status metav1.ConditionStatus, reason string, since time.Duration) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{v1.NodePoolLabelKey: "web", "karpenter.k8s.aws/ec2nodeclass": "default"}}}
		nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(at)},
			{Type: v1.ConditionTypeRegistered, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at.Add(since))}}
		return nc
	}
	count := func(typ, status, reason string) float64 {
		return testutil.ToFloat64(c.transitions.WithLabelValues(typ, status, reason, "default", "web"))
	}
	unknown := claim(metav1.ConditionUnknown, "NodeNotFound", 0)
	c.OnAdd(unknown, true)
	if count("Launched", "True", "Launched") != 1 || count("Registered", "Unknown", "NodeNotFound") != 1 {
		t.Errorf("first sight: every condition is a transition, as Karpenter's status controller counts its first reconcile")
	}
	registered := claim(metav1.ConditionTrue, "Registered", 42*time.Second)
	c.OnUpdate(unknown, registered)
	c.OnUpdate(registered, registered.DeepCopy()) // a resync
	if got := count("Registered", "True", "Registered"); got != 1 {
		t.Errorf("Registered True counted %v times, want 1", got)
	}
	if got := count("Launched", "True", "Launched"); got != 1 {
		t.Errorf("Launched, unchanged, counted %v times, want 1", got)
	}
	if n, sum := histogram(t, c, "Registered", "Unknown"); n != 1 || sum != 42 {
		t.Errorf("Registered held Unknown: %d observations summing %v, want one of 42 s", n, sum)
	}

	c.now = func() time.Time { return at.Add(time.Minute) }
	deleting := registered.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: at.Add(50 * time.Second)}
	c.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "c", Obj: deleting})
	m := &dto.Metric{}
	if err := c.termination.WithLabelValues("default", "web").(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		t.Fatal(err)
	}
	if m.GetHistogram().GetSampleCount() != 1 || m.GetHistogram().GetSampleSum() != 10 {
		t.Errorf("termination: %d observations summing %v, want one of 10 s", m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum())
	}

	c.leading = func() bool { return false }
	c.OnUpdate(registered, unknown)
	if got := count("Registered", "Unknown", "NodeNotFound"); got != 1 {
		t.Errorf("a standby counted a transition: %v, want 1", got)
	}
}

func histogram(t *testing.T, c *conditionTransitions, typ, status string) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := c.durations.WithLabelValues(typ, status, "default", "web").(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A Node's transitions carry its EC2NodeClass, NodePool and initialized labels and
// stay out of the kind-less families (Karpenter makes the Node status controller
// without them); an EC2NodeClass's count in both, the kind-less ones labeled with
// its group and kind; a NodeClaim without the EC2NodeClass label is labeled with
// its nodeClassRef.
func TestConditionTransitionsOfNodesAndNodeClasses(t *testing.T) {
	kindless := newKindlessTransitions()
	nodes := newConditionTransitions("node", transitionBuckets(), nodeStatusLabels...)
	classes := newConditionTransitions("ec2nodeclass", prometheus.DefBuckets).alsoKindless(kindless, awsv1.Group, "EC2NodeClass")
	claims := newConditionTransitions("nodeclaim", transitionBuckets(), nodeClaimStatusLabels...).alsoKindless(kindless, v1.Group, "NodeClaim")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{v1.NodePoolLabelKey: "web", awsNodeClassLabel: "default", v1.NodeInitializedLabelKey: "true"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(at)}}}}
	nodes.OnAdd(node, true)
	ready := node.DeepCopy()
	ready.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.NewTime(at.Add(20 * time.Second))}
	nodes.OnUpdate(node, ready)
	if got := testutil.ToFloat64(nodes.transitions.WithLabelValues("Ready", "True", "KubeletReady", "default", "web", "true")); got != 1 {
		t.Errorf("operator_node_status_condition_transitions_total{Ready, True} = %v, want 1", got)
	}
	if n, sum := observations(t, nodes.durations.WithLabelValues("Ready", "False", "default", "web", "true")); n != 1 || sum != 20 {
		t.Errorf("Ready held False: %d observations summing %v, want one of 20 s", n, sum)
	}

	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(at)}}
	classes.OnAdd(class, true)
	if got := testutil.ToFloat64(classes.transitions.WithLabelValues("Ready", "True", "Ready")); got != 1 {
		t.Errorf("operator_ec2nodeclass_status_condition_transitions_total{Ready, True} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(kindless.transitions.WithLabelValues("Ready", "True", "Ready", awsv1.Group, "EC2NodeClass")); got != 1 {
		t.Errorf("operator_status_condition_transitions_total{kind=EC2NodeClass} = %v, want 1", got)
	}
	classes.now = func() time.Time { return at.Add(time.Minute) }
	deleting := class.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: at.Add(30 * time.Second)}
	classes.OnDelete(deleting)
	if n, sum := observations(t, kindless.termination.WithLabelValues(awsv1.Group, "EC2NodeClass")); n != 1 || sum != 30 {
		t.Errorf("operator_termination_duration_seconds{kind=EC2NodeClass}: %d observations summing %v, want one of 30 s", n, sum)
	}

	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{v1.NodePoolLabelKey: "web"}},
		Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}}}
	claim.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(at)}}
	claims.OnAdd(claim, true)
	if got := testutil.ToFloat64(claims.transitions.WithLabelValues("Launched", "True", "Launched", "default", "web")); got != 1 {
		t.Errorf("operator_nodeclaim_status_condition_transitions_total{karpenter_k8s_aws_ec2nodeclass=default} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(kindless.transitions.WithLabelValues("Launched", "True", "Launched", v1.Group, "NodeClaim")); got != 1 {
		t.Errorf("operator_status_condition_transitions_total{kind=NodeClaim} = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(kindless.transitions); got != 2 {
		t.Errorf("kind-less transition series = %d, want 2 (the EC2NodeClass's and the NodeClaim's, none for the Node)", got)
	}
}

// A CapacityBuffer's transitions count as Karpenter's generic status controller
// of CapacityBuffers (its CapacityBuffer gate) counts them: in
// operator_capacitybuffer_* without object labels, with 0.5 s to 8192 s buckets,
// and in the kind-less families as group autoscaling.x-k8s.io, kind
// CapacityBuffer; its deletion observes how long it took.
func TestConditionTransitionsOfCapacityBuffers(t *testing.T) {
	kindless := newKindlessTransitions()
	buffers := newConditionTransitions("capacitybuffer", transitionBuckets()).alsoKindless(kindless, cb.Group, "CapacityBuffer")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	buffer := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "web"}}
	buffer.Status.Conditions = []metav1.Condition{
		{Type: cb.ConditionReadyForProvisioning, Status: metav1.ConditionTrue, Reason: "Resolved", LastTransitionTime: metav1.NewTime(at)},
		{Type: cb.ConditionProvisioning, Status: metav1.ConditionFalse, Reason: "NoCapacity", LastTransitionTime: metav1.NewTime(at)},
	}
	buffers.OnAdd(buffer, true)
	provisioned := buffer.DeepCopy()
	provisioned.Status.Conditions[1] = metav1.Condition{Type: cb.ConditionProvisioning, Status: metav1.ConditionTrue, Reason: "CapacityProvisioned", LastTransitionTime: metav1.NewTime(at.Add(40 * time.Second))}
	buffers.OnUpdate(buffer, provisioned)
	for _, want := range []struct {
		labels []string
		n      float64
	}{{[]string{"ReadyForProvisioning", "True", "Resolved"}, 1}, {[]string{"Provisioning", "False", "NoCapacity"}, 1}, {[]string{"Provisioning", "True", "CapacityProvisioned"}, 1}} {
		if got := testutil.ToFloat64(buffers.transitions.WithLabelValues(want.labels...)); got != want.n {
			t.Errorf("operator_capacitybuffer_status_condition_transitions_total%v = %v, want %v", want.labels, got, want.n)
		}
		if got := testutil.ToFloat64(kindless.transitions.WithLabelValues(append(want.labels, cb.Group, "CapacityBuffer")...)); got != want.n {
			t.Errorf("operator_status_condition_transitions_total%v{kind=CapacityBuffer} = %v, want %v", want.labels, got, want.n)
		}
	}
	if n, sum := observations(t, buffers.durations.WithLabelValues("Provisioning", "False")); n != 1 || sum != 40 {
		t.Errorf("Provisioning held False: %d observations summing %v, want one of 40 s", n, sum)
	}
	if n, sum := observations(t, kindless.durations.WithLabelValues("Provisioning", "False", cb.Group, "CapacityBuffer")); n != 1 || sum != 40 {
		t.Errorf("operator_status_condition_transition_seconds{kind=CapacityBuffer}: %d observations summing %v, want one of 40 s", n, sum)
	}
	buffers.now = func() time.Time { return at.Add(time.Minute) }
	deleting := provisioned.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: at.Add(45 * time.Second)}
	buffers.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "web/room", Obj: deleting})
	if n, sum := observations(t, buffers.termination.WithLabelValues()); n != 1 || sum != 15 {
		t.Errorf("operator_capacitybuffer_termination_duration_seconds: %d observations summing %v, want one of 15 s", n, sum)
	}
	if n, sum := observations(t, kindless.termination.WithLabelValues(cb.Group, "CapacityBuffer")); n != 1 || sum != 15 {
		t.Errorf("operator_termination_duration_seconds{kind=CapacityBuffer}: %d observations summing %v, want one of 15 s", n, sum)
	}
	// Karpenter's buckets for CapacityBuffers: 0.5 s to 8192 s, doubling.
	m := &dto.Metric{}
	if err := buffers.durations.WithLabelValues("Provisioning", "False").(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	if b := m.GetHistogram().GetBucket(); len(b) != 15 || b[0].GetUpperBound() != 0.5 || b[14].GetUpperBound() != 8192 {
		t.Errorf("operator_capacitybuffer_status_condition_transition_seconds has %d buckets, want 15 from 0.5 s to 8192 s", len(b))
	}
	// The package's families are the ones Run counts into.
	if bufferConditions.kind != "CapacityBuffer" || bufferConditions.group != cb.Group || bufferConditions.deprecated != kindlessConditions {
		t.Errorf("bufferConditions counts into the kind-less families as %s/%s", bufferConditions.group, bufferConditions.kind)
	}
}

func observations(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
