package provisioning

import (
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// limitBudget holds, per NodePool, what counts against its limits, and takes each
// claim of a batch from it just before the claim is created. The plan was made
// from a snapshot; claims created since (a disruption's replacements, say) are in
// the usage it starts from, and the batch's own claims are added as they are
// taken, so no claim passes a limit whatever changed after the plan.
type limitBudget struct {
	mu     sync.Mutex
	limits map[string]v1.Limits
	used   map[string]corev1.ResourceList
}

func newLimitBudget(pools map[string]*v1.NodePool, used map[string]corev1.ResourceList) *limitBudget {
	b := &limitBudget{limits: map[string]v1.Limits{}, used: map[string]corev1.ResourceList{}}
	for name, np := range pools {
		b.limits[name] = np.Spec.Limits
		b.used[name] = used[name].DeepCopy()
		if b.used[name] == nil {
			b.used[name] = corev1.ResourceList{}
		}
	}
	return b
}

// take counts need against the pool's limits and returns "", or leaves the usage
// alone and says which limit need would pass.
func (b *limitBudget) take(pool string, need corev1.ResourceList) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if why := overrun(b.limits[pool], b.used[pool], need); why != "" {
		return why
	}
	for name, q := range need {
		sum := b.used[pool][name]
		sum.Add(q)
		b.used[pool][name] = sum
	}
	return ""
}

// give returns what take counted, for a claim that was not created after all.
func (b *limitBudget) give(pool string, need corev1.ResourceList) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, q := range need {
		sum := b.used[pool][name]
		sum.Sub(q)
		b.used[pool][name] = sum
	}
}

// overrun names the first limit (in name order) that used plus need passes, or
// returns "". Like the scheduling engine, it checks every limited resource, so a
// pool already past a limit (lowered, say) launches nothing.
func overrun(limits v1.Limits, used, need corev1.ResourceList) string {
	names := make([]corev1.ResourceName, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		limit := limits[name]
		total := used[name].DeepCopy()
		total.Add(need[name])
		if total.Cmp(limit) > 0 {
			has, adds := used[name], need[name]
			return fmt.Sprintf("limit %s=%s would be passed: %s in use, the node adds %s", name, limit.String(), has.String(), adds.String())
		}
	}
	return ""
}
