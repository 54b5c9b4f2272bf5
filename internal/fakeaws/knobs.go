package fakeaws

import (
	"maps"
	"math/rand/v2"
	"strings"
	"time"
)

// Actions are named as IAM policies name them, service prefix and action:
// "ec2:CreateFleet", "sqs:ReceiveMessage", "eks:DescribeCluster". A knob set on
// "ec2:*" applies to every EC2 action without its own setting.

type knobs struct {
	calls            map[string]int
	throttleNext     map[string]int
	throttleFraction map[string]float64
	latency          map[string]time.Duration
	// ice holds the offerings without capacity; "" in a field matches any value.
	ice map[Offering]bool
	// noSpotRole: the account has no EC2 Spot service-linked role, and the
	// caller may not create it.
	noSpotRole bool
	// fleetQuotaFull: the account is at its quota of fleet requests.
	fleetQuotaFull bool
}

func newKnobs() knobs {
	return knobs{
		calls:            map[string]int{},
		throttleNext:     map[string]int{},
		throttleFraction: map[string]float64{},
		latency:          map[string]time.Duration{},
		ice:              map[Offering]bool{},
	}
}

func wildcardOf(name string) string {
	svc, _, _ := strings.Cut(name, ":")
	return svc + ":*"
}

func (k *knobs) latencyFor(c *call) time.Duration {
	if d, ok := k.latency[c.name()]; ok {
		return d
	}
	return k.latency[wildcardOf(c.name())]
}

func (k *knobs) throttle(c *call, rng *rand.Rand) bool {
	for _, key := range []string{c.name(), wildcardOf(c.name())} {
		if n := k.throttleNext[key]; n > 0 {
			k.throttleNext[key] = n - 1
			return true
		}
	}
	f, ok := k.throttleFraction[c.name()]
	if !ok {
		f = k.throttleFraction[wildcardOf(c.name())]
	}
	return f > 0 && rng.Float64() < f
}

func (k *knobs) insufficient(o Offering) bool {
	for _, key := range []Offering{
		o,
		{InstanceType: o.InstanceType, Zone: o.Zone},
		{InstanceType: o.InstanceType, CapacityType: o.CapacityType},
		{Zone: o.Zone, CapacityType: o.CapacityType},
		{InstanceType: o.InstanceType},
		{Zone: o.Zone},
		{CapacityType: o.CapacityType},
	} {
		if k.ice[key] {
			return true
		}
	}
	return false
}

// Offering is one way to buy an instance type: a zone and a capacity type
// ("spot" or "on-demand").
type Offering struct {
	InstanceType string
	Zone         string
	CapacityType string
}

// SetInsufficientCapacity makes CreateFleet answer InsufficientInstanceCapacity
// for the offering (or stop doing so). An empty field matches every value, so
// {Zone: "us-east-1a", CapacityType: "spot"} takes all spot capacity in a zone.
func (s *Server) SetInsufficientCapacity(o Offering, insufficient bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if insufficient {
		s.k.ice[o] = true
	} else {
		delete(s.k.ice, o)
	}
}

// SetSpotServiceLinkedRole says whether the account has the EC2 Spot
// service-linked role (AWSServiceRoleForEC2Spot). Without it, EC2 creates it on
// the first spot launch if the caller may iam:CreateServiceLinkedRole; the fake's
// callers may not, so every spot override of a fleet fails with
// AuthFailure.ServiceLinkedRoleCreationNotPermitted, as in a new account whose
// controller lacks that permission. Accounts have it by default.
func (s *Server) SetSpotServiceLinkedRole(exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k.noSpotRole = !exists
}

// SetFleetQuotaExceeded puts the account at (or back under) its quota of EC2
// Fleet requests: every override of a fleet then fails with MaxFleetCountExceeded.
func (s *Server) SetFleetQuotaExceeded(full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k.fleetQuotaFull = full
}

// accountRefuses is the error an override of a fleet of the capacity type gets
// from the account's limits, if any (see SetSpotServiceLinkedRole and
// SetFleetQuotaExceeded).
func (s *Server) accountRefuses(capacityType string) (code, msg string) {
	switch {
	case s.k.fleetQuotaFull:
		return "MaxFleetCountExceeded", "You've reached your quota for maximum Fleet Requests for this account."
	case s.k.noSpotRole && capacityType == "spot":
		return "AuthFailure.ServiceLinkedRoleCreationNotPermitted", "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances."
	}
	return "", ""
}

// ThrottleNext makes the next n calls of action answer the service's throttling
// error (RequestLimitExceeded with HTTP 503 for EC2).
func (s *Server) ThrottleNext(action string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k.throttleNext[action] = n
}

// ThrottleFraction throttles each call of action with probability f, drawn from
// the server's seeded generator.
func (s *Server) ThrottleFraction(action string, f float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k.throttleFraction[action] = f
}

// SetLatency delays every answer to action by d. A d longer than the caller's
// deadline (time.Hour) plays a hung API: the answer never comes, and the request
// ends only when the client gives up on it (its context or HTTP timeout), as a
// request to a stalled endpoint would.
func (s *Server) SetLatency(action string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k.latency[action] = d
}

// SetConsistencyDelay hides instances launched from now on from DescribeInstances
// (and makes CreateTags and TerminateInstances not find them) for d.
func (s *Server) SetConsistencyDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.ConsistencyDelay = d
}

// Calls is how many requests action received, throttled ones included.
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.k.calls[action]
}

// AllCalls is the count of every action called so far.
func (s *Server) AllCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.k.calls)
}

// ResetCalls sets every counter back to zero.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k.calls = map[string]int{}
}
