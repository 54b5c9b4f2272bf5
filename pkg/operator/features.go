package operator

import (
	"fmt"
	"strconv"
	"strings"
)

// FeatureGates are Karpenter's feature gates, set as Karpenter's are
// (--feature-gates or FEATURE_GATES, "NodeRepair=true,SpotToSpotConsolidation=true"),
// with Karpenter's defaults. Gates Karpenter has and Tailor does not implement are
// accepted at the value that leaves the feature off, so the FEATURE_GATES string of a
// Karpenter install works unchanged.
type FeatureGates struct {
	// NodeRepair replaces nodes unhealthy past a toleration (Ready False or Unknown
	// for 30 minutes). Off by default.
	NodeRepair bool
	// ReservedCapacity launches into capacity reservations. On by default; no Tailor
	// provider offers reserved capacity yet, so either value changes nothing.
	ReservedCapacity bool
	// SpotToSpotConsolidation lets consolidation replace spot nodes with cheaper
	// spot nodes (single-node only, and only with at least 15 cheaper instance types
	// to choose from). Off by default: spot nodes are then consolidated only by
	// deletion or into on-demand.
	SpotToSpotConsolidation bool
	// StaticCapacity keeps static NodePools (spec.replicas) at their number of
	// nodes. Off by default: such a NodePool is then only told, in its
	// StaticCapacity condition, that nothing keeps its nodes.
	StaticCapacity bool
	// NodeOverlay is not implemented: only false is accepted.
	NodeOverlay bool
	// CapacityBuffer keeps the room CapacityBuffers (autoscaling.x-k8s.io) ask
	// for. Off by default, as in Karpenter.
	CapacityBuffer bool
}

// DefaultFeatureGates are Karpenter's defaults.
func DefaultFeatureGates() FeatureGates {
	return FeatureGates{ReservedCapacity: true}
}

// featureGate is one gate as data: its name, where it lives, and whether Tailor
// implements it (an unimplemented gate may only be left off).
type featureGate struct {
	name        string
	field       func(*FeatureGates) *bool
	implemented bool
}

// featureGates lists every gate, in Karpenter's order.
var featureGates = []featureGate{
	{"NodeRepair", func(g *FeatureGates) *bool { return &g.NodeRepair }, true},
	{"ReservedCapacity", func(g *FeatureGates) *bool { return &g.ReservedCapacity }, true},
	{"SpotToSpotConsolidation", func(g *FeatureGates) *bool { return &g.SpotToSpotConsolidation }, true},
	{"NodeOverlay", func(g *FeatureGates) *bool { return &g.NodeOverlay }, false},
	{"StaticCapacity", func(g *FeatureGates) *bool { return &g.StaticCapacity }, true},
	{"CapacityBuffer", func(g *FeatureGates) *bool { return &g.CapacityBuffer }, true},
}

// FeatureGateNames are the gates ParseFeatureGates knows, in Karpenter's order.
func FeatureGateNames() []string {
	names := make([]string, len(featureGates))
	for i, fg := range featureGates {
		names[i] = fg.name
	}
	return names
}

// FeatureGateValues are the values --feature-gates accepts for a gate: true and
// false, or only false for a gate Tailor does not implement.
func FeatureGateValues(name string) []string {
	i := featureGateIndex(name)
	switch {
	case i < 0:
		return nil
	case !featureGates[i].implemented:
		return []string{"false"}
	}
	return []string{"true", "false"}
}

// String is the gates in the --feature-gates syntax.
func (g FeatureGates) String() string {
	parts := make([]string, len(featureGates))
	for i, fg := range featureGates {
		parts[i] = fg.name + "=" + strconv.FormatBool(*fg.field(&g))
	}
	return strings.Join(parts, ",")
}

// ParseFeatureGates reads a comma-separated list of Name=bool over the defaults: a
// gate the list leaves out keeps its default. A gate Tailor does not know is an
// error rather than silently ignored, and so is turning on one it does not implement.
func ParseFeatureGates(s string) (FeatureGates, error) {
	g := DefaultFeatureGates()
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return g, fmt.Errorf("feature gate %q: want %s=true or %s=false", item, name, name)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return g, fmt.Errorf("feature gate %s: %q is not true or false", name, strings.TrimSpace(value))
		}
		i := featureGateIndex(name)
		if i < 0 {
			return g, fmt.Errorf("unknown feature gate %q (known: %s)", name, strings.Join(FeatureGateNames(), ", "))
		}
		if on && !featureGates[i].implemented {
			return g, fmt.Errorf("feature gate %s: Tailor does not implement it; leave it false or unset", name)
		}
		*featureGates[i].field(&g) = on
	}
	return g, nil
}

func featureGateIndex(name string) int {
	for i, fg := range featureGates {
		if fg.name == name {
			return i
		}
	}
	return -1
}
