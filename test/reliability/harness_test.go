package reliability

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// workloadLabel marks every pod the suites make, so counts leave out the
// control plane's own.
const workloadLabel = "reliability.tailor.sh/workload"

// env is one suite's cluster: the local control plane, a direct client for writes
// and fresh reads, the test's informers for the every-second reads (listing
// thousands of pods a second would load the API server the controller needs), and
// the tracker that sees every instance launched.
type env struct {
	t       *testing.T
	cluster *localcluster.Cluster
	kube    client.Client
	cached  client.Client
	// informers feed cached; a suite may watch more kinds through them.
	informers cache.Cache
	track     *tracker
	rng       *rand.Rand
	// types is the sim cloud's catalog, by instance-type name.
	types map[string]*scheduling.InstanceType

	mu    sync.Mutex
	ctrls []*controller
	// summary collects the suite's figures, logged together at its end.
	summary []string
}

func newEnv(t *testing.T, salt uint64) *env {
	t.Helper()
	log.SetLogger(logr.Discard())
	s := seed ^ salt
	t.Logf("size %s, seed %d (TAILOR_RELIABILITY_SEED=%d repeats the suites' choices)", suite.name, seed, seed)
	// The controller-manager's default client QPS has the ReplicaSet controller make
	// 20 pods a second; the suites scale by hundreds.
	cluster, kube, stop, err := testenv.Start(localcluster.Options{Scheduler: true, ControllerManager: true, Kwok: true, KubeAPIQPS: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	e := &env{t: t, cluster: cluster, kube: kube, track: newTracker(), rng: rand.New(rand.NewPCG(s, s+1))}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	e.types = map[string]*scheduling.InstanceType{}
	for _, it := range types {
		e.types[it.Name] = it
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	informers, err := cache.New(cluster.Config, cache.Options{Scheme: kube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []client.Object{&v1alpha1.SimInstance{}, &v1.NodeClaim{}, &corev1.Node{}, &corev1.Pod{}, &appsv1.Deployment{}} {
		informer, err := informers.GetInformer(ctx, kind)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := kind.(*v1alpha1.SimInstance); ok {
			if _, err := informer.AddEventHandler(e.track.handler()); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.informers = informers
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(t.Context()) {
		t.Fatal("the test's informers did not sync")
	}
	e.cached, err = client.New(cluster.Config, client.Options{Scheme: kube.Scheme(), Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	// Every suite's nodes run what a real cluster's do: DaemonSets tolerating every
	// taint, which drains must work around.
	for _, ds := range testenv.SystemDaemonSets() {
		e.create(ds)
	}
	// Controllers end before the cluster (cleanups run last first); a failed suite
	// shows the end of the log of each controller still running then.
	t.Cleanup(func() {
		e.mu.Lock()
		ctrls := slices.Clone(e.ctrls)
		e.mu.Unlock()
		var live []*controller
		for _, c := range ctrls {
			if c.running() {
				live = append(live, c)
			}
			c.stop()
		}
		if t.Failed() {
			for _, c := range live {
				c.logTail(t, 6000)
			}
		}
	})
	// Logged first of the cleanups, last in the output: the figures in one block.
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		t.Logf("summary of %s (size %s, seed %d):\n  %s", t.Name(), suite.name, seed, strings.Join(e.summary, "\n  "))
	})
	return e
}

// note adds a line to the suite's summary.
func (e *env) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.summary = append(e.summary, fmt.Sprintf(format, args...))
}

func (e *env) create(objs ...client.Object) {
	e.t.Helper()
	for _, o := range objs {
		if err := e.kube.Create(e.t.Context(), o); err != nil {
			e.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// scale sets a Deployment's replicas.
func (e *env) scale(name string, replicas int) {
	e.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	if err := e.kube.Patch(e.t.Context(), d, patch); err != nil {
		e.t.Fatalf("scaling deployment %s to %d: %v", name, replicas, err)
	}
}

// eventually polls cond until it holds, logging how long that took, or fails the
// test with cond's last word after timeout.
func (e *env) eventually(what string, timeout time.Duration, cond func(context.Context) (bool, string)) bool {
	e.t.Helper()
	return e.poll(what, timeout, cond, false)
}

// poll is eventually; with noteFirst the summary also gets cond's first word,
// when it did not hold at once.
func (e *env) poll(what string, timeout time.Duration, cond func(context.Context) (bool, string), noteFirst bool) bool {
	e.t.Helper()
	start, first, last := time.Now(), "", ""
	err := wait.PollUntilContextTimeout(e.t.Context(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, s := cond(ctx)
		if ctx.Err() != nil {
			// The deadline hit mid-read: keep the last full reading.
			return false, nil
		}
		if !ok && first == "" {
			first = s
		}
		last = s
		return ok, nil
	})
	if err != nil {
		e.t.Errorf("%s: not within %s: %s", what, timeout, last)
		e.note("%s: NOT within %s", what, timeout)
		return false
	}
	took := time.Since(start).Seconds()
	if first != "" {
		first = " (at first: " + first + ")"
	}
	e.t.Logf("%s: after %.1fs%s", what, took, first)
	if !noteFirst {
		first = ""
	}
	e.note("%s: %.1fs%s", what, took, first)
	return true
}

// podsRunning reports whether every pod the suite's Deployments want runs.
func (e *env) podsRunning(ctx context.Context) (bool, string) {
	deployments := &appsv1.DeploymentList{}
	pods := &corev1.PodList{}
	if err := e.cached.List(ctx, deployments); err != nil {
		return false, err.Error()
	}
	if err := e.cached.List(ctx, pods, client.HasLabels{workloadLabel}); err != nil {
		return false, err.Error()
	}
	want := 0
	for _, d := range deployments.Items {
		want += int(*d.Spec.Replicas)
	}
	running, alive := 0, 0
	var waiting []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		alive++
		if p.Status.Phase == corev1.PodRunning {
			running++
		} else if len(waiting) < 3 {
			waiting = append(waiting, fmt.Sprintf("%s (node %q, %s)", p.Name, p.Spec.NodeName, scheduledMessage(&p)))
		}
	}
	return running == want && alive == want, fmt.Sprintf("%d of %d pods running (%d exist); waiting: %s", running, want, alive, strings.Join(waiting, "; "))
}

func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("scheduled=%s %s", c.Status, c.Message)
		}
	}
	return "not looked at by the scheduler yet"
}

// deployment is a Deployment of pods with the given requests, labelled as the
// suite's workload.
func deployment(name string, replicas int, cpu, mem string, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	labels := map[string]string{"app": name, workloadLabel: name}
	r := int32(replicas)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: &r, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers: []corev1.Container{{Name: "app", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}}}
	for _, m := range mutate {
		m(d)
	}
	return d
}

// daemonSet is a node agent that tolerates every taint, as logging and network
// agents do: the DaemonSet controller puts it back on a draining node at once.
func daemonSet(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "agent", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}}}
}

// nodePool is a NodePool over the SimNodeClass "default" that removes empty and
// underutilized nodes after 5s, as many at once as it likes.
func nodePool(name string, mutate ...func(*v1.NodePool)) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: "default"}
	np.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("5s")
	np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func requirement(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func simNodeClass(launchDelay time.Duration) *v1alpha1.SimNodeClass {
	return &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.SimNodeClassSpec{LaunchDelay: metav1.Duration{Duration: launchDelay}}}
}

