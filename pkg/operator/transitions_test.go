package operator

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

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
