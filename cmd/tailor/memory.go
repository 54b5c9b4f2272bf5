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
// (the controller used a small share of the CPU next to the API server). For a hard
// ceiling, set GOMEMLIMIT a little under the container's memory limit.
const controllerGOGC = 50

// tuneGC applies controllerGOGC unless the environment sets GOGC.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(controllerGOGC)
	}
}
