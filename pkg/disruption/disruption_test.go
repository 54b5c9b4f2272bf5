package disruption

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func blockedReason(dec *Decision, node string) string {
	for _, b := range dec.Blocked {
		if b.Node == node {
			return b.Reason
		}
	}
	return ""
}

func TestEmptyNodesAreDeletedWithinBudget(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "2"}}
	busy := c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
	e1 := c.node(3, v1.CapacityTypeOnDemand, pod("10m", "10Mi", daemon))
	e2 := c.node(3, v1.CapacityTypeOnDemand)
	e3 := c.node(3, v1.CapacityTypeOnDemand)
	dec := Decide(c.in)
	cmd := dec.Command
	if cmd == nil || cmd.Reason != v1.DisruptionReasonEmpty || cmd.Decision() != "delete" {
		t.Fatalf("want deletion of empty nodes, got %v", cmd)
	}
	got := names(cmd.Candidates)
	if len(got) != 2 || slices.Contains(got, busy.Node.Name) {
		t.Fatalf("deleted %v: want two of the three empty nodes (budget 2), never %s", got, busy.Node.Name)
	}
	if dec.Eligible[v1.DisruptionReasonEmpty] != 3 {
		t.Errorf("eligible empty = %d, want 3", dec.Eligible[v1.DisruptionReasonEmpty])
	}
	left := []string{e1.Node.Name, e2.Node.Name, e3.Node.Name}
	left = slices.DeleteFunc(left, func(s string) bool { return slices.Contains(got, s) })
	if !strings.Contains(blockedReason(dec, left[0]), "disruption budget") {
		t.Errorf("the third empty node should be blocked by the budget, got %q", blockedReason(dec, left[0]))
	}
}

func TestConsolidateAfterWaitsForQuiet(t *testing.T) {
	c := newCluster(t)
	n := c.node(3, v1.CapacityTypeOnDemand)
	c.claim(n).Status.LastPodEventTime = metav1.NewTime(now.Add(-10 * time.Second))
	if cmd := Decide(c.in).Command; cmd != nil {
		t.Fatalf("a pod left 10s ago with consolidateAfter 30s: want nothing, got %s", cmd)
	}
	c.in.Now = now.Add(21 * time.Second)
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Reason != v1.DisruptionReasonEmpty {
		t.Fatalf("after consolidateAfter the empty node should go, got %v", cmd)
	}
	c.pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("Never")
	if cmd := Decide(c.in).Command; cmd != nil {
		t.Fatalf("consolidateAfter Never: want nothing, got %s", cmd)
	}
}

func TestUnderutilizedNodesConsolidate(t *testing.T) {
	c := newCluster(t)
	// Three 8-cpu nodes each running one 1-cpu pod: one node of 4 cpu holds them all.
	for range 3 {
		c.node(7, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	}
	before := c.price()
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Reason != v1.DisruptionReasonUnderutilized || cmd.Kind != KindMulti || len(cmd.Candidates) != 3 || len(cmd.Replacements) != 1 {
		t.Fatalf("want the three nodes consolidated into one, got %v", cmd)
	}
	if r := cmd.Replacements[0]; r.Offering.Price >= before*(1-DefaultMinSavings) {
		t.Errorf("replacement costs %.4f, the nodes %.4f", r.Offering.Price, before)
	}
	for _, it := range cmd.Replacements[0].InstanceTypes {
		if o, _ := it.CheapestOffering(cmd.Replacements[0].Requirements); o.Price >= before*(1-DefaultMinSavings) {
			t.Errorf("replacement option %s at %.4f does not save the minimum", it.Name, o.Price)
		}
	}
	c.apply(cmd)
	if after := c.price(); after >= before {
		t.Errorf("price %.4f → %.4f", before, after)
	}
	if cmd := Decide(c.in).Command; cmd != nil {
		t.Errorf("the consolidated cluster should be stable, got %s", cmd)
	}
}

func TestSingleNodeReplacedWithCheaper(t *testing.T) {
	c := newCluster(t)
	n := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"), pod("1", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Kind != KindSingle || cmd.Decision() != "replace" || cmd.Candidates[0].Node.Node.Name != n.Node.Name {
		t.Fatalf("want %s replaced by a smaller node, got %v", n.Node.Name, cmd)
	}
	if cmd.Replacements[0].Offering.CapacityType != v1.CapacityTypeOnDemand {
		t.Errorf("replacement must follow the NodePool's requirements, got %s", cmd.Replacements[0].Offering.CapacityType)
	}
	if cmd.Savings <= 0 {
		t.Errorf("savings %.4f", cmd.Savings)
	}
}

