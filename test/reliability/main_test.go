// Package reliability puts the built tailor controller, as a separate process on the
// real local control plane with the sim cloud, through what production does to it:
// writes that fail or time out, kill -9 at random moments, a leader lost mid-batch,
// and a long random soak. Each suite checks invariants (one instance per NodeClaim,
// no leaked instance, no stuck finalizer, NodePool limits, PodDisruptionBudgets,
// do-not-disrupt pods, flat memory and goroutines) and logs its figures.
//
// By default the suites run at CI size (a few minutes in all, a fixed seed);
// TAILOR_RELIABILITY=full runs them at full size (1,000 pods, 100 kill cycles, an
// hour of soak; a random seed). TAILOR_RELIABILITY_SEED fixes the seed,
// TAILOR_RELIABILITY_LOGS=DIR keeps the controllers' logs there, and
// TAILOR_RELIABILITY_BIN=PATH runs that tailor binary instead of building one
// (an older build, to see a suite catch what it was written for).
package reliability

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// size is how much each suite does.
type size struct {
	name string
	// faultPods are scaled up, then to zero, under write faults; faultRate is the
	// fraction of the controller's writes that fail.
	faultPods int
	faultRate float64
	// killCycles kill -9 the controller, with at most killPods pods wanted.
	killCycles, killPods int
	// failoverRounds each add failoverPods one-per-node pods and kill the leader.
	failoverRounds, failoverPods int
	// soak runs that long with at most soakPods pods in random Deployments;
	// soakScaleEvery is the pause between random scale changes.
	soak           time.Duration
	soakPods       int
	soakScaleEvery time.Duration
	// deadline bounds each wait for the cluster to settle.
	deadline time.Duration
}

var (
	ci = size{name: "ci", faultPods: 150, faultRate: 0.15, killCycles: 8, killPods: 60,
		failoverRounds: 1, failoverPods: 12, soak: 90 * time.Second, soakPods: 90, soakScaleEvery: 5 * time.Second,
		deadline: 3 * time.Minute}
	full = size{name: "full", faultPods: 1000, faultRate: 0.15, killCycles: 100, killPods: 1000,
		failoverRounds: 5, failoverPods: 40, soak: time.Hour, soakPods: 400, soakScaleEvery: 15 * time.Second,
		deadline: 15 * time.Minute}
)

// ciSeed is the CI size's seed: the same choices every run.
const ciSeed = 14

var (
	// tailorBin is the controller binary the suites run, built once.
	tailorBin string
	// suite is the size chosen by TAILOR_RELIABILITY.
	suite size
	// seed seeds every random choice; each suite derives its own from it.
	seed uint64
	// logDir, when set, keeps the controllers' logs.
	logDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch v := os.Getenv("TAILOR_RELIABILITY"); v {
	case "", "ci":
		suite, seed = ci, ciSeed
	case "full":
		suite, seed = full, uint64(time.Now().UnixNano())
	default:
		fmt.Fprintf(os.Stderr, "TAILOR_RELIABILITY=%q: want ci (the default) or full\n", v)
		return 2
	}
	if v := os.Getenv("TAILOR_RELIABILITY_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "TAILOR_RELIABILITY_SEED=%q: want a non-negative integer\n", v)
			return 2
		}
		seed = s
	}
	logDir = os.Getenv("TAILOR_RELIABILITY_LOGS")
	if tailorBin = os.Getenv("TAILOR_RELIABILITY_BIN"); tailorBin != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "tailor-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	tailorBin = filepath.Join(dir, "tailor")
	if out, err := exec.Command("go", "build", "-o", tailorBin, "github.com/nodetailor/tailor/cmd/tailor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tailor: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