func ptr[T any](v T) *T { return &v }

// tracker sees every SimInstance the cloud holds, through the test's informer, and
// remembers each NodeClaim that ever had two live instances at once.
type tracker struct {
	mu       sync.Mutex
	live     map[string]map[string]bool // claim → its live instances
	doubled  map[string]string          // claim → the instances seen together, first time
	launched map[string]bool            // every instance seen
}

func newTracker() *tracker {
	return &tracker{live: map[string]map[string]bool{}, doubled: map[string]string{}, launched: map[string]bool{}}
}

func (tr *tracker) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tr.see(o, false) },
		UpdateFunc: func(_, o any) { tr.see(o, false) },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			tr.see(o, true)
		},
	}
}

func (tr *tracker) see(o any, deleted bool) {
	inst, ok := o.(*v1alpha1.SimInstance)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.launched[inst.Name] = true
	claim := inst.Spec.NodeClaim
	if deleted || inst.DeletionTimestamp != nil {
		delete(tr.live[claim], inst.Name)
		return
	}
	if tr.live[claim] == nil {
		tr.live[claim] = map[string]bool{}
	}
	tr.live[claim][inst.Name] = true
	if n := len(tr.live[claim]); n > 1 {
		if _, seen := tr.doubled[claim]; !seen {
			tr.doubled[claim] = fmt.Sprintf("nodeclaim %s: %d live instances at %s (%s)", claim, n,
				time.Now().Format("15:04:05.000"), strings.Join(slices.Sorted(maps.Keys(tr.live[claim])), ", "))
		}
	}
}

