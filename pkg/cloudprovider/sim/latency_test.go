package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

func realistic(seed int64, icePercent *int32) func(*v1alpha1.SimNodeClass) {
	return func(nc *v1alpha1.SimNodeClass) {
		nc.Spec.Latency = &v1alpha1.Latency{Profile: v1alpha1.LatencyRealistic, Seed: seed, InsufficientCapacityPercent: icePercent}
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// The realistic model's draws: launch calls of a second or two, registrations of
// tens of seconds with a tail (log-normal), never outside their bounds; about
// 2% of launches out of capacity; the same draws for the same seed.
func TestRealisticLatencyDistribution(t *testing.T) {
	nc := &v1alpha1.SimNodeClass{}
	realistic(7, nil)(nc)
	m := ModelOf(nc)
	const n = 5000
	var launches, registrations, calls []time.Duration
	ice := 0
	for i := range uint64(n) {
		l := m.Launch(i)
		launches, registrations, calls = append(launches, l.Delay), append(registrations, l.Registration), append(calls, m.API(i))
		if l.OutOfCapacity {
			ice++
		}
		if l != m.Launch(i) {
			t.Fatalf("launch %d drew %+v, then %+v: not reproducible", i, l, m.Launch(i))
		}
	}
	for _, c := range []struct {
		name                   string
		draws                  []time.Duration
		lo, hi                 time.Duration // every draw
		medianLo, medianHi     time.Duration
		p95Lo, p95Hi, p99AtMin time.Duration
	}{
		{"launch", launches, 300 * time.Millisecond, 15 * time.Second, 1400 * time.Millisecond, 1600 * time.Millisecond, 2500 * time.Millisecond, 3300 * time.Millisecond, 3 * time.Second},
		{"registration", registrations, 5 * time.Second, 2 * time.Minute, 24 * time.Second, 26 * time.Second, 40 * time.Second, 50 * time.Second, 50 * time.Second},
		{"api call", calls, 40 * time.Millisecond, 3 * time.Second, 190 * time.Millisecond, 210 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 550 * time.Millisecond},
	} {
		for _, d := range c.draws {
			if d < c.lo || d > c.hi {
				t.Errorf("%s drew %s, outside [%s, %s]", c.name, d, c.lo, c.hi)
				break
			}
		}
		med, p95, p99 := percentile(c.draws, 0.5), percentile(c.draws, 0.95), percentile(c.draws, 0.99)
		t.Logf("%s: median %s, 95th percentile %s, 99th %s, max %s", c.name, med, p95, p99, slices.Max(c.draws))
		if med < c.medianLo || med > c.medianHi || p95 < c.p95Lo || p95 > c.p95Hi || p99 < c.p99AtMin {
			t.Errorf("%s: median %s (want %s-%s), 95th percentile %s (want %s-%s), 99th %s (want at least %s): not the model's log-normal",
				c.name, med, c.medianLo, c.medianHi, p95, c.p95Lo, c.p95Hi, p99, c.p99AtMin)
		}
	}
	// 2% of 5000 is 100, give or take 10 (one standard deviation).
	if ice < 70 || ice > 130 {
		t.Errorf("%d of %d launches out of capacity, want about 2%%", ice, n)
	}
	other := nc.DeepCopy()
	other.Spec.Latency.Seed = 8
	if ModelOf(other).Launch(0) == m.Launch(0) && ModelOf(other).Launch(1) == m.Launch(1) {
		t.Error("seeds 7 and 8 drew the same launches")
	}
	// A nonzero launchDelay or registrationDelay is the median; None is exact.
	scaled := nc.DeepCopy()
	scaled.Spec.RegistrationDelay = metav1.Duration{Duration: 4 * time.Second}
	var scaledRegs []time.Duration
	for i := range uint64(1000) {
		scaledRegs = append(scaledRegs, ModelOf(scaled).Launch(i).Registration)
	}
	if med := percentile(scaledRegs, 0.5); med < 3800*time.Millisecond || med > 4200*time.Millisecond {
		t.Errorf("registrationDelay 4s: median %s, want about 4s", med)
	}
	none := &v1alpha1.SimNodeClass{Spec: v1alpha1.SimNodeClassSpec{LaunchDelay: metav1.Duration{Duration: time.Second},
		RegistrationDelay: metav1.Duration{Duration: 9 * time.Second}, Latency: &v1alpha1.Latency{Profile: v1alpha1.LatencyNone, Seed: 3}}}
	for i := range uint64(50) {
		if got, want := ModelOf(none).Launch(i), (Launch{Delay: time.Second, Registration: 9 * time.Second}); got != want || ModelOf(none).API(i) != 0 {
			t.Fatalf("profile None drew %+v and an API delay of %s, want exactly %+v and none", got, ModelOf(none).API(i), want)
		}
	}
}

// Launched one after another under the realistic model, nodes register in another
// order: a node launched later registers first.
func TestRealisticRegistersOutOfOrder(t *testing.T) {
	ctx := t.Context()
	cloud := New(kube, clock.RealClock{})
	zero := int32(0)
	nodeClass(t, "ooo", func(nc *v1alpha1.SimNodeClass) {
		realistic(11, &zero)(nc)
		nc.Spec.LaunchDelay = metav1.Duration{Duration: time.Millisecond} // quick calls, the registrations as EC2's
	})
	type launched struct {
		inst          string
		registerAfter time.Time
	}
	var order []launched
	for i := range 8 {
		c := claim(fmt.Sprintf("ooo-%d", i), "ooo", in(v1.LabelInstanceType, "m5.large"), in(v1.CapacityTypeLabelKey, v1.CapacityTypeOnDemand))
		nc, err := cloud.Create(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cloud.Delete(context.Background(), nc) })
		name, _ := instanceOf(nc.Status.ProviderID)
		inst := &v1alpha1.SimInstance{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, inst); err != nil {
			t.Fatal(err)
		}
		order = append(order, launched{name, inst.Spec.RegisterAfter.Time})
	}
	// The first pair where a later launch registers sooner.
	first, later := -1, -1
	for i := 0; i < len(order) && first < 0; i++ {
		for j := i + 1; j < len(order); j++ {
			if order[j].registerAfter.Before(order[i].registerAfter) {
				first, later = i, j
				break
			}
		}
	}
	if first < 0 {
		t.Fatalf("8 launches register in launch order (%v): the draws are not independent", order)
	}
	// The registrar, at a moment between the two, registers the later launch's
	// Node and not the earlier one's.
	between := order[later].registerAfter.Add(order[first].registerAfter.Sub(order[later].registerAfter) / 2)
	registrar := NewRegistrar(kube, cloud, clocktesting.NewFakeClock(between))
	for _, l := range []launched{order[first], order[later]} {
		if _, err := registrar.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.inst}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, l := range order {
			_ = kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: l.inst}})
		}
	})
	if err := kube.Get(ctx, client.ObjectKey{Name: order[later].inst}, &corev1.Node{}); err != nil {
		t.Errorf("launch %d (registers after %s) has no Node: %v", later, order[later].registerAfter.Sub(order[0].registerAfter), err)
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: order[first].inst}, &corev1.Node{}); err == nil {
		t.Errorf("launch %d registered before its time, though launched before launch %d", first, later)
	}
}

