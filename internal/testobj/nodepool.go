package testobj

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// NodePoolOption changes a NodePool being built.
type NodePoolOption func(*v1.NodePool)

// NodePool is a NodePool of the SimNodeClass default and nothing else: the API
// server's defaults (budgets, consolidation) are left to it.
func NodePool(name string, opts ...NodePoolOption) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = SimClass("default")
	for _, o := range opts {
		o(np)
	}
	return np
}

// NodeClassRef makes the NodePool's nodes of the NodeClass ref.
func NodeClassRef(ref *v1.NodeClassReference) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.NodeClassRef = ref }
}

// Requirement adds a requirement on key to the NodePool's template.
func Requirement(key string, op v1.NodeSelectorOperator, values ...string) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
}

// MinValues adds a requirement that key be one of values, with at least n of them
// among a node's options.
func MinValues(key string, n int, values ...string) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: v1.NodeSelectorOpIn, Values: values, MinValues: &n})
	}
}

// Limit caps the NodePool's total of name at qty.
func Limit(name corev1.ResourceName, qty string) NodePoolOption {
	return func(np *v1.NodePool) {
		if np.Spec.Limits == nil {
			np.Spec.Limits = v1.Limits{}
		}
		np.Spec.Limits[name] = resource.MustParse(qty)
	}
}

// Weight sets the NodePool's weight.
func Weight(w int32) NodePoolOption { return func(np *v1.NodePool) { np.Spec.Weight = &w } }

// TemplateLabels adds the key/value pairs kv to the labels of the NodePool's nodes.
func TemplateLabels(kv ...string) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Template.Labels = merge(np.Spec.Template.Labels, kv) }
}

// TemplateTaint taints the NodePool's nodes key=value:effect.
func TemplateTaint(key, value string, effect corev1.TaintEffect) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// PoolAnnotations adds the key/value pairs kv to the NodePool's annotations.
func PoolAnnotations(kv ...string) NodePoolOption {
	return func(np *v1.NodePool) { np.Annotations = merge(np.Annotations, kv) }
}

// ConsolidateAfter sets how long the NodePool's nodes wait before consolidation:
// a duration ("30s") or "Never".
func ConsolidateAfter(d string) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration(d) }
}

// ConsolidationPolicy sets what the NodePool consolidates.
func ConsolidationPolicy(policy v1.ConsolidationPolicy) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = policy }
}

// Budgets sets the NodePool's disruption budgets, one for each count or
// percentage of nodes.
func Budgets(nodes ...string) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Disruption.Budgets = nil
		for _, n := range nodes {
			np.Spec.Disruption.Budgets = append(np.Spec.Disruption.Budgets, v1.Budget{Nodes: n})
		}
	}
}

// ExpireAfter sets how long the NodePool's nodes live: a duration or "Never".
func ExpireAfter(d string) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration(d) }
}

// Replicas makes the NodePool static, of n nodes.
func Replicas(n int64) NodePoolOption { return func(np *v1.NodePool) { np.Spec.Replicas = &n } }
