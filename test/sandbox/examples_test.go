package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/operator"
	"github.com/nodetailor/tailor/pkg/sandbox"
)

// exampleRejections are the documents of examples/aws-karpenter the API refuses, as
// Karpenter's CRDs do (see its README.md): kind and the error they must still get.
var exampleRejections = map[string]struct{ kind, message string }{
	"placement-group.yaml":         {"EC2NodeClass", `unknown field "spec.placementGroup"`},
	"max-node-lifetime.yaml":       {"NodePool", `unknown field "spec.template.spec.terminationGracePeirod"`},
	"windows-custom-userdata.yaml": {"NodePool", "spec.template.spec.nodeClassRef.group: Invalid value"},
}

// exampleNeverJoins are examples whose nodes would never join on a real account,
// so none must join here either: the fake's kubelets boot through the referee
// (hack/eksnode). custom-family-with-alias boots Bottlerocket (alias
// bottlerocket@latest) with a MIME shell script calling /etc/eks/bootstrap.sh,
// which Bottlerocket neither has nor reads: its user data must be TOML.
var exampleNeverJoins = map[string]bool{"custom-family-with-alias.yaml": true}

// exampleClusterNames are what the examples tell a user to replace with the
// cluster's name.
var exampleClusterNames = []string{"${CLUSTER_NAME}", "happy-bluegrass-pumpkin", "my-cluster"}

// poll is how often the test looks; the controller and kwok act within seconds.
const poll = 500 * time.Millisecond

// example is one file: the objects the API accepted from it, and NodePools the
// test adds to launch from an EC2NodeClass whose NodePool the API refused.
type example struct {
	file    string
	docs    []*unstructured.Unstructured
	pools   []*v1.NodePool
	classes []*awsv1.EC2NodeClass
	// orphans are pools whose EC2NodeClass the API refused: they must say so.
	orphans []*v1.NodePool
}

