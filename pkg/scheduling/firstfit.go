package scheduling

// verdict is a node's answer to a pod of one variant.
type verdict int

const (
	accepted verdict = iota
	// refusedNow: the node may take the pod once other pods have landed anywhere
	// (a zonal spread or affinity whose counts move, a pool limit).
	refusedNow
	// refusedUntilChanged: the node may take the pod once pods have landed on it
	// (its growth for this pod costs more than a fresh node, for now).
	refusedUntilChanged
	// refusedForGood: nothing later in the solve changes the answer, as nodes
	// only fill, their requirements only narrow and topology counts only grow.
	refusedForGood
)

// nodeQueue is, for one variant, the nodes first-fit still has to try, in node
// order: those that have not refused it for good. Without it every pod would scan
// every node, full ones included, and the solve would grow with pods × nodes.
type nodeQueue struct {
	live []int32 // positions in solver.nodes; -1 once dropped
	// until[j] is how many pods live[j] had when it refused until changed, or -1:
	// while it has as many, it is skipped.
	until   []int32
	dropped int
	next    int // nodes from here on have not been tried yet
}

// firstFit places the pod on the first node that takes it, in node order. With
// lasting set every refusal is for good.
func (s *solver) firstFit(p *podInfo, v *variant, lasting bool) bool {
	q := &v.queue
	q.compact()
	for j, i := range q.live {
		if i < 0 {
			continue
		}
		n := s.nodes[i]
		if q.until[j] == int32(len(n.pods)) {
			continue
		}
		switch vd := s.try(p, v, n); {
		case vd == accepted:
			return true
		case vd == refusedForGood || lasting:
			q.live[j] = -1
			q.dropped++
		case vd == refusedUntilChanged:
			q.until[j] = int32(len(n.pods))
		default:
			q.until[j] = -1
		}
	}
	for q.next < len(s.nodes) {
		i := q.next
		q.next++
		n := s.nodes[i]
		vd := s.try(p, v, n)
		if vd == refusedForGood || vd != accepted && lasting {
			continue
		}
		q.live = append(q.live, int32(i))
		q.until = append(q.until, -1)
		switch vd {
		case accepted:
			return true
		case refusedUntilChanged:
			q.until[len(q.until)-1] = int32(len(n.pods))
		}
	}
	return false
}

// try is tryNode for first-fit. An exhaustive solve (tests) takes no refusal at
// its word, and narrows each node's options eagerly (see narrowOptions), so its
// plans show what these shortcuts change: nothing.
func (s *solver) try(p *podInfo, v *variant, n *simNode) verdict {
	vd, _ := s.tryNode(p, v, n, false)
	if s.exhaustive && vd != accepted {
		return refusedNow
	}
	return vd
}

// compact removes the dropped nodes once they are half the queue, so a scan pays
// for them at most about as much as for the nodes still live.
func (q *nodeQueue) compact() {
	if q.dropped*2 <= len(q.live) {
		return
	}
	w := 0
	for j, i := range q.live {
		if i >= 0 {
			q.live[w], q.until[w] = i, q.until[j]
			w++
		}
	}
	q.live, q.until, q.dropped = q.live[:w], q.until[:w], 0
}
