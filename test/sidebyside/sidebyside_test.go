// Package sidebyside measures Tailor against Karpenter on one local control plane
// (issue 26 §3, §4): the same catalog, NodePool and workload, Karpenter's kwok
// controller first and Tailor's sim cloud after it, never both at once. For each
// workload and side it prints the time until every pod runs, the nodes and their
// price, the time the cluster takes to settle after the Deployments are scaled down
// to a tenth, and the time to no node at all after they are scaled to zero. A
// measurement, not a check:
//
//	hack/tools.sh control-plane karpenter-kwok
//	TAILOR_SIDEBYSIDE=1 go test -v -timeout 3h ./test/sidebyside/
//
// TAILOR_SIDEBYSIDE_WORKLOADS (inflate,mix), TAILOR_SIDEBYSIDE_SIDES
// (karpenter,tailor) choose what runs; TAILOR_SIDEBYSIDE_LATENCY=realistic times
// both clouds by the sim cloud's realistic model (seed TAILOR_SIDEBYSIDE_SEED, 1),
// launch for launch the same draws; TAILOR_SIDEBYSIDE_NODECOST=on bills each node
// its volume and address (the SimNodeClass's perNodeCost) and an agent (the
// NodePool's tailor.sh/per-node-cost), which Tailor plans with and Karpenter
// ignores; TAILOR_SIDEBYSIDE_QUIET (60s) is how long no NodeClaim may change for
// the cluster to count as settled; TAILOR_SIDEBYSIDE_API_QPS sets the client QPS of
// the kube-scheduler and kube-controller-manager (their defaults, 50 and 20, unless
// set); TAILOR_SIDEBYSIDE_LOGS keeps the controllers'
// logs in that directory; TAILOR_SIDEBYSIDE_TAILOR runs that tailor binary instead
// of building one.
package sidebyside

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/cloudprovider/sim"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

var (
	kube    client.Client
	cluster *localcluster.Cluster
	// its is the sim cloud's catalog as its nodes have it: the prices of both sides.
	its []*scheduling.InstanceType
	// tailorBin, karpenterBin and karpenterCRDs are what each side runs.
	tailorBin, karpenterBin, karpenterCRDs string
	// karpenterCatalog is its in Karpenter's kwok format, for its kwok provider.
	karpenterCatalog string
	logDir           string
)

func TestMain(m *testing.M) {
	if os.Getenv("TAILOR_SIDEBYSIDE") == "" {
		fmt.Println("a measurement, not a check: run with TAILOR_SIDEBYSIDE=1 after hack/tools.sh control-plane karpenter-kwok")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, err := localcluster.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	karpenterBin, karpenterCRDs = filepath.Join(bin, "karpenter-kwok"), filepath.Join(bin, "karpenter-crds")
	for _, p := range []string{karpenterBin, karpenterCRDs} {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(os.Stderr, "%v: build it with hack/tools.sh karpenter-kwok\n", err)
			return 1
		}
	}
	logDir = os.Getenv("TAILOR_SIDEBYSIDE_LOGS")
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "sidebyside-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("logs:", logDir)
	if tailorBin = os.Getenv("TAILOR_SIDEBYSIDE_TAILOR"); tailorBin == "" {
		tailorBin = filepath.Join(logDir, "tailor")
		if out, err := exec.Command("go", "build", "-o", tailorBin, "github.com/nodetailor/tailor/cmd/tailor").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building tailor: %v\n%s", err, out)
			return 1
		}
	}
	if its, err = simCatalog(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	karpenterCatalog = filepath.Join(logDir, "instance-types.json")
	if err := writeKarpenterCatalog(karpenterCatalog); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := localcluster.Options{Scheduler: true, ControllerManager: true, Kwok: true}
	if q := os.Getenv("TAILOR_SIDEBYSIDE_API_QPS"); q != "" {
		if opts.KubeAPIQPS, err = strconv.Atoi(q); err != nil {
			fmt.Fprintln(os.Stderr, "TAILOR_SIDEBYSIDE_API_QPS:", err)
			return 1
		}
	}
	c, k, stop, err := testenv.Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	cluster, kube = c, k
	for _, ds := range testenv.SystemDaemonSets() {
		if err := kube.Create(context.Background(), ds); err != nil {
			fmt.Fprintln(os.Stderr, "creating DaemonSet", ds.Name, err)
			return 1
		}
	}
	return m.Run()
}

