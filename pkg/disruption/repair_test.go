package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
)

// sick describes one node of a repair test: its pool, its Ready status and how long
// it has held it, and its claim.
type sick struct {
	pool    string
	ready   corev1.ConditionStatus // "" for no Ready condition at all
	held    time.Duration
	foreign bool
	going   bool
}

func repairInput(nodes []sick) *RepairInput {
	in := &RepairInput{Now: now, Policies: KubeletRepairPolicies}
	in.Manages = func(nc *v1.NodeClaim) bool { return nc.Spec.NodeClassRef.Kind == "SimNodeClass" }
	for i, s := range nodes {
		name := fmt.Sprintf("n%d", i)
		nodeOpts := []testobj.NodeOption{testobj.ProviderID("fake:///" + name), testobj.NodeReady(s.ready, now.Add(-s.held))}
		claimOpts := []testobj.NodeClaimOption{testobj.ClaimNode("fake:///"+name, name)}
		if s.pool != "" {
			nodeOpts = append(nodeOpts, testobj.NodeLabels(v1.NodePoolLabelKey, s.pool))
			claimOpts = append(claimOpts, testobj.ClaimLabels(v1.NodePoolLabelKey, s.pool))
		}
		if s.foreign {
			claimOpts = append(claimOpts, testobj.ClaimNodeClassRef(&v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}))
		}
		n, nc := testobj.Node(name, "", "", nodeOpts...), testobj.NodeClaim(name, claimOpts...)
		if s.ready == "" {
			n.Status.Conditions = nil
		}
		if s.going {
			nc.DeletionTimestamp = &metav1.Time{Time: now}
		}
		in.Nodes = append(in.Nodes, n)
		in.Claims = append(in.Claims, nc)
	}
	return in
}

// healthy is n nodes of pool, Ready for a day.
func healthy(pool string, n int) []sick {
	out := make([]sick, n)
	for i := range out {
		out[i] = sick{pool: pool, ready: corev1.ConditionTrue, held: 24 * time.Hour}
	}
	return out
}

func TestDecideRepairs(t *testing.T) {
	const tol = 30 * time.Minute
	tests := []struct {
		name     string
		nodes    []sick
		repaired []string
		blocked  []string
		next     time.Duration // from now; 0 for none
	}{
		{"NotReady past its toleration", append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: tol + time.Second}}, healthy("a", 4)...),
			[]string{"n0"}, nil, 0},
		{"Unknown past its toleration", append([]sick{{pool: "a", ready: corev1.ConditionUnknown, held: tol + time.Second}}, healthy("a", 4)...),
			[]string{"n0"}, nil, 0},
		{"NotReady within its toleration", append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: tol - time.Minute}}, healthy("a", 4)...),
			nil, nil, time.Minute},
		{"ready, or no Ready condition yet", []sick{{pool: "a", ready: corev1.ConditionTrue, held: time.Hour}, {pool: "a"}}, nil, nil, 0},
		{"already being deleted", append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: time.Hour, going: true}}, healthy("a", 4)...),
			nil, nil, 0},
		{"another provider's claim", append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: time.Hour, foreign: true}}, healthy("a", 4)...),
			nil, nil, 0},
		// 20% of 3 rounds up to one node.
		{"one of three", append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: time.Hour}}, healthy("a", 2)...),
			[]string{"n0"}, nil, 0},
		// Two of five are unhealthy, one still within its toleration: more than 20%.
		{"two of five", append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: time.Hour},
			{pool: "a", ready: corev1.ConditionUnknown, held: time.Minute}}, healthy("a", 3)...),
			nil, []string{"n0"}, tol - time.Minute},
		{"each pool by itself", append(append([]sick{{pool: "a", ready: corev1.ConditionFalse, held: time.Hour},
			{pool: "b", ready: corev1.ConditionFalse, held: time.Hour}, {pool: "b", ready: corev1.ConditionFalse, held: time.Hour}},
			healthy("a", 4)...), healthy("b", 1)...),
			[]string{"n0"}, []string{"n1", "n2"}, 0},
		// Two of the cluster's five nodes are unhealthy, one of pool a's four.
		{"a claim without a pool is held to the cluster", append([]sick{{ready: corev1.ConditionFalse, held: time.Hour},
			{pool: "a", ready: corev1.ConditionFalse, held: time.Hour}}, healthy("a", 3)...),
			[]string{"n1"}, []string{"n0"}, 0},
		{"a claim without a pool in a healthy cluster", append([]sick{{ready: corev1.ConditionFalse, held: time.Hour}}, healthy("a", 4)...),
			[]string{"n0"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := DecideRepairs(repairInput(tt.nodes))
			var repaired, blocked []string
			for _, r := range dec.Repairs {
				repaired = append(repaired, r.Claim.Name)
				if r.Node.Name != r.Claim.Name || r.Condition.Type != corev1.NodeReady {
					t.Errorf("repair of %s names node %s, condition %s", r.Claim.Name, r.Node.Name, r.Condition.Type)
				}
			}
			for _, b := range dec.Blocked {
				blocked = append(blocked, b.Claim.Name)
				if !strings.Contains(b.Reason, "more than 20%") {
					t.Errorf("blocked reason %q", b.Reason)
				}
			}
			if !slices.Equal(repaired, tt.repaired) || !slices.Equal(blocked, tt.blocked) {
				t.Errorf("repaired %v, blocked %v; want %v, %v", repaired, blocked, tt.repaired, tt.blocked)
			}
			var want time.Time
			if tt.next != 0 {
				want = now.Add(tt.next)
			}
			if !dec.Next.Equal(want) {
				t.Errorf("next %v, want %v", dec.Next, want)
			}
		})
	}
}