// duplicates describes every claim that had two instances at once.
func (tr *tracker) duplicates() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Sorted(maps.Values(tr.doubled))
}

func (tr *tracker) instancesSeen() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.launched)
}

// inventory is the cloud and the cluster as the API server has them now.
type inventory struct {
	instances []v1alpha1.SimInstance
	claims    []v1.NodeClaim
	// nodes are the Nodes Tailor made (labelled with a NodePool).
	nodes []corev1.Node
}

func (e *env) inventory(ctx context.Context) (inventory, error) {
	var inv inventory
	instances, claims, nodes := &v1alpha1.SimInstanceList{}, &v1.NodeClaimList{}, &corev1.NodeList{}
	if err := e.kube.List(ctx, instances); err != nil {
		return inv, err
	}
	if err := e.kube.List(ctx, claims); err != nil {
		return inv, err
	}
	if err := e.kube.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}); err != nil {
		return inv, err
	}
	return inventory{instances: instances.Items, claims: claims.Items, nodes: nodes.Items}, nil
}

// leaked are the instances no NodeClaim owns: their claim is gone, or the claim
// records another instance.
func (inv inventory) leaked() []string {
	claims := map[string]*v1.NodeClaim{}
	for i := range inv.claims {
		claims[inv.claims[i].Name] = &inv.claims[i]
	}
	var out []string
	for _, inst := range inv.instances {
		nc := claims[inst.Spec.NodeClaim]
		switch {
		case nc == nil:
			out = append(out, fmt.Sprintf("instance %s (%s, created %s): its nodeclaim %s is gone", inst.Name, inst.Spec.InstanceType,
				inst.CreationTimestamp.Format("15:04:05"), inst.Spec.NodeClaim))
		case nc.Status.ProviderID != "" && !strings.HasSuffix(nc.Status.ProviderID, "/"+inst.Name):
			out = append(out, fmt.Sprintf("instance %s (%s, created %s): nodeclaim %s records %s", inst.Name, inst.Spec.InstanceType,
				inst.CreationTimestamp.Format("15:04:05"), nc.Name, nc.Status.ProviderID))
		}
	}
	return out
}