func TestDeleteWhenPodsFitElsewhere(t *testing.T) {
	c := newCluster(t)
	// Replacing both with one 8-cpu node saves exactly what deleting the small one
	// does: the move that disrupts less wins.
	c.node(7, v1.CapacityTypeOnDemand, pod("7", "1Gi"))
	small := c.node(1, v1.CapacityTypeOnDemand, pod("500m", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Decision() != "delete" || len(cmd.Candidates) != 1 || cmd.Candidates[0].Node.Node.Name != small.Node.Name {
		t.Fatalf("the small node's pod fits on the big one: want %s deleted, got %v", small.Node.Name, cmd)
	}
}

func TestNoChurnForPennies(t *testing.T) {
	c := newCluster(t)
	// A 2-cpu node with a 1.5-cpu pod: nothing smaller fits, so nothing to gain.
	n := c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("want nothing, got %s", dec.Command)
	}
	if why := blockedReason(dec, n.Node.Name); !strings.Contains(why, "saves enough") {
		t.Errorf("blocked reason %q, want it to say no replacement saves enough", why)
	}
	// A 3-cpu node whose pod fits a 2-cpu one saves a third: enough by default, not
	// with a 50% minimum.
	c = newCluster(t)
	c.node(2, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Decision() != "replace" {
		t.Fatalf("3 → 2 cpu saves 33%%: want a replacement, got %v", cmd)
	}
	c.in.Options.MinSavings = 0.5
	if cmd := Decide(c.in).Command; cmd != nil {
		t.Fatalf("with a 50%% minimum saving: want nothing, got %s", cmd)
	}
}

func TestBlockers(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(c *cluster, n *scheduling.Node)
		want  string
	}{
		"do-not-disrupt pod": {func(c *cluster, n *scheduling.Node) {
			n.Pods[0].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		}, "do-not-disrupt"},
		"do-not-disrupt node": {func(c *cluster, n *scheduling.Node) {
			n.Node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		}, "do-not-disrupt"},
		"do-not-disrupt claim": {func(c *cluster, n *scheduling.Node) {
			c.claim(n).Annotations[v1.DoNotDisruptAnnotationKey] = "true"
		}, "do-not-disrupt"},
		"pdb": {func(c *cluster, n *scheduling.Node) {
			zero := intstr.FromInt32(0)
			c.in.PDBs = append(c.in.PDBs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}})
		}, "pdb default/web prevents pod evictions"},
		"budget": {func(c *cluster, n *scheduling.Node) {
			c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}}
		}, "disruption budget"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			n := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
			tc.setup(c, n)
			dec := Decide(c.in)
			if dec.Command != nil {
				t.Fatalf("want nothing, got %s", dec.Command)
			}
			if why := blockedReason(dec, n.Node.Name); !strings.Contains(why, tc.want) {
				t.Errorf("blocked reason %q, want it to mention %q", why, tc.want)
			}
		})
	}
}

