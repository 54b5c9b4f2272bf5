// Package fidelity holds a differential test: pkg/scheduling's single-node
// feasibility check against the kube-scheduler's own filter plugins, on random
// clusters. See README.md.
package fidelity
