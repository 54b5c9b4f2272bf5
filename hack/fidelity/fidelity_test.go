package fidelity

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

var (
	flagCases  = flag.Int("fidelity.cases", envInt("FIDELITY_CASES", 20000), "random cases to check (env FIDELITY_CASES)")
	flagSeed   = flag.Uint64("fidelity.seed", uint64(envInt("FIDELITY_SEED", 1)), "seed of the run (env FIDELITY_SEED)")
	flagCase   = flag.Int("fidelity.case", -1, "check only this case index of the run")
	flagReport = flag.Int("fidelity.report", 5, "disagreements to shrink and print in full")
	flagList   = flag.Int("fidelity.list", 40, "disagreeing nodes to list in one line each")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// disagreement is one node on which our verdict and the kube-scheduler's differ.
type disagreement struct {
	index    int
	c        *testCase
	node     string
	oursFits bool
	ours     string
	kube     string
}

// TestFidelity draws random clusters and pending pods and checks, node by node,
// that scheduling.Feasibility admits the pod exactly where the kube-scheduler's
// filter plugins do.
func TestFidelity(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := *flagSeed
	first, last := 0, *flagCases
	if *flagCase >= 0 {
		first, last = *flagCase, *flagCase+1
	}
	start := time.Now()

	workers := min(runtime.GOMAXPROCS(0), max(last-first, 1))
	var (
		mu       sync.Mutex
		found    []disagreement
		failures []string
		checked  int
		wg       sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		k, err := newKubeFilters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c := generate(seed, i)
				ds, err := compare(ctx, k, i, c)
				mu.Lock()
				checked++
				if err != nil {
					failures = append(failures, fmt.Sprintf("case %d: %v", i, err))
				}
				found = append(found, ds...)
				mu.Unlock()
			}
		}()
	}
	for i := first; i < last; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("checked %d cases (seed %d) in %v: %d disagreeing nodes", checked, seed, time.Since(start).Round(time.Millisecond), len(found))
	if len(found) == 0 {
		return
	}

	slices.SortFunc(found, func(a, b disagreement) int {
		if a.index != b.index {
			return a.index - b.index
		}
		return strings.Compare(a.node, b.node)
	})
	k, err := newKubeFilters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reported := map[int]bool{}
	shown := 0
	for _, d := range found {
		if shown >= *flagReport {
			break
		}
		if reported[d.index] {
			continue // one per case
		}
		reported[d.index] = true
		shown++
		small := shrink(ctx, k, d)
		t.Errorf("%s", describe(seed, small))
	}
	var tally []string
	for _, d := range found {
		tally = append(tally, fmt.Sprintf("case %d %s: ours %q, kube %q", d.index, d.node, d.ours, d.kube))
	}
	if len(tally) > *flagList {
		tally = append(tally[:*flagList], fmt.Sprintf("... and %d more", len(tally)-*flagList))
	}
	t.Errorf("%d disagreeing nodes in %d cases:\n%s", len(found), countCases(found), strings.Join(tally, "\n"))
}

func countCases(ds []disagreement) int {
	seen := map[int]bool{}
	for _, d := range ds {
		seen[d.index] = true
	}
	return len(seen)
}

// compare runs both checks on a case and returns the nodes where they differ.
func compare(ctx context.Context, k *kubeFilters, index int, c *testCase) (out []disagreement, err error) {
	ours, kube, err := verdicts(ctx, k, c)
	if err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		name := n.Node.Name
		o, ok := ours[name]
		if !ok {
			return nil, fmt.Errorf("Feasibility returned no verdict for node %s", name)
		}
		if (o == "") != (kube[name] == "") {
			out = append(out, disagreement{index: index, c: c, node: name, oursFits: o == "", ours: o, kube: kube[name]})
		}
	}
	return out, nil
}

func verdicts(ctx context.Context, k *kubeFilters, c *testCase) (ours, kube map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	in := &scheduling.Input{Nodes: c.nodes, Namespaces: c.namespaces}
	if ours, err = scheduling.Feasibility(in, c.pod); err != nil {
		return nil, nil, fmt.Errorf("Feasibility: %w", err)
	}
	if kube, err = k.run(ctx, c); err != nil {
		return nil, nil, fmt.Errorf("kube-scheduler filters: %w", err)
	}
	return ours, kube, nil
}
