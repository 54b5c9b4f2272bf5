package sim

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

func nodeClass(t *testing.T, name string, mutate func(*v1alpha1.SimNodeClass)) *v1alpha1.SimNodeClass {
	t.Helper()
	nc := &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if mutate != nil {
		mutate(nc)
	}
	if err := kube.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nc) })
	return nc
}

// claim is a claim of the class; its UID (which the API server replaces when the
// claim is created there) lets it launch without being created.
func claim(name, class string, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{v1.NodePoolLabelKey: "default", "team": "payments"}},
		Spec: v1.NodeClaimSpec{Requirements: reqs, NodeClassRef: &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: class},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

func in(key string, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
}

func TestLaunchRegisterTerminate(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := New(kube, clk)
	nodeClass(t, "delayed", func(nc *v1alpha1.SimNodeClass) {
		nc.Spec.RegistrationDelay = metav1.Duration{Duration: 30 * time.Second}
	})

	c := claim("launch", "delayed", in(v1.LabelInstanceType, "m5.large", "c5.large"), in(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot))
	if err := kube.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	launched, err := cloud.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// The cheapest spot offering of the two types, found independently.
	catalogTypes, err := cloud.instanceTypes(&v1alpha1.SimNodeClass{})
	if err != nil {
		t.Fatal(err)
	}
	wantType, wantZone, best := "", "", 1e9
	for _, it := range catalogTypes {
		if it.Name != "m5.large" && it.Name != "c5.large" {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == v1.CapacityTypeSpot && o.Price < best {
				wantType, wantZone, best = it.Name, o.Zone, o.Price
			}
		}
	}
	if launched.Labels[v1.LabelInstanceType] != wantType || launched.Labels[v1.LabelZone] != wantZone || launched.Labels[v1.CapacityTypeLabelKey] != "spot" {
		t.Errorf("launched %v, want %s spot in %s", launched.Labels, wantType, wantZone)
	}
	// An EKS node: 2 vCPUs less 70m kube-reserved; 8Gi (m5) or 4Gi (c5) less 7.5%
	// VM overhead, 574Mi kube-reserved for 29 pods and 100Mi eviction.
	wantMemory := map[string]string{"m5.large": "6903Mi", "c5.large": "3114Mi"}[wantType]
	if cpu, mem := launched.Status.Allocatable[corev1.ResourceCPU], launched.Status.Allocatable[corev1.ResourceMemory]; cpu.String() != "1930m" || mem.String() != wantMemory {
		t.Errorf("allocatable cpu %s and memory %s, want 1930m and %s", cpu.String(), mem.String(), wantMemory)
	}
	if _, err := cloud.Get(ctx, launched.Status.ProviderID); err != nil {
		t.Errorf("Get: %v", err)
	}
	// Launching again for the same claim (a retry after a crash) makes no second instance.
	again, err := cloud.Create(ctx, c)
	if err != nil || again.Status.ProviderID != launched.Status.ProviderID {
		t.Errorf("second launch for the claim: %v, %v; want the same instance %s", again.Status.ProviderID, err, launched.Status.ProviderID)
	}
	all, err := cloud.List(ctx)
	if err != nil || len(all) != 1 || all[0].Status.ProviderID != launched.Status.ProviderID {
		t.Errorf("List: %v, %v", all, err)
	}

	registrar := NewRegistrar(kube, cloud, clk).WithKubeletVersion("v1.34.4")
	inst, _ := instanceOf(launched.Status.ProviderID)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: inst}}
	res, err := registrar.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
		t.Fatalf("before the delay: %+v, %v; want a requeue within 30s", res, err)
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: inst}, &corev1.Node{}); err == nil {
		t.Fatal("the node registered before its delay")
	}
	clk.Step(31 * time.Second)
	if _, err := registrar.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: inst}, node); err != nil {
		t.Fatalf("the node did not register: %v", err)
	}
	if node.Spec.ProviderID != launched.Status.ProviderID || node.Annotations[KwokNodeAnnotation] != "fake" ||
		node.Labels["team"] != "payments" || node.Labels[v1.LabelArch] != "amd64" || node.Labels[v1.LabelInstanceType] != wantType {
		t.Errorf("node %s: providerID %s, labels %v, annotations %v", node.Name, node.Spec.ProviderID, node.Labels, node.Annotations)
	}
	// The Node reports what the engine planned with.
	if !equality.Semantic.DeepEqual(node.Status.Capacity, launched.Status.Capacity) || !equality.Semantic.DeepEqual(node.Status.Allocatable, launched.Status.Allocatable) {
		t.Errorf("node capacity %v, allocatable %v; the claim says %v, %v", node.Status.Capacity, node.Status.Allocatable, launched.Status.Capacity, launched.Status.Allocatable)
	}
	if !hasTaint(node, v1.UnregisteredNoExecuteTaint.Key) || !hasTaint(node, "dedicated") {
		t.Errorf("node taints %v, want karpenter.sh/unregistered and the claim's", node.Spec.Taints)
	}
	// It registers as a kubelet does, with its status: ready, so the node lifecycle
	// controller has no not-ready taint to add and remove.
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready || node.Status.Phase != corev1.NodeRunning || len(node.Status.Addresses) != 2 || node.Labels["beta.kubernetes.io/arch"] != "amd64" {
		t.Errorf("node status: conditions %v, phase %q, addresses %v; want Ready, Running, an internal IP and a hostname (and the beta arch label)",
			node.Status.Conditions, node.Status.Phase, node.Status.Addresses)
	}
	// Its kubelet reports a version, as `kubectl get nodes` shows.
	if info := node.Status.NodeInfo; info.KubeletVersion != "v1.34.4" || info.Architecture != "amd64" || info.OperatingSystem != "linux" {
		t.Errorf("node info %+v, want kubelet v1.34.4 on linux/amd64", info)
	}

	if err := cloud.Delete(ctx, launched); err != nil {
		t.Fatal(err)
	}
	if _, err := registrar.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: inst}, &corev1.Node{}); err == nil {
		t.Error("the node outlived its instance")
	}
	if err := cloud.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("deleting again: %v, want NodeClaimNotFound", err)
	}
	if _, err := cloud.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get after delete: %v, want NodeClaimNotFound", err)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func TestInsufficientCapacityAndFallback(t *testing.T) {
	ctx := t.Context()
	cloud := New(kube, clocktesting.NewFakeClock(time.Now()))
	nodeClass(t, "short", func(nc *v1alpha1.SimNodeClass) {
		nc.Spec.UnavailableOfferings = []v1alpha1.Offering{{InstanceType: "m5.large", CapacityType: "spot"}}
	})
	c := claim("fallback", "short", in(v1.LabelInstanceType, "m5.large", "m5.xlarge"), in(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot))
	launched, err := cloud.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := launched.Labels[v1.LabelInstanceType]; got != "m5.xlarge" {
		t.Errorf("launched %s, want the fallback m5.xlarge", got)
	}
	t.Cleanup(func() { _ = cloud.Delete(context.Background(), launched) })
	_, err = cloud.Create(ctx, claim("none-left", "short", in(v1.LabelInstanceType, "m5.large"), in(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot)))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("got %v, want insufficient capacity", err)
	}
	if n := len(err.(*cloudprovider.InsufficientCapacityError).Offerings); n != 3 {
		t.Errorf("%d offerings reported unavailable, want m5.large spot in 3 zones", n)
	}
	// The price list does not know about the shortage: launches find out.
	pool := &v1.NodePool{}
	pool.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: "short"}
	types, err := cloud.InstanceTypes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		for _, o := range it.Offerings {
			if !o.Available {
				t.Errorf("%s %s/%s listed unavailable", it.Name, o.Zone, o.CapacityType)
			}
		}
	}
}

