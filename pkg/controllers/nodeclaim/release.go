package nodeclaim

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// The kube-scheduler does not place pods where the plan has them: by default it
// scores the emptiest nodes best, so as a batch's nodes come up together the small
// pods spread over the largest ones and take the room planned there for pods only
// a large node holds, which then need nodes of their own (a mix of four pod shapes
// paid 15-29% over its plan's price that way). Registered after the small nodes,
// the large nodes find the pods planned for them. So the provisioner records each
// batch's claims with their sizes and says when a claim is settled (its node is up
// and no pod still waits for it), and registration holds a node back (it keeps
// karpenter.sh/unregistered): a node larger than the batch's smallest tier until
// every node of that tier is settled, and every node until all nodes of its tier
// have joined, so that they open together and the first one open does not draw
// every pod in the queue; for at most MaxReleaseHold. The wait is for pods, not a
// fixed time: the kube-scheduler backs off a pod it failed to place for up to 10
// seconds, so the pods of a node that just came up are placed within a second or
// within ten. Two tiers, not one per size: a middle tier opened on its own draws
// the pods planned for the larger nodes as much as the larger ones would. A third
// rank, after the larger nodes, holds the small nodes of a zone spread whose other
// pods are planned on larger nodes (see AfterOthers).

// ReleaseSettle is how long a batch's larger nodes wait after its smaller ones
// settled.
const ReleaseSettle = 500 * time.Millisecond

// releasePoll is how often a held node is looked at. A tier registers at a moment
// set at least two polls ahead, which every node of it sees in time.
const releasePoll = 100 * time.Millisecond

// AnnounceLead is how long before a node registers the pods planned for it are
// given its name as their nominated node: the kube-scheduler is to see the
// nominations before it sees the node open.
const AnnounceLead = 2 * releasePoll

// KeepNominations is how long after a node was named to its pods registration
// names it again to those whose nomination was cleared: the kube-scheduler's
// backoff, 10 seconds at most, and a little.
const KeepNominations = 12 * time.Second

// MaxReleaseHold bounds how long a node that joined is held back, so that a
// smaller node that never comes up, or pods that never land, delay the others by
// this much at most.
const MaxReleaseHold = 20 * time.Second

// forgetBatchAfter drops a batch from the order this long after it was added: by
// then every node of it is up, gone, or no longer held.
const forgetBatchAfter = 30 * time.Minute

// ReleaseOrder is the order in which the provisioner's batches register their
// nodes. It lives in memory: after a restart nothing is held back.
type ReleaseOrder struct {
	clock clock.Clock
	// noHold registers every node as soon as it is up (see WithoutHold).
	noHold bool
	mu     sync.Mutex
	claims map[string]*releaseClaim
	// planned holds the pods waiting for each claim's node, as the provisioner
	// last saw them; announced, when registration first named a claim's node to
	// them (see Announce).
	planned   map[string][]types.NamespacedName
	announced map[string]time.Time
	// closed holds when registration first found a claim's node closed to pods
	// waiting for it (see Closed).
	closed map[string]time.Time
}

type releaseClaim struct {
	batch *ReleaseBatch
	name  string
	rank  int
	added time.Time
	// held is when registration first asked about the claim; settled, when its
	// node was up with no pod waiting for it any more (or the claim went).
	held, settled time.Time
}

// ReleaseBatch is one batch of the order, its claims added as they are created.
type ReleaseBatch struct {
	order  *ReleaseOrder
	ranks  []int
	claims []*releaseClaim
	// nominate says the batch's pods are of several shapes: registration names
	// each node to the pods planned for it (see Plan).
	nominate bool
	// releaseAt is when the nodes of each rank register, once known.
	releaseAt map[int]time.Time
}

// NewReleaseOrder returns an empty order.
func NewReleaseOrder(clk clock.Clock) *ReleaseOrder {
	return &ReleaseOrder{clock: clk, claims: map[string]*releaseClaim{}, announced: map[string]time.Time{}, closed: map[string]time.Time{}}
}

// WithoutHold has the order hold no node back: each registers as soon as it is
// up, its pods still told its name first (see Announce).
func (o *ReleaseOrder) WithoutHold() *ReleaseOrder {
	o.noHold = true
	return o
}

