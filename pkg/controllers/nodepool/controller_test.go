package nodepool

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/testenv"
)

var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

var simClass = &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: "default"}

// isolate removes the test's NodePools and claims when it ends.
func isolate(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			t.Error(err)
		}
		for i := range claims.Items {
			nc := &claims.Items[i]
			patch := client.MergeFrom(nc.DeepCopy())
			nc.Finalizers = nil
			if err := kube.Patch(ctx, nc, patch); err != nil {
				t.Error(err)
			}
		}
		for _, kind := range []client.Object{&v1.NodeClaim{}, &v1.NodePool{}, &v1alpha1.SimNodeClass{}} {
			if err := kube.DeleteAllOf(ctx, kind); err != nil {
				t.Error(err)
			}
		}
	})
}

func createPool(t *testing.T, name string, edit func(*v1.NodePool)) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = simClass
	if edit != nil {
		edit(np)
	}
	if err := kube.Create(t.Context(), np); err != nil {
		t.Fatalf("creating NodePool %s: %v", name, err)
	}
	return np
}

func reconcileAndGet(t *testing.T, c *Controller, name string) *v1.NodePool {
	t.Helper()
	if _, err := c.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Fatalf("reconciling NodePool %s: %v", name, err)
	}
	np := &v1.NodePool{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: name}, np); err != nil {
		t.Fatal(err)
	}
	return np
}

// A template whose labels or annotations no NodeClaim may carry (the NodePool's own
// schema lets them through: label keys and annotation keys; label values it
// refuses itself, as Karpenter's does) makes the NodePool not Ready, with a reason
// naming the field; a valid one with its NodeClass present is Ready.
func TestTemplateNoNodeClaimCanCarryIsNotReady(t *testing.T) {
	isolate(t)
	if err := kube.Create(t.Context(), &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	c := NewController(kube, false, &v1alpha1.SimNodeClass{})
	for _, tc := range []struct {
		name  string
		edit  func(*v1.NodePool)
		field string // in the reason; "" for Ready
	}{
		{"valid", func(np *v1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "a"} }, ""},
		{"label-key", func(np *v1.NodePool) { np.Spec.Template.Labels = map[string]string{"team name": "a"} }, "spec.template.metadata.labels"},
		{"annotation-key", func(np *v1.NodePool) { np.Spec.Template.Annotations = map[string]string{"not a key!": "x"} }, "spec.template.metadata.annotations"},
	} {
		createPool(t, tc.name, tc.edit)
		np := reconcileAndGet(t, c, tc.name)
		ready := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady)
		switch {
		case ready == nil:
			t.Errorf("%s: no Ready condition", tc.name)
		case tc.field == "" && ready.Status != metav1.ConditionTrue:
			t.Errorf("%s: Ready %s (%s: %s), want True", tc.name, ready.Status, ready.Reason, ready.Message)
		case tc.field != "" && (ready.Status != metav1.ConditionFalse || ready.Reason != "ValidationFailed" || !strings.Contains(ready.Message, tc.field)):
			t.Errorf("%s: Ready %s (%s: %s), want False, ValidationFailed, naming %s", tc.name, ready.Status, ready.Reason, ready.Message, tc.field)
		}
		if ready != nil && ready.ObservedGeneration != np.Generation {
			t.Errorf("%s: Ready for generation %d, want %d", tc.name, ready.ObservedGeneration, np.Generation)
		}
	}
}

// counting counts the NodeClaims created, dry runs included.
type counting struct {
	client.Client
	creates int
}

func (c *counting) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1.NodeClaim); ok {
		c.creates++
	}
	return c.Client.Create(ctx, obj, opts...)
}

// The API server is asked, with a dry run, whether it takes a NodeClaim from the
// template, once per generation; what it refuses, the NodePool's reason quotes.
func TestTemplateIsTriedOnTheAPIServerOncePerGeneration(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	cc := &counting{Client: kube}
	c := NewController(cc, false, &v1alpha1.SimNodeClass{})
	np := createPool(t, "dry-run", func(np *v1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "a"} })
	if why, err := c.admits(ctx, np); why != "" || err != nil {
		t.Fatalf("a valid template: refused %q, %v", why, err)
	}
	if why, err := c.admits(ctx, np); why != "" || err != nil || cc.creates != 1 {
		t.Errorf("asked again: %q, %v, %d creates; want the answer remembered for the generation", why, err, cc.creates)
	}
	// A label key only the API server checks here (Validate would catch it first).
	np.Spec.Template.Labels = map[string]string{"team name": "a"}
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	why, err := c.admits(ctx, np)
	if err != nil || !strings.Contains(why, "metadata.labels") || cc.creates != 2 {
		t.Errorf("a new generation with a bad label key: %q, %v, %d creates; want it asked again and refused naming metadata.labels", why, err, cc.creates)
	}
	claims := &v1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil || len(claims.Items) != 0 {
		t.Errorf("%d claims (%v): a dry run created one", len(claims.Items), err)
	}
}

