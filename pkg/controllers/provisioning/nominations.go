package provisioning

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// nomination says which NodeClaim holds the room for a pending pod, since when. A
// nomination of no claim holds back a pod whose room was taken while other pods
// still waited for their nodes, since it was taken (see reserve).
type nomination struct {
	claim string
	at    time.Time
	// pod names the pod, for the release order (see nodeclaim.ReleaseOrder.Plan).
	pod k8stypes.NamespacedName
	// afterOthers says the kube-scheduler may place the pod only once pods
	// planned for other nodes have landed (see placedAfterOthers).
	afterOthers bool
}

// nominations remember the room found for pending pods. A pod that waits for a
// claim is not planned for again; it is put on its claim's node in the snapshot,
// so the room kept for it is not handed to another pod either.
type nominations map[k8stypes.UID]nomination

// reserve puts each waiting pod on its claim's node in in.Nodes and returns the
// pending pods still to plan for. A nomination lapses when its claim is gone or
// going, when the pod is no longer pending, and once the claim's node is up, when
// the pod no longer fits beside the pods bound there (by requests or by its hard
// topology spreads) or NominationGrace passed.
//
// A pod whose room was taken is not planned for while other pods still wait for
// their planned nodes (for NominationGrace at most): the kube-scheduler places pods
// by its own scoring as the nodes come up, so the pod that took this room leaves
// its own elsewhere, and so on until the last waiting pod is placed. Planned in the
// middle of that, the pod finds room held for pods that will go elsewhere and gets
// a node of its own; afterwards the kube-scheduler has most often placed it
// already, and what is left is planned into the room truly left.
func (n nominations) reserve(in *scheduling.Input, claims []*v1.NodeClaim, now time.Time) ([]*corev1.Pod, lapses) {
	nodes := claimNodes(in, claims)
	byName := map[string]*v1.NodeClaim{}
	for _, nc := range claims {
		byName[nc.Name] = nc
	}
	pending := make(map[k8stypes.UID]bool, len(in.Pods))
	outcomes := make([]outcome, len(in.Pods))
	var lapsed lapses
	coming := false
	for i, pod := range in.Pods {
		pending[pod.UID] = true
		outcomes[i] = n.wait(pod, byName, nodes, now, &lapsed)
	}
	// With every waiting pod on its node, those whose spread bars them there for
	// good give up their room.
	for i, pod := range in.Pods {
		if outcomes[i] == waits && n.barredBySpread(pod, byName, nodes, in.Nodes) {
			outcomes[i] = roomTaken
			lapsed.RoomTaken++
		}
		coming = coming || outcomes[i] == waits
	}
	out := in.Pods[:0:0]
	for i, pod := range in.Pods {
		switch nom := n[pod.UID]; outcomes[i] {
		case waits:
			continue
		case roomTaken:
			if coming {
				n[pod.UID] = nomination{at: now, pod: client.ObjectKeyFromObject(pod)}
				lapsed.Held++
				continue
			}
			delete(n, pod.UID)
		case heldBack:
			if coming && now.Sub(nom.at) < NominationGrace {
				lapsed.Held++
				continue
			}
			delete(n, pod.UID)
			lapsed.Released++
		}
		out = append(out, pod)
	}
	for uid := range n {
		if !pending[uid] {
			delete(n, uid) // bound, or gone
		}
	}
	return out, lapsed
}

// outcome is what became of a pending pod's nomination in a reserve.
type outcome int

const (
	// toPlan: it has none, or it lapsed.
	toPlan outcome = iota
	// waits on its claim's node, holding its room there.
	waits
	// roomTaken: its claim's node is up and the room is taken, or a hard
	// topology spread bars the pod there for now (see spreadAdmits).
	roomTaken
	// heldBack since its room was taken.
	heldBack
)

// holding reports pods held back after their room was taken (see reserve).
func (n nominations) holding() bool {
	for _, nom := range n {
		if nom.claim == "" {
			return true
		}
	}
	return false
}

// held reports whether pod is held back after its room was taken.
func (n nominations) held(pod *corev1.Pod) bool {
	nom, ok := n[pod.UID]
	return ok && nom.claim == ""
}

// lapses count the nominations that lapsed in a reserve, by cause, for the log;
// Held are the pods whose room was taken, held back while other pods wait,
// Released those planned for now that the wait is over.
type lapses struct {
	ClaimGone, Grace, RoomTaken, Held, Released int
}

func (l lapses) any() bool { return l.ClaimGone+l.Grace+l.RoomTaken+l.Released > 0 }

func (n nominations) wait(pod *corev1.Pod, claims map[string]*v1.NodeClaim, nodes map[string]*scheduling.Node, now time.Time, lapsed *lapses) outcome {
	nom, ok := n[pod.UID]
	if !ok {
		return toPlan
	}
	if nom.claim == "" {
		return heldBack
	}
	nc, node := claims[nom.claim], nodes[nom.claim]
	if nc == nil || nc.DeletionTimestamp != nil || node == nil {
		delete(n, pod.UID)
		lapsed.ClaimGone++
		return toPlan
	}
	if claimUp(nc) {
		up := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized)
		since := nom.at
		if up.LastTransitionTime.After(since) {
			since = up.LastTransitionTime.Time
		}
		if !fits(node, pod) {
			lapsed.RoomTaken++
			return roomTaken
		}
		if now.Sub(since) > NominationGrace {
			delete(n, pod.UID)
			lapsed.Grace++
			return toPlan
		}
	}
	node.Pods = append(node.Pods, pod)
	return waits
}

// barredBySpread reports a pod waiting on its claim's node, up, that its hard
// topology spread bars there even once every waiting pod has landed where
// planned (the kube-scheduler put a peer planned elsewhere in this zone, say); it
// is taken off the node, whose room it no longer holds.
func (n nominations) barredBySpread(pod *corev1.Pod, claims map[string]*v1.NodeClaim, nodes map[string]*scheduling.Node, all []*scheduling.Node) bool {
	claim := n[pod.UID].claim
	nc, node := claims[claim], nodes[claim]
	if nc == nil || node == nil || !claimUp(nc) || spreadAdmits(all, node, pod) {
		return false
	}
	node.Pods = slices.DeleteFunc(node.Pods, func(p *corev1.Pod) bool { return p.UID == pod.UID })
	return true
}

// nominate records that pod waits for claim, from now.
func (n nominations) nominate(pod *corev1.Pod, claim string, now time.Time) {
	n[pod.UID] = nomination{claim: claim, at: now, pod: client.ObjectKeyFromObject(pod), afterOthers: placedAfterOthers(pod)}
}

// placedAfterOthers reports a pod whose placement the kube-scheduler may put off
// until pods planned for other nodes have landed: a hard topology spread over a
// key other than the hostname (a zone whose planned pods wait for nodes still
// held back counts as empty, and caps the pods of the other zones), or a required
// pod affinity (its peers may be planned on such nodes). Such a pod waiting for
// its node must not hold back the batch's larger nodes (see
// nodeclaim.ReleaseOrder): the wait would last until the hold ran out.
func placedAfterOthers(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule && c.TopologyKey != corev1.LabelHostname {
			return true
		}
	}
	a := pod.Spec.Affinity
	return a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
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

// claimUp reports a claim whose node is initialized.
func claimUp(nc *v1.NodeClaim) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)
}
