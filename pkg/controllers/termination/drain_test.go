package termination

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodetailor/tailor/api/v1"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func pod(name string, mutate ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func daemonSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: p.Name}}
}
func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }
func toleratesAll(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}
func doNotDisrupt(p *corev1.Pod) { p.Annotations[v1.DoNotDisruptAnnotationKey] = "true" }
func mirror(p *corev1.Pod)       { p.Annotations[corev1.MirrorPodAnnotationKey] = "x" }

func doNotDisruptFor(value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations[v1.DoNotDisruptAnnotationKey] = value }
}

// heldFor is a pod annotated do-not-disrupt 30m that started ago.
func heldFor(ago time.Duration) corev1.Pod {
	return pod("held-"+ago.String(), doNotDisruptFor("30m"), func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: now.Add(-ago)} })
}
func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

// deleted marks the pod deleted with a grace period that ends at end.
func deleted(end time.Time, grace int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: end}
		p.DeletionGracePeriodSeconds = &grace
	}
}

func names(ps []*corev1.Pod) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestPlanDrain(t *testing.T) {
	web := pod("web")
	dns := pod("dns", critical)
	agent := pod("agent", daemonSet)
	cni := pod("cni", daemonSet, critical)
	// kube-proxy style: a DaemonSet pod that tolerates every taint, the disrupted
	// one included. Its DaemonSet would put an evicted copy straight back.
	proxy := pod("kube-proxy", daemonSet, critical, toleratesAll)
	logs := pod("log-agent", daemonSet, toleratesAll)
	tolerant := pod("tolerant", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedNoScheduleTaint.Key, Operator: corev1.TolerationOpExists}}
	})
	other := pod("other-toleration", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	})
	static := pod("static", mirror)
	job := pod("job", succeeded)
	held := pod("batch", doNotDisrupt)
	leaving := pod("leaving", deleted(now.Add(10*time.Second), 30))
	stuck := pod("stuck", deleted(now.Add(-31*time.Second), 30))
	heldAgent := pod("held-agent", daemonSet, doNotDisrupt)
	quick := pod("quick", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5) })
	slowAgent := pod("slow-agent", daemonSet, func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](120) })
	up, soon, later := now, now.Add(20*time.Second), now.Add(time.Hour)

	tests := []struct {
		name                string
		pods                []corev1.Pod
		until               *time.Time
		evict, del, waiting []string
		early               []string
		why                 string
		done                bool
	}{
		{name: "ordinary pods first", pods: []corev1.Pod{web, other, dns, agent, cni, proxy, static, job},
			evict: []string{"other-toleration", "web"}},
		{name: "then critical non-DaemonSet pods", pods: []corev1.Pod{dns, agent, cni, proxy, static, job},
			evict: []string{"dns"}},
		{name: "then DaemonSet pods", pods: []corev1.Pod{agent, cni, proxy, logs},
			evict: []string{"agent"}},
		{name: "critical DaemonSet pods last", pods: []corev1.Pod{cni, proxy, logs},
			evict: []string{"cni"}},
		{name: "pods that tolerate the disrupted taint are neither evicted nor waited for",
			pods: []corev1.Pod{proxy, logs, tolerant, static, job}, done: true},
		{name: "a terminating pod holds its tier and the later ones", pods: []corev1.Pod{leaving, dns, agent},
			waiting: []string{"leaving"}, why: "terminating"},
		{name: "a pod stuck terminating past its grace period is not waited for", pods: []corev1.Pod{stuck, proxy}, done: true},
		{name: "a pod stuck terminating does not hold the next tier", pods: []corev1.Pod{stuck, agent}, evict: []string{"agent"}},
		{name: "do-not-disrupt is waited on and holds the later tiers", pods: []corev1.Pod{held, web, dns, agent},
			evict: []string{"web"}, waiting: []string{"batch"}, why: v1.DoNotDisruptAnnotationKey},
		{name: "do-not-disrupt in the DaemonSet tier", pods: []corev1.Pod{heldAgent, agent, cni},
			evict: []string{"agent"}, waiting: []string{"held-agent"}, why: v1.DoNotDisruptAnnotationKey},
		{name: "grace period up: every tier deleted at once, tolerating pods still left alone",
			pods: []corev1.Pod{held, web, agent, cni, proxy, static, leaving}, until: &up,
			del: []string{"agent", "batch", "cni", "web"}},
		{name: "grace period up: pods still terminating are not waited for",
			pods: []corev1.Pod{leaving, proxy}, until: &up, done: true},
		{name: "deadline far: the tiers as usual", pods: []corev1.Pod{web, held, agent, slowAgent}, until: &later,
			evict: []string{"web"}, waiting: []string{"batch"}, why: v1.DoNotDisruptAnnotationKey},
		{name: "deadline near: pods whose own grace period would outlast it go now, whatever their tier or annotation",
			pods: []corev1.Pod{web, held, quick, agent, slowAgent, leaving}, until: &soon,
			early: []string{"agent", "batch", "slow-agent", "web"}, evict: []string{"quick"}, waiting: []string{"leaving"}, why: "terminating"},
		{name: "a do-not-disrupt duration is waited on until it runs out since the pod started",
			pods:  []corev1.Pod{heldFor(25 * time.Minute), heldFor(31 * time.Minute), pod("unstarted", doNotDisruptFor("30m")), pod("invalid", doNotDisruptFor("soon"))},
			evict: []string{"held-31m0s", "invalid"}, waiting: []string{"held-25m0s", "unstarted"}, why: v1.DoNotDisruptAnnotationKey},
		{name: "nothing left", pods: []corev1.Pod{static, job}, done: true},
		{name: "no pods", done: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := PlanDrain(tt.pods, now, tt.until)
			want := map[string]any{"evict": orEmpty(tt.evict), "delete": orEmpty(tt.del), "waiting": orEmpty(tt.waiting), "why": tt.why, "done": tt.done,
				"early": orEmpty(tt.early)}
			got := map[string]any{"evict": names(d.Evict), "delete": names(d.Delete), "waiting": names(d.Waiting), "why": d.Why, "done": d.Done,
				"early": names(d.Early)}
			if len(d.Early) > 0 && d.EarlyGrace != soon.Sub(now) {
				t.Errorf("early deletions get %s, want the %s left", d.EarlyGrace, soon.Sub(now))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestStuckTerminating(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"not deleted", pod("a"), false},
		{"within its grace period", pod("a", deleted(now.Add(time.Second), 30)), false},
		{"at the end of its grace period", pod("a", deleted(now, 30)), false},
		{"just past its grace period", pod("a", deleted(now.Add(-time.Nanosecond), 30)), true},
		{"long past its grace period", pod("a", deleted(now.Add(-time.Hour), 30)), true},
		{"force-deleted pod past its deletion", pod("a", deleted(now.Add(-time.Second), 0)), true},
		{"no grace period recorded", pod("a", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)} }), true},
	}
	for _, tt := range tests {
		if got := StuckTerminating(&tt.pod, now); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSettleLeft(t *testing.T) {
	tests := []struct {
		tainted time.Time
		want    time.Duration
	}{
		{now, TaintSettle},
		{now.Add(-time.Second), TaintSettle - time.Second},
		{now.Add(-TaintSettle), 0},
		{now.Add(-time.Hour), 0},
	}
	for _, tt := range tests {
		if got := settleLeft(tt.tainted, now); got != tt.want {
			t.Errorf("tainted %s before: %s left, want %s", now.Sub(tt.tainted), got, tt.want)
		}
	}
}

func TestBlockingAttachments(t *testing.T) {
	va := func(name string, pv *string) storagev1.VolumeAttachment {
		return storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.VolumeAttachmentSpec{NodeName: "n", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: pv}}}
	}
	vas := []storagev1.VolumeAttachment{va("data", ptr.To("pv-data")), va("agent", ptr.To("pv-agent")), va("inline", nil)}
	got := BlockingAttachments(vas, map[string]bool{"pv-agent": true})
	if len(got) != 1 || got[0].Name != "data" {
		t.Errorf("blocking %v, want only data: agent's volume stays with its pod, inline volumes are not waited for", got)
	}
	if got := BlockingAttachments(nil, nil); len(got) != 0 {
		t.Errorf("no attachments: %v", got)
	}
}

