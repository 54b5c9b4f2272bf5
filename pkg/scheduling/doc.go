// Package scheduling decides where pending pods go: onto free room of existing nodes,
// onto nodes being launched, or onto new nodes drawn from NodePools and the instance
// types a cloud offers, choosing the cheapest instance types that fit.
//
// It is pure: a snapshot goes in, a plan comes out. No client, no clock, no logging,
// no metrics, and no dependence on map order, so the controller and `tailor simulate`
// run the very same decisions and tests can check them exactly.
package scheduling
