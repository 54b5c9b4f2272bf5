package operator

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// conditionTransitions counts the status-condition changes of one kind of object
// as the informer's events show them, as Karpenter's operator library does from
// what its status controller last saw of each object: a condition new or of
// another status is a transition (labeled by its new type, status and reason);
// one that changed status also observes how long it held the old one (from the
// old to the new lastTransitionTime); and an object deleted after its deletion
// was requested observes how long it took. Only the leader counts, as only
// Karpenter's leader runs its status controllers.
type conditionTransitions struct {
	transitions *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	termination *prometheus.HistogramVec
	// labels are the extra labels of an object, in the order of extra (the
	// label names after Karpenter's: the object label's key, with '/', '.' and
	// '-' as '_').
	extra  []string
	labels func(client.Object) []string

	now     func() time.Time
	leading func() bool
}

// newConditionTransitions makes the families operator_<kind>_status_condition_*
// and operator_<kind>_termination_duration_seconds, labeled also by the object
// labels extra, with the histograms' buckets.
func newConditionTransitions(kind string, buckets []float64, extra ...string) *conditionTransitions {
	names := make([]string, len(extra))
	for i, key := range extra {
		names[i] = strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(key)
	}
	return &conditionTransitions{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "operator_" + kind + "_status_condition_transitions_total",
			Help: "The count of transitions of a given object, type and status.",
		}, append([]string{"type", "status", "reason"}, names...)),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "operator_" + kind + "_status_condition_transition_seconds",
			Help:    "The amount of time a condition was in a given state before transitioning.",
			Buckets: buckets,
		}, append([]string{"type", "status"}, names...)),
		termination: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "operator_" + kind + "_termination_duration_seconds",
			Help:    "The amount of time taken by an object to terminate completely.",
			Buckets: buckets,
		}, names),
		extra: extra,
		labels: func(o client.Object) []string {
			out := make([]string, len(extra))
			for i, key := range extra {
				out[i] = o.GetLabels()[key]
			}
			return out
		},
		now: time.Now,
	}
}

// transitionBuckets are the buckets Karpenter gives the NodePool and NodeClaim
// families: 0.5 s to 8192 s, doubling.
func transitionBuckets() []float64 { return prometheus.ExponentialBuckets(0.5, 2, 15) }

// nodePoolConditions and nodeClaimConditions are the families of Karpenter's
// NodePool and NodeClaim status controllers; a NodeClaim's carry its NodePool and
// EC2NodeClass labels, as Karpenter's AWS provider labels them.
var (
	nodePoolConditions  = newConditionTransitions("nodepool", transitionBuckets())
	nodeClaimConditions = newConditionTransitions("nodeclaim", transitionBuckets(), "karpenter.k8s.aws/ec2nodeclass", v1.NodePoolLabelKey)
)

func (c *conditionTransitions) Describe(ch chan<- *prometheus.Desc) {
	c.transitions.Describe(ch)
	c.durations.Describe(ch)
	c.termination.Describe(ch)
}

func (c *conditionTransitions) Collect(ch chan<- prometheus.Metric) {
	c.transitions.Collect(ch)
	c.durations.Collect(ch)
	c.termination.Collect(ch)
}

func (c *conditionTransitions) counting() bool { return c.leading == nil || c.leading() }

func (c *conditionTransitions) OnAdd(obj any, _ bool) { c.observe(nil, obj) }
func (c *conditionTransitions) OnUpdate(old, obj any) { c.observe(old, obj) }

func (c *conditionTransitions) OnDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok || o.GetDeletionTimestamp() == nil || !c.counting() {
		return
	}
	c.termination.WithLabelValues(c.labels(o)...).Observe(c.now().Sub(o.GetDeletionTimestamp().Time).Seconds())
}

func (c *conditionTransitions) observe(old, obj any) {
	o, ok := obj.(client.Object)
	if !ok || !c.counting() {
		return
	}
	var before []metav1.Condition
	if old != nil {
		before = conditionsOf(old)
	}
	extra := c.labels(o)
	for _, cond := range conditionsOf(obj) {
		was := meta.FindStatusCondition(before, cond.Type)
		if was != nil && was.Status == cond.Status {
			continue
		}
		c.transitions.WithLabelValues(append([]string{cond.Type, string(cond.Status), cond.Reason}, extra...)...).Inc()
		if was != nil {
			c.durations.WithLabelValues(append([]string{cond.Type, string(was.Status)}, extra...)...).
				Observe(cond.LastTransitionTime.Sub(was.LastTransitionTime.Time).Seconds())
		}
	}
}

// conditionsOf are the status conditions of a NodePool or NodeClaim.
func conditionsOf(obj any) []metav1.Condition {
	switch o := obj.(type) {
	case *v1.NodePool:
		return o.Status.Conditions
	case *v1.NodeClaim:
		return o.Status.Conditions
	}
	return nil
}
