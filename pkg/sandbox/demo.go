package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/examples"
	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
)

// Demo runs the seed example (examples/seed/inflate.yaml) on a sandbox: its
// Deployment of 10 replicas of 1 cpu and 1Gi goes from pending to running on nodes
// Tailor launches, then scales to zero.
// It shows the cluster as it changes: plain lines, or a redrawn view on a terminal.
func Demo(ctx context.Context, kubeconfig string, out io.Writer, tty bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := newClient(cfg)
	if err != nil {
		return err
	}
	d, err := seedDeployment()
	if err != nil {
		return err
	}
	want := int(*d.Spec.Replicas)
	view := &viewer{out: out, tty: tty}
	view.say(fmt.Sprintf("demo: applying the seed example's Deployment %s (examples/seed/inflate.yaml): %s", d.Name, describeWorkload(d)))
	start := time.Now()
	if err := kube.Create(ctx, d); err != nil {
		return fmt.Errorf("creating the Deployment %s: %w", d.Name, err)
	}
	var peak snapshot
	err = watch(ctx, 3*time.Minute, func() (bool, error) {
		s, err := look(ctx, kube, d.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		view.show(time.Since(start), s)
		peak = s
		return s.running == want, nil
	})
	if err != nil {
		return err
	}
	upIn := time.Since(start)
	view.say(fmt.Sprintf("demo: all %d pods running after %s", want, upIn.Round(100*time.Millisecond)))

	view.say(fmt.Sprintf("demo: scaling %s to 0", d.Name))
	scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
	if err := kube.Patch(ctx, d, scale); err != nil {
		return fmt.Errorf("scaling the Deployment: %w", err)
	}
	downStart := time.Now()
	var after snapshot
	err = watch(ctx, time.Minute, func() (bool, error) {
		s, err := look(ctx, kube, d.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		view.show(time.Since(start), s)
		after = s
		return s.running+s.pending == 0, nil
	})
	if err != nil {
		return err
	}
	view.say(fmt.Sprintf("demo: pods gone after %s; empty nodes go once the NodePool's consolidateAfter (30s) has passed", time.Since(downStart).Round(100*time.Millisecond)))
	err = watch(ctx, 4*time.Minute, func() (bool, error) {
		s, err := look(ctx, kube, d.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		view.show(time.Since(start), s)
		after = s
		return len(s.nodes) == 0 && s.instances == 0, nil
	})
	if err != nil {
		return err
	}
	downIn := time.Since(downStart)
	view.say(fmt.Sprintf("demo: all nodes removed after %s", downIn.Round(100*time.Millisecond)))
	fmt.Fprintln(out)
	fmt.Fprintln(out, "SUMMARY")
	fmt.Fprintf(out, "  %d pending pods running in %s on %d new nodes: %s\n", want, upIn.Round(100*time.Millisecond), len(peak.nodes), peak.describeNodes())
	fmt.Fprintf(out, "  price at peak: $%.4f/hour\n", peak.price)
	fmt.Fprintf(out, "  after scaling to zero: every node removed in %s, price back to $%.4f/hour\n", downIn.Round(100*time.Millisecond), after.price)
	return client.IgnoreNotFound(kube.Delete(ctx, d))
}

// seedDeployment reads the Deployment of the seed example; the sandbox already has
// the example's NodePool (its own default NodePool, with consolidation on).
func seedDeployment() (*appsv1.Deployment, error) {
	objs, err := documents(examples.Seed)
	if err != nil {
		return nil, fmt.Errorf("reading examples/seed/inflate.yaml: %w", err)
	}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
			return nil, fmt.Errorf("reading examples/seed/inflate.yaml: %w", err)
		}
		if d.Namespace == "" {
			d.Namespace = "default"
		}
		if d.Spec.Replicas == nil {
			d.Spec.Replicas = ptr(int32(1))
		}
		return d, nil
	}
	return nil, errors.New("examples/seed/inflate.yaml has no Deployment")
}

// describeWorkload says what a Deployment asks for: "10 replicas of 1 cpu and 1Gi".
func describeWorkload(d *appsv1.Deployment) string {
	requests := corev1.ResourceList{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for name, q := range c.Resources.Requests {
			sum := requests[name]
			sum.Add(q)
			requests[name] = sum
		}
	}
	cpu, mem := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	return fmt.Sprintf("%d replicas of %s cpu and %s", *d.Spec.Replicas, cpu.String(), mem.String())
}

func ptr[T any](v T) *T { return &v }

func watch(ctx context.Context, timeout time.Duration, step func() (bool, error)) error {
	deadline := time.After(timeout)
	for {
		done, err := step()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not done after %s", timeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// snapshot is what the demo shows at one moment.
type snapshot struct {
	pending, running int
	claims           map[string]int // by state
	nodes            []string       // Tailor's Nodes: "type zone capacity-type"
	instances        int            // the cloud's, which the price is for
	price            float64
}

// look reads the pods of the workload, the NodeClaims, the Nodes they became and
// the cloud's instances, whose prices add up to what the cluster costs.
func look(ctx context.Context, kube client.Client, workload map[string]string) (snapshot, error) {
	s := snapshot{claims: map[string]int{}}
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.MatchingLabels(workload)); err != nil {
		return s, err
	}
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodRunning:
			s.running++
		default:
			s.pending++
		}
	}
	claims := &v1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		return s, err
	}
	claimOf := map[string]*v1.NodeClaim{}
	for i := range claims.Items {
		if id := claims.Items[i].Status.ProviderID; id != "" {
			claimOf[id] = &claims.Items[i]
		}
	}
	for _, nc := range claims.Items {
		state := "Launching"
		for _, c := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeReady} {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, c) {
				state = c
			}
		}
		if nc.DeletionTimestamp != nil {
			state = "Terminating"
		}
		s.claims[state]++
		// On AWS a claim lives as long as its instance (its finalizer waits for
		// EC2 to say terminated); the fake sells at the embedded catalog's prices.
		if ref := nc.Spec.NodeClassRef; ref != nil && ref.Kind == "EC2NodeClass" && nc.Status.ProviderID != "" {
			s.instances++
			s.price += awsPrice(nc.Labels)
		}
	}
	instances := &v1alpha1.SimInstanceList{}
	if err := kube.List(ctx, instances); err != nil {
		return s, err
	}
	for _, inst := range instances.Items {
		s.instances++
		if p, err := strconv.ParseFloat(inst.Spec.Price, 64); err == nil {
			s.price += p
		}
	}
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}); err != nil {
		return s, err
	}
	for i := range nodes.Items {
		s.nodes = append(s.nodes, describeNode(&nodes.Items[i], claimOf[nodes.Items[i].Spec.ProviderID]))
	}
	slices.Sort(s.nodes)
	return s, nil
}

