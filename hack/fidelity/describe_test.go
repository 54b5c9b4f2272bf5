package fidelity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// describe renders a (shrunk) disagreement for a person: the verdicts, the node
// in question first, the other nodes, and the pending pod.
func describe(seed uint64, d disagreement) string {
	var b strings.Builder
	if d.oursFits {
		fmt.Fprintf(&b, "case %d, node %s: ours says the pod fits; the kube-scheduler says %s\n", d.index, d.node, d.kube)
	} else {
		fmt.Fprintf(&b, "case %d, node %s: ours says %q; the kube-scheduler's filters pass it\n", d.index, d.node, d.ours)
	}
	fmt.Fprintf(&b, "replay: go test -run TestFidelity -fidelity.seed=%d -fidelity.case=%d (shrunk below)\n", seed, d.index)
	b.WriteString("namespaces:")
	for _, ns := range d.c.namespaces {
		fmt.Fprintf(&b, " %s%s", ns.Name, formatMap(ns.Labels, labelNSName))
	}
	b.WriteString("\nnodes:\n")
	for _, n := range d.c.nodes {
		if n.Node.Name == d.node {
			describeNode(&b, n, true)
		}
	}
	for _, n := range d.c.nodes {
		if n.Node.Name != d.node {
			describeNode(&b, n, false)
		}
	}
	b.WriteString("pending pod:\n")
	fmt.Fprintf(&b, "  effective requests: %s\n", formatResources(scheduling.PodRequests(d.c.pod)))
	shown := struct {
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
		Spec      corev1.PodSpec    `json:"spec"`
	}{d.c.pod.Namespace, d.c.pod.Labels, *d.c.pod.Spec.DeepCopy()}
	for i := range shown.Spec.Containers {
		shown.Spec.Containers[i].Image = ""
	}
	for i := range shown.Spec.InitContainers {
		shown.Spec.InitContainers[i].Image = ""
	}
	y, err := yaml.Marshal(shown)
	if err != nil {
		y = []byte(err.Error())
	}
	for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

func describeNode(b *strings.Builder, n *scheduling.Node, target bool) {
	node := n.Node
	mark := " "
	if target {
		mark = "*"
	}
	fmt.Fprintf(b, "%s %s labels%s", mark, node.Name, formatMap(node.Labels, labelHostname))
	if len(node.Spec.Taints) > 0 {
		var ts []string
		for _, t := range node.Spec.Taints {
			ts = append(ts, t.ToString())
		}
		fmt.Fprintf(b, " taints[%s]", strings.Join(ts, " "))
	}
	fmt.Fprintf(b, " allocatable{%s}", formatResources(node.Status.Allocatable))
	if node.Spec.Unschedulable {
		b.WriteString(" unschedulable")
	}
	b.WriteString("\n")
	for _, p := range n.Pods {
		fmt.Fprintf(b, "    pod %s/%s labels%s requests{%s}", p.Namespace, p.Name, formatMap(p.Labels, ""), formatResources(scheduling.PodRequests(p)))
		var ports []string
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, cp := range c.Ports {
				if cp.HostPort > 0 {
					ports = append(ports, fmt.Sprintf("%s %s:%d", cp.Protocol, cp.HostIP, cp.HostPort))
				}
			}
		}
		if len(ports) > 0 {
			fmt.Fprintf(b, " hostPorts[%s]", strings.Join(ports, ", "))
		}
		if a := p.Spec.Affinity; a != nil {
			if a.PodAffinity != nil {
				fmt.Fprintf(b, " podAffinity[%s]", formatTerms(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
			}
			if a.PodAntiAffinity != nil {
				fmt.Fprintf(b, " podAntiAffinity[%s]", formatTerms(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
			}
		}
		if p.DeletionTimestamp != nil {
			b.WriteString(" terminating")
		}
		if p.Status.Phase != corev1.PodRunning {
			fmt.Fprintf(b, " phase=%s", p.Status.Phase)
		}
		b.WriteString("\n")
	}
}

func formatTerms(terms []corev1.PodAffinityTerm) string {
	var out []string
	for _, t := range terms {
		s := fmt.Sprintf("%s: %s", t.TopologyKey, formatSelector(t.LabelSelector))
		if len(t.Namespaces) > 0 {
			s += fmt.Sprintf(" namespaces=%v", t.Namespaces)
		}
		if t.NamespaceSelector != nil {
			s += " namespaceSelector=" + formatSelector(t.NamespaceSelector)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// formatSelector tells apart the nil selector (no object) and the empty one
// (every object), which metav1.FormatLabelSelector both renders "<none>".
func formatSelector(s *metav1.LabelSelector) string {
	switch {
	case s == nil:
		return "nil (matches nothing)"
	case len(s.MatchLabels)+len(s.MatchExpressions) == 0:
		return "{} (matches everything)"
	}
	return metav1.FormatLabelSelector(s)
}

// formatMap renders labels sorted, leaving out skip.
func formatMap(m map[string]string, skip string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		if k != skip {
			parts = append(parts, k+"="+m[k])
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func formatResources(l corev1.ResourceList) string {
	var parts []string
	for _, k := range sortedKeys(l) {
		q := l[k]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, " ")
}
