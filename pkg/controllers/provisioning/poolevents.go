package provisioning

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Event reasons on a NodePool that launches nothing while pods wait, so that
// `kubectl describe nodepool` says why. LimitReached is also the static
// NodePools' reason.
const (
	ReasonLimitReached = "LimitReached"
	ReasonNotReady     = "NotReady"
)

// PoolEventInterval is how often a NodePool is told the same reason while it lasts:
// the provisioner looks again every second while pods wait at a limit.
const PoolEventInterval = 2 * time.Minute

// poolBlock is why a NodePool launched nothing for pods that wait.
type poolBlock struct {
	pool    *v1.NodePool
	reason  string
	message string
}

// refusal is what the limits refused a NodePool in a batch: the claims' pods, and
// why the first was refused.
type refusal struct {
	why  string
	pods int
}

// blockedPools says which NodePools a limit or their readiness kept from launching
// nodes for waiting pods (pure): those not Ready while pods fit nowhere (a
// NodePool whose instance types could not be read is left out: it is looked at
// again within seconds), and those the plan found at a limit for some pod, or
// whose claims the limits refused just before creation.
func blockedPools(pools []*scheduling.NodePool, typesFailed []string, unschedulable []scheduling.Failure, refused map[string]refusal) []poolBlock {
	var out []poolBlock
	for _, pool := range pools {
		np := pool.NodePool
		if pool.Unavailable != "" && pool.Unavailable != state.StaticUnavailable && !slices.Contains(typesFailed, np.Name) && len(unschedulable) > 0 {
			out = append(out, poolBlock{pool: np, reason: ReasonNotReady,
				message: fmt.Sprintf("Launching no nodes while %s; %d pending pods fit no node", pool.Unavailable, len(unschedulable))})
			continue
		}
		why, pods := "", 0
		for _, f := range unschedulable {
			if limit := limitReason(f.Reason, np.Name); limit != "" {
				why = cmp.Or(why, limit)
				pods++
			}
		}
		if r, ok := refused[np.Name]; ok {
			why = cmp.Or(why, r.why)
			pods += r.pods
		}
		if pods > 0 {
			out = append(out, poolBlock{pool: np, reason: ReasonLimitReached,
				message: fmt.Sprintf("Launching no more nodes: %s; %d pending pods wait for room", why, pods)})
		}
	}
	return out
}

// limitReason is the part of an unschedulable pod's reason that says the pool's
// limits ruled it out ("limit cpu=10 reached (…)"), or "". The engine gives one
// reason per NodePool: "NodePool a: …; NodePool b: limit cpu=10 reached (…)".
func limitReason(reason, pool string) string {
	// Each NodePool's reason follows "; " but the first, which starts the string.
	head := "; NodePool " + pool + ": "
	i := strings.Index("; "+reason, head+"limit")
	if i < 0 {
		return ""
	}
	limit, _, _ := strings.Cut(("; " + reason)[i+len(head):], "; ")
	return limit
}