// A do-not-disrupt duration protects the pod for that long after it started, as
// Karpenter reads it; an invalid value protects nothing; a pod not started yet is
// protected; the node's and claim's annotation protect only with "true".
func TestDoNotDisruptDuration(t *testing.T) {
	started := func(ago time.Duration) testobj.PodOption {
		return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: now.Add(-ago)} }
	}
	for name, tc := range map[string]struct {
		value   string
		opts    []testobj.PodOption
		blocked string // part of the blocked reason; "" for consolidated
	}{
		"within the duration":         {value: "30m", opts: []testobj.PodOption{started(10 * time.Minute)}, blocked: "until 2026-11-22T12:20:00Z"},
		"duration elapsed":            {value: "30m", opts: []testobj.PodOption{started(31 * time.Minute)}},
		"hours and minutes":           {value: "1h30m", opts: []testobj.PodOption{started(time.Hour)}, blocked: "do-not-disrupt"},
		"not started":                 {value: "30m", blocked: "do-not-disrupt"},
		"invalid":                     {value: "soon", opts: []testobj.PodOption{started(time.Minute)}},
		"not positive":                {value: "-5m", opts: []testobj.PodOption{started(time.Minute)}},
		"false":                       {value: "false", opts: []testobj.PodOption{started(time.Minute)}},
		"true on a terminating pod":   {value: "true", opts: []testobj.PodOption{started(time.Minute), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }}},
		"true protects for good":      {value: "true", opts: []testobj.PodOption{started(1000 * time.Hour)}, blocked: "do-not-disrupt"},
		"duration on the node":        {value: "node:30m"},
		"duration on the node, true":  {value: "node:true", blocked: "node node-1 is annotated"},
		"duration on the claim, true": {value: "claim:true", blocked: "nodeclaim claim-node-1 is annotated"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			p := pod("1", "1Gi", tc.opts...)
			n := c.node(15, v1.CapacityTypeOnDemand, p)
			switch on, value, _ := strings.Cut(tc.value, ":"); on {
			case "node":
				n.Node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: value}
			case "claim":
				c.claim(n).Annotations[v1.DoNotDisruptAnnotationKey] = value
			default:
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations[v1.DoNotDisruptAnnotationKey] = tc.value
			}
			dec := Decide(c.in)
			if tc.blocked == "" {
				if dec.Command == nil {
					t.Fatalf("want the node consolidated, got nothing (blocked: %q)", blockedReason(dec, n.Node.Name))
				}
				return
			}
			if dec.Command != nil {
				t.Fatalf("want nothing, got %s", dec.Command)
			}
			if why := blockedReason(dec, n.Node.Name); !strings.Contains(why, tc.blocked) {
				t.Errorf("blocked reason %q, want it to mention %q", why, tc.blocked)
			}
		})
	}
}

func TestPDBWithRoomAllowsConsolidation(t *testing.T) {
	c := newCluster(t)
	c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	one := intstr.FromInt32(1)
	c.in.PDBs = []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}}
	if cmd := Decide(c.in).Command; cmd == nil {
		t.Fatal("a PDB that allows a disruption should not block")
	}
}