func TestInterruptionNotice(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := New(kube, clk)
	nodeClass(t, "spotty", nil)
	launched, err := cloud.Create(ctx, claim("spotty", "spotty", in(v1.LabelInstanceType, "m5.large"), in(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Delete(context.Background(), launched) })
	if got, err := cloud.Interruptions(ctx); err != nil || len(got) != 0 {
		t.Fatalf("interruptions before any notice: %v, %v", got, err)
	}
	at := clk.Now().Add(2 * time.Minute)
	if err := cloud.Interrupt(ctx, launched.Status.ProviderID, at); err != nil {
		t.Fatal(err)
	}
	got, err := cloud.Interruptions(ctx)
	if err != nil || len(got) != 1 || got[0].ProviderID != launched.Status.ProviderID || !got[0].At.Equal(at.Truncate(time.Second)) {
		t.Errorf("interruptions %+v, %v; want the notice for %s at %s", got, err, launched.Status.ProviderID, at)
	}
	// At the announced time the instance is reclaimed.
	name, _ := instanceOf(launched.Status.ProviderID)
	registrar := NewRegistrar(kube, cloud, clk)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}
	if res, err := registrar.Reconcile(ctx, req); err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("before the reclaim: %+v, %v; want a requeue at the reclaim", res, err)
	}
	clk.Step(2 * time.Minute)
	if _, err := registrar.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("after the reclaim the instance should be gone, got %v", err)
	}
	if _, err := registrar.Reconcile(ctx, req); err != nil { // and with it its Node
		t.Fatal(err)
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("the reclaimed instance's node should be gone, got %v", err)
	}
}