// Issue 13: Karpenter's public AWS examples apply unchanged on `tailor sandbox up
// --cloud aws` (after the cluster-name substitutions their comments ask for),
// their EC2NodeClasses and NodePools become Ready, and each NodePool launches an
// EC2 instance of its EC2NodeClass for a pod that can only run there.
func TestKarpenterExamplesOnSandbox(t *testing.T) {
	start := time.Now()
	tailor := testenv.BuildTailor(t)
	dir := filepath.Join(t.TempDir(), "sandbox")
	t.Cleanup(func() { _ = exec.Command(tailor, "sandbox", "down", "--dir", dir).Run() })
	if out, err := exec.Command(tailor, "sandbox", "up", "--cloud", "aws", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("tailor sandbox up --cloud aws: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range []string{"tailor.log", "fake-aws.log"} {
				if data, err := os.ReadFile(filepath.Join(dir, log)); err == nil {
					t.Logf("%s (tail):\n%s", log, tail(string(data), 40))
				}
			}
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox up in %s", time.Since(start).Round(time.Second))

	// The sandbox's own default NodePool and EC2NodeClass share the examples' names.
	removeAll(t, kube, []client.Object{
		&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	})

	examples := readExamples(t, filepath.Join("..", "..", "examples", "aws-karpenter"))
	for file := range exampleRejections {
		if !slices.ContainsFunc(examples, func(ex *example) bool { return ex.file == file }) {
			t.Errorf("exampleRejections names %s, which is not among the examples", file)
		}
	}
	for i, group := range groupExamples(examples) {
		var files []string
		for _, ex := range group {
			files = append(files, strings.TrimSuffix(ex.file, ".yaml"))
		}
		t.Run(fmt.Sprintf("%02d:%s", i, strings.Join(files, ",")), func(t *testing.T) {
			groupStart := time.Now()
			runGroup(t, kube, group)
			t.Logf("took %s", time.Since(groupStart).Round(100*time.Millisecond))
		})
	}
	t.Logf("TestKarpenterExamplesOnSandbox took %s", time.Since(start).Round(time.Second))
}

// runGroup applies a group's files, checks what each must do, and removes them.
func runGroup(t *testing.T, kube client.Client, group []*example) {
	var created []client.Object
	defer func() { removeAll(t, kube, created) }()
	for _, ex := range group {
		apply(t, kube, ex, &created)
	}
	// Pools go before their classes when removed.
	slices.SortStableFunc(created, func(a, b client.Object) int { return kindOrder(a) - kindOrder(b) })
	var ready []check
	for _, ex := range group {
		for _, nc := range ex.classes {
			ready = append(ready, readyCheck(kube, nc, func() []metav1.Condition { return nc.Status.Conditions }))
		}
		for _, np := range ex.pools {
			ready = append(ready, readyCheck(kube, np, func() []metav1.Condition { return np.Status.Conditions }))
		}
		for _, np := range ex.orphans {
			ready = append(ready, orphanCheck(kube, np))
		}
	}
	start := time.Now()
	if !waitAll(t, "Ready", time.Minute, ready) {
		return
	}
	t.Logf("Ready after %s", time.Since(start).Round(100*time.Millisecond))
	var running []check
	for _, ex := range group {
		for _, np := range ex.pools {
			pod := podFor(ex, np)
			if err := kube.Create(t.Context(), pod); err != nil {
				t.Fatalf("%s: creating pod %s: %v", ex.file, pod.Name, err)
			}
			created = append([]client.Object{pod}, created...)
			if exampleNeverJoins[ex.file] {
				running = append(running, neverJoinsCheck(kube, ex.file, np))
				continue
			}
			running = append(running, runningCheck(kube, ex.file, pod, np))
		}
	}
	if waitAll(t, "running", 2*time.Minute, running) {
		t.Logf("%d pods running after %s", len(running), time.Since(start).Round(100*time.Millisecond))
	}
}

// podEvents lists the events of a pod, oldest first, as "time source reason:
// message".
func podEvents(ctx context.Context, kube client.Client, pod *corev1.Pod) string {
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace(pod.Namespace), client.MatchingFields{"involvedObject.name": pod.Name}); err != nil {
		return err.Error()
	}
	when := func(e corev1.Event) time.Time {
		if !e.LastTimestamp.IsZero() {
			return e.LastTimestamp.Time
		}
		return e.EventTime.Time
	}
	slices.SortFunc(events.Items, func(a, b corev1.Event) int { return when(a).Compare(when(b)) })
	var out []string
	for _, e := range events.Items {
		source := e.Source.Component
		if source == "" {
			source = e.ReportingController
		}
		out = append(out, fmt.Sprintf("%s %s %s: %s", when(e).Format(time.TimeOnly), source, e.Reason, e.Message))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// check is one thing a group waits for: done, or what it is at.
type check struct {
	name string
	done func(context.Context) (bool, string)
}

// waitAll polls the checks together until all are done or the timeout, and
// fails with the state of those that are not.
func waitAll(t *testing.T, what string, timeout time.Duration, checks []check) bool {
	t.Helper()
	state := make([]string, len(checks))
	done := make([]bool, len(checks))
	for deadline := time.Now().Add(timeout); ; {
		all := true
		for i, c := range checks {
			if !done[i] {
				done[i], state[i] = c.done(t.Context())
				all = all && done[i]
			}
		}
		if all || time.Now().After(deadline) {
			break
		}
		time.Sleep(poll)
	}
	ok := true
	for i, c := range checks {
		if !done[i] {
			t.Errorf("%s: not %s after %s: %s", c.name, what, timeout, state[i])
			ok = false
		}
	}
	return ok
}

// readyCheck is the object's Ready condition True.
func readyCheck(kube client.Client, obj client.Object, conditions func() []metav1.Condition) check {
	return check{name: fmt.Sprintf("%T %s", obj, obj.GetName()), done: func(ctx context.Context) (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(conditions(), "Ready"), fmt.Sprintf("%v", conditions())
	}}
}

// orphanCheck is a pool whose EC2NodeClass the API refused reporting
// NodeClassReady=False, and not Ready.
func orphanCheck(kube client.Client, np *v1.NodePool) check {
	return check{name: "NodePool " + np.Name + " (its EC2NodeClass refused)", done: func(ctx context.Context) (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
			return false, err.Error()
		}
		c := np.Status.Conditions
		return meta.IsStatusConditionFalse(c, v1.ConditionTypeNodeClassReady) && meta.IsStatusConditionFalse(c, v1.ConditionTypeReady), fmt.Sprintf("%v", c)
	}}
}

// runningCheck is the pod running on an EC2 instance of the pool whose NodeClaim
// names the pool's EC2NodeClass.
// neverJoinsCheck is done once a NodeClaim of the pool has been launched for 15 s
// (the sandbox's kubelets register within 2) and still has no Node.
func neverJoinsCheck(kube client.Client, file string, np *v1.NodePool) check {
	return check{name: file + ": NodePool " + np.Name, done: func(ctx context.Context) (bool, string) {
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}); err != nil {
			return false, err.Error()
		}
		for _, c := range claims.Items {
			if c.Status.NodeName != "" || meta.IsStatusConditionTrue(c.Status.Conditions, v1.ConditionTypeRegistered) {
				return false, fmt.Sprintf("NodeClaim %s registered node %q, but this example's node would never join", c.Name, c.Status.NodeName)
			}
			if l := meta.FindStatusCondition(c.Status.Conditions, v1.ConditionTypeLaunched); l != nil && l.Status == metav1.ConditionTrue &&
				time.Since(l.LastTransitionTime.Time) > 15*time.Second {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no NodeClaim of %s launched 15 s ago yet (%d claims)", np.Name, len(claims.Items))
	}}
}

func runningCheck(kube client.Client, file string, pod *corev1.Pod, np *v1.NodePool) check {
	class := np.Spec.Template.Spec.NodeClassRef.Name
	return check{name: file + ": pod " + pod.Name, done: func(ctx context.Context) (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			// A pod gone (evicted, or collected with its node): its events say how.
			return false, fmt.Sprintf("%v; its events: %s", err, podEvents(ctx, kube, pod))
		}
		if pod.Status.Phase != corev1.PodRunning {
			claims := &v1.NodeClaimList{}
			_ = kube.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: np.Name})
			var states []string
			for _, c := range claims.Items {
				states = append(states, fmt.Sprintf("%s %v", c.Name, c.Status.Conditions))
			}
			return false, fmt.Sprintf("pod %s on %q %v; NodeClaims of %s: %v", pod.Status.Phase, pod.Spec.NodeName, pod.Status.Conditions, np.Name, states)
		}
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
			return false, err.Error()
		}
		if !strings.HasPrefix(node.Spec.ProviderID, "aws:///") || node.Labels[v1.NodePoolLabelKey] != np.Name {
			return false, fmt.Sprintf("node %s (provider ID %q, nodepool %q) is not an EC2 instance of NodePool %s", node.Name, node.Spec.ProviderID, node.Labels[v1.NodePoolLabelKey], np.Name)
		}
		if want := pod.Spec.NodeSelector[corev1.LabelOSStable]; want != "" && (node.Labels[corev1.LabelOSStable] != want || node.Status.NodeInfo.OperatingSystem != want) {
			return false, fmt.Sprintf("node %s runs %q (label %q), want %q", node.Name, node.Status.NodeInfo.OperatingSystem, node.Labels[corev1.LabelOSStable], want)
		}
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(claims.Items, func(c v1.NodeClaim) bool { return c.Status.NodeName == node.Name })
		if i < 0 {
			return false, "no NodeClaim for node " + node.Name
		}
		c := claims.Items[i]
		if ref := c.Spec.NodeClassRef; ref == nil || ref.Kind != "EC2NodeClass" || ref.Name != class || c.Status.ProviderID != node.Spec.ProviderID {
			return false, fmt.Sprintf("NodeClaim %s of node %s references %+v with provider ID %q, want EC2NodeClass %s and %q",
				c.Name, node.Name, ref, c.Status.ProviderID, class, node.Spec.ProviderID)
		}
		return true, ""
	}}
}