func TestDrift(t *testing.T) {
	t.Run("template hash", func(t *testing.T) {
		c := newCluster(t)
		c.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		n := c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
		if cmd := Decide(c.in).Command; cmd != nil {
			t.Fatalf("nothing drifted yet, got %s", cmd)
		}
		c.pool.Annotations[v1.NodePoolHashAnnotationKey] = "h2"
		cmd := Decide(c.in).Command
		if cmd == nil || cmd.Reason != v1.DisruptionReasonDrifted || cmd.Candidates[0].Node.Node.Name != n.Node.Name || len(cmd.Replacements) != 1 {
			t.Fatalf("want %s replaced for drift, got %v", n.Node.Name, cmd)
		}
		// A hash of another hashing version says nothing.
		c.pool.Annotations[v1.NodePoolHashVersionAnnotationKey] = "v2"
		if cmd := Decide(c.in).Command; cmd != nil {
			t.Fatalf("hash versions differ: want nothing, got %s", cmd)
		}
	})
	t.Run("drifted under another hash version stays drifted", func(t *testing.T) {
		// A claim Karpenter marked Drifted, stamped with Karpenter's hash version,
		// read before the NodePool controller re-stamps it: still drifted.
		c := newCluster(t)
		c.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		n := c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
		nc := c.claim(n)
		nc.Annotations[v1.NodePoolHashAnnotationKey], nc.Annotations[v1.NodePoolHashVersionAnnotationKey] = "6043937311012962385", "v3"
		if cmd := Decide(c.in).Command; cmd != nil {
			t.Fatalf("a hash of another version alone drifts nothing, got %s", cmd)
		}
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
			Reason: "NodePoolDrifted", Message: "marked by Karpenter"})
		dec := Decide(c.in)
		if cmd := dec.Command; cmd == nil || cmd.Reason != v1.DisruptionReasonDrifted || cmd.Candidates[0].Node.Node.Name != n.Node.Name {
			t.Fatalf("want the claim Karpenter marked Drifted replaced, got %v", cmd)
		}
		if got := dec.States[nc.Name].Drifted; got != "NodePoolDrifted: marked by Karpenter" {
			t.Errorf("Drifted condition %q, want Karpenter's kept", got)
		}
		// Re-stamped as the NodePool controller does: the old hash under the new version.
		nc.Annotations[v1.NodePoolHashVersionAnnotationKey] = "v1"
		if cmd := Decide(c.in).Command; cmd == nil || cmd.Reason != v1.DisruptionReasonDrifted {
			t.Fatalf("re-stamped with its old hash, want it still drifted, got %v", cmd)
		}
	})
	t.Run("requirements", func(t *testing.T) {
		c := newCluster(t)
		c.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
		c.pool.Spec.Template.Spec.Requirements = append(c.pool.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: "example.com/cpu", Operator: v1.NodeSelectorOpGt, Values: []string{"4"}})
		cmd := Decide(c.in).Command
		if cmd == nil || cmd.Reason != v1.DisruptionReasonDrifted || !strings.Contains(cmd.Candidates[0].drift, "RequirementsDrifted") {
			t.Fatalf("want a requirements drift, got %v", cmd)
		}
		if got := cmd.Replacements[0].InstanceType.Name; got == c.types[3].Name {
			t.Errorf("the replacement must meet the new requirements, got %s", got)
		}
	})
	t.Run("instance type gone", func(t *testing.T) {
		c := newCluster(t)
		c.node(3, v1.CapacityTypeOnDemand)
		c.pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("Never")
		c.in.Cluster.NodePools[0].InstanceTypes = slices.Delete(slices.Clone(c.types), 3, 4)
		cmd := Decide(c.in).Command
		if cmd == nil || cmd.Reason != v1.DisruptionReasonDrifted || cmd.Decision() != "delete" {
			t.Fatalf("an empty node of a withdrawn type goes, got %v", cmd)
		}
	})
	t.Run("provider", func(t *testing.T) {
		c := newCluster(t)
		c.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		n := c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
		c.in.ProviderDrift = map[string]string{c.claim(n).Name: "ImageDrifted"}
		if cmd := Decide(c.in).Command; cmd == nil || cmd.Candidates[0].drift != "ImageDrifted" {
			t.Fatalf("want the provider's drift, got %v", cmd)
		}
	})
	t.Run("do-not-disrupt yields to terminationGracePeriod", func(t *testing.T) {
		c := newCluster(t)
		c.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		n := c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi", testobj.Annotations(v1.DoNotDisruptAnnotationKey, "true")))
		c.pool.Annotations[v1.NodePoolHashAnnotationKey] = "h2"
		if cmd := Decide(c.in).Command; cmd != nil {
			t.Fatalf("do-not-disrupt blocks drift, got %s", cmd)
		}
		c.claim(n).Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		if cmd := Decide(c.in).Command; cmd == nil {
			t.Fatal("with a terminationGracePeriod drift may proceed")
		}
	})
}

func TestDisruptingNodesCountAgainstBudget(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
	c.node(3, v1.CapacityTypeOnDemand)
	going := c.node(3, v1.CapacityTypeOnDemand)
	going.Node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("one node is already disrupting under a budget of 1: want nothing, got %s", dec.Command)
	}
	if dec.Allowed["default"][v1.DisruptionReasonEmpty] != 0 {
		t.Errorf("allowed = %d, want 0", dec.Allowed["default"][v1.DisruptionReasonEmpty])
	}
	// The budget itself, as Karpenter's allowed_disruptions reports it: the nodes
	// disrupting do not lower it.
	if got := dec.Budgets["default"][v1.DisruptionReasonEmpty]; got != 1 {
		t.Errorf("budget = %d, want 1", got)
	}
}

