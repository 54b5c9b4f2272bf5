package reliability

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
)

// guarded is a Deployment under a PodDisruptionBudget: at most maxUnavailable of
// its replicas may be unhealthy because of a disruption.
type guarded struct {
	name                     string
	replicas, maxUnavailable int
	cpu, mem                 string
	// baseline: the Deployment was fully healthy once; from then on a shortfall
	// beyond the budget is a violation.
	baseline bool
}

// TestSoak scales Deployments up and down at random across three NodePools (with
// weights and cpu limits) for suite.soak, with consolidation on, beside
// Deployments under PodDisruptionBudgets and one of karpenter.sh/do-not-disrupt
// pods, all at fixed sizes. Every second it checks each NodePool's launched
// capacity against its limit, the PDB-covered Deployments' healthy pods against
// their budgets, that no do-not-disrupt pod went, and reads the controller's
// resident memory and goroutines. At the end: no overrun, no violation, memory and
// goroutines flat (the last quarter's median against the second's), PDB-covered
// pods gone only through the Eviction API, its refusals (429s, which PDBs give as
// they should) no more often than the drain's backoff allows, and after scaling
// to zero, nothing leaked or stuck.
func TestSoak(t *testing.T) {
	e := newEnv(t, 4)
	limits := map[string]string{"small-spot": "16", "general": "32", "fallback": "64"}
	e.create(simNodeClass(0),
		nodePool("small-spot", func(np *v1.NodePool) {
			np.Spec.Weight = ptr(int32(50))
			np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(limits["small-spot"])}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, "spot"),
				requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpIn, "2", "4")}
			np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "30%"}}
		}),
		nodePool("general", func(np *v1.NodePool) {
			np.Spec.Weight = ptr(int32(20))
			np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(limits["general"])}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m"),
				requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpLte, "8")}
			np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "30%"}}
		}),
		nodePool("fallback", func(np *v1.NodePool) {
			np.Spec.Weight = ptr(int32(1))
			np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(limits["fallback"])}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpLte, "16")}
		}),
		daemonSet("agent"))
	guardedDeployments := []*guarded{
		{name: "web", replicas: 6, maxUnavailable: 1, cpu: "250m", mem: "256Mi"},
		{name: "api", replicas: 4, maxUnavailable: 1, cpu: "500m", mem: "512Mi"},
	}
	for _, g := range guardedDeployments {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: g.name, Namespace: "default"}, Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.name}}}}
		if g.name == "web" {
			pdb.Spec.MaxUnavailable = ptr(intstr.FromInt32(int32(g.maxUnavailable)))
		} else {
			pdb.Spec.MinAvailable = ptr(intstr.FromInt32(int32(g.replicas - g.maxUnavailable)))
		}
		e.create(pdb, deployment(g.name, g.replicas, g.cpu, g.mem))
	}
	const pinnedReplicas = 3
	e.create(deployment("pinned", pinnedReplicas, "200m", "128Mi", func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	}))
	batches := []string{"batch-a", "batch-b", "batch-c"}
	e.create(deployment(batches[0], 0, "500m", "1Gi"), deployment(batches[1], 0, "1", "2Gi"), deployment(batches[2], 0, "250m", "256Mi"))
	removals := e.auditRemovals("web", "api")
	refusedEvents := e.countEvents(pdbRefusal)
	ctrlStarted := time.Now()
	ctrl := e.startController("soak", false)
	if !e.eventually("soak: the fixed Deployments running", suite.deadline, e.podsRunning) {
		return
	}

	t.Logf("soak: %s of random scaling (a batch Deployment to 0-%d pods every %s), limits cpu %s", suite.soak, suite.soakPods/len(batches),
		suite.soakScaleEvery, formatCounts(limits))
	var (
		overruns     = newEpisodes()
		peak         = map[string]float64{}
		violations   = newEpisodes()
		pinnedGone   = map[string]string{}
		pinnedSeen   = map[string]bool{}
		rss          []float64
		goroutines   []float64
		scaleChanges int
	)
	start := time.Now()
	nextScale := start
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < suite.soak {
		select {
		case <-tick.C:
		case <-t.Context().Done():
			return
		}
		ctx := t.Context()
		now := time.Now()
		if !now.Before(nextScale) {
			name := batches[e.rng.IntN(len(batches))]
			e.scale(name, e.rng.IntN(suite.soakPods/len(batches)+1))
			scaleChanges++
			nextScale = now.Add(suite.soakScaleEvery)
		}
		// Launched capacity per NodePool: the cloud's instances, draining or not.
		used, instances, err := e.launchedCPU(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for pool, limit := range limits {
			l := resource.MustParse(limit)
			peak[pool] = max(peak[pool], used[pool])
			if used[pool] > l.AsApproximateFloat64() {
				overruns.bad("nodepool "+pool, now, used[pool], fmt.Sprintf("%.1f cpu launched, limit %s: %s", used[pool], limit, strings.Join(instances[pool], ", ")))
			} else {
				overruns.good("nodepool " + pool)
			}
		}
		// PodDisruptionBudgets, from the pods.
		for _, g := range guardedDeployments {
			healthy, unhealthy, err := e.healthyPods(ctx, g.name)
			if err != nil {
				t.Fatal(err)
			}
			if healthy == g.replicas {
				g.baseline = true
			}
			if g.baseline && healthy < g.replicas-g.maxUnavailable {
				violations.bad("deployment "+g.name, now, float64(g.replicas-healthy), fmt.Sprintf("%d of %d pods healthy, the PDB allows %d unavailable; unhealthy: %s",
					healthy, g.replicas, g.maxUnavailable, strings.Join(unhealthy, ", ")))
			} else {
				violations.good("deployment " + g.name)
			}
		}
		// do-not-disrupt pods: the Deployment never changes size, so none may go.
		pods := &corev1.PodList{}
		if err := e.cached.List(ctx, pods, client.MatchingLabels{"app": "pinned"}); err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{}
		for _, p := range pods.Items {
			uid := string(p.UID)
			present[uid] = true
			pinnedSeen[uid] = true
			if p.DeletionTimestamp != nil && pinnedGone[uid] == "" {
				pinnedGone[uid] = fmt.Sprintf("%s pod %s (node %s) deleted", now.Format("15:04:05"), p.Name, p.Spec.NodeName)
			}
		}
		for uid := range pinnedSeen {
			if !present[uid] && pinnedGone[uid] == "" {
				pinnedGone[uid] = fmt.Sprintf("%s pod uid %s gone", now.Format("15:04:05"), uid)
			}
		}
		// The controller's resident memory and goroutines.
		if r := rssMiB(ctrl.pid()); r >= 0 {
			rss = append(rss, float64(r))
		}
		if families, err := ctrl.metrics(); err == nil {
			goroutines = append(goroutines, sum(families, "go_goroutines", nil))
		}
		if !ctrl.running() {
			t.Fatalf("the controller exited during the soak")
		}
	}

	t.Logf("soak: %d samples over %s, %d scale changes, %d instances launched in all; peak launched cpu per NodePool: %s",
		len(rss), suite.soak, scaleChanges, e.track.instancesSeen(), formatCounts(peak))
	t.Logf("soak: limit overruns: %d samples in %d episodes", overruns.samples(), len(overruns.all()))
	for _, o := range overruns.all() {
		t.Errorf("limit overrun: %s", o)
	}
	t.Logf("soak: PDB violations: %d samples in %d episodes", violations.samples(), len(violations.all()))
	for _, v := range violations.all() {
		t.Errorf("PDB violation: %s", v)
	}
	evicted, bypassed, guardedPods := removals.result()
	t.Logf("soak: PDB-covered pods removed: %d through the Eviction API, %d around it", evicted, len(bypassed))
	for _, b := range bypassed {
		t.Errorf("PDB bypassed: %s", b)
	}
	asks, err := e.evictionAnswers(ctrl, refusedEvents, guardedPods, time.Since(ctrlStarted))
	if err != nil {
		t.Fatalf("reading the controller's eviction metrics: %v", err)
	}
	t.Logf("soak: %s", asks)
	if asks.refused > asks.maxRefused {
		t.Errorf("evictions refused %d times, above the %d the drain's backoff allows: it asks again without waiting", asks.refused, asks.maxRefused)
	}
	t.Logf("soak: do-not-disrupt pods disrupted: %d of %d seen", len(pinnedGone), len(pinnedSeen))
	e.note("soak: %d samples, %d scale changes, %d instances launched; peak cpu per NodePool %s (limits %s)",
		len(rss), scaleChanges, e.track.instancesSeen(), formatCounts(peak), formatCounts(limits))
	e.note("soak: limit overruns %d samples; PDB violations %d samples; PDB-covered pods evicted %d, removed around the Eviction API %d; do-not-disrupt pods disrupted %d",
		overruns.samples(), violations.samples(), evicted, len(bypassed), len(pinnedGone))
	e.note("soak: %s", asks)
	for _, g := range slices.Sorted(maps.Values(pinnedGone)) {
		t.Errorf("do-not-disrupt pod disrupted: %s", g)
	}
	e.flat("resident memory (MiB)", rss, 1.5, 32)
	e.flat("goroutines", goroutines, 1.5, 50)

	for _, name := range append(batches, "web", "api", "pinned") {
		e.scale(name, 0)
	}
	e.settleToZero("after the soak, scaled to zero: every node, nodeclaim and instance gone")
}