// simCatalog is the sim cloud's catalog as a default SimNodeClass's nodes have it
// (EKS nodes: allocatable less the kubelet's reservations).
func simCatalog() ([]*scheduling.InstanceType, error) {
	listed, err := catalog.EmbeddedAWSUSEast1()
	if err != nil {
		return nil, err
	}
	return listed.InstanceTypes(sim.NodeModel(&v1alpha1.SimNodeClass{}))
}

// kwokReserved is what Karpenter's kwok provider keeps back of every type's
// resources (its InstanceTypeOverhead: kube-reserved 100m cpu, 10Mi memory).
var kwokReserved = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}

// writeKarpenterCatalog writes the sim cloud's catalog for Karpenter's kwok
// provider: the same types, offerings and prices (the catalog file is in kwok's
// format already), with each type's resources set so that what kwok leaves
// allocatable is exactly what the sim cloud's node of that type has allocatable
// (kwok keeps back only kwokReserved; an EKS node keeps back more, and fewer pods
// fit it). So both sides plan with, and launch, the same nodes.
func writeKarpenterCatalog(path string) error {
	// The file the sim cloud embeds, read from the repository.
	raw, err := os.ReadFile(filepath.Join("..", "..", "pkg", "cloudprovider", "catalog", "aws-us-east-1.json"))
	if err != nil {
		return err
	}
	var entries []map[string]any
	if err := json.Unmarshal(raw, &entries); err != nil {
		return err
	}
	byName := map[string]*scheduling.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	out := entries[:0]
	for _, e := range entries {
		it, ok := byName[e["name"].(string)]
		if !ok {
			continue
		}
		alloc := allocatable.Node{Capacity: it.Capacity, Overhead: it.Overhead}.Allocatable()
		resources := map[string]string{}
		for name, q := range alloc {
			if r, ok := kwokReserved[name]; ok {
				q = q.DeepCopy()
				q.Add(r)
			}
			resources[string(name)] = q.String()
		}
		e["resources"] = resources
		out = append(out, e)
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// shape is one Deployment of a workload, scaled from replicas down to down.
type shape struct {
	app            string
	replicas, down int32
	cpu, memory    string
}

// workloads are issue 26's: inflate, 100 pods of 1 cpu and 1Gi; and the mix of
// four shapes the fidelity suite measures (test/fidelity), 66 pods. Each scales
// down to a tenth, rounded up.
var workloads = map[string][]shape{
	"inflate": {{"inflate", 100, 10, "1", "1Gi"}},
	"mix": {{"mix-small", 30, 3, "250m", "512Mi"}, {"mix-medium", 20, 2, "1", "2Gi"},
		{"mix-large", 10, 1, "1500m", "6Gi"}, {"mix-memory", 6, 1, "500m", "12Gi"}},
}

// The NodePool and NodeClass of every run.
const (
	pool       = "bench"
	benchLabel = "sidebyside"
)

// result is what one side did with one workload. A negative duration means the
// step did not finish in its time.
type result struct {
	workload, side                   string
	pods                             int
	running, upSettled, downSettled  time.Duration
	zero                             time.Duration
	runningNodes, upNodes, downNodes int
	runningPrice, upPrice, downPrice float64
	peak, launched, moved            int
}

func TestSideBySide(t *testing.T) {
	names := list("TAILOR_SIDEBYSIDE_WORKLOADS", "inflate,mix")
	sides := list("TAILOR_SIDEBYSIDE_SIDES", "karpenter,tailor")
	t.Logf("latency %s, seed %d, per-node costs %s ($%.6f/node/h billed), quiet %s", latency(), seed(), cmp.Or(os.Getenv("TAILOR_SIDEBYSIDE_NODECOST"), "off"), nodeCost(), quiet())
	var results []result
	for _, name := range names {
		w, ok := workloads[name]
		if !ok {
			t.Fatalf("TAILOR_SIDEBYSIDE_WORKLOADS: no workload %q (want inflate or mix)", name)
		}
		for _, side := range sides {
			if side != "karpenter" && side != "tailor" {
				t.Fatalf("TAILOR_SIDEBYSIDE_SIDES: no side %q (want karpenter or tailor)", side)
			}
			t.Run(name+"/"+side, func(t *testing.T) {
				r := measure(t, side, name, w)
				results = append(results, r)
			})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| workload | side | to Running | nodes, $/h at Running (peak claims) | settled after scale-up | scale-down: settled | nodes, $/h after | pods moved | to zero |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s (%d pods) | %s | %s | %d, $%.4f (%d) | %s, %d nodes, $%.4f | %s | %d, $%.4f | %d | %s |\n",
			r.workload, r.pods, r.side, secs(r.running), r.runningNodes, r.runningPrice, r.peak, secs(r.upSettled), r.upNodes, r.upPrice,
			secs(r.downSettled), r.downNodes, r.downPrice, r.moved, secs(r.zero))
	}
	t.Log(b.String())
}

func secs(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func list(env, def string) []string {
	return strings.Split(cmp.Or(os.Getenv(env), def), ",")
}

func latency() v1alpha1.LatencyProfile {
	switch l := os.Getenv("TAILOR_SIDEBYSIDE_LATENCY"); l {
	case "", "none":
		return v1alpha1.LatencyNone
	case "realistic":
		return v1alpha1.LatencyRealistic
	default:
		panic("TAILOR_SIDEBYSIDE_LATENCY: want none or realistic, got " + l)
	}
}

func seed() int64 {
	s := cmp.Or(os.Getenv("TAILOR_SIDEBYSIDE_SEED"), "1")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic("TAILOR_SIDEBYSIDE_SEED: want an integer, got " + s)
	}
	return n
}

func quiet() time.Duration {
	d, err := time.ParseDuration(cmp.Or(os.Getenv("TAILOR_SIDEBYSIDE_QUIET"), "60s"))
	if err != nil {
		panic("TAILOR_SIDEBYSIDE_QUIET: " + err.Error())
	}
	return d
}

// Per-node costs when on: a 20Gi gp3 root volume and a public IPv4 address, as
// docs/benchmarks.md prices them ($0.002192 + $0.005 an hour), stand in the
// SimNodeClass's perNodeCost; an agent, the NodePool's tailor.sh/per-node-cost.
const (
	volumeAndAddress = "0.007192"
	agent            = "0.01"
)

func nodeCostOn() bool { return os.Getenv("TAILOR_SIDEBYSIDE_NODECOST") == "on" }

// nodeCost is what each node is billed besides its instance.
func nodeCost() float64 {
	if !nodeCostOn() {
		return 0
	}
	a, _ := strconv.ParseFloat(volumeAndAddress, 64)
	b, _ := strconv.ParseFloat(agent, 64)
	return a + b
}

// simNodeClass is Tailor's NodeClass of the runs.
func simNodeClass() *v1alpha1.SimNodeClass {
	nc := &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.SimNodeClassSpec{Latency: &v1alpha1.Latency{Profile: latency(), Seed: seed()}}}
	if nodeCostOn() {
		nc.Spec.PerNodeCost = volumeAndAddress
	}
	return nc
}

// kwokNodeClass is Karpenter's NodeClass of the runs.
func kwokNodeClass() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("karpenter.kwok.sh/v1alpha1")
	u.SetKind("KWOKNodeClass")
	u.SetName(pool)
	return u
}

