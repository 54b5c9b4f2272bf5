package provisioning

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// NominationGrace is how long a nominated pod that still fits may stay pending on a
// node that is up before it is planned for again. The kube-scheduler needs a while:
// its backoff reaches 10s, and when hundreds of nodes come up at once it works
// through a backlog (in the scale test, empty nodes waited more than 10s for their
// pods); planning those pods again only makes nodes nobody needs. A pod that no
// longer fits beside the pods bound to its node (someone else took the room) is
// planned for at once.
const NominationGrace = 20 * time.Second

// nomination says which NodeClaim holds the room for a pending pod, since when.
type nomination struct {
	claim string
	at    time.Time
}

// nominations remember the room found for pending pods. A pod that waits for a
// claim is not planned for again; it is put on its claim's node in the snapshot,
// so the room kept for it is not handed to another pod either.
type nominations map[k8stypes.UID]nomination

// reserve puts each waiting pod on its claim's node in in.Nodes and returns the
// pending pods still to plan for. A nomination lapses when its claim is gone or
// going, when the pod is no longer pending, and once the claim's node is up, when
// the pod no longer fits beside the pods bound there or NominationGrace passed.
func (n nominations) reserve(in *scheduling.Input, claims []*v1.NodeClaim, now time.Time) ([]*corev1.Pod, lapses) {
	nodes := claimNodes(in, claims)
	byName := map[string]*v1.NodeClaim{}
	for _, nc := range claims {
		byName[nc.Name] = nc
	}
	pending := make(map[k8stypes.UID]bool, len(in.Pods))
	out := in.Pods[:0:0]
	var lapsed lapses
	for _, pod := range in.Pods {
		pending[pod.UID] = true
		if !n.wait(pod, byName, nodes, now, &lapsed) {
			out = append(out, pod)
		}
	}
	for uid := range n {
		if !pending[uid] {
			delete(n, uid) // bound, or gone
		}
	}
	return out, lapsed
}

// lapses count the nominations that lapsed in a reserve, by cause, for the log.
type lapses struct {
	ClaimGone, Grace, RoomTaken int
}

func (l lapses) any() bool { return l.ClaimGone+l.Grace+l.RoomTaken > 0 }

func (n nominations) wait(pod *corev1.Pod, claims map[string]*v1.NodeClaim, nodes map[string]*scheduling.Node, now time.Time, lapsed *lapses) bool {
	nom, ok := n[pod.UID]
	if !ok {
		return false
	}
	nc, node := claims[nom.claim], nodes[nom.claim]
	if nc == nil || nc.DeletionTimestamp != nil || node == nil {
		delete(n, pod.UID)
		lapsed.ClaimGone++
		return false
	}
	if up := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); up != nil && up.Status == metav1.ConditionTrue {
		since := nom.at
		if up.LastTransitionTime.After(since) {
			since = up.LastTransitionTime.Time
		}
		if !fits(node, pod) {
			delete(n, pod.UID)
			lapsed.RoomTaken++
			return false
		}
		if now.Sub(since) > NominationGrace {
			delete(n, pod.UID)
			lapsed.Grace++
			return false
		}
	}
	node.Pods = append(node.Pods, pod)
	return true
}

// nominate records that pod waits for claim, from now.
func (n nominations) nominate(pod *corev1.Pod, claim string, now time.Time) {
	n[pod.UID] = nomination{claim: claim, at: now}
}

// claimNodes maps each live NodeClaim to its node in in.Nodes: the registered node
// with its provider ID, else the node it is launching as.
func claimNodes(in *scheduling.Input, claims []*v1.NodeClaim) map[string]*scheduling.Node {
	byName := make(map[string]*scheduling.Node, len(in.Nodes))
	byProviderID := make(map[string]*scheduling.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		byName[n.Node.Name] = n
		if id := n.Node.Spec.ProviderID; id != "" && !n.Launching {
			byProviderID[id] = n
		}
	}
	out := make(map[string]*scheduling.Node, len(claims))
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		if n := byProviderID[nc.Status.ProviderID]; nc.Status.ProviderID != "" && n != nil {
			out[nc.Name] = n
		} else if n := byName[state.LaunchingNode(nc).Name]; n != nil && n.Launching {
			out[nc.Name] = n
		}
	}
	return out
}

// claimOfNode inverts claimNodes: the NodeClaim a snapshot node belongs to.
func claimOfNode(nodes map[string]*scheduling.Node) map[string]string {
	out := make(map[string]string, len(nodes))
	for claim, n := range nodes {
		out[n.Node.Name] = claim
	}
	return out
}

// fits reports whether pod fits beside the pods already on node.
func fits(node *scheduling.Node, pod *corev1.Pod) bool {
	used := corev1.ResourceList{}
	for _, p := range node.Pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for name, q := range scheduling.PodRequests(p) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for name, q := range scheduling.PodRequests(pod) {
		if q.IsZero() {
			continue
		}
		have, ok := node.Node.Status.Allocatable[name]
		sum := used[name]
		sum.Add(q)
		if !ok || sum.Cmp(have) > 0 {
			return false
		}
	}
	return true
}
