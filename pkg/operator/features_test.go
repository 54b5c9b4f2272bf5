package operator

import (
	"strings"
	"testing"
)

func TestParseFeatureGates(t *testing.T) {
	def := DefaultFeatureGates()
	with := func(f func(*FeatureGates)) FeatureGates {
		g := def
		f(&g)
		return g
	}
	tests := []struct {
		name    string
		in      string
		want    FeatureGates
		wantErr string
	}{
		{"empty keeps the defaults", "", def, ""},
		{"one gate on", "NodeRepair=true", with(func(g *FeatureGates) { g.NodeRepair = true }), ""},
		{"spaces and a trailing comma", " NodeRepair = false ,", def, ""},
		{"spot to spot", "SpotToSpotConsolidation=true", with(func(g *FeatureGates) { g.SpotToSpotConsolidation = true }), ""},
		{"reserved capacity off", "ReservedCapacity=false", with(func(g *FeatureGates) { g.ReservedCapacity = false }), ""},
		{"the Karpenter chart's string", "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false", def, ""},
		{"no value", "NodeRepair", def, `"NodeRepair": want NodeRepair=true`},
		{"not a boolean", "NodeRepair=yes", def, `NodeRepair: "yes" is not true or false`},
		{"unknown gate", "NodeRepiar=true", def, `unknown feature gate "NodeRepiar"`},
		{"unimplemented gate on", "NodeOverlay=true", def, "NodeOverlay: Tailor does not implement it"},
		{"unimplemented gate off", "NodeOverlay=false", def, ""},
		{"capacity buffers on", "CapacityBuffer=true", with(func(g *FeatureGates) { g.CapacityBuffer = true }), ""},
		{"static capacity on", "StaticCapacity=true", with(func(g *FeatureGates) { g.StaticCapacity = true }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFeatureGates(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// Karpenter's defaults: only ReservedCapacity is on, and String round-trips.
func TestDefaultFeatureGates(t *testing.T) {
	def := DefaultFeatureGates()
	const want = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
	if got := def.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, err := ParseFeatureGates(def.String()); err != nil || got != def {
		t.Errorf("round trip: %+v, %v", got, err)
	}
}
