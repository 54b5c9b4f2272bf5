package main

import (
	"io"
	"testing"
)

// NodeRepair is off unless --feature-gates turns it on, as in Karpenter.
func TestFeatureGatesFlag(t *testing.T) {
	opts, err := parseController(nil, io.Discard)
	if err != nil || opts.FeatureGates.NodeRepair {
		t.Fatalf("default: %+v, %v; want NodeRepair off", opts.FeatureGates, err)
	}
	opts, err = parseController([]string{"--feature-gates", "NodeRepair=true"}, io.Discard)
	if err != nil || !opts.FeatureGates.NodeRepair {
		t.Fatalf("--feature-gates NodeRepair=true: %+v, %v", opts.FeatureGates, err)
	}
	if _, err := parseController([]string{"--feature-gates", "NodeRepiar=true"}, io.Discard); err == nil {
		t.Error("a misspelt gate was accepted")
	}
}