// A batch of launches under the realistic model with a high insufficient-capacity
// rate: the launches that ran out fail with an insufficient-capacity error naming
// the offering and leave no instance; the offering stays out, so the later
// launches of the batch, and each failed launch retried, take another offering.
func TestRealisticInsufficientCapacityMidBatch(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := New(kube, clk)
	half := int32(50)
	nc := nodeClass(t, "ice", func(nc *v1alpha1.SimNodeClass) {
		realistic(5, &half)(nc)
		nc.Spec.LaunchDelay = metav1.Duration{Duration: time.Millisecond}
	})
	// The fake clock never moves: the calls' waits pass in a goroutine that steps
	// it, until the last cleanup (the terminations wait too).
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				if clk.HasWaiters() {
					clk.Step(time.Second)
				}
			}
		}
	}()
	reqs := []v1.NodeSelectorRequirementWithMinValues{in(v1.LabelInstanceType, "m5.large", "m5.xlarge", "c5.large", "c5.xlarge"),
		in(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot)}
	ranOut := map[cloudprovider.UnavailableOffering]bool{}
	var failed []string
	succeeded := 0
	for i := range 10 {
		name := fmt.Sprintf("ice-%d", i)
		launched, err := cloud.Create(ctx, claim(name, "ice", reqs...))
		if err == nil {
			succeeded++
			t.Cleanup(func() { _ = cloud.Delete(context.Background(), launched) })
			got := cloudprovider.UnavailableOffering{InstanceType: launched.Labels[v1.LabelInstanceType], Zone: launched.Labels[v1.LabelZone], CapacityType: v1.CapacityTypeSpot}
			if ranOut[got] {
				t.Errorf("%s launched %v, which ran out earlier in the batch", name, got)
			}
			continue
		}
		var ice *cloudprovider.InsufficientCapacityError
		if !errors.As(err, &ice) || len(ice.Offerings) == 0 {
			t.Fatalf("%s: %v, want an insufficient-capacity error naming the offering", name, err)
		}
		ranOut[ice.Offerings[len(ice.Offerings)-1]] = true
		failed = append(failed, name)
	}
	if len(failed) == 0 || succeeded == 0 {
		t.Fatalf("%d launches failed and %d succeeded at 50%% insufficient capacity (seed 5): want some of each", len(failed), succeeded)
	}
	t.Logf("%d of 10 launches ran out of capacity: %v", len(failed), ranOut)
	// No instance for a failed launch.
	instances := &v1alpha1.SimInstanceList{}
	if err := kube.List(ctx, instances); err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, inst := range instances.Items {
		if inst.Spec.NodeClass == "ice" {
			mine++
			if slices.Contains(failed, inst.Spec.NodeClaim) {
				t.Errorf("instance %s was left behind by the failed launch of %s", inst.Name, inst.Spec.NodeClaim)
			}
		}
	}
	if mine != succeeded {
		t.Errorf("%d instances for %d launches that succeeded", mine, succeeded)
	}
	// Retried with the rate at 0, each failed launch takes another offering.
	patch := client.MergeFrom(nc.DeepCopy())
	zero := int32(0)
	nc.Spec.Latency.InsufficientCapacityPercent = &zero
	if err := kube.Patch(ctx, nc, patch); err != nil {
		t.Fatal(err)
	}
	for _, name := range failed {
		retried := claim(name+"-again", "ice", reqs...)
		retried.UID = types.UID("uid-" + name + "-again")
		launched, err := cloud.Create(ctx, retried)
		if err != nil {
			t.Fatalf("retrying %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cloud.Delete(context.Background(), launched) })
		got := cloudprovider.UnavailableOffering{InstanceType: launched.Labels[v1.LabelInstanceType], Zone: launched.Labels[v1.LabelZone], CapacityType: v1.CapacityTypeSpot}
		if ranOut[got] {
			t.Errorf("retrying %s launched %v again, which ran out", name, got)
		}
	}
}

// Realistic terminations and reads take time (a slow API); None answers at once.
func TestRealisticSlowAPI(t *testing.T) {
	ctx := t.Context()
	cloud := New(kube, clock.RealClock{})
	zero := int32(0)
	nodeClass(t, "slow", func(nc *v1alpha1.SimNodeClass) {
		realistic(2, &zero)(nc)
		nc.Spec.LaunchDelay = metav1.Duration{Duration: time.Millisecond}
	})
	launched, err := cloud.Create(ctx, claim("slow", "slow", in(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := cloud.Get(ctx, launched.Status.ProviderID); err != nil {
		t.Fatal(err)
	}
	// No draw is under a fifth of the 200ms median.
	if took := time.Since(start); took < defaultAPIMedian/5 {
		t.Errorf("Get took %s, want at least %s", took, defaultAPIMedian/5)
	}
	start = time.Now()
	if err := cloud.Delete(ctx, launched); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < defaultAPIMedian/5 {
		t.Errorf("Delete took %s, want at least %s", took, defaultAPIMedian/5)
	}
}
