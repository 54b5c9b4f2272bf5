package scheduling

// Internals for the external tests.
var SolveOnce = solveOnce

const (
	SecondOpinionPods = secondOpinionPods
	GrowSlack         = growSlack
)
