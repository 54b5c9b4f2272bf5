package scheduling

// Internals for the external tests.
var SolveOnce = solveOnce

// SolveOnceExhaustive is SolveOnce with first-fit trying again every node that
// refused before, and each node's options narrowed eagerly (see try).
func SolveOnceExhaustive(in *Input, opts Options, slack float64) *Plan {
	s := newSolver(in, opts)
	s.growSlack, s.exhaustive = slack, true
	s.run()
	s.refine()
	return s.plan()
}

const (
	SecondOpinionPods = secondOpinionPods
	GrowSlack         = growSlack
)