// Batch starts a batch of new nodes of these sizes (see NodeSize); its claims are
// added as they are created, before their nodes can boot. Its tiers are the nodes
// of the smallest size tier (see sizeTier) and the rest. A batch of nodes of one
// size tier holds nothing back, and is nil (see Together).
func (o *ReleaseOrder) Batch(sizes []float64) *ReleaseBatch {
	if o == nil {
		return nil
	}
	tiers := make([]int, len(sizes))
	for i, size := range sizes {
		tiers[i] = sizeTier(size)
	}
	smallest := slices.Min(append(tiers, math.MaxInt))
	if !slices.ContainsFunc(tiers, func(t int) bool { return t != smallest }) {
		return nil
	}
	b := o.Together(len(sizes))
	for i, tier := range tiers {
		if tier != smallest {
			b.ranks[i] = 1
		}
	}
	return b
}

// Together starts a batch of n new nodes of one rank: each is held back until
// every other has joined (for MaxReleaseHold at most), so that they open at one
// moment. On a cloud whose nodes come up tens of seconds apart in random order,
// the first node open otherwise draws every pod it can hold, planned elsewhere or
// not, and pods of several shapes or spread over zones no longer fit the room
// left where they were planned.
func (o *ReleaseOrder) Together(n int) *ReleaseBatch {
	if o == nil {
		return nil
	}
	b := &ReleaseBatch{order: o, ranks: make([]int, n), releaseAt: map[int]time.Time{}}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, c := range o.claims {
		if now.Sub(c.added) > forgetBatchAfter {
			delete(o.claims, name)
		}
	}
	return b
}

// AfterOthers marks the nodes planned for pods the kube-scheduler places only after
// pods planned for other nodes (a zone spread): when some of them are larger
// nodes, the smallest ones register last, after the larger ones. A zone whose
// spread pods wait on a larger node held back counts as empty and caps the spread
// pods of the other zones, whose room on the small nodes, kept for them only by a
// nomination the kube-scheduler clears at each failed attempt, goes to other
// pods. Opened last, they find the larger nodes' zones filled, and catch up. To
// be called before the claims are added.
func (b *ReleaseBatch) AfterOthers(after []bool) {
	if b == nil {
		return
	}
	split := false
	for i, a := range after {
		split = split || (a && b.ranks[i] > 0)
	}
	if !split {
		return
	}
	for i, a := range after {
		if a && b.ranks[i] == 0 {
			b.ranks[i] = 2
		}
	}
}

// NominatePods has registration name each of the batch's nodes to the pods planned
// for it: to be called for a batch whose pods are of several shapes.
func (b *ReleaseBatch) NominatePods() {
	if b != nil {
		b.nominate = true
	}
}

// Add records the claim created for the batch's i-th node.
func (b *ReleaseBatch) Add(i int, name string) {
	if b == nil {
		return
	}
	o := b.order
	o.mu.Lock()
	defer o.mu.Unlock()
	c := &releaseClaim{batch: b, name: name, rank: b.ranks[i], added: o.clock.Now()}
	b.claims = append(b.claims, c)
	o.claims[name] = c
}

