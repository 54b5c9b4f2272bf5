package main

import (
	"io"
	"testing"
	"time"
)

// The flags parse once into Options, with the defaults the README lists.
func TestParseController(t *testing.T) {
	opts, err := parseController(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.CloudProvider != "sim" || opts.BatchIdle != time.Second || opts.BatchMax != 10*time.Second || !opts.LeaderElection ||
		opts.MetricsAddr != ":8080" || opts.HealthAddr != ":8081" || opts.KubeClientQPS != 200 || opts.KubeClientBurst != 400 {
		t.Errorf("defaults %+v", opts)
	}
	opts, err = parseController([]string{"--kubeconfig", "/k", "--batch-idle-duration", "2s", "--batch-max-duration", "20s",
		"--leader-elect=false", "--metrics-bind-address", "0", "--kube-client-qps", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Kubeconfig != "/k" || opts.BatchIdle != 2*time.Second || opts.BatchMax != 20*time.Second || opts.LeaderElection ||
		opts.MetricsAddr != "0" || opts.KubeClientQPS != 50 {
		t.Errorf("parsed %+v", opts)
	}
	for _, bad := range [][]string{{"--kube-client-qps", "0"}, {"--batch-idle-duration", "soon"}, {"--no-such-flag"}} {
		if _, err := parseController(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