// launchedCPU sums, per NodePool, the cpu capacity of the cloud's instances, and
// describes them: type, cpu, and whether their claim is being deleted.
func (e *env) launchedCPU(ctx context.Context) (map[string]float64, map[string][]string, error) {
	instances := &v1alpha1.SimInstanceList{}
	claims := &v1.NodeClaimList{}
	if err := e.cached.List(ctx, instances); err != nil {
		return nil, nil, err
	}
	if err := e.cached.List(ctx, claims); err != nil {
		return nil, nil, err
	}
	deleting := map[string]bool{}
	for _, nc := range claims.Items {
		deleting[nc.Name] = nc.DeletionTimestamp != nil
	}
	used, described := map[string]float64{}, map[string][]string{}
	for _, inst := range instances.Items {
		it, ok := e.types[inst.Spec.InstanceType]
		if !ok {
			return nil, nil, fmt.Errorf("instance %s: type %s is not in the catalog", inst.Name, inst.Spec.InstanceType)
		}
		pool, cpu := inst.Labels[v1.NodePoolLabelKey], it.Capacity.Cpu().AsApproximateFloat64()
		used[pool] += cpu
		d := fmt.Sprintf("%s %s %g cpu", inst.Name, it.Name, cpu)
		if deleting[inst.Spec.NodeClaim] {
			d += " (nodeclaim deleting)"
		}
		described[pool] = append(described[pool], d)
	}
	return used, described, nil
}

