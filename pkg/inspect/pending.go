package inspect

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// PendingPod is what becomes of a pod no node holds yet, as explain pod says it.
type PendingPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Created is when the pod was made (RFC 3339).
	Created string `json:"created,omitempty"`
	// Plan says what the engine would do for it now; Reasons why each NodePool
	// cannot take it, with what would make it fit.
	Plan    string       `json:"plan"`
	Reasons []PoolReason `json:"reasons,omitempty"`
}

// PendingPods plans every pod not bound to a node with one solve, as the
// provisioner would now (read-only), and says for each what explain pod says:
// where it fits, the node Tailor would launch for it, or why no NodePool can take
// it. Sorted by namespace and name.
func (c *Cluster) PendingPods(opts scheduling.Options) []PendingPod {
	in := *c.Snapshot.Input
	in.Pods = slices.Clone(in.Pods)
	var pending []*corev1.Pod
	for _, p := range c.Objects.Pods {
		if p.Spec.NodeName != "" || scheduling.IsTerminal(p) || p.DeletionTimestamp != nil {
			continue
		}
		pending = append(pending, p)
		if !scheduling.IsDaemonSetPod(p) && !slices.Contains(in.Pods, p) {
			// Not marked unschedulable by the kube-scheduler (yet): plan it all the same.
			in.Pods = append(in.Pods, p)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	plans := map[*corev1.Pod]PendingPod{}
	plan, err := scheduling.Solve(&in, opts)
	if err == nil {
		for _, b := range plan.Bindings {
			text := fmt.Sprintf("fits on node %s (existing or launching): the kube-scheduler should place it there", b.Node)
			if nc := c.claimNamed(b.Node); nc != "" {
				text = fmt.Sprintf("fits on NodeClaim %s, which is being launched: it waits for that node", nc)
			}
			plans[b.Pod] = PendingPod{Plan: text}
		}
		for _, n := range plan.NewNodes {
			text := fmt.Sprintf("Tailor would launch a new node of NodePool %s for it: %s in %s (%s) at $%.4f/hour; the controller creates it on its next batch",
				n.NodePool, n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, n.Price())
			for _, p := range n.Pods {
				plans[p] = PendingPod{Plan: text}
			}
		}
		for _, f := range plan.Unschedulable {
			plans[f.Pod] = PendingPod{Plan: "no NodePool can launch a node for it", Reasons: poolReasons(f.Reason)}
		}
	}
	out := make([]PendingPod, 0, len(pending))
	for _, p := range pending {
		pp, ok := plans[p]
		switch {
		case scheduling.IsDaemonSetPod(p):
			pp.Plan = "a DaemonSet pod: it follows nodes, and Tailor launches no node for it"
		case err != nil:
			pp.Plan = "the scheduling engine could not plan: " + err.Error()
		case !ok:
			pp.Plan = "the scheduling engine left it out of the plan"
		}
		pp.Namespace, pp.Name = p.Namespace, p.Name
		if !p.CreationTimestamp.IsZero() {
			pp.Created = p.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, pp)
	}
	slices.SortFunc(out, func(a, b PendingPod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}
