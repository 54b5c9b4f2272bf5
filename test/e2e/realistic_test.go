package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/sim"
)

// realisticLaunches is how many launches the scenario below makes: one node per
// web pod (hostname anti-affinity) and the db pods'.
const realisticLaunches = 8

// realisticSeed is the first seed under which, at icePercent, one of the first
// launches after the first runs out of capacity: the scenario meets insufficient
// capacity mid-batch in every run.
func realisticSeed(t *testing.T, icePercent int32) int64 {
	t.Helper()
	for seed := int64(1); seed < 1000; seed++ {
		nc := &v1alpha1.SimNodeClass{Spec: v1alpha1.SimNodeClassSpec{Latency: &v1alpha1.Latency{
			Profile: v1alpha1.LatencyRealistic, Seed: seed, InsufficientCapacityPercent: &icePercent}}}
		m := sim.ModelOf(nc)
		if m.Launch(0).OutOfCapacity {
			continue
		}
		for n := uint64(1); n < realisticLaunches/2; n++ {
			if m.Launch(n).OutOfCapacity {
				return seed
			}
		}
	}
	t.Fatal("no seed below 1000 runs out of capacity mid-batch")
	return 0
}

// On a realistic cloud (the SimNodeClass's Realistic latency: registrations of
// tens of seconds, out of launch order, a launch running out of capacity mid-batch,
// a slow API) a batch of web and db pods all run: the claim whose launch ran out is
// dropped, its pods planned again onto another offering, and no instance is left
// without its claim. Sim only: the latency model is the sim cloud's.
func TestRealisticCloudScalesUp(t *testing.T) {
	if provider.kind() != "SimNodeClass" {
		t.Skip("the realistic latency model is the sim cloud's")
	}
	icePercent := int32(20)
	class := &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "realistic"},
		Spec: v1alpha1.SimNodeClassSpec{Latency: &v1alpha1.Latency{Profile: v1alpha1.LatencyRealistic,
			Seed: realisticSeed(t, icePercent), InsufficientCapacityPercent: &icePercent}}}
	taint := corev1.Taint{Key: "dedicated", Value: "realistic", Effect: corev1.TaintEffectNoSchedule}
	tolerate := testobj.Template(testobj.Tolerations(corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}))
	create(t, class, nodePool("realistic", "realistic", testobj.TemplateLabels("pool", "realistic"),
		testobj.TemplateTaint(taint.Key, taint.Value, taint.Effect)))
	start := time.Now()
	create(t,
		testobj.Deployment("realistic-web", realisticLaunches-2, "1", "1Gi", onPool("realistic"), tolerate,
			testobj.Template(testobj.PodAntiAffinity(corev1.LabelHostname, map[string]string{"app": "realistic-web"}))),
		testobj.Deployment("realistic-db", 2, "3", "12Gi", onPool("realistic"), tolerate))
	eventually(t, 5*time.Minute, "every web and db pod running", func(ctx context.Context) (bool, string) {
		running, all := 0, 0
		for _, app := range []string{"realistic-web", "realistic-db"} {
			pods := &corev1.PodList{}
			if err := kube.List(ctx, pods, client.MatchingLabels{"app": app}); err != nil {
				return false, err.Error()
			}
			for _, p := range pods.Items {
				all++
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
		}
		return running == realisticLaunches && all == realisticLaunches, fmt.Sprintf("%d of %d pods running", running, all)
	})
	took := time.Since(start)

	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: "realistic"}); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, nc := range claims.Items {
		live[nc.Name] = true
	}
	instances := &v1alpha1.SimInstanceList{}
	if err := kube.List(t.Context(), instances, client.MatchingLabels{v1.NodePoolLabelKey: "realistic"}); err != nil {
		t.Fatal(err)
	}
	var registrations []time.Duration
	for _, inst := range instances.Items {
		if !live[inst.Spec.NodeClaim] {
			t.Errorf("instance %s outlived its claim %s: leaked", inst.Name, inst.Spec.NodeClaim)
		}
		registrations = append(registrations, inst.Spec.RegisterAfter.Sub(inst.CreationTimestamp.Time).Round(time.Second))
	}
	if len(instances.Items) != len(claims.Items) {
		t.Errorf("%d instances for %d claims", len(instances.Items), len(claims.Items))
	}
	events := &corev1.EventList{}
	if err := kube.List(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	ice := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "NodeClaim" && e.Reason == "InsufficientCapacityError" && !live[e.InvolvedObject.Name] &&
			strings.HasPrefix(e.InvolvedObject.Name, "realistic-") {
			ice++
		}
	}
	if ice == 0 {
		t.Error("no launch ran out of capacity: the seed was chosen so that one does")
	}
	t.Logf("%d pods running in %s on %d nodes; registrations drawn %v; %d launches out of capacity, their claims replaced",
		realisticLaunches, took.Round(time.Second), len(claims.Items), registrations, ice)
}