// A NodePool's budget for a reason is the most restrictive budget active for it,
// a percentage of its initialized nodes rounded up; with none active, unlimited.
func TestBudgetsBeforeDisrupting(t *testing.T) {
	c := newCluster(t)
	never := "0 0 1 1 *"
	c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "50%"}, {Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}},
		{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonUnderutilized}, Schedule: &never, Duration: &metav1.Duration{Duration: time.Minute}}}
	for range 3 {
		c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
	}
	going := c.node(3, v1.CapacityTypeOnDemand)
	going.Node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
	dec := Decide(c.in)
	want := map[v1.DisruptionReason]int{v1.DisruptionReasonEmpty: 2, v1.DisruptionReasonDrifted: 0, v1.DisruptionReasonUnderutilized: 2}
	if diff := cmp.Diff(want, dec.Budgets["default"]); diff != "" {
		t.Errorf("budgets of 4 nodes, one disrupting (-want +got):\n%s", diff)
	}
	if got := dec.Allowed["default"][v1.DisruptionReasonEmpty]; got != 1 {
		t.Errorf("allowed = %d, want 1 (the budget of 2 less the node disrupting)", got)
	}
}

// Off by default, as Karpenter's feature gate: a spot node that only a cheaper spot
// node could replace stays.
func TestSpotToSpotIsOffByDefault(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Template.Spec.Requirements = nil
	n := c.node(31, v1.CapacityTypeSpot, pod("1", "1Gi"))
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("spot-to-spot consolidation is off: want nothing, got %s", dec.Command)
	}
	if why := blockedReason(dec, n.Node.Name); !strings.Contains(why, "SpotToSpotConsolidation") {
		t.Errorf("blocked reason %q, want one naming the feature gate", why)
	}
}