func TestClaimDeadline(t *testing.T) {
	deleted := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &metav1.Time{Time: deleted}}}
	hour := &metav1.Duration{Duration: time.Hour}
	at := func(t time.Time) map[string]string {
		return map[string]string{v1.NodeClaimTerminationTimestampAnnotationKey: t.Format(time.RFC3339)}
	}
	for _, tc := range []struct {
		name        string
		tgp         *metav1.Duration
		annotations map[string]string
		want        *time.Time
	}{
		{name: "no grace period, no annotation: no deadline"},
		{name: "grace period", tgp: hour, want: ptr.To(deleted.Add(time.Hour))},
		{name: "repair's annotation comes first", tgp: hour, annotations: at(deleted), want: ptr.To(deleted)},
		{name: "annotation without a grace period", annotations: at(deleted.Add(time.Minute)), want: ptr.To(deleted.Add(time.Minute))},
		{name: "grace period comes first", tgp: hour, annotations: at(deleted.Add(2 * time.Hour)), want: ptr.To(deleted.Add(time.Hour))},
		{name: "unreadable annotation is ignored", tgp: hour,
			annotations: map[string]string{v1.NodeClaimTerminationTimestampAnnotationKey: "soon"}, want: ptr.To(deleted.Add(time.Hour))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: tc.annotations}}
			nc.Spec.TerminationGracePeriod = tc.tgp
			got := claimDeadline(nc, node)
			if (got == nil) != (tc.want == nil) || (got != nil && !got.Equal(*tc.want)) {
				t.Fatalf("claimDeadline = %v, want %v", got, tc.want)
			}
		})
	}
}
