package static

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/controllers/provisioning"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

var kube client.Client

// cloud is the provider the controller serves: it launches from tailor.sh/SimNodeClass.
var cloud = fake.New(schedtest.SyntheticTypes(1))

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

// staticPool creates a static NodePool whose template labels nodes tier=name, and
// marks it Ready as the NodePool controller would; edits change it before it is
// created.
func staticPool(t *testing.T, name string, replicas int64, limits v1.Limits, edits ...func(*v1.NodePool)) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Replicas = &replicas
	np.Spec.Limits = limits
	np.Spec.Template.Labels = map[string]string{"tier": name}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}
	for _, edit := range edits {
		edit(np)
	}
	if err := kube.Create(t.Context(), np); err != nil {
		t.Fatalf("creating NodePool %s: %v", name, err)
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready",
		ObservedGeneration: np.Generation, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		claims := &v1.NodeClaimList{}
		_ = kube.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: name})
		for i := range claims.Items {
			nc := &claims.Items[i]
			patch := client.MergeFrom(nc.DeepCopy())
			nc.Finalizers = nil
			_ = kube.Patch(ctx, nc, patch)
		}
		_ = kube.DeleteAllOf(ctx, &v1.NodeClaim{}, client.MatchingLabels{v1.NodePoolLabelKey: name})
		_ = kube.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1.NodePoolLabelKey: name})
		_ = kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.GracePeriodSeconds(0))
		_ = kube.Delete(ctx, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return np
}

func reconcilePool(t *testing.T, c *Controller, name string) {
	t.Helper()
	if _, err := c.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Fatalf("reconciling NodePool %s: %v", name, err)
	}
}

// claimsOf lists the pool's claims: those staying, and the names of those deleting.
func claimsOf(t *testing.T, pool string) (staying []v1.NodeClaim, deleting []string) {
	t.Helper()
	list := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), list, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range list.Items {
		if nc.DeletionTimestamp != nil {
			deleting = append(deleting, nc.Name)
		} else {
			staying = append(staying, nc)
		}
	}
	slices.Sort(deleting)
	return staying, deleting
}

// launch does what the lifecycle controller and the kubelet would: the claim's
// node exists, registered and initialized, with pods bound to it.
func launch(t *testing.T, nc *v1.NodeClaim, pods int) {
	t.Helper()
	ctx := t.Context()
	providerID := "sim:///" + nc.Name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: map[string]string{v1.NodePoolLabelKey: nc.Labels[v1.NodePoolLabelKey]}},
		Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = providerID, node.Name
	for _, kind := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: kind,
			LastTransitionTime: metav1.Now()})
	}
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", nc.Name, i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "app",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// A static NodePool of 3 gets 3 NodeClaims from its template; pending pods that
// only it could take get no node from it; its nodes filling with pods changes
// nothing; scaled to 1 it deletes the 2 claims whose nodes hold fewest pods.
func TestStaticNodePool(t *testing.T) {
	ctx := t.Context()
	rec := record.NewFakeRecorder(100)
	c := NewController(kube, cloud, rec)
	staticPool(t, "static", 3, nil)

	reconcilePool(t, c, "static")
	claims, _ := claimsOf(t, "static")
	if len(claims) != 3 {
		t.Fatalf("replicas 3: %d NodeClaims, want 3", len(claims))
	}
	for _, nc := range claims {
		if nc.Labels["tier"] != "static" || !slices.Contains(nc.Finalizers, v1.TerminationFinalizer) {
			t.Errorf("NodeClaim %s: labels %v, finalizers %v; want the template's label and the termination finalizer", nc.Name, nc.Labels, nc.Finalizers)
		}
		if !slices.ContainsFunc(nc.Spec.Requirements, func(r v1.NodeSelectorRequirementWithMinValues) bool {
			return r.Key == v1.NodePoolLabelKey && slices.Equal(r.Values, []string{"static"})
		}) {
			t.Errorf("NodeClaim %s: requirements %v lack %s In [static]", nc.Name, nc.Spec.Requirements, v1.NodePoolLabelKey)
		}
	}
	reconcilePool(t, c, "static")
	if again, _ := claimsOf(t, "static"); len(again) != 3 {
		t.Fatalf("a second reconcile at replicas: %d NodeClaims, want still 3", len(again))
	}

	// A pod only the static pool's nodes would take is not provisioned for.
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": "static"}, Containers: []corev1.Container{{Name: "app", Image: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	if err := kube.Create(ctx, pending); err != nil {
		t.Fatal(err)
	}
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	if err := kube.Status().Update(ctx, pending); err != nil {
		t.Fatal(err)
	}
	types := schedtest.SyntheticTypes(4)
	prov := provisioning.NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		rec, clocktesting.NewFakeClock(time.Now()), provisioning.Options{})
	if err := prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := claimsOf(t, "static"); len(after) != 3 {
		t.Fatalf("after provisioning a pending pod: %d NodeClaims, want the static pool's 3", len(after))
	}
	if !slices.ContainsFunc(events(rec), func(e string) bool {
		return strings.Contains(e, "FailedScheduling") && strings.Contains(e, state.StaticUnavailable)
	}) {
		t.Errorf("the pending pod got no FailedScheduling event naming %q", state.StaticUnavailable)
	}

	// The nodes come up and fill with pods: the count stays.
	podsOn := map[string]int{claims[0].Name: 3, claims[1].Name: 0, claims[2].Name: 1}
	for i := range claims {
		launch(t, &claims[i], podsOn[claims[i].Name])
	}
	reconcilePool(t, c, "static")
	if after, deleting := claimsOf(t, "static"); len(after) != 3 || len(deleting) != 0 {
		t.Fatalf("with pods on its nodes: %d NodeClaims and %v deleting, want 3 and none", len(after), deleting)
	}

	// Scaled to 1: the two claims whose nodes hold fewest pods go.
	np := &v1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "static"}, np); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Replicas = ptr(int64(1))
	if err := kube.Patch(ctx, np, patch); err != nil {
		t.Fatal(err)
	}
	reconcilePool(t, c, "static")
	staying, deleting := claimsOf(t, "static")
	want := []string{claims[1].Name, claims[2].Name}
	slices.Sort(want)
	if len(staying) != 1 || staying[0].Name != claims[0].Name || !slices.Equal(deleting, want) {
		t.Fatalf("replicas 1: staying %d (want %s), deleting %v (want %v)", len(staying), claims[0].Name, deleting, want)
	}
	// The claims being deleted drain; no new claim replaces them.
	reconcilePool(t, c, "static")
	if staying, _ := claimsOf(t, "static"); len(staying) != 1 {
		t.Fatalf("replicas 1 while 2 claims drain: %d staying, want 1", len(staying))
	}
}

// limits.nodes bounds the count: claims past it are held back, with an event.
func TestStaticNodePoolWithinNodeLimit(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	c := NewController(kube, cloud, rec)
	staticPool(t, "limited", 4, v1.Limits{"nodes": resource.MustParse("2")})
	reconcilePool(t, c, "limited")
	if claims, _ := claimsOf(t, "limited"); len(claims) != 2 {
		t.Fatalf("replicas 4, limits.nodes 2: %d NodeClaims, want 2", len(claims))
	}
	if !slices.ContainsFunc(events(rec), func(e string) bool { return strings.Contains(e, "LimitReached") && strings.Contains(e, "holds back 2") }) {
		t.Errorf("no LimitReached event saying 2 claims are held back; events %v", events(rec))
	}
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func ptr[T any](v T) *T { return &v }
