package sim

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nodetailor/tailor/api/v1alpha1"
)

// The realistic latency model's defaults, in the range EC2 shows for a node that
// joins an EKS cluster: the fleet call returns in a second or two; the instance
// boots and its kubelet registers some 20-40 seconds later, now and then a minute
// or more. Log-normal, as service times are: most near the median, a long tail
// to the right.
const (
	defaultLaunchMedian       = 1500 * time.Millisecond
	defaultRegistrationMedian = 25 * time.Second
	defaultAPIMedian          = 200 * time.Millisecond
	// sigmas of the logarithms: the 95th percentile is median × e^(1.645σ).
	launchSigma       = 0.4
	registrationSigma = 0.35
	apiSigma          = 0.5
	// No draw is shorter than a fifth of its median or longer than these.
	maxLaunch       = 15 * time.Second
	maxRegistration = 2 * time.Minute
	maxAPI          = 3 * time.Second
	// defaultInsufficientCapacityPercent of launches find their offering out.
	defaultInsufficientCapacityPercent = 2
	// OutOfCapacityFor is how long an offering that ran out mid-batch stays out:
	// as long as the controller's own memory of it (Karpenter's 3 minutes).
	OutOfCapacityFor = 3 * time.Minute
)

// LatencyModel is a SimNodeClass's latency, resolved: the medians of each delay,
// the share of launches that run out of capacity, and the seed of the draws. The
// zero model (profile None) delays nothing and fails nothing.
type LatencyModel struct {
	Realistic                                   bool
	Seed                                        int64
	LaunchMedian, RegistrationMedian, APIMedian time.Duration
	InsufficientCapacityPercent                 int32
	fixedLaunchDelay, fixedRegistrationDelay    time.Duration
}

// Launch is what one launch draws.
type Launch struct {
	// Delay is how long the launch call takes; Registration how long after it
	// the instance's Node registers.
	Delay, Registration time.Duration
	// OutOfCapacity says the offering the launch would take has just run out.
	OutOfCapacity bool
}

// ModelOf resolves a NodeClass's latency: its profile's defaults, with the
// NodeClass's launchDelay and registrationDelay as the medians when set.
func ModelOf(nc *v1alpha1.SimNodeClass) LatencyModel {
	l := nc.Spec.Latency
	if l == nil || l.Profile != v1alpha1.LatencyRealistic {
		return LatencyModel{fixedLaunchDelay: nc.Spec.LaunchDelay.Duration, fixedRegistrationDelay: nc.Spec.RegistrationDelay.Duration}
	}
	m := LatencyModel{Realistic: true, Seed: l.Seed, LaunchMedian: defaultLaunchMedian, RegistrationMedian: defaultRegistrationMedian,
		APIMedian: defaultAPIMedian, InsufficientCapacityPercent: defaultInsufficientCapacityPercent}
	if d := nc.Spec.LaunchDelay.Duration; d > 0 {
		m.LaunchMedian = d
	}
	if d := nc.Spec.RegistrationDelay.Duration; d > 0 {
		m.RegistrationMedian = d
	}
	if p := l.InsufficientCapacityPercent; p != nil {
		m.InsufficientCapacityPercent = *p
	}
	return m
}

// Streams of draws, so that a launch's draws do not depend on how many API
// calls came before it.
const (
	launchStream uint64 = 0x6c61756e6368
	apiStream    uint64 = 0x617069
)

// Launch is the n-th launch's draw: the same for the same seed and n.
func (m LatencyModel) Launch(n uint64) Launch {
	if !m.Realistic {
		return Launch{Delay: m.fixedLaunchDelay, Registration: m.fixedRegistrationDelay}
	}
	r := rand.New(rand.NewPCG(uint64(m.Seed)^launchStream, n))
	return Launch{
		Delay:         logNormal(r, m.LaunchMedian, launchSigma, maxLaunch),
		Registration:  logNormal(r, m.RegistrationMedian, registrationSigma, maxRegistration),
		OutOfCapacity: r.IntN(10000) < int(m.InsufficientCapacityPercent)*100,
	}
}

// API is how long the n-th call that reads or terminates instances takes.
func (m LatencyModel) API(n uint64) time.Duration {
	if !m.Realistic {
		return 0
	}
	return logNormal(rand.New(rand.NewPCG(uint64(m.Seed)^apiStream, n)), m.APIMedian, apiSigma, maxAPI)
}

// logNormal draws median × e^(σ·N(0,1)), kept between a fifth of the median and
// most (or the median itself, when that is above most).
func logNormal(r *rand.Rand, median time.Duration, sigma float64, most time.Duration) time.Duration {
	d := time.Duration(float64(median) * math.Exp(sigma*r.NormFloat64()))
	return min(max(d, median/5), max(most, median))
}

// draws counts the launches and API calls of each NodeClass, the n of their
// draws, from the controller's start.
type draws struct {
	mu       sync.Mutex
	launches map[string]uint64
	calls    map[string]uint64
	// outOfCapacity holds until when offerings that ran out mid-batch stay out,
	// by NodeClass and offering.
	outOfCapacity map[outKey]time.Time
}

type outKey struct{ nodeClass, instanceType, zone, capacityType string }

func newDraws() *draws {
	return &draws{launches: map[string]uint64{}, calls: map[string]uint64{}, outOfCapacity: map[outKey]time.Time{}}
}

// nextLaunch returns the number of the NodeClass's next launch.
func (d *draws) nextLaunch(nodeClass string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.launches[nodeClass]
	d.launches[nodeClass] = n + 1
	return n
}

// nextCall returns the number of the NodeClass's next API call.
func (d *draws) nextCall(nodeClass string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.calls[nodeClass]
	d.calls[nodeClass] = n + 1
	return n
}

// runOut records that an offering ran out of capacity until then.
func (d *draws) runOut(k outKey, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outOfCapacity[k] = until
}

// out reports whether an offering is out of capacity at now.
func (d *draws) out(k outKey, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.outOfCapacity[k]
	if ok && !now.Before(until) {
		delete(d.outOfCapacity, k)
		return false
	}
	return ok
}