func TestSpotToSpot(t *testing.T) {
	c := newCluster(t)
	c.in.Options.SpotToSpotConsolidation = true
	c.pool.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}}}
	// A 12-cpu spot node with a 1-cpu pod: only 11 cheaper types exist.
	n := c.node(11, v1.CapacityTypeSpot, pod("1", "1Gi"))
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("too few cheaper spot types: want nothing, got %s", dec.Command)
	}
	if why := blockedReason(dec, n.Node.Name); !strings.Contains(why, "spot replacement needs") {
		t.Errorf("blocked reason %q", why)
	}
	c = newCluster(t)
	c.in.Options.SpotToSpotConsolidation = true
	c.pool.Spec.Template.Spec.Requirements = nil
	c.node(31, v1.CapacityTypeSpot, pod("1", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || len(cmd.Replacements[0].InstanceTypes) != SpotToSpotMinOptions {
		t.Fatalf("a 32-cpu spot node has plenty of cheaper types: want a replacement with %d options, got %v", SpotToSpotMinOptions, cmd)
	}
	if r, ok := cmd.Replacements[0].Requirements.Get(v1.LabelInstanceType); !ok || len(r.Values()) != SpotToSpotMinOptions {
		t.Errorf("the replacement's requirements must name only its options")
	}
}

func TestValidate(t *testing.T) {
	c := newCluster(t)
	n := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil {
		t.Fatal("want a command")
	}
	if _, err := Validate(c.in, cmd); err != nil {
		t.Fatalf("nothing changed, yet: %v", err)
	}
	c.claim(n).Status.LastPodEventTime = metav1.NewTime(now)
	n.Pods = append(n.Pods, pod("8", "1Gi"))
	if _, err := Validate(c.in, cmd); err == nil || !strings.Contains(err.Error(), "pod arrive") {
		t.Fatalf("a pod arrived: want an error, got %v", err)
	}
}

// TestScaleDownSettlesNearOptimal scales a packed cluster down to a third of its
// pods and runs passes until nothing is left to do: every command saves money, the
// passes end, and the final price is close to a fresh solve of what is left.
func TestScaleDownSettlesNearOptimal(t *testing.T) {
	c := newCluster(t)
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := []string{"250m", "500m", "1", "1500m"}
	var all []*corev1.Pod
	for range 150 {
		all = append(all, pod(sizes[rng.IntN(len(sizes))], "512Mi"))
	}
	in := *c.in.Cluster
	in.Pods = all
	plan, err := scheduling.Solve(&in, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range plan.NewNodes {
		typ := slices.Index(c.types, n.InstanceType)
		c.node(typ, v1.CapacityTypeOnDemand, n.Pods...)
	}
	// Scale down: keep every third pod.
	for _, n := range c.in.Cluster.Nodes {
		n.Pods = slices.DeleteFunc(n.Pods, func(p *corev1.Pod) bool {
			return !strings.HasSuffix(p.Name, "0") && !strings.HasSuffix(p.Name, "3") && !strings.HasSuffix(p.Name, "6")
		})
	}
	before := c.price()
	passes := 0
	for ; passes < 100; passes++ {
		cmd := Decide(c.in).Command
		if cmd == nil {
			break
		}
		if cmd.Savings <= 0 {
			t.Fatalf("pass %d: %s saves nothing", passes, cmd)
		}
		c.apply(cmd)
	}
	if passes == 100 {
		t.Fatal("consolidation did not settle in 100 passes")
	}
	optimal := c.freshPlan()
	after, left := c.price(), 0
	for _, n := range c.in.Cluster.Nodes {
		left += len(n.Pods)
	}
	t.Logf("%d pods: $%.3f/h on %d nodes after scale-down; settled in %d passes at $%.3f/h on %d nodes; a fresh solve costs $%.3f/h (ratio %.3f)",
		left, before, len(plan.NewNodes), passes, after, len(c.in.Cluster.Nodes), optimal.Cost(), after/optimal.Cost())
	if after > optimal.Cost()*1.25 {
		t.Errorf("settled at $%.3f/h, a fresh solve costs $%.3f/h", after, optimal.Cost())
	}
}

// A budget of one node still lets consolidation look past a first candidate that
// cannot move.
func TestBudgetOfOneLooksPastAStuckCandidate(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
	// Cheapest to disrupt (one pod) but pinned to its node by a hostname selector.
	stuck := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	stuck.Pods[0].Spec.NodeSelector = map[string]string{corev1.LabelHostname: stuck.Node.Name}
	movable := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"), pod("1", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || len(cmd.Candidates) != 1 || cmd.Candidates[0].Node.Node.Name != movable.Node.Name {
		t.Fatalf("want %s consolidated, got %v", movable.Node.Name, cmd)
	}
}

// A node a pending pod would run on is not taken away: a new node would only be
// launched for the pod.
func TestPendingPodsKeepTheirNode(t *testing.T) {
	c := newCluster(t)
	empty := c.node(3, v1.CapacityTypeOnDemand)
	c.in.Cluster.Pods = []*corev1.Pod{pod("3", "1Gi")}
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("the pending pod needs %s: want nothing, got %s", empty.Node.Name, dec.Command)
	}
	if why := blockedReason(dec, empty.Node.Name); !strings.Contains(why, "pending pod") {
		t.Errorf("blocked reason %q", why)
	}
	// A pending pod that cannot use the node (it does not tolerate a taint) does
	// not keep it: this is what bounds a runaway of broken nodes.
	empty.Node.Spec.Taints = []corev1.Taint{{Key: "broken", Effect: corev1.TaintEffectNoExecute}}
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Reason != v1.DisruptionReasonEmpty {
		t.Fatalf("the broken empty node should go, got %v", cmd)
	}
}

func TestPodOfSeveralPDBsBlocks(t *testing.T) {
	c := newCluster(t)
	n := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	for _, name := range []string{"a", "b"} {
		c.in.PDBs = append(c.in.PDBs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}})
	}
	dec := Decide(c.in)
	if dec.Command != nil || !strings.Contains(blockedReason(dec, n.Node.Name), "several PDBs") {
		t.Fatalf("want the node blocked by several PDBs, got %v, %q", dec.Command, blockedReason(dec, n.Node.Name))
	}
}

