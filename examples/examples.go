// Package examples embeds the example manifests that commands apply themselves: the
// seed example (`make demo`) is the file a person can read and apply by hand.
package examples

import _ "embed"

// Seed is examples/seed/inflate.yaml: a default NodePool and the Deployment inflate,
// 10 replicas of 1 cpu and 1Gi.
//
//go:embed seed/inflate.yaml
var Seed []byte