// Waiting reports a node held back for a smaller one not settled yet: the
// provisioner is to look again soon (see Observe).
func (o *ReleaseOrder) Waiting() bool {
	if o == nil {
		return false
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.claims {
		if c.held.IsZero() || now.Sub(c.held) >= MaxReleaseHold {
			continue
		}
		for _, d := range c.batch.claims {
			if d.rank < c.rank && d.settled.IsZero() {
				return true
			}
		}
	}
	return false
}

// Observe settles the claims whose node is up (up says so) with no pod waiting
// for them (waiting), and those that went (live says which are not).
func (o *ReleaseOrder) Observe(live, up, waiting func(name string) bool) {
	if o == nil {
		return
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.claims {
		switch {
		case !c.settled.IsZero():
		case !live(c.name):
			// A claim that went leaves no pods to place on its node.
			c.settled = now.Add(-ReleaseSettle)
		case up(c.name) && !waiting(c.name):
			c.settled = now
		}
	}
}

// Hold reports how much longer the claim's node is to stay unregistered: 0 when
// it may register now.
func (o *ReleaseOrder) Hold(name string) time.Duration {
	hold, _ := o.Due(name)
	return hold
}

// Due is Hold, and whether the moment the node registers is known: when it is
// not, the hold is only how soon to look again.
func (o *ReleaseOrder) Due(name string) (time.Duration, bool) {
	if o == nil {
		return 0, true
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.claims[name]
	if c == nil || o.noHold {
		return 0, true
	}
	if c.held.IsZero() {
		c.held = now
	}
	left := c.held.Add(MaxReleaseHold).Sub(now)
	if left <= 0 {
		return 0, true
	}
	if at, ok := c.batch.releaseAt[c.rank]; ok {
		return min(left, max(0, at.Sub(now))), true
	}
	var last time.Time
	for _, d := range c.batch.claims {
		switch {
		case d.rank < c.rank && d.settled.IsZero():
			// Looked at again soon: the pods land at any moment.
			return min(left, releasePoll), false
		case d.rank < c.rank && d.settled.After(last):
			last = d.settled
		case d.rank == c.rank && d.held.IsZero() && d.settled.IsZero():
			// A node of the same size still booting: nodes released one by one
			// each draw the pods in the queue's order until full, and small pods
			// fill the first ones.
			return min(left, releasePoll), false
		}
	}
	// The nodes of this size register at one moment, one that every one of them
	// looks at, and names to its pods (see Announce), before it comes (each
	// looks every releasePoll).
	at := last.Add(ReleaseSettle)
	ahead := 2 * releasePoll
	if c.batch.nominate {
		ahead += AnnounceLead
	}
	if first := now.Add(ahead); at.Before(first) {
		at = first
	}
	c.batch.releaseAt[c.rank] = at
	return min(left, at.Sub(now)), true
}

// Plan records the pods waiting for each claim's node, replacing what was there.
// Only the claims of batches that nominate their pods (see NominatePods), with
// nodes of more than one size, are kept: where each pod lands matters only when
// the pods are of several shapes. When any pod fits where another was planned,
// a nomination costs time, not nodes: the kube-scheduler keeps a node's room for
// the very pods nominated there, which may sit out a backoff of up to 10 seconds
// while others that would fit wait (inflate 500 ran in 33-38 s instead of 30).
func (o *ReleaseOrder) Plan(pods map[string][]types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.planned = map[string][]types.NamespacedName{}
	for name, keys := range pods {
		if c := o.claims[name]; c != nil && c.batch.nominate {
			o.planned[name] = keys
		}
	}
	for _, m := range []map[string]time.Time{o.announced, o.closed} {
		maps.DeleteFunc(m, func(name string, _ time.Time) bool { _, ok := o.planned[name]; return !ok })
	}
}

// Closed reports how much longer to wait before looking again at a claim's node
// that is up but would still turn its pods away (not ready, or tainted so): a
// node with pods waiting for it stays unregistered until they can land, so that
// the kube-scheduler's first look at it is one that places them; every failed
// look clears a pod's nomination (see Announce). For MaxReleaseHold at most
// from the first ask; 0 when there is no pod to wait for or the time is up.
func (o *ReleaseOrder) Closed(name string) time.Duration {
	if o == nil {
		return 0
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.planned[name]) == 0 {
		return 0
	}
	since := firstSeen(o.closed, name, now)
	return min(releasePoll, max(0, since.Add(MaxReleaseHold).Sub(now)))
}

// Planned returns the pods waiting for the claim's node.
func (o *ReleaseOrder) Planned(name string) []types.NamespacedName {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.planned[name])
}

// Announce records that the pods waiting for the claim's node were told its name
// and reports how much longer the node is to wait before it registers, so that
// the kube-scheduler sees the pods' nominations before it sees the node open.
func (o *ReleaseOrder) Announce(name string) time.Duration {
	if o == nil {
		return 0
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.planned[name]; !ok {
		return 0
	}
	at := firstSeen(o.announced, name, now)
	return max(0, at.Add(AnnounceLead).Sub(now))
}

// firstSeen returns when name was first recorded in m, recording now if never.
func firstSeen(m map[string]time.Time, name string, now time.Time) time.Time {
	at, ok := m[name]
	if !ok {
		at = now
		m[name] = at
	}
	return at
}

// Keep reports, for a claim whose node registered, how soon to look again at the
// nominations of the pods waiting for it (see Announce), for KeepNominations
// after they were first made; 0 when there is nothing to keep.
func (o *ReleaseOrder) Keep(name string) time.Duration {
	if o == nil {
		return 0
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.announced[name]
	if !ok || len(o.planned[name]) == 0 || now.Sub(at) >= KeepNominations {
		return 0
	}
	return releasePoll
}

// sizeTier puts nodes within about 40% of each other's size in one tier: they
// draw much the same pods and are released together.
func sizeTier(size float64) int {
	return int(math.Floor(2 * math.Log2(max(size, 1e-3))))
}

// NodeSize orders nodes by how many pods they can draw: cores plus GiB of memory
// over four (the general-purpose ratio), so a memory-optimised node counts as
// larger than a general-purpose one of the same cores.
func NodeSize(cpuMillis, memoryBytes int64) float64 {
	return float64(cpuMillis)/1000 + float64(memoryBytes)/(4<<30)
}