// An on-demand node whose only cheaper replacements are spot gets a spot-only
// replacement: an on-demand fallback at launch would cost more.
func TestReplacementThatOnlySpotMakesCheaperIsSpotOnly(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Template.Spec.Requirements = nil
	c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || len(cmd.Replacements) != 1 {
		t.Fatalf("want a spot replacement, got %v", cmd)
	}
	r, ok := cmd.Replacements[0].Requirements.Get(v1.CapacityTypeLabelKey)
	if !ok || r.Has(v1.CapacityTypeOnDemand) || !r.Has(v1.CapacityTypeSpot) {
		t.Errorf("the replacement must be spot only, requirements %s", cmd.Replacements[0].Requirements)
	}
}

// A static NodePool's nodes are kept by count: neither emptiness nor consolidation
// removes one, however idle, but drift still replaces them.
func TestStaticNodePoolsAreNotConsolidated(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Replicas = ptr(int64(4))
	c.node(3, v1.CapacityTypeOnDemand)
	c.node(3, v1.CapacityTypeOnDemand)
	for range 2 {
		c.node(7, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	}
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("static pool: want nothing, got %s", dec.Command)
	}
	if n := dec.Eligible[v1.DisruptionReasonEmpty] + dec.Eligible[v1.DisruptionReasonUnderutilized]; n != 0 {
		t.Errorf("static pool: %d nodes eligible for consolidation, want 0", n)
	}
	// The same cluster in a dynamic pool would be consolidated: the test shows the pool
	// kind, not the nodes, decides.
	c.pool.Spec.Replicas = nil
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Reason == v1.DisruptionReasonDrifted {
		t.Fatalf("dynamic pool: want a consolidation, got %v", cmd)
	}
	c.pool.Spec.Replicas = ptr(int64(4))
	c.pool.Annotations[v1.NodePoolHashAnnotationKey] = "h2"
	empty := Decide(c.in).Command
	if empty == nil || empty.Reason != v1.DisruptionReasonDrifted || len(empty.Candidates) != 2 || empty.Decision() != "delete" {
		t.Fatalf("static pool drifted: want its two empty nodes deleted (the pool refills them), got %v", empty)
	}
	// While those are in flight, a busy node is replaced within the pool: its
	// controller launches a node of the template, not whatever a plan would choose
	// for the pods (static pools take no pending pods).
	c.in.InFlight = map[string]bool{empty.Candidates[0].Claim.Name: true, empty.Candidates[1].Claim.Name: true}
	busy := Decide(c.in).Command
	if busy == nil || !busy.Refill || len(busy.Replacements) != 0 || busy.Decision() != "replace" || len(busy.Candidates) != 1 || len(busy.Candidates[0].Pods) != 1 {
		t.Fatalf("static pool drifted: want one busy node replaced by the pool's refill, got %v", busy)
	}
}

// Balanced (Karpenter 1.14) takes a move only when its share of the NodePool's price
// saved outweighs its share of the NodePool's disruption cost, by the threshold.
func TestBalancedConsolidation(t *testing.T) {
	build := func(policy v1.ConsolidationPolicy, threshold *int32) (*cluster, *scheduling.Node) {
		c := newCluster(t)
		c.pool.Spec.Disruption.ConsolidationPolicy = policy
		c.pool.Spec.Disruption.ConsolidationThreshold = threshold
		// Five full 16-cpu nodes: nothing to gain there, and much to disrupt.
		for range 5 {
			var pods []*corev1.Pod
			for range 16 {
				pods = append(pods, pod("990m", "1Gi"))
			}
			c.node(15, v1.CapacityTypeOnDemand, pods...)
		}
		// A 4-cpu node whose two pods a 3-cpu node holds: 25% cheaper, a small part
		// of the pool's price.
		small := c.node(3, v1.CapacityTypeOnDemand, pod("1", "1Gi"), pod("1", "1Gi"))
		return c, small
	}
	c, small := build(v1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil)
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Candidates[0].Node.Node.Name != small.Node.Name {
		t.Fatalf("WhenEmptyOrUnderutilized: want %s replaced, got %v", small.Node.Name, cmd)
	}
	c, small = build(v1.ConsolidationPolicyBalanced, nil)
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("Balanced: the move saves about 1%% of the pool's price for 3%% of its disruption; want nothing, got %s", dec.Command)
	}
	if why := blockedReason(dec, small.Node.Name); !strings.Contains(why, "is Balanced") {
		t.Errorf("blocked reason %q, want one naming the Balanced policy", why)
	}
	three := int32(3)
	c, small = build(v1.ConsolidationPolicyBalanced, &three)
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Candidates[0].Node.Node.Name != small.Node.Name {
		t.Fatalf("Balanced with threshold 3 (score about 0.35, at least 1/3): want %s replaced, got %v", small.Node.Name, cmd)
	}
}