// Claims stamped by another hash version (a Karpenter being replaced) get the
// pool's current hash and version, so they are not taken for drifted and a later
// change of the template is; claims of the current version keep theirs (they may
// have drifted), and claims of a NodeClass kind not served here are not touched.
func TestClaimsOfAnotherHashVersionAreRestamped(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	c := NewController(kube, false, &v1alpha1.SimNodeClass{})
	createPool(t, "cutover", nil)
	pool := reconcileAndGet(t, c, "cutover")
	hash := pool.Annotations[v1.NodePoolHashAnnotationKey]
	if hash == "" || pool.Annotations[v1.NodePoolHashVersionAnnotationKey] != HashVersion {
		t.Fatalf("the NodePool is not stamped: %v", pool.Annotations)
	}
	claim := func(name, hash, version string, ref *v1.NodeClassReference) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "cutover"},
			Annotations: map[string]string{v1.NodePoolHashAnnotationKey: hash, v1.NodePoolHashVersionAnnotationKey: version}},
			Spec: v1.NodeClaimSpec{NodeClassRef: ref, Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large"}}}}}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	karpenters := claim("karpenters", "6043937311012962385", "v3", simClass)
	drifted := claim("drifted", "12345", HashVersion, simClass)
	foreign := claim("foreign", "6043937311012962385", "v3", &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"})
	// Karpenter had marked this one Drifted: it keeps its old hash, and so stays drifted.
	markedDrifted := claim("marked-drifted", "6043937311012962385", "v3", simClass)
	meta.SetStatusCondition(&markedDrifted.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: "NodePoolDrifted", Message: "NodePoolDrifted"})
	if err := kube.Status().Update(ctx, markedDrifted); err != nil {
		t.Fatal(err)
	}
	reconcileAndGet(t, c, "cutover")
	for _, tc := range []struct {
		nc            *v1.NodeClaim
		hash, version string
	}{
		{karpenters, hash, HashVersion},
		{drifted, "12345", HashVersion},
		{foreign, "6043937311012962385", "v3"},
		{markedDrifted, "6043937311012962385", HashVersion},
	} {
		got := &v1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(tc.nc), got); err != nil {
			t.Fatal(err)
		}
		if h, v := got.Annotations[v1.NodePoolHashAnnotationKey], got.Annotations[v1.NodePoolHashVersionAnnotationKey]; h != tc.hash || v != tc.version {
			t.Errorf("claim %s: hash %s version %s, want %s %s", tc.nc.Name, h, v, tc.hash, tc.version)
		}
	}
}

// A claim being deleted counts in the NodePool's status until it is gone: its
// instance runs until termination ends.
func TestStatusCountsClaimsBeingDeleted(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	c := NewController(kube, false, &v1alpha1.SimNodeClass{})
	createPool(t, "counted", nil)
	for _, name := range []string{"running", "draining"} {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "counted"},
			Finalizers: []string{v1.TerminationFinalizer}},
			Spec: v1.NodeClaimSpec{NodeClassRef: simClass, Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large"}}}}}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		if err := kube.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
		if name == "draining" {
			if err := kube.Delete(ctx, nc); err != nil {
				t.Fatal(err)
			}
		}
	}
	np := reconcileAndGet(t, c, "counted")
	if cpu, nodes := np.Status.Resources[corev1.ResourceCPU], np.Status.Resources["nodes"]; cpu.Value() != 4 || nodes.Value() != 2 {
		t.Errorf("status resources %v, want 4 cpu on 2 nodes, the claim being deleted included", np.Status.Resources)
	}
}

// With the StaticCapacity gate off, a static NodePool says, in a condition, that
// its replicas are not kept; with it on, or on a dynamic pool, there is no such
// condition. Readiness is not affected.
func TestStaticNodePoolWithoutTheFeatureGate(t *testing.T) {
	isolate(t)
	if err := kube.Create(t.Context(), &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	createPool(t, "static", func(np *v1.NodePool) { np.Spec.Replicas = ptr(int64(2)) })
	createPool(t, "dynamic", nil)
	off := NewController(kube, false, &v1alpha1.SimNodeClass{})
	np := reconcileAndGet(t, off, "static")
	cond := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeStaticCapacity)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "FeatureGateDisabled" ||
		!strings.Contains(cond.Message, "spec.replicas") || !strings.Contains(cond.Message, "StaticCapacity") {
		t.Errorf("gate off, static pool: condition %s is %+v; want False, FeatureGateDisabled, naming spec.replicas and the gate", v1.ConditionTypeStaticCapacity, cond)
	}
	if !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("gate off, static pool: Ready %+v, want True", meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady))
	}
	if cond := meta.FindStatusCondition(reconcileAndGet(t, off, "dynamic").Status.Conditions, v1.ConditionTypeStaticCapacity); cond != nil {
		t.Errorf("gate off, dynamic pool: unexpected condition %+v", cond)
	}
	on := NewController(kube, true, &v1alpha1.SimNodeClass{})
	if cond := meta.FindStatusCondition(reconcileAndGet(t, on, "static").Status.Conditions, v1.ConditionTypeStaticCapacity); cond != nil {
		t.Errorf("gate on, static pool: condition %+v should be gone", cond)
	}
}
func ptr[T any](v T) *T { return &v }