// nodePool is the NodePool of both sides but for its NodeClass: spot and
// on-demand linux capacity of every architecture, consolidating empty and
// underused nodes at once (consolidateAfter 0s), the default budget of 10% of
// the nodes.
func nodePool(ref *v1.NodeClassReference) *v1.NodePool {
	opts := []testobj.NodePoolOption{testobj.NodeClassRef(ref),
		testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
		testobj.Requirement(corev1.LabelOSStable, v1.NodeSelectorOpIn, "linux"),
		testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized), testobj.ConsolidateAfter("0s"), testobj.Budgets("10%")}
	if nodeCostOn() {
		opts = append(opts, testobj.PoolAnnotations(v1alpha1.PerNodeCostAnnotationKey, agent))
	}
	return testobj.NodePool(pool, opts...)
}

// measure runs one side on one workload: its CRDs, its NodeClass, its controller,
// the NodePool, then the workload up, down to a tenth, and to zero.
func measure(t *testing.T, side, name string, w []shape) result {
	ctx := t.Context()
	r := result{workload: name, side: side, running: -1, upSettled: -1, downSettled: -1, zero: -1}
	var nodeClass client.Object
	var ref *v1.NodeClassReference
	if side == "karpenter" {
		if err := installKarpenterCRDs(ctx); err != nil {
			t.Fatal(err)
		}
		nodeClass, ref = kwokNodeClass(), &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: pool}
	} else {
		if err := crd.Install(ctx, cluster.Config); err != nil {
			t.Fatal(err)
		}
		nodeClass, ref = simNodeClass(), testobj.SimClass(pool)
	}
	if err := kube.Create(ctx, nodeClass); err != nil {
		t.Fatalf("creating the NodeClass: %v", err)
	}
	stop := startController(t, side, name)
	np := nodePool(ref)
	if err := kube.Create(ctx, np); err != nil {
		t.Fatalf("creating the NodePool: %v", err)
	}
	deployments := map[string]*appsv1.Deployment{}
	for _, s := range w {
		d := testobj.Deployment(s.app, s.replicas, s.cpu, s.memory, testobj.SelectorLabels("bench", benchLabel))
		deployments[s.app] = d
		r.pods += int(s.replicas)
	}
	defer cleanUp(t, nodeClass, np, deployments, stop)

	start := time.Now()
	for _, s := range w {
		if err := kube.Create(ctx, deployments[s.app]); err != nil {
			t.Fatalf("creating %s: %v", s.app, err)
		}
	}
	claims := newClaimSet()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := claims.observe(ctx); err != nil {
			return false, nil
		}
		running, err := runningPods(ctx, time.Time{}, nil)
		return err == nil && running == r.pods, nil
	})
	if err != nil {
		t.Errorf("%d pods not all running: %v", r.pods, err)
		return r
	}
	r.running, r.peak = time.Since(start), claims.peak
	r.runningNodes, r.runningPrice = census(ctx, t)
	logTimeline(ctx, t, name+"/"+side, start)
	t.Logf("%s/%s: %d pods running in %.1fs on %d nodes at $%.4f/h (peak %d claims)", name, side, r.pods, r.running.Seconds(), r.runningNodes, r.runningPrice, r.peak)

	// Let the scale-up come to rest before scaling down: consolidation may act on
	// it too.
	settledAt, ok := settle(t, claims, r.pods, time.Time{}, nil)
	if ok {
		r.upSettled = settledAt.Sub(start)
		r.upNodes, r.upPrice = census(ctx, t)
		t.Logf("%s/%s: after the scale-up, settled %.1fs after the start at %d nodes, $%.4f/h", name, side, r.upSettled.Seconds(), r.upNodes, r.upPrice)
	}

	down := 0
	for _, s := range w {
		scale(t, s.app, s.down)
		down += int(s.down)
	}
	downStart := time.Now()
	moved := map[string]bool{}
	settledAt, ok = settle(t, claims, down, downStart, moved)
	if ok {
		r.downSettled = max(settledAt.Sub(downStart), 0) // no change at all: settled at once
		r.downNodes, r.downPrice = census(ctx, t)
	}
	r.moved = len(moved)
	t.Logf("%s/%s: scaled down to %d pods: settled %s after at %d nodes, $%.4f/h; %d pods started again elsewhere", name, side, down, secs(r.downSettled), r.downNodes, r.downPrice, r.moved)

	for _, s := range w {
		scale(t, s.app, 0)
	}
	zeroStart := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := claims.observe(ctx)
		if err != nil {
			return false, nil
		}
		nodes := &corev1.NodeList{}
		if err := kube.List(ctx, nodes, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
			return false, nil
		}
		return len(now) == 0 && len(nodes.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("nodes left after scaling to zero: %v", err)
	} else {
		r.zero = time.Since(zeroStart)
	}
	r.launched = len(claims.seen)
	t.Logf("%s/%s: no node left %s after scaling to zero; %d claims launched in all", name, side, secs(r.zero), r.launched)
	return r
}