// Each candidate's Drifted and Consolidatable state is reported, for the
// conditions Karpenter writes on NodeClaims.
func TestClaimStates(t *testing.T) {
	c := newCluster(t)
	quiet := c.node(3, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	drifted := c.node(3, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	c.claim(drifted).Annotations[v1.NodePoolHashAnnotationKey] = "h0"
	busy := c.node(3, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	c.claim(busy).Status.LastPodEventTime = metav1.NewTime(now.Add(-10 * time.Second))
	states := Decide(c.in).States
	for node, want := range map[*scheduling.Node]ClaimState{
		quiet:   {Consolidatable: true},
		drifted: {Drifted: "NodePoolDrifted", Consolidatable: true},
		busy:    {},
	} {
		if got := states[c.claim(node).Name]; got != want {
			t.Errorf("claim of %s: %+v, want %+v", node.Node.Name, got, want)
		}
	}
}

// A consolidation replacement the plan puts on a capacity reservation is pinned
// to reserved capacity: if the reservation is full at launch, the launch fails
// and the command is abandoned, never turned into on-demand.
func TestReplacementOntoReservationIsPinned(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey,
		Operator: v1.NodeSelectorOpIn, Values: []string{capacityTypeReserved, v1.CapacityTypeOnDemand}}}
	types := slices.Clone(c.types)
	reserved := *types[1]
	reserved.Requirements = slices.DeleteFunc(slices.Clone(reserved.Requirements), func(r scheduling.Requirement) bool {
		return r.Key == v1.CapacityTypeLabelKey
	}).With(scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, capacityTypeReserved))
	od, _ := scheduling.OfferingPrice(c.types, map[string]string{v1.LabelInstanceType: reserved.Name, v1.LabelZone: "zone-a", v1.CapacityTypeLabelKey: v1.CapacityTypeOnDemand})
	reserved.Offerings = append(slices.Clone(reserved.Offerings), scheduling.Offering{Zone: "zone-a", CapacityType: capacityTypeReserved,
		Price: od * 1e-6, Available: true, ReservationCapacity: 1})
	types[1] = &reserved
	c.in.Cluster.NodePools[0].InstanceTypes = types
	c.node(3, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || len(cmd.Replacements) != 1 {
		t.Fatalf("want a replacement onto the reservation, got %v", cmd)
	}
	r := cmd.Replacements[0]
	if r.Offering.CapacityType != capacityTypeReserved {
		t.Fatalf("replacement planned on %s, want reserved", r.Offering.CapacityType)
	}
	ct, ok := r.Requirements.Get(v1.CapacityTypeLabelKey)
	if !ok || ct.Has(v1.CapacityTypeOnDemand) || ct.Has(v1.CapacityTypeSpot) || !ct.Has(capacityTypeReserved) {
		t.Errorf("replacement capacity types %s, want reserved only", r.Requirements)
	}
	for _, it := range r.InstanceTypes {
		if _, ok := it.CheapestOffering(r.Requirements); !ok {
			t.Errorf("option %s has no reserved offering", it.Name)
		}
	}
}