// describeNode is "type zone capacity-type" for a Node. A Node that has not
// registered yet may lack the labels its claim got at launch (an AWS instance's
// kubelet starts with the labels known before the launch chose spot or
// on-demand): they come from its claim then, or read "unknown", never blank.
func describeNode(n *corev1.Node, claim *v1.NodeClaim) string {
	var fields []string
	for _, key := range []string{v1.LabelInstanceType, v1.LabelZone, v1.CapacityTypeLabelKey} {
		v := n.Labels[key]
		if v == "" && claim != nil {
			v = claim.Labels[key]
		}
		if v == "" {
			v = "unknown"
		}
		fields = append(fields, v)
	}
	return strings.Join(fields, " ")
}

var fallbackPrices = sync.OnceValues(func() (awscloud.Prices, error) { return awscloud.FallbackPrices("us-east-1") })

// awsPrice is the hourly price of the offering a claim's labels name.
func awsPrice(labels map[string]string) float64 {
	prices, err := fallbackPrices()
	if err != nil {
		return 0
	}
	if labels[v1.CapacityTypeLabelKey] == v1.CapacityTypeSpot {
		return prices.Spot[labels[v1.LabelInstanceType]][labels[v1.LabelZone]]
	}
	return prices.OnDemand[labels[v1.LabelInstanceType]]
}

func (s snapshot) describeNodes() string {
	count := map[string]int{}
	for _, n := range s.nodes {
		count[n]++
	}
	var parts []string
	for n, c := range count {
		parts = append(parts, fmt.Sprintf("%d× %s", c, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (s snapshot) claimStates() string {
	var parts []string
	for _, st := range []string{"Launching", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeReady, "Terminating"} {
		if n := s.claims[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(st)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// viewer prints plain lines when the state changes, or redraws a view on a terminal.
type viewer struct {
	out  io.Writer
	tty  bool
	last string
	log  []string
}

func (v *viewer) say(line string) {
	v.log = append(v.log, line)
	if !v.tty {
		fmt.Fprintln(v.out, line)
	}
}

func (v *viewer) show(elapsed time.Duration, s snapshot) {
	line := fmt.Sprintf("pods: %d pending, %d running | nodeclaims: %s | nodes: %d (%s) | $%.4f/hour",
		s.pending, s.running, s.claimStates(), len(s.nodes), s.describeNodes(), s.price)
	if !v.tty {
		if line != v.last {
			fmt.Fprintf(v.out, "[%5.1fs] %s\n", elapsed.Seconds(), line)
		}
		v.last = line
		return
	}
	fmt.Fprint(v.out, "\033[H\033[2J")
	for _, l := range v.log {
		fmt.Fprintln(v.out, l)
	}
	fmt.Fprintf(v.out, "\nt+%5.1fs\n  pods        %d pending, %d running\n  nodeclaims  %s\n  nodes       %d\n", elapsed.Seconds(), s.pending, s.running, s.claimStates(), len(s.nodes))
	for _, n := range s.nodes {
		fmt.Fprintf(v.out, "              %s\n", n)
	}
	fmt.Fprintf(v.out, "  price       $%.4f/hour\n", s.price)
}