// claimSet follows the NodePool's claims (terminating ones included): every name
// seen, the most alive at once, and when the set last changed.
type claimSet struct {
	names []string
	last  time.Time
	seen  map[string]bool
	peak  int
}

func newClaimSet() *claimSet { return &claimSet{last: time.Now(), seen: map[string]bool{}} }

// observe lists the claims and records a change; it returns them.
func (s *claimSet) observe(ctx context.Context) ([]v1.NodeClaim, error) {
	claims, err := claimsNow(ctx)
	if err != nil {
		return nil, err
	}
	var now []string
	for _, c := range claims {
		now = append(now, c.Name)
		s.seen[c.Name] = true
	}
	slices.Sort(now)
	if !slices.Equal(now, s.names) {
		s.names, s.last = now, time.Now()
	}
	s.peak = max(s.peak, len(live(claims)))
	return claims, nil
}

// settle waits until no NodeClaim has been created or deleted for quiet() since
// the last change or since, with want pods of the workload running, and returns
// when the last change was; pods
// created after since go in moved (pods a disruption evicted, started again by
// their ReplicaSet).
func settle(t *testing.T, claims *claimSet, want int, since time.Time, moved map[string]bool) (time.Time, bool) {
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := claims.observe(ctx); err != nil {
			return false, nil
		}
		running, err := runningPods(ctx, since, moved)
		return err == nil && running == want && time.Since(later(claims.last, since)) >= quiet(), nil
	})
	if err != nil {
		t.Errorf("did not settle: %v", err)
		return time.Time{}, false
	}
	return claims.last, true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// logTimeline logs, since start, when the first and the last of the NodePool's