// readExamples reads every example file with the cluster-name placeholders
// replaced by the sandbox's cluster.
func readExamples(t *testing.T, dir string) []*example {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	var out []*example
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, placeholder := range exampleClusterNames {
			text = strings.ReplaceAll(text, placeholder, sandbox.AWSCluster)
		}
		ex := &example{file: filepath.Base(path)}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", ex.file, err)
			}
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatalf("%s: %v", ex.file, err)
			}
			if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
				continue // only comments
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s: %v", ex.file, err)
			}
			ex.docs = append(ex.docs, u)
		}
		out = append(out, ex)
	}
	return out
}

// groupExamples puts files whose objects have different names in the same group,
// so that the sandbox runs them at once; several files name a NodePool or an
// EC2NodeClass "default". Files that collide with the most others are placed
// first, which keeps the groups few.
func groupExamples(examples []*example) [][]*example {
	keys := map[*example]map[string]bool{}
	for _, ex := range examples {
		keys[ex] = map[string]bool{}
		for _, u := range ex.docs {
			keys[ex][u.GetKind()+"/"+u.GetName()] = true
			if u.GetKind() == "EC2NodeClass" && exampleRejections[ex.file].kind == "NodePool" {
				keys[ex]["NodePool/"+u.GetName()] = true // its probe pool
			}
		}
	}
	collisions := map[*example]int{}
	for _, a := range examples {
		for _, b := range examples {
			if a != b && overlaps(keys[a], keys[b]) {
				collisions[a]++
			}
		}
	}
	order := slices.Clone(examples)
	slices.SortStableFunc(order, func(a, b *example) int { return collisions[b] - collisions[a] })
	var groups [][]*example
	var names []map[string]bool
	for _, ex := range order {
		i := slices.IndexFunc(names, func(n map[string]bool) bool { return !overlaps(n, keys[ex]) })
		if i < 0 {
			groups, names = append(groups, nil), append(names, map[string]bool{})
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], ex)
		for k := range keys[ex] {
			names[i][k] = true
		}
	}
	return groups
}

