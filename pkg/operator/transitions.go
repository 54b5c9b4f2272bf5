package operator

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
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
	// deprecated, when set, counts the same into the kind-less families, labeled
	// by group and kind, as the controllers Karpenter makes with
	// EmitDeprecatedMetrics do.
	deprecated  *kindlessTransitions
	group, kind string
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
	names := statusLabelNames(extra)
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
		extra:  extra,
		labels: func(o client.Object) []string { return statusLabelValues(o, extra) },
		now:    time.Now,
	}
}

// alsoKindless has c count into the deprecated kind-less families too, as
// Karpenter's status controller with EmitDeprecatedMetrics does for kind of group.
func (c *conditionTransitions) alsoKindless(k *kindlessTransitions, group, kind string) *conditionTransitions {
	c.deprecated, c.group, c.kind = k, group, kind
	return c
}

// kindlessTransitions are operatorpkg's deprecated families without a kind in
// their names: operator_status_condition_transitions_total,
// operator_status_condition_transition_seconds and
// operator_termination_duration_seconds, labeled by group and kind and without
// the object labels, with Prometheus's default buckets.
type kindlessTransitions struct {
	transitions *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	termination *prometheus.HistogramVec
}

func newKindlessTransitions() *kindlessTransitions {
	return &kindlessTransitions{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "operator_status_condition_transitions_total",
			Help: "The count of transitions of a given object, type and status.",
		}, []string{"type", "status", "reason", "group", "kind"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "operator_status_condition_transition_seconds",
			Help:    "The amount of time a condition was in a given state before transitioning.",
			Buckets: prometheus.DefBuckets,
		}, []string{"type", "status", "group", "kind"}),
		termination: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "operator_termination_duration_seconds",
			Help:    "The amount of time taken by an object to terminate completely.",
			Buckets: prometheus.DefBuckets,
		}, []string{"group", "kind"}),
	}
}

func (k *kindlessTransitions) Describe(ch chan<- *prometheus.Desc) {
	k.transitions.Describe(ch)
	k.durations.Describe(ch)
	k.termination.Describe(ch)
}

func (k *kindlessTransitions) Collect(ch chan<- prometheus.Metric) {
	k.transitions.Collect(ch)
	k.durations.Collect(ch)
	k.termination.Collect(ch)
}

// awsNodeClassLabel is the label Karpenter puts on the NodeClaims and Nodes of an
// EC2NodeClass (its NodeClassLabelKey: the group, then the kind in lower case).
const awsNodeClassLabel = awsv1.Group + "/ec2nodeclass"

// The object labels Karpenter v1.14 adds to the status-condition families of
// NodeClaims and Nodes (its controllers.go: the cloud provider's NodeClass label,
// the NodePool's, and for Nodes karpenter.sh/initialized). Karpenter's AWS
// provider supports one NodeClass, EC2NodeClass, and Tailor names the families
// as it does whatever the cloud.
var (
	nodeClaimStatusLabels = []string{awsNodeClassLabel, v1.NodePoolLabelKey}
	nodeStatusLabels      = []string{awsNodeClassLabel, v1.NodePoolLabelKey, v1.NodeInitializedLabelKey}
)

// statusLabelValues are the values of the object labels keys on o. Karpenter
// labels each NodeClaim with its EC2NodeClass; Tailor does not, so a NodeClaim's
// is read from its nodeClassRef when the label is missing.
func statusLabelValues(o client.Object, keys []string) []string {
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = o.GetLabels()[key]
		if nc, ok := o.(*v1.NodeClaim); ok && key == awsNodeClassLabel && out[i] == "" {
			if ref := nc.Spec.NodeClassRef; ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass" {
				out[i] = ref.Name
			}
		}
	}
	return out
}

// statusLabelNames are Karpenter's label names for the object labels keys: each
// key with '/', '.' and '-' as '_'.
func statusLabelNames(keys []string) []string {
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(key)
	}
	return out
}

// transitionBuckets are the buckets Karpenter gives the NodePool and NodeClaim
// families: 0.5 s to 8192 s, doubling.
func transitionBuckets() []float64 { return prometheus.ExponentialBuckets(0.5, 2, 15) }

// The families of Karpenter v1.14's status controllers: NodePool and NodeClaim,
// with the deprecated kind-less families too; Node, whose families carry its
// NodePool, EC2NodeClass and initialized labels (a NodeClaim's its NodePool and
// EC2NodeClass); and, from Karpenter's AWS provider, EC2NodeClass, with
// Prometheus's default buckets and the kind-less families.
var (
	kindlessConditions     = newKindlessTransitions()
	nodePoolConditions     = newConditionTransitions("nodepool", transitionBuckets()).alsoKindless(kindlessConditions, v1.Group, "NodePool")
	nodeClaimConditions    = newConditionTransitions("nodeclaim", transitionBuckets(), nodeClaimStatusLabels...).alsoKindless(kindlessConditions, v1.Group, "NodeClaim")
	nodeConditions         = newConditionTransitions("node", transitionBuckets(), nodeStatusLabels...)
	ec2NodeClassConditions = newConditionTransitions("ec2nodeclass", prometheus.DefBuckets).alsoKindless(kindlessConditions, awsv1.Group, "EC2NodeClass")
	bufferConditions       = newConditionTransitions("capacitybuffer", transitionBuckets()).alsoKindless(kindlessConditions, cb.Group, "CapacityBuffer")
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
	took := c.now().Sub(o.GetDeletionTimestamp().Time).Seconds()
	c.termination.WithLabelValues(c.labels(o)...).Observe(took)
	if c.deprecated != nil {
		c.deprecated.termination.WithLabelValues(c.group, c.kind).Observe(took)
	}
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
		if c.deprecated != nil {
			c.deprecated.transitions.WithLabelValues(cond.Type, string(cond.Status), cond.Reason, c.group, c.kind).Inc()
		}
		if was != nil {
			held := cond.LastTransitionTime.Sub(was.LastTransitionTime.Time).Seconds()
			c.durations.WithLabelValues(append([]string{cond.Type, string(was.Status)}, extra...)...).Observe(held)
			if c.deprecated != nil {
				c.deprecated.durations.WithLabelValues(cond.Type, string(was.Status), c.group, c.kind).Observe(held)
			}
		}
	}
}

// conditionsOf are the status conditions of a NodePool, NodeClaim, EC2NodeClass,
// CapacityBuffer or Node.
func conditionsOf(obj any) []metav1.Condition {
	switch o := obj.(type) {
	case *v1.NodePool:
		return o.Status.Conditions
	case *v1.NodeClaim:
		return o.Status.Conditions
	case *awsv1.EC2NodeClass:
		return o.Status.Conditions
	case *cb.CapacityBuffer:
		return o.Status.Conditions
	case *corev1.Node:
		return nodeConditionsOf(o)
	}
	return nil
}

// nodeConditionsOf are a Node's conditions as Karpenter's status controller reads
// them (status.conditions, read as conditions of any object).
func nodeConditionsOf(n *corev1.Node) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(n.Status.Conditions))
	for _, c := range n.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
	}
	return out
}
