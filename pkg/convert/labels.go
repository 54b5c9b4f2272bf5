package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Label keys the old APIs had and v1 does not take.
const (
	labelProvisionerName = "karpenter.sh/provisioner-name"
	labelInstancePods    = "karpenter.k8s.aws/instance-pods"
)

// restricted says why v1 refuses a label key on a NodePool (the CRD's rules, as
// Karpenter's since v1.10 relaxed them: kubernetes.io and k8s.io keys are allowed),
// or "".
func restricted(key string) string {
	domain, _, _ := strings.Cut(key, "/")
	switch {
	case key == labelProvisionerName:
		return "Provisioners are gone; v1 labels nodes with karpenter.sh/nodepool itself"
	case key == labelInstancePods:
		return "the label was dropped in v1beta1"
	case key == v1.NodePoolLabelKey:
		return "the label is set by Tailor"
	case key == corev1.LabelHostname:
		return "the label is restricted"
	case strings.HasSuffix(domain, "karpenter.sh") && key != v1.CapacityTypeLabelKey:
		return `the label domain "karpenter.sh" is restricted`
	}
	return ""
}

// labels drops the labels v1 refuses.
func (c *converter) labels(s *source, path string, labels map[string]string) map[string]string {
	var out map[string]string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if why := restricted(k); why != "" {
			c.warn(s, path+"."+k, "not carried over: %s", why)
			continue
		}
		out = setKey(out, k, labels[k])
	}
	return out
}

// requirements converts requirements, dropping those on keys v1 refuses.
func (c *converter) requirements(s *source, path string, reqs []v1.NodeSelectorRequirementWithMinValues) ([]v1.NodeSelectorRequirementWithMinValues, error) {
	var out []v1.NodeSelectorRequirementWithMinValues
	for i, r := range reqs {
		field := fmt.Sprintf("%s[%d]", path, i)
		if r.Key == "" {
			return nil, fmt.Errorf("%s.key: required", field)
		}
		switch r.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist,
			v1.NodeSelectorOpGt, v1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		default:
			return nil, fmt.Errorf("%s.operator: %q; want In, NotIn, Exists, DoesNotExist, Gt or Lt", field, r.Operator)
		}
		if why := restricted(r.Key); why != "" {
			c.warn(s, field, "requirement on %s not carried over: %s", r.Key, why)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// withV1alpha5Defaults adds the requirements v1alpha5's webhook added to a
// Provisioner that did not constrain these keys (by requirement or label), which
// v1beta1 and v1 no longer add: instance categories c, m and r of generation 3 and
// later, on-demand, linux, amd64.
func withV1alpha5Defaults(reqs []v1.NodeSelectorRequirementWithMinValues, labels map[string]string) []v1.NodeSelectorRequirementWithMinValues {
	has := func(match func(key string) bool) bool {
		for _, r := range reqs {
			if match(r.Key) {
				return true
			}
		}
		for k := range labels {
			if match(k) {
				return true
			}
		}
		return false
	}
	is := func(keys ...string) func(string) bool {
		return func(k string) bool { return slices.Contains(keys, k) }
	}
	req := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
		return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
	}
	if !has(func(k string) bool {
		return k == corev1.LabelInstanceTypeStable || k == "beta.kubernetes.io/instance-type" || strings.HasPrefix(k, "karpenter.k8s.aws/")
	}) {
		reqs = append(reqs,
			req("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r"),
			req("karpenter.k8s.aws/instance-generation", v1.NodeSelectorOpGt, "2"))
	}
	if !has(is(v1.CapacityTypeLabelKey)) {
		reqs = append(reqs, req(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
	}
	if !has(is(corev1.LabelOSStable, "beta.kubernetes.io/os")) {
		reqs = append(reqs, req(corev1.LabelOSStable, v1.NodeSelectorOpIn, string(corev1.Linux)))
	}
	if !has(is(corev1.LabelArchStable, "beta.kubernetes.io/arch")) {
		reqs = append(reqs, req(corev1.LabelArchStable, v1.NodeSelectorOpIn, "amd64"))
	}
	return reqs
}