// claims were created, their Nodes created (registered) and Ready, and the
// workload's pods bound and Running: where the time to Running went.
func logTimeline(ctx context.Context, t *testing.T, run string, start time.Time) {
	claims, err := claimsNow(ctx)
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	if err != nil || kube.List(ctx, nodes, client.MatchingLabels{v1.NodePoolLabelKey: pool}) != nil ||
		kube.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"bench": benchLabel}) != nil {
		return
	}
	var created, registered, ready, bound, running []time.Time
	for _, c := range claims {
		created = append(created, c.CreationTimestamp.Time)
	}
	for _, n := range nodes.Items {
		registered = append(registered, n.CreationTimestamp.Time)
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, c.LastTransitionTime.Time)
			}
		}
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			switch {
			case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue:
				bound = append(bound, c.LastTransitionTime.Time)
			case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
				running = append(running, c.LastTransitionTime.Time)
			}
		}
	}
	span := func(ts []time.Time) string {
		if len(ts) == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f–%.0fs", slices.MinFunc(ts, time.Time.Compare).Sub(start).Seconds(), slices.MaxFunc(ts, time.Time.Compare).Sub(start).Seconds())
	}
	t.Logf("%s timeline (seconds after the start, to the API server's second): claims created %s, Nodes created %s, Ready %s; pods bound %s, ready %s",
		run, span(created), span(registered), span(ready), span(bound), span(running))
}

// census is the NodePool's live claims and their price an hour, per-node costs
// included when on.
func census(ctx context.Context, t *testing.T) (int, float64) {
	claims, err := claimsNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	price := 0.0
	n := 0
	for _, c := range live(claims) {
		n++
		p, ok := scheduling.OfferingPrice(its, c.Labels)
		if !ok {
			t.Errorf("NodeClaim %s: an offering the catalog does not sell (or not launched yet): %v", c.Name, c.Labels)
		}
		price += p + nodeCost()
	}
	return n, math.Round(price*1e4) / 1e4
}

func claimsNow(ctx context.Context) ([]v1.NodeClaim, error) {
	list := &v1.NodeClaimList{}
	if err := kube.List(ctx, list, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// live are the claims not being deleted.
func live(claims []v1.NodeClaim) []v1.NodeClaim {
	return slices.DeleteFunc(slices.Clone(claims), func(c v1.NodeClaim) bool { return c.DeletionTimestamp != nil })
}

// runningPods counts the workload's pods that run and are not being deleted;
// those created after since go in moved.
func runningPods(ctx context.Context, since time.Time, moved map[string]bool) (int, error) {
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"bench": benchLabel}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if moved != nil && p.CreationTimestamp.After(since) {
			moved[p.Name] = true
		}
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

func scale(t *testing.T, app string, replicas int32) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: app}, d); err != nil {
			return false, nil
		}
		d.Spec.Replicas = &replicas
		return kube.Update(ctx, d) == nil, nil
	})
	if err != nil {
		t.Fatalf("scaling %s to %d: %v", app, replicas, err)
	}
}