// episodes groups a condition's bad samples into runs of consecutive samples,
// each reported once, with its worst sample.
type episodes struct {
	open map[string]*episode
	done []*episode
}

type episode struct {
	key      string
	from, to time.Time
	samples  int
	worst    float64
	detail   string
}

func newEpisodes() *episodes { return &episodes{open: map[string]*episode{}} }

// bad records a bad sample of key; the one with the highest severity is kept.
func (es *episodes) bad(key string, at time.Time, severity float64, detail string) {
	ep := es.open[key]
	if ep == nil {
		ep = &episode{key: key, from: at, worst: severity, detail: detail}
		es.open[key] = ep
		es.done = append(es.done, ep)
	}
	ep.to = at
	ep.samples++
	if severity > ep.worst {
		ep.worst, ep.detail = severity, detail
	}
}

// good ends key's episode, if one is open.
func (es *episodes) good(key string) { delete(es.open, key) }

func (es *episodes) all() []*episode { return es.done }

func (es *episodes) samples() int {
	n := 0
	for _, ep := range es.done {
		n += ep.samples
	}
	return n
}

func (ep *episode) String() string {
	return fmt.Sprintf("%s, %s to %s (%d samples); at the worst: %s", ep.key, ep.from.Format("15:04:05"), ep.to.Format("15:04:05"), ep.samples, ep.detail)
}

// healthyPods counts a Deployment's pods as a PodDisruptionBudget does: Ready and
// not being deleted; it describes the others.
func (e *env) healthyPods(ctx context.Context, app string) (int, []string, error) {
	pods := &corev1.PodList{}
	if err := e.cached.List(ctx, pods, client.MatchingLabels{"app": app}); err != nil {
		return 0, nil, err
	}
	healthy := 0
	var others []string
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		switch {
		case p.DeletionTimestamp == nil && ready:
			healthy++
		case p.DeletionTimestamp != nil:
			others = append(others, fmt.Sprintf("%s deleting (node %s)", p.Name, p.Spec.NodeName))
		default:
			others = append(others, fmt.Sprintf("%s %s (node %q)", p.Name, p.Status.Phase, p.Spec.NodeName))
		}
	}
	return healthy, others, nil
}