// A NodeClass's kubelet settings give its nodes their allocatable, in the engine's
// instance types and on the Node alike; other NodeClasses keep the defaults.
func TestKubeletSettings(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := New(kube, clk)
	maxPods := int32(10)
	nodeClass(t, "dense", func(nc *v1alpha1.SimNodeClass) {
		nc.Spec.Kubelet = &v1alpha1.KubeletConfiguration{MaxPods: &maxPods, SystemReserved: map[string]string{"cpu": "100m", "memory": "200Mi"},
			EvictionHard: map[string]v1alpha1.EvictionThreshold{"memory.available": "300Mi"}}
	})
	nodeClass(t, "plain", nil)
	pool := func(class string) *v1.NodePool {
		return &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: class}}}}}
	}
	m5 := func(class string) corev1.ResourceList {
		t.Helper()
		types, err := cloud.InstanceTypes(ctx, pool(class))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			if it.Name == "m5.large" {
				return it.Allocatable()
			}
		}
		t.Fatal("no m5.large")
		return nil
	}
	// 7577Mi less 11Mi × 10 + 255Mi kube-reserved, 200Mi system-reserved, 300Mi eviction.
	dense := m5("dense")
	if cpu, mem, pods := dense[corev1.ResourceCPU], dense[corev1.ResourceMemory], dense[corev1.ResourcePods]; cpu.String() != "1830m" || mem.String() != "6712Mi" || pods.Value() != 10 {
		t.Errorf("dense m5.large allocatable cpu %s, memory %s, pods %s; want 1830m, 6712Mi, 10", cpu.String(), mem.String(), pods.String())
	}
	if mem := m5("plain")[corev1.ResourceMemory]; mem.String() != "6903Mi" {
		t.Errorf("plain m5.large allocatable memory %s, want the default 6903Mi", mem.String())
	}

	c := claim("dense", "dense", in(v1.LabelInstanceType, "m5.large"), in(v1.CapacityTypeLabelKey, v1.CapacityTypeOnDemand))
	if err := kube.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	launched, err := cloud.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Delete(context.Background(), launched) })
	inst, _ := instanceOf(launched.Status.ProviderID)
	if _, err := NewRegistrar(kube, cloud, clk).Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: inst}}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: inst}, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), node) })
	if !equality.Semantic.DeepEqual(node.Status.Allocatable, dense) {
		t.Errorf("node allocatable %v, the engine's %v", node.Status.Allocatable, dense)
	}
}

func TestNodeClassProblems(t *testing.T) {
	cloud := New(kube, clocktesting.NewFakeClock(time.Now()))
	_, err := cloud.Create(t.Context(), claim("orphan", "missing"))
	if !cloudprovider.IsNodeClassNotReady(err) {
		t.Errorf("missing NodeClass: %v", err)
	}
	c := claim("aws", "x")
	c.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	if _, err := cloud.Create(t.Context(), c); !cloudprovider.IsNodeClassNotReady(err) {
		t.Errorf("foreign NodeClass: %v", err)
	}
}

func TestDrift(t *testing.T) {
	ctx := t.Context()
	cloud := New(kube, clocktesting.NewFakeClock(time.Now()))
	nc := nodeClass(t, "imaged", nil)
	launched, err := cloud.Create(ctx, claim("drifty", "imaged", in(v1.LabelInstanceType, "t3.micro")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Delete(context.Background(), launched) })
	if reason, err := cloud.IsDrifted(ctx, launched); err != nil || reason != "" {
		t.Errorf("fresh instance drifted: %q %v", reason, err)
	}
	nc.Spec.ImageID = "sim-image-2"
	if err := kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if reason, err := cloud.IsDrifted(ctx, launched); err != nil || reason != "ImageDrift" {
		t.Errorf("after an image change: %q %v, want ImageDrift", reason, err)
	}
}