// doubled are the claims with more than one live instance now.
func (inv inventory) doubled() []string {
	per := map[string][]string{}
	for _, inst := range inv.instances {
		if inst.DeletionTimestamp == nil {
			per[inst.Spec.NodeClaim] = append(per[inst.Spec.NodeClaim], inst.Name)
		}
	}
	var out []string
	for claim, insts := range per {
		if len(insts) > 1 {
			out = append(out, fmt.Sprintf("nodeclaim %s: instances %s", claim, strings.Join(insts, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// stuck are the Nodes and NodeClaims being deleted that still hold the
// termination finalizer, with what holds each.
func (e *env) stuck(ctx context.Context, inv inventory) []string {
	var out []string
	now := time.Now()
	for _, nc := range inv.claims {
		if nc.DeletionTimestamp != nil && slices.Contains(nc.Finalizers, v1.TerminationFinalizer) {
			var conds []string
			for _, c := range nc.Status.Conditions {
				conds = append(conds, c.Type+"="+string(c.Status))
			}
			out = append(out, fmt.Sprintf("nodeclaim %s: deleting for %.0fs, node %q, provider ID %q, conditions %s",
				nc.Name, now.Sub(nc.DeletionTimestamp.Time).Seconds(), nc.Status.NodeName, nc.Status.ProviderID, strings.Join(conds, " ")))
		}
	}
	for _, n := range inv.nodes {
		if n.DeletionTimestamp != nil && slices.Contains(n.Finalizers, v1.TerminationFinalizer) {
			out = append(out, fmt.Sprintf("node %s: deleting for %.0fs, pods: %s", n.Name, now.Sub(n.DeletionTimestamp.Time).Seconds(), e.podsOn(ctx, n.Name)))
		}
	}
	return out
}

// podsOn describes the pods bound to a node: owner kind, phase, deleting, and
// do-not-disrupt.
func (e *env) podsOn(ctx context.Context, node string) string {
	pods := &corev1.PodList{}
	if err := e.kube.List(ctx, pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return err.Error()
	}
	if len(pods.Items) == 0 {
		return "none"
	}
	var out []string
	for _, p := range pods.Items {
		owner := "bare"
		if len(p.OwnerReferences) > 0 {
			owner = p.OwnerReferences[0].Kind
		}
		s := fmt.Sprintf("%s/%s (%s, %s", p.Namespace, p.Name, owner, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += ", deleting"
		}
		if p.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
			s += ", do-not-disrupt"
		}
		out = append(out, s+")")
	}
	return strings.Join(out, ", ")
}

// settleToZero waits until every Tailor node, claim and instance is gone, then
// checks what must hold at the end of every suite: no claim ever had two
// instances, nothing leaked, nothing stuck on its finalizer.
func (e *env) settleToZero(what string) {
	e.t.Helper()
	e.eventually(what, suite.deadline, func(ctx context.Context) (bool, string) {
		inv, err := e.inventory(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(inv.nodes) == 0 && len(inv.claims) == 0 && len(inv.instances) == 0,
			fmt.Sprintf("%d nodes, %d nodeclaims, %d instances left", len(inv.nodes), len(inv.claims), len(inv.instances))
	})
	e.checkInvariants(true)
}

// checkInvariants reports, one error per object, every claim that ever had two
// instances, every leaked instance, every object stuck on its finalizer, and at
// zero, every node, claim or instance left.
func (e *env) checkInvariants(atZero bool) {
	e.t.Helper()
	ctx := e.t.Context()
	inv, err := e.inventory(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	dups, leaked, stuck := e.track.duplicates(), inv.leaked(), e.stuck(ctx, inv)
	e.t.Logf("invariants: %d instances launched in all; %d claims ever with two instances; now %d leaked instances, %d stuck finalizers; %d nodes, %d nodeclaims, %d instances",
		e.track.instancesSeen(), len(dups), len(leaked), len(stuck), len(inv.nodes), len(inv.claims), len(inv.instances))
	e.note("invariants: %d instances launched; duplicates %d, leaked %d, stuck finalizers %d; left: %d nodes, %d nodeclaims, %d instances",
		e.track.instancesSeen(), len(dups), len(leaked), len(stuck), len(inv.nodes), len(inv.claims), len(inv.instances))
	for _, d := range dups {
		e.t.Errorf("duplicate launch: %s", d)
	}
	for _, d := range inv.doubled() {
		e.t.Errorf("duplicate launch, still there: %s", d)
	}
	for _, l := range leaked {
		e.t.Errorf("leaked: %s", l)
	}
	for _, s := range stuck {
		e.t.Errorf("stuck finalizer: %s", s)
	}
	if !atZero {
		return
	}
	// What is left and not even deleting, one line per kind: a node with its pods,
	// a claim with its node, an instance with its claim (unless that claim is
	// deleting, and so reported as stuck).
	var nodes, claims, instances []string
	for _, n := range inv.nodes {
		if n.DeletionTimestamp == nil {
			nodes = append(nodes, fmt.Sprintf("%s (pods: %s)", n.Name, e.podsOn(ctx, n.Name)))
		}
	}
	deleting := map[string]bool{}
	for _, nc := range inv.claims {
		deleting[nc.Name] = nc.DeletionTimestamp != nil
		if nc.DeletionTimestamp == nil {
			claims = append(claims, fmt.Sprintf("%s (node %s)", nc.Name, nc.Status.NodeName))
		}
	}
	for _, inst := range inv.instances {
		if !deleting[inst.Spec.NodeClaim] {
			instances = append(instances, fmt.Sprintf("%s (nodeclaim %s)", inst.Name, inst.Spec.NodeClaim))
		}
	}
	for _, k := range []struct {
		kind string
		left []string
	}{{"nodes", nodes}, {"nodeclaims", claims}, {"instances", instances}} {
		if len(k.left) > 0 {
			e.t.Errorf("%d %s left at zero, not deleting: %s", len(k.left), k.kind, strings.Join(k.left, ", "))
		}
	}
}

// claimsMatchInstances polls, for up to a garbage collection's grace and
// interval, until each claim has one instance and each instance one claim.
func (e *env) claimsMatchInstances(what string) bool {
	e.t.Helper()
	return e.poll(what, 90*time.Second, func(ctx context.Context) (bool, string) {
		inv, err := e.inventory(ctx)
		if err != nil {
			return false, err.Error()
		}
		per := map[string]int{}
		for _, inst := range inv.instances {
			if inst.DeletionTimestamp == nil {
				per[inst.Spec.NodeClaim]++
			}
		}
		var bad []string
		for _, nc := range inv.claims {
			if per[nc.Name] != 1 {
				bad = append(bad, fmt.Sprintf("nodeclaim %s has %d instances", nc.Name, per[nc.Name]))
			}
		}
		bad = append(bad, inv.leaked()...)
		if len(bad) > 0 {
			return false, fmt.Sprintf("%d wrong: %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
		}
		return true, ""
	}, true)
}

// controller is a tailor controller process.
type controller struct {
	name       string
	cmd        *exec.Cmd
	metricsURL string
	// readyURL answers 200 once the controller's caches are synced.
	readyURL string
	logPath  string
	exited   chan struct{}
}

// startController runs `tailor controller` against the env's cluster, with quick
// disruption passes; extraEnv adds environment variables (the fault injector's).
func (e *env) startController(name string, leaderElect bool, extraEnv ...string) *controller {
	e.t.Helper()
	addr, err := freeAddr()
	if err != nil {
		e.t.Fatal(err)
	}
	health, err := freeAddr()
	if err != nil {
		e.t.Fatal(err)
	}
	dir := logDir
	if dir == "" {
		dir = e.t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	c := &controller{name: name, metricsURL: "http://" + addr + "/metrics", readyURL: "http://" + health + "/readyz", exited: make(chan struct{}),
		logPath: filepath.Join(dir, strings.ReplaceAll(e.t.Name(), "/", "_")+"-"+name+".log")}
	logFile, err := os.Create(c.logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	c.cmd = exec.Command(tailorBin, "controller", "--kubeconfig", e.cluster.Kubeconfig,
		"--leader-elect="+strconv.FormatBool(leaderElect), "--leader-election-namespace", "kube-system",
		"--metrics-bind-address", addr, "--health-probe-bind-address", health,
		"--disruption-interval", "1s", "--consolidation-validation-delay", "2s", "--replacement-timeout", "2m")
	c.cmd.Env = append(os.Environ(), extraEnv...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait()
		_ = logFile.Close()
		close(c.exited)
	}()
	e.mu.Lock()
	e.ctrls = append(e.ctrls, c)
	e.mu.Unlock()
	return c
}

func (c *controller) pid() int { return c.cmd.Process.Pid }

// ready reports whether the controller's caches are synced (its /readyz).
func (c *controller) ready() bool {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(c.readyURL)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (c *controller) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL: no deferred function, no lease release.
func (c *controller) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop asks the process to end (SIGTERM) and kills it after 30s.
func (c *controller) stop() {
	if !c.running() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.kill()
	}
}

func (c *controller) logTail(t *testing.T, n int) {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	t.Logf("--- end of controller %s's log (%s; TAILOR_RELIABILITY_LOGS=DIR keeps it) ---\n%s", c.name, c.logPath, data)
}

// metrics reads the controller's Prometheus metrics.
func (c *controller) metrics() (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(c.metricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var parser expfmt.TextParser
	return parser.TextToMetricFamilies(resp.Body)
}

// sum adds up a family's counters and gauges whose labels include match.
func sum(families map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		ok := true
		for k, v := range match {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

// byLabel sums a counter family by one label.
func byLabel(families map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// rssMiB is a process's resident memory (VmRSS), or -1 once it is gone.
func rssMiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	return -1
}

// formatCounts renders a map as "k1 v1, k2 v2" in key order.
func formatCounts[V int | float64 | string](m map[string]V) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