func overlaps(a, b map[string]bool) bool {
	for k := range b {
		if a[k] {
			return true
		}
	}
	return false
}

// apply creates the file's documents with strict field validation, as kubectl
// apply does, and checks the refused document is refused as documented. An
// EC2NodeClass whose NodePool was refused gets a probe NodePool of its name, so
// that it still launches a node. What it creates goes in created as soon as it
// is, for removal even when the test stops here.
func apply(t *testing.T, kube client.Client, ex *example, created *[]client.Object) {
	t.Helper()
	rejection, rejected := exampleRejections[ex.file]
	var refusedPool bool
	for _, u := range ex.docs {
		obj := u.DeepCopy()
		err := kube.Create(t.Context(), obj, client.FieldValidation(metav1.FieldValidationStrict))
		if rejected && obj.GetKind() == rejection.kind {
			if err == nil || !strings.Contains(err.Error(), rejection.message) {
				t.Errorf("%s: %s %s: got error %v, want the documented refusal %q", ex.file, obj.GetKind(), obj.GetName(), err, rejection.message)
			}
			if err == nil {
				*created = append(*created, obj)
			}
			refusedPool = rejection.kind == "NodePool"
			continue
		}
		if err != nil {
			t.Fatalf("%s: applying %s %s: %v", ex.file, u.GetKind(), u.GetName(), err)
		}
		switch obj.GetKind() {
		case "NodePool":
			np := &v1.NodePool{}
			fromUnstructured(t, obj, np)
			if rejected && rejection.kind == "EC2NodeClass" {
				ex.orphans = append(ex.orphans, np)
			} else {
				ex.pools = append(ex.pools, np)
			}
			*created = append(*created, np)
		case "EC2NodeClass":
			nc := &awsv1.EC2NodeClass{}
			fromUnstructured(t, obj, nc)
			ex.classes = append(ex.classes, nc)
			*created = append(*created, nc)
		default:
			t.Fatalf("%s: unexpected %s %s", ex.file, obj.GetKind(), obj.GetName())
		}
	}
	if refusedPool {
		for _, nc := range ex.classes {
			np := probePool(nc)
			if err := kube.Create(t.Context(), np); err != nil {
				t.Fatalf("%s: creating probe NodePool %s: %v", ex.file, np.Name, err)
			}
			ex.pools = append(ex.pools, np)
			*created = append(*created, np)
		}
	}
}