// flat checks that the last quarter's median of samples is at most factor times
// the second quarter's plus slack, and logs the quarters.
func (e *env) flat(what string, samples []float64, factor, slack float64) {
	t := e.t
	t.Helper()
	if len(samples) < 8 {
		t.Errorf("%s: %d samples, too few to tell", what, len(samples))
		return
	}
	n := len(samples)
	q := func(i int) float64 { return median(samples[i*n/4 : (i+1)*n/4]) }
	peak := slices.Max(samples)
	t.Logf("soak: %s, medians by quarter: %.0f, %.0f, %.0f, %.0f; peak %.0f", what, q(0), q(1), q(2), q(3), peak)
	e.note("soak: %s, medians by quarter %.0f, %.0f, %.0f, %.0f; peak %.0f", what, q(0), q(1), q(2), q(3), peak)
	if q(3) > factor*q(1)+slack {
		t.Errorf("%s grew: the last quarter's median %.0f is above %.1f × the second quarter's %.0f + %.0f", what, q(3), factor, q(1), slack)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// evictionAsks is what the Eviction API answered the controller's drains, from
// its karpenter_pods_eviction_requests_total. A refusal (429) is a
// PodDisruptionBudget allowing no disruption just then: expected, and not a
// violation (those the suite checks from the pods); the drain asks again later.
// How many there are follows how often consolidation drains a node whose
// PDB-covered pods have spent their budget, so the count has no bound of its own;
// its rate does. The drain asks again about a refused pod after 1s, doubling to
// 10s, so over w a pod is refused at most 5 + w/10s times.
type evictionAsks struct {
	granted, refused int
	// other counts the other answers by code (404: the pod was gone already).
	other map[string]int
	// counted: the controller's metrics have the counter. Without it (no eviction
	// asked for yet, or a build without it) refused is the refusals the test saw
	// as FailedDraining events on the nodes (see pdbRefusal), which the event
	// recorder folds and drops past a burst: at most the refusals.
	counted bool
	// maxRefused is twice the backoff's bound, over every PDB-covered pod seen:
	// more means the drain asks again without waiting.
	maxRefused int
	pods       int
	over       time.Duration
}

func (e *env) evictionAnswers(c *controller, events *eventCounter, guardedPods int, over time.Duration) (evictionAsks, error) {
	families, err := c.metrics()
	if err != nil {
		return evictionAsks{}, err
	}
	const family = "karpenter_pods_eviction_requests_total"
	a := evictionAsks{counted: families[family] != nil, other: map[string]int{}, pods: guardedPods, over: over,
		maxRefused: 2 * guardedPods * (5 + int(over/(10*time.Second)))}
	if !a.counted {
		a.refused = events.total()
		return a, nil
	}
	for code, n := range byLabel(families, family, "code") {
		switch code {
		case "200":
			a.granted += int(n)
		case "429":
			a.refused += int(n)
		default:
			a.other[code] += int(n)
		}
	}
	return a, nil
}

func (a evictionAsks) String() string {
	refused := fmt.Sprintf("%d refused (429: a PDB allowed no disruption then, expected; the drain asks again after a backoff; at most %d for %d PDB-covered pods over %s)",
		a.refused, a.maxRefused, a.pods, a.over.Round(time.Second))
	if !a.counted {
		return fmt.Sprintf("evictions: no %s in the controller's metrics; FailedDraining events for a refused eviction: %s", "karpenter_pods_eviction_requests_total", refused)
	}
	return fmt.Sprintf("evictions asked for: %d granted; %s; other answers by code: %s", a.granted, refused, formatCounts(a.other))
}

// pdbRefusal reports an Event that says a PodDisruptionBudget refused an
// eviction. The drain says so as Karpenter does: a Warning FailedDraining on the
// node, "Failed to drain node: evicting pod NS/NAME violates a
// PodDisruptionBudget, …" (before, a FailedEviction on the pod). The drain's
// other FailedDraining events, for pods it waits on (do-not-disrupt, terminating),
// are not refusals; nor is an Event the recorder combined from similar ones
// ("(combined from similar events): …"), which may hold either kind, so the
// count is at most the refusals.
func pdbRefusal(ev *corev1.Event) bool {
	return ev.Reason == "FailedDraining" && ev.InvolvedObject.Kind == "Node" &&
		strings.HasPrefix(ev.Message, "Failed to drain node: evicting pod ") && strings.Contains(ev.Message, "violates a PodDisruptionBudget")
}

// eventCounter counts the Events the test's informer sees that a filter admits,
// each at its highest count (the recorder folds repeats into one Event): Events
// expire after an hour, the counter keeps them.
type eventCounter struct {
	mu     sync.Mutex
	counts map[string]int32
}

func (c *eventCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += int(v)
	}
	return n
}

func (e *env) countEvents(admit func(*corev1.Event) bool) *eventCounter {
	e.t.Helper()
	c := &eventCounter{counts: map[string]int32{}}
	see := func(o any) {
		ev, ok := o.(*corev1.Event)
		if !ok || !admit(ev) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.counts[string(ev.UID)] = max(c.counts[string(ev.UID)], ev.Count, 1)
	}
	informer, err := e.informers.GetInformer(e.t.Context(), &corev1.Event{})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// removalAudit records how the pods of PDB-covered Deployments left: the Eviction
// API marks a pod it evicts with a DisruptionTarget condition (reason
// EvictionByEvictionAPI) before deleting it, after checking the PDB. A pod deleted
// without it went around its PDB. The Deployments keep a fixed size, so nothing
// else has a reason to remove their pods.
type removalAudit struct {
	mu       sync.Mutex
	seen     map[string]bool
	evicted  map[string]bool
	bypassed map[string]string
}

func (e *env) auditRemovals(apps ...string) *removalAudit {
	e.t.Helper()
	a := &removalAudit{seen: map[string]bool{}, evicted: map[string]bool{}, bypassed: map[string]string{}}
	see := func(o any, deleted bool) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok || !slices.Contains(apps, p.Labels["app"]) {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		uid := string(p.UID)
		a.seen[uid] = true
		if p.DeletionTimestamp == nil && !deleted {
			return
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
				a.evicted[uid] = true
				delete(a.bypassed, uid)
				return
			}
		}
		if !a.evicted[uid] {
			why := "no DisruptionTarget condition"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget {
					why = fmt.Sprintf("DisruptionTarget %s: %s", c.Reason, c.Message)
				}
			}
			a.bypassed[uid] = fmt.Sprintf("%s pod %s on node %s removed (%s)", time.Now().Format("15:04:05"), p.Name, p.Spec.NodeName, why)
		}
	}
	informer, err := e.informers.GetInformer(e.t.Context(), &corev1.Pod{})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { see(o, false) },
		UpdateFunc: func(_, o any) { see(o, false) },
		DeleteFunc: func(o any) { see(o, true) },
	}); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// result is how many pods left through the Eviction API, the ones that did not,
