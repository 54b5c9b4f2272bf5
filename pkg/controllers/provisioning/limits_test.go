package provisioning

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

func TestOverrun(t *testing.T) {
	q := resource.MustParse
	limits := v1.Limits{corev1.ResourceCPU: q("10"), corev1.ResourceMemory: q("40Gi")}
	for _, tc := range []struct {
		name       string
		limits     v1.Limits
		used, need corev1.ResourceList
		want       string // a part of the reason, or "" for none
	}{
		{"no limits", nil, corev1.ResourceList{corev1.ResourceCPU: q("100")}, corev1.ResourceList{corev1.ResourceCPU: q("4")}, ""},
		{"within", limits, corev1.ResourceList{corev1.ResourceCPU: q("6")}, corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi")}, ""},
		{"exactly at", limits, corev1.ResourceList{corev1.ResourceCPU: q("6"), corev1.ResourceMemory: q("32Gi")}, corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi")}, ""},
		{"cpu passed", limits, corev1.ResourceList{corev1.ResourceCPU: q("6500m")}, corev1.ResourceList{corev1.ResourceCPU: q("4")},
			"limit cpu=10 would be passed: 6500m in use, the node adds 4"},
		{"memory passed", limits, corev1.ResourceList{corev1.ResourceMemory: q("36Gi")}, corev1.ResourceList{corev1.ResourceMemory: q("8Gi")}, "limit memory=40Gi"},
		{"already past a limit the node adds nothing to", limits, corev1.ResourceList{corev1.ResourceMemory: q("50Gi")}, corev1.ResourceList{corev1.ResourceCPU: q("1")}, "limit memory=40Gi"},
		{"nodes", v1.Limits{"nodes": q("2")}, corev1.ResourceList{"nodes": q("2")}, corev1.ResourceList{"nodes": q("1")}, "limit nodes=2"},
	} {
		got := overrun(tc.limits, tc.used, tc.need)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func pendingEvents(rec *record.FakeRecorder) []string {
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

// A claim created after the snapshot (a disruption's replacement, say) counts when
// the batch's claims are created: each is checked against the limits just before
// its creation, with the batch's earlier claims counted, and one that would pass
// a limit is not created; its pods get an event saying which.
func TestClaimsAreCheckedAgainstLimitsJustBeforeCreation(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	types := schedtest.SyntheticTypes(4) // fake-it-i has i+1 vCPU
	readyNodePool(t, "limited", func(np *v1.NodePool) { np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("8")} })
	// Two pods of 3 cpu need a 4-vCPU node each: 8 cpu, the limit.
	pendingPod(t, "a", "3", "limited")
	pendingPod(t, "b", "3", "limited")
	// Once the snapshot is read (it asks for the instance types after its lists),
	// another claim of 4 cpu appears.
	var once sync.Once
	instanceTypes := func(ctx context.Context, _ *v1.NodePool) ([]*scheduling.InstanceType, error) {
		var err error
		once.Do(func() {
			other := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "replacement", Labels: map[string]string{v1.NodePoolLabelKey: "limited"}},
				Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"},
					Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-3"}}}}}
			err = kube.Create(ctx, other)
		})
		return types, err
	}
	rec := record.NewFakeRecorder(100)
	p := NewProvisioner(kube, state.New(kube), instanceTypes, rec, clocktesting.NewFakeClock(time.Now()), Options{})
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := poolClaims(t, "limited")
	byName := state.TypesByName(types)
	total := resource.Quantity{}
	for i := range claims {
		total.Add(state.ClaimUsage(&claims[i], byName)[corev1.ResourceCPU])
	}
	if len(claims) != 2 || total.Cmp(resource.MustParse("8")) > 0 {
		t.Errorf("%d claims holding %s cpu, want the other claim and one of the batch's, 8 cpu", len(claims), total.String())
	}
	var limited int
	for _, e := range pendingEvents(rec) {
		if strings.Contains(e, "FailedScheduling") && strings.Contains(e, "NodePool limited: limit cpu=8 would be passed: 8 in use, the node adds 4") {
			limited++
		}
	}
	if limited != 1 {
		t.Errorf("%d limit events, want one, on the pod of the claim not created", limited)
	}
	if !p.refused {
		t.Error("the provisioner will not look at the pods held back again")
	}
}

// lagging is a cache that shows a NodeClaim only from the lag-th read on.
type lagging struct {
	client.Client
	lag   int
	mu    sync.Mutex
	reads map[string]int
}

func (l *lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1.NodeClaim); ok {
		l.mu.Lock()
		l.reads[key.Name]++
		n := l.reads[key.Name]
		l.mu.Unlock()
		if n < l.lag {
			return apierrors.NewNotFound(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, key.Name)
		}
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// A batch one of whose claims the API server refuses still waits until the cache
// shows the claims it created, so the next plan counts them.
func TestAFailedCreateStillWaitsForTheClaimsCreated(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	readyNodePool(t, "good", nil)
	// Ready by its (stale) condition, but no NodeClaim can carry its annotation.
	readyNodePool(t, "refused", func(np *v1.NodePool) { np.Spec.Template.Annotations = map[string]string{"not a key!": "x"} })
	pendingPod(t, "to-good", "1", "good")
	pendingPod(t, "to-refused", "1", "refused")
	cache := &lagging{Client: kube, lag: 3, reads: map[string]int{}}
	types := schedtest.SyntheticTypes(4)
	p := NewProvisioner(cache, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{})
	err := p.Provision(ctx)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "NodePool refused") {
		t.Errorf("Provision: %v, want the refused create, naming its NodePool", err)
	}
	claims := &v1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 || claims.Items[0].Labels[v1.NodePoolLabelKey] != "good" {
		t.Fatalf("%d claims, want the one of NodePool good", len(claims.Items))
	}
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if reads := cache.reads[claims.Items[0].Name]; reads < cache.lag {
		t.Errorf("Provision returned after %d reads of the claim it created, before the cache showed it (read %d)", reads, cache.lag)
	}
}
