package operator

import (
	"fmt"
	"strconv"
	"strings"
)

// FeatureGates are the Karpenter feature gates Tailor honours, set as Karpenter's
// are: --feature-gates NodeRepair=true.
type FeatureGates struct {
	// NodeRepair replaces nodes unhealthy past a toleration (Ready False or Unknown
	// for 30 minutes). Alpha in Karpenter, and off by default there as here.
	NodeRepair bool
}

// ParseFeatureGates reads a comma-separated list of Name=bool. A gate Tailor does
// not know is an error rather than silently ignored.
func ParseFeatureGates(s string) (FeatureGates, error) {
	var g FeatureGates
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return g, fmt.Errorf("feature gate %q: want Name=true or Name=false", item)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return g, fmt.Errorf("feature gate %s: %q is not a boolean", name, value)
		}
		switch strings.TrimSpace(name) {
		case "NodeRepair":
			g.NodeRepair = on
		default:
			return g, fmt.Errorf("unknown feature gate %q (known: NodeRepair)", name)
		}
	}
	return g, nil
}