// and how many pods were seen in all.
func (a *removalAudit) result() (evicted int, bypassed []string, seen int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.evicted), slices.Sorted(maps.Values(a.bypassed)), len(a.seen)
}

// The drain's events, as the termination controller words them: only the
// refused eviction counts.
func TestPDBRefusalEvents(t *testing.T) {
	onNode := func(reason, message string) *corev1.Event {
		return &corev1.Event{Reason: reason, Message: message, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n"}}
	}
	for _, tc := range []struct {
		name string
		ev   *corev1.Event
		want bool
	}{
		{"refused by a PDB", onNode("FailedDraining",
			"Failed to drain node: evicting pod default/web-1 violates a PodDisruptionBudget, retrying in 2s: Cannot evict pod as it would violate the pod's disruption budget."), true},
		{"waiting on do-not-disrupt", onNode("FailedDraining",
			"Failed to drain node: 2 pods are waiting to be evicted, first default/pinned-1 (karpenter.sh/do-not-disrupt)"), false},
		{"combined by the recorder", onNode("FailedDraining",
			"(combined from similar events): Failed to drain node: evicting pod default/web-1 violates a PodDisruptionBudget, retrying in 4s"), false},
		{"evicted", &corev1.Event{Reason: "Evicted", Message: "Evicted pod: underutilized", InvolvedObject: corev1.ObjectReference{Kind: "Pod"}}, false},
		{"the old reason", &corev1.Event{Reason: "FailedEviction", Message: "Eviction refused (PodDisruptionBudget)", InvolvedObject: corev1.ObjectReference{Kind: "Pod"}}, false},
	} {
		if got := pdbRefusal(tc.ev); got != tc.want {
			t.Errorf("%s: pdbRefusal = %v, want %v", tc.name, got, tc.want)
		}
	}
}