func kindOrder(o client.Object) int {
	switch o.(type) {
	case *corev1.Pod:
		return 0
	case *v1.NodePool:
		return 1
	}
	return 2
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into client.Object) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// probePool is a NodePool of the class's OS and amd64, named after it.
func probePool(nc *awsv1.EC2NodeClass) *v1.NodePool {
	os := "linux"
	if strings.HasPrefix(nc.AMIFamily(), "Windows") {
		os = "windows"
	}
	return testobj.NodePool(nc.Name, testobj.NodeClassRef(&v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}),
		testobj.Requirement(corev1.LabelOSStable, v1.NodeSelectorOpIn, os), testobj.Requirement(corev1.LabelArchStable, v1.NodeSelectorOpIn, "amd64"))
}

// podFor is a small pod that only the pool can run: its nodepool label, its OS,
// tolerating its taints.
func podFor(ex *example, np *v1.NodePool) *corev1.Pod {
	name := strings.TrimSuffix(ex.file, ".yaml") + "-" + np.Name
	opts := []testobj.PodOption{testobj.Labels("example", name), testobj.NodeSelector(v1.NodePoolLabelKey, np.Name)}
	class := np.Spec.Template.Spec.NodeClassRef.Name
	for _, nc := range ex.classes {
		if nc.Name == class && strings.HasPrefix(nc.AMIFamily(), "Windows") {
			opts = append(opts, testobj.NodeSelector(corev1.LabelOSStable, "windows"))
		}
	}
	for _, taint := range np.Spec.Template.Spec.Taints {
		opts = append(opts, testobj.Toleration(taint.Key, taint.Value, taint.Effect))
	}
	return testobj.Pod(name, "100m", "128Mi", opts...)
}

// removeAll deletes the objects (pods first, then pools, then classes) and waits
// for them, and for every NodeClaim and EC2 Node, to be gone: the next group may
// reuse their names.
func removeAll(t *testing.T, kube client.Client, objs []client.Object) {
	t.Helper()
	ctx := context.Background() // also after a failure
	start := time.Now()
	for _, o := range objs {
		if err := kube.Delete(ctx, o, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %T %s: %v", o, o.GetName(), err)
		}
	}
	last := ""
	err := wait.PollUntilContextTimeout(ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var left []string
		for _, o := range objs {
			err := kube.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
			if err == nil {
				left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
			}
		}
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			return false, nil
		}
		for _, c := range claims.Items {
			left = append(left, "NodeClaim "+c.Name)
		}
		nodes := &corev1.NodeList{}
		if err := kube.List(ctx, nodes); err != nil {
			return false, nil
		}
		for _, n := range nodes.Items {
			if strings.HasPrefix(n.Spec.ProviderID, "aws:///") {
				left = append(left, "Node "+n.Name)
			}
		}
		last = strings.Join(left, ", ")
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("not removed after 2m: %s", last)
	}
	t.Logf("removed %d objects, their NodeClaims and Nodes in %s", len(objs), time.Since(start).Round(100*time.Millisecond))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