// staleCache is a client whose cache has not seen any SimInstance yet: the
// informer lags the API server, by seconds under load.
type staleCache struct{ client.Client }

func (s staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.SimInstance); ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.Group, Resource: "siminstances"}, key.Name)
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func (s staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.SimInstanceList); ok {
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// A launch retried while the cache does not show the first one yet makes no
// second instance: the instance's name comes from the claim's UID, so the API
// server refuses a second, and the first is read past the cache (or, with no
// reader that can, the retry fails and is retried).
func TestRetriedLaunchWithAStaleCacheMakesOneInstance(t *testing.T) {
	nodeClass(t, "tokens", nil)
	for _, tt := range []struct {
		name      string
		apiReader bool
	}{{"with-api-reader", true}, {"cache-only", false}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			cloud := New(staleCache{kube}, clocktesting.NewFakeClock(time.Now()))
			if tt.apiReader {
				cloud = cloud.WithAPIReader(kube)
			}
			c := claim("token-"+tt.name, "tokens", in(v1.LabelInstanceType, "m5.large"))
			if err := kube.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = kube.Delete(context.Background(), c) })
			first, err := cloud.Create(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cloud.Delete(context.Background(), first) })
			again, err := cloud.Create(ctx, c)
			switch {
			case tt.apiReader && (err != nil || again.Status.ProviderID != first.Status.ProviderID):
				t.Errorf("retried launch: %s, %v; want the first instance %s", providerID(again), err, first.Status.ProviderID)
			case !tt.apiReader && err == nil && again.Status.ProviderID != first.Status.ProviderID:
				t.Errorf("retried launch made %s; want the first instance %s or an error to retry", again.Status.ProviderID, first.Status.ProviderID)
			}
			instances := &v1alpha1.SimInstanceList{}
			if err := kube.List(ctx, instances, client.MatchingLabels{NodeClaimLabel: c.Name}); err != nil {
				t.Fatal(err)
			}
			if len(instances.Items) != 1 {
				t.Errorf("%d instances for one claim, want 1", len(instances.Items))
			}
		})
	}
}

// The registrar gives a Node the labels and taints of the claim its instance was
// launched for only: a claim of another NodeClass kind (Karpenter's), even one
// whose name and UID match, is not the sim cloud's.
func TestRegistrarIgnoresForeignClaims(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := New(kube, clk)
	foreign := claim("karpenter-claim", "default", in(v1.LabelInstanceType, "m5.large"))
	foreign.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	if err := kube.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), foreign) })
	inst := &v1alpha1.SimInstance{ObjectMeta: metav1.ObjectMeta{Name: instanceName(foreign.UID)},
		Spec: v1alpha1.SimInstanceSpec{NodeClaim: foreign.Name, NodeClass: "default", InstanceType: "m5.large", Zone: "us-east-1a",
			CapacityType: v1.CapacityTypeOnDemand, ImageID: "sim-image-1", Price: "0.096", RegisterAfter: metav1.NewTime(clk.Now())}}
	if err := kube.Create(ctx, inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), inst)
		_ = kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.Name}})
	})
	if _, err := NewRegistrar(kube, cloud, clk).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(inst)}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: inst.Name}, node); err != nil {
		t.Fatalf("the instance's node did not register: %v", err)
	}
	if node.Labels["team"] != "" || hasTaint(node, "dedicated") {
		t.Errorf("node took the foreign claim's labels %v and taints %v", node.Labels, node.Spec.Taints)
	}
	if node.Labels[v1.LabelInstanceType] != "m5.large" || !hasTaint(node, v1.UnregisteredNoExecuteTaint.Key) {
		t.Errorf("node labels %v, taints %v; want the instance's own and karpenter.sh/unregistered", node.Labels, node.Spec.Taints)
	}
}

func providerID(nc *v1.NodeClaim) string {
	if nc == nil {
		return "(none)"
	}
	return nc.Status.ProviderID
}
