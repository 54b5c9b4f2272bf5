package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
)

func condition(np *v1.NodePool, kind string) string {
	if c := meta.FindStatusCondition(np.Status.Conditions, kind); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "missing"
}

// A NodePool is Ready when its NodeClass is; one pointing at a missing NodeClass
// says so in its conditions, and its pods stay pending with an event saying why.
func TestNodePoolStatusAndMissingNodeClass(t *testing.T) {
	create(t, nodeClass("present"), nodePool("ok", "present", testobj.TemplateLabels("pool", "ok")))
	create(t, nodePool("orphan", "absent", testobj.TemplateLabels("pool", "orphan")))
	for name, want := range map[string]string{"ok": "True/Ready", "orphan": "False/NodeClassNotReady"} {
		eventually(t, time.Minute, "NodePool "+name+" "+want, func(ctx context.Context) (bool, string) {
			np := &v1.NodePool{}
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
				return false, err.Error()
			}
			got := condition(np, v1.ConditionTypeReady)
			return got == want && np.Annotations[v1.NodePoolHashAnnotationKey] != "", fmt.Sprintf("Ready %s, hash %q", got, np.Annotations[v1.NodePoolHashAnnotationKey])
		})
	}
	create(t, testobj.Deployment("stranded", 1, "100m", "128Mi", onPool("orphan")))
	eventually(t, time.Minute, "an event on the stranded pod", func(ctx context.Context) (bool, string) {
		return podEvent(ctx, "stranded", "FailedScheduling", provider.kind()+" absent")
	})
	// The NodeClass arrives: the NodePool turns Ready without any change of its own,
	// and the stranded pod gets its node.
	create(t, nodeClass("absent"))
	eventually(t, time.Minute, "NodePool orphan True/Ready once its NodeClass exists", func(ctx context.Context) (bool, string) {
		np := &v1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "orphan"}, np); err != nil {
			return false, err.Error()
		}
		got := condition(np, v1.ConditionTypeReady)
		return got == "True/Ready", "Ready " + got
	})
	runningOn(t, "stranded", 1)
}

// podEvent finds an event of reason on a pod of app whose message contains text.
func podEvent(ctx context.Context, app, reason, text string) (bool, string) {
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace("default")); err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind != "Pod" || !strings.HasPrefix(e.InvolvedObject.Name, app) || e.Reason != reason {
			continue
		}
		if strings.Contains(e.Message, text) {
			return true, ""
		}
		seen = append(seen, e.Message)
	}
	return false, fmt.Sprintf("events: %v", seen)
}

// A NodePool's limits stop growth; the pods left over stay pending with an event
// naming the limit.
func TestLimitsStopGrowth(t *testing.T) {
	create(t, nodeClass("limited"), nodePool("limited", "limited", testobj.TemplateLabels("pool", "limited"), testobj.Limit(corev1.ResourceCPU, "4")))
	create(t, testobj.Deployment("capped", 8, "1", "1Gi", onPool("limited")))
	eventually(t, 2*time.Minute, "a limit event", func(ctx context.Context) (bool, string) {
		return podEvent(ctx, "capped", "FailedScheduling", "limit cpu=4 reached")
	})
	// Once its claims have launched, the NodePool holds at most 4 cpu, its status
	// counts them, and it stays so: the pods left over stay pending.
	var launched resource.Quantity
	eventually(t, time.Minute, "the claims launched and counted in the NodePool's status", func(ctx context.Context) (bool, string) {
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: "limited"}); err != nil {
			return false, err.Error()
		}
		launched = resource.Quantity{}
		for _, nc := range claims.Items {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) {
				return false, "claim " + nc.Name + " not launched"
			}
			launched.Add(nc.Status.Capacity[corev1.ResourceCPU])
		}
		np := &v1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "limited"}, np); err != nil {
			return false, err.Error()
		}
		counted := np.Status.Resources[corev1.ResourceCPU]
		nodes := np.Status.Resources["nodes"]
		return len(claims.Items) > 0 && counted.Cmp(launched) == 0 && nodes.Value() == int64(len(claims.Items)),
			fmt.Sprintf("%d claims of %s cpu; status: %s cpu, %s nodes", len(claims.Items), launched.String(), counted.String(), nodes.String())
	})
	if launched.Cmp(resource.MustParse("4")) > 0 {
		t.Errorf("NodePool limited launched %s cpu, over its limit of 4", launched.String())
	}
	// Launched is not yet registered: on AWS the instance's kubelet has to boot.
	eventually(t, time.Minute, "some capped pods running", func(ctx context.Context) (bool, string) {
		running := runningNodes(ctx, "capped")
		return len(running) > 0, fmt.Sprintf("running on %v", running)
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		claims := &v1.NodeClaimList{}
		pods := &corev1.PodList{}
		if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: "limited"}); err != nil {
			t.Fatal(err)
		}
		if err := kube.List(t.Context(), pods, client.MatchingLabels{"app": "capped"}); err != nil {
			t.Fatal(err)
		}
		total := resource.Quantity{}
		for _, nc := range claims.Items {
			total.Add(nc.Status.Capacity[corev1.ResourceCPU])
		}
		pending := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				pending++
			}
		}
		if total.Cmp(resource.MustParse("4")) > 0 || pending == 0 || pending == len(pods.Items) {
			t.Fatalf("%d claims of %s cpu, %d of %d pods pending; want at most 4 cpu and some pods running, the rest pending",
				len(claims.Items), total.String(), pending, len(pods.Items))
		}
		time.Sleep(time.Second)
	}
}
