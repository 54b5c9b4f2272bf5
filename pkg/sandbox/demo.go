package sandbox

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/operator"
)

// Demo runs the seed example on a sandbox: a Deployment of 10 replicas of 1 cpu and
// 1Gi goes from pending to running on nodes Tailor launches, then scales to zero.
// It shows the cluster as it changes: plain lines, or a redrawn view on a terminal.
func Demo(ctx context.Context, kubeconfig string, out io.Writer, tty bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := operator.Scheme()
	if err != nil {
		return err
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	replicas := int32(10)
	labels := map[string]string{"app": "inflate"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "inflate", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	view := &viewer{out: out, tty: tty}
	view.say("demo: creating Deployment inflate: 10 replicas of 1 cpu and 1Gi")
	start := time.Now()
	if err := kube.Create(ctx, d); err != nil {
		return fmt.Errorf("creating the Deployment: %w", err)
	}
	var peak snapshot
	err = watch(ctx, 3*time.Minute, func() (bool, error) {
		s, err := look(ctx, kube)
		if err != nil {
			return false, err
		}
		view.show(time.Since(start), s)
		peak = s
		return s.running == 10, nil
	})
	if err != nil {
		return err
	}
	upIn := time.Since(start)
	view.say(fmt.Sprintf("demo: all 10 pods running after %s", upIn.Round(100*time.Millisecond)))

	view.say("demo: scaling inflate to 0")
	scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
	if err := kube.Patch(ctx, d, scale); err != nil {
		return fmt.Errorf("scaling the Deployment: %w", err)
	}
	downStart := time.Now()
	var after snapshot
	err = watch(ctx, time.Minute, func() (bool, error) {
		s, err := look(ctx, kube)
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
		s, err := look(ctx, kube)
		if err != nil {
			return false, err
		}
		view.show(time.Since(start), s)
		after = s
		return len(s.nodes) == 0, nil
	})
	if err != nil {
		return err
	}
	downIn := time.Since(downStart)
	view.say(fmt.Sprintf("demo: all nodes removed after %s", downIn.Round(100*time.Millisecond)))
	fmt.Fprintln(out)
	fmt.Fprintln(out, "SUMMARY")
	fmt.Fprintf(out, "  10 pending pods running in %s on %d new nodes: %s\n", upIn.Round(100*time.Millisecond), len(peak.nodes), peak.describeNodes())
	fmt.Fprintf(out, "  price at peak: $%.4f/hour\n", peak.price)
	fmt.Fprintf(out, "  after scaling to zero: every node removed in %s, price back to $%.4f/hour\n", downIn.Round(100*time.Millisecond), after.price)
	return client.IgnoreNotFound(kube.Delete(ctx, d))
}

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
	nodes            []string       // "type zone capacity-type"
	price            float64
}

func look(ctx context.Context, kube client.Client) (snapshot, error) {
	s := snapshot{claims: map[string]int{}}
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.MatchingLabels{"app": "inflate"}); err != nil {
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
	}
	instances := &v1alpha1.SimInstanceList{}
	if err := kube.List(ctx, instances); err != nil {
		return s, err
	}
	for _, inst := range instances.Items {
		s.nodes = append(s.nodes, fmt.Sprintf("%s %s %s", inst.Spec.InstanceType, inst.Spec.Zone, inst.Spec.CapacityType))
		if p, err := strconv.ParseFloat(inst.Spec.Price, 64); err == nil {
			s.price += p
		}
	}
	slices.Sort(s.nodes)
	return s, nil
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
