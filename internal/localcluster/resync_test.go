package localcluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

func TestStalledOnKwok(t *testing.T) {
	now := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pod := func(name, node string, created time.Duration, edit func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created)},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if edit != nil {
			edit(&p)
		}
		return p
	}
	scheduled := func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: ago(d)})
		}
	}
	pods := []corev1.Pod{
		pod("bound-long-ago", "kwok", time.Minute, scheduled(10*time.Second)),
		pod("bound-just-now", "kwok", time.Minute, scheduled(time.Second)),
		pod("created-bound", "kwok", 6*time.Second, nil),
		pod("created-bound-just-now", "kwok", time.Second, nil),
		pod("on-a-real-node", "kubelet", time.Minute, scheduled(time.Minute)),
		pod("running", "kwok", time.Minute, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }),
		pod("ready", "kwok", time.Minute, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}),
		pod("deleting", "kwok", time.Minute, func(p *corev1.Pod) { d := ago(time.Second); p.DeletionTimestamp = &d }),
		pod("touched-just-now", "kwok", time.Minute, func(p *corev1.Pod) {
			p.Annotations = map[string]string{ResyncAnnotation: now.Add(-time.Second).Format(time.RFC3339)}
		}),
		pod("touched-long-ago", "kwok", time.Minute, func(p *corev1.Pod) {
			p.Annotations = map[string]string{ResyncAnnotation: now.Add(-10 * time.Second).Format(time.RFC3339)}
		}),
	}
	var got []string
	for _, p := range stalledOnKwok(pods, map[string]bool{"kwok": true, "kubelet": false}, now, 5*time.Second) {
		got = append(got, p.Name)
	}
	want := []string{"bound-long-ago", "created-bound", "touched-long-ago"}
	if !slices.Equal(got, want) {
		t.Errorf("stalled pods %v, want %v", got, want)
	}
}

// Against a real API server (no kwok, so nothing runs the pods): the field
// selectors are accepted, and only the pod bound to a kwok node is touched.
func TestResyncTouchesPodsStalledOnKwokNodes(t *testing.T) {
	cluster, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	kube := kubernetes.NewForConfigOrDie(cluster.Config)
	ctx := t.Context()
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node", Annotations: map[string]string{KwokNodeAnnotation: "fake"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "real-node"}},
	} {
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No controller-manager makes the namespace's ServiceAccount, which pods need.
	waitFor(t, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
		_, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	for name, node := range map[string]string{"on-kwok": "kwok-node", "on-real": "real-node", "unbound": ""} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
		if _, err := kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The list reads the watch cache, which may lag the creates by a moment.
	waitFor(t, "the pod on the kwok node touched", func(ctx context.Context) (bool, error) {
		if err := resyncOnce(ctx, kube, 0); err != nil {
			return false, err
		}
		p, err := kube.CoreV1().Pods("default").Get(ctx, "on-kwok", metav1.GetOptions{})
		return err == nil && p.Annotations[ResyncAnnotation] != "", err
	})
	for _, name := range []string{"on-real", "unbound"} {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, touched := p.Annotations[ResyncAnnotation]; touched {
			t.Errorf("pod %s touched: %v", name, p.Annotations)
		}
	}
}

// Pods bound to their node as it is created, as a DaemonSet's are: kwok drops
// many of them (without the resync this failed in 3 runs of 3, 11 of 20 pods
// left Pending in one), and the resync has every one running.
func TestPodsBoundAsTheirKwokNodeAppearsRun(t *testing.T) {
	cluster, err := Start(t.Context(), Options{Kwok: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	kube := kubernetes.NewForConfigOrDie(cluster.Config)
	ctx := t.Context()
	waitFor(t, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
		_, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	const nodes = 20
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{KwokNodeAnnotation: "fake"}}}
		node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Allocatable = node.Status.Capacity
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "daemon-" + name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
		if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pending []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pending = nil
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				pending = append(pending, p.Name)
			}
		}
		return len(pods.Items) == nodes && len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods not running within a minute: %v", pending)
	}
}
