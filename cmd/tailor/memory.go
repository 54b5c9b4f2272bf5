package main

import (
	"os"
	"runtime/debug"
)

// controllerGOGC is the controller's garbage-collection target unless $GOGC says
// otherwise. Its live heap (mostly the trimmed informer cache: some 80 MB at 5,000
// pods on 850 nodes) is small next to the garbage that solves and disruption passes
// leave, and at Go's default of 100 the heap grows to twice the live size before a
// collection. At 50 it grows by half: on the scale test, resident memory at 5,000
// pods went from about 250 MiB to about 175 MiB, for collections twice as often
// (the controller used a small share of the CPU next to the API server). For a
// ceiling, pass the container's memory limit (MEMORY_LIMIT) or set GOMEMLIMIT.
const controllerGOGC = 50

// tuneGC applies controllerGOGC unless the environment sets GOGC, and, given the
// container's memory limit (--memory-limit, MEMORY_LIMIT), a soft limit of 90% of
// it unless the environment sets GOMEMLIMIT, as Karpenter does.
func tuneGC(memoryLimit int64) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(controllerGOGC)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok && memoryLimit > 0 {
		debug.SetMemoryLimit(softMemoryLimit(memoryLimit))
	}
}

// softMemoryLimit is the Go runtime's share of a container memory limit: the rest
// is room for what the runtime does not count (stacks of cgo, the binary).
func softMemoryLimit(limit int64) int64 { return limit / 10 * 9 }