// cleanUp removes a run's objects, waits for its nodes to go, and stops its
// controller.
func cleanUp(t *testing.T, nodeClass client.Object, np *v1.NodePool, deployments map[string]*appsv1.Deployment, stop func()) {
	ctx := context.Background()
	for _, d := range deployments {
		if err := kube.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", d.Name, err)
		}
	}
	if err := kube.Delete(ctx, np); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the NodePool: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		claims, err := claimsNow(ctx)
		if err != nil || kube.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"bench": benchLabel}) != nil {
			return false, nil
		}
		err = kube.Get(ctx, client.ObjectKeyFromObject(np), &v1.NodePool{})
		return len(claims) == 0 && len(pods.Items) == 0 && apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the run's pods, NodePool or NodeClaims did not go: %v", err)
	}
	stop()
	if err := kube.Delete(ctx, nodeClass); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the NodeClass: %v", err)
	}
}

// installKarpenterCRDs puts Karpenter's own CRDs (from bin/karpenter-crds, of the
// version karpenter-kwok was built from) in place of Tailor's for karpenter.sh.
func installKarpenterCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(karpenterCRDs, "*.yaml"))
	if err != nil {
		return err
	}
	api, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	crds := api.ApiextensionsV1().CustomResourceDefinitions()
	var installed []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, c); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		existing, err := crds.Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = crds.Create(ctx, c, metav1.CreateOptions{})
		case err == nil:
			c.ResourceVersion = existing.ResourceVersion
			_, err = crds.Update(ctx, c, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing Karpenter's CRD %s: %w", c.Name, err)
		}
		installed = append(installed, c)
	}
	for _, c := range installed {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s: %w", c.Name, err)
		}
	}
	return crd.WaitDiscoverable(ctx, cluster.Config, installed, 30*time.Second)
}

// startController runs the side's controller against the cluster, logging to
// the log directory, and waits until it is ready; the returned stop ends it.
func startController(t *testing.T, side, workload string) func() {
	t.Helper()
	health, metrics := freePort(t), freePort(t)
	logPath := filepath.Join(logDir, fmt.Sprintf("%s-%s-%s.log", workload, side, time.Now().Format("150405")))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if side == "karpenter" {
		cmd = exec.Command(karpenterBin)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "INSTANCE_TYPES_FILE_PATH="+karpenterCatalog,
			"DISABLE_LEADER_ELECTION=true", "HEALTH_PROBE_PORT="+strconv.Itoa(health), "METRICS_PORT="+strconv.Itoa(metrics))
		if latency() == v1alpha1.LatencyRealistic {
			draws := filepath.Join(logDir, "draws.json")
			if err := writeDraws(draws); err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(cmd.Env, "TAILOR_LATENCY_DRAWS="+draws)
		}
	} else {
		cmd = exec.Command(tailorBin, "controller", "--kubeconfig", cluster.Kubeconfig, "--leader-elect=false",
			"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metrics), "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", health))
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	t.Logf("%s controller: log %s", side, logPath)
	err = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("the controller exited")
		default:
		}
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		stop()
		data, _ := os.ReadFile(logPath)
		t.Fatalf("%s controller not ready: %v\n%s", side, err, tail(string(data), 40))
	}
	return stop
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeDraws writes the draws of the sim cloud's latency model for the runs'
// SimNodeClass, for karpenter-kwok (hack/karpenter, Draws): the n-th launch of
// Karpenter's cloud takes the times the n-th launch of Tailor's does.
func writeDraws(path string) error {
	model := sim.ModelOf(simNodeClass())
	type launch struct {
		Delay         time.Duration `json:"delay"`
		Registration  time.Duration `json:"registration"`
		OutOfCapacity bool          `json:"outOfCapacity"`
	}
	var d struct {
		Launches []launch        `json:"launches"`
		API      []time.Duration `json:"api"`
	}
	for n := range uint64(5000) {
		l := model.Launch(n)
		d.Launches = append(d.Launches, launch{l.Delay, l.Registration, l.OutOfCapacity})
	}
	for n := range uint64(50000) {
		d.API = append(d.API, model.API(n))
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
