package scheduling_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

const ebs = "ebs.csi.aws.com"

// volumes is a small world of CSI volumes: bound claims on PVs of a driver, and
// unbound claims of a WaitForFirstConsumer class whose provisioner is the driver.
type volumes struct {
	pvs    []*corev1.PersistentVolume
	claims []*corev1.PersistentVolumeClaim
	class  *storagev1.StorageClass
}

func newVolumes() *volumes {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	return &volumes{class: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: ebs, VolumeBindingMode: &wait}}
}

// bound adds a claim bound to a PV of driver.
func (v *volumes) bound(name, driver string) {
	v.pvs = append(v.pvs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}}}})
	v.claims = append(v.claims, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
}

// unbound adds a claim of the class, waiting for its first consumer.
func (v *volumes) unbound(name string) {
	v.claims = append(v.claims, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &v.class.Name}})
}

func (v *volumes) into(in *Input) *Input {
	in.PersistentVolumes, in.PersistentVolumeClaims, in.StorageClasses = v.pvs, v.claims, []*storagev1.StorageClass{v.class}
	return in
}

func withClaims(names ...string) podOption {
	return func(p *corev1.Pod) {
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
		}
	}
}

func csiNode(node string, limits map[string]int32) *storagev1.CSINode {
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for driver, count := range limits {
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: driver, NodeID: node,
			Allocatable: &storagev1.VolumeNodeResources{Count: &count}})
	}
	return cn
}

// An existing node attaches at most its CSINode's allocatable count per driver,
// counting the volumes of the pods already there; a volume they already use costs
// nothing more, and other drivers have their own counts.
func TestCSIVolumeLimitsOnExistingNodes(t *testing.T) {
	vols := newVolumes()
	vols.bound("a", ebs)
	vols.bound("b", ebs)
	vols.bound("efs", "efs.csi.aws.com")
	vols.unbound("new")
	vols.bound("c", ebs)
	node := existingNode("full", "16", "64Gi", nil,
		makePod("old-a", "100m", "100Mi", withClaims("a")), makePod("old-b", "100m", "100Mi", withClaims("b")))
	pools := []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		limits map[string]int32
		bound  bool
	}{
		{"unbound claim of the driver", makePod("p", "1", "1Gi", withClaims("new")), map[string]int32{ebs: 2}, false},
		{"bound volume of the driver", makePod("p", "1", "1Gi", withClaims("c")), map[string]int32{ebs: 2}, false},
		{"room for one more", makePod("p", "1", "1Gi", withClaims("new")), map[string]int32{ebs: 3}, true},
		{"two more, room for one", makePod("p", "1", "1Gi", withClaims("new", "c")), map[string]int32{ebs: 3}, false},
		{"a volume already attached", makePod("p", "1", "1Gi", withClaims("a")), map[string]int32{ebs: 2}, true},
		{"another driver", makePod("p", "1", "1Gi", withClaims("efs")), map[string]int32{ebs: 2}, true},
		{"another driver's limit", makePod("p", "1", "1Gi", withClaims("efs")), map[string]int32{ebs: 2, "efs.csi.aws.com": 0}, false},
		{"no volumes", makePod("p", "1", "1Gi"), map[string]int32{ebs: 2}, true},
		{"no CSINode", makePod("p", "1", "1Gi", withClaims("new")), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := vols.into(&Input{Pods: []*corev1.Pod{tc.pod}, Nodes: []*Node{node}, NodePools: pools})
			if tc.limits != nil {
				in.CSINodes = []*storagev1.CSINode{csiNode("full", tc.limits)}
			}
			plan := solve(t, in)
			if bound := len(plan.Bindings) == 1; bound != tc.bound {
				t.Errorf("bound to the node: %v, want %v (new nodes %d)", bound, tc.bound, len(plan.NewNodes))
			}
			if len(plan.Unschedulable) > 0 {
				t.Errorf("unschedulable: %s", plan.Unschedulable[0].Reason)
			}
		})
	}
}

// A new node holds no more volumes of a driver than its instance type attaches;
// without a limit it holds as many as fit.
func TestCSIVolumeLimitsOnNewNodes(t *testing.T) {
	vols := newVolumes()
	var ps []*corev1.Pod
	for i := range 5 {
		name := fmt.Sprintf("data-%d", i)
		vols.unbound(name)
		ps = append(ps, makePod(fmt.Sprintf("db-%d", i), "100m", "100Mi", withClaims(name)))
	}
	limited := func(n int32) []*InstanceType {
		types := schedtest.SyntheticTypes(4)
		for _, it := range types {
			it.VolumeLimits = map[string]int32{ebs: n, "other.csi.example.com": 1}
		}
		return types
	}
	perNode := func(plan *Plan) []int {
		var out []int
		for _, n := range plan.NewNodes {
			out = append(out, len(n.Pods))
		}
		return out
	}

	plan := solve(t, vols.into(&Input{Pods: ps, NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}))
	if got := perNode(plan); len(got) != 1 {
		t.Errorf("no limit: pods per node %v, want one node", got)
	}

	plan = solve(t, vols.into(&Input{Pods: ps, NodePools: []*NodePool{pool(makeNodePool("default"), limited(2))}}))
	if got := perNode(plan); len(got) != 3 || len(plan.Unschedulable) != 0 {
		t.Errorf("limit 2: pods per node %v, unschedulable %d; want 3 nodes of at most 2", got, len(plan.Unschedulable))
	}
	for _, n := range plan.NewNodes {
		if len(n.Pods) > 2 {
			t.Errorf("node %s holds %d volumes of %s, its types attach 2", n.Name, len(n.Pods), ebs)
		}
	}

	plan = solve(t, vols.into(&Input{Pods: ps[:1], NodePools: []*NodePool{pool(makeNodePool("default"), limited(0))}}))
	if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "attaches") {
		t.Errorf("limit 0: new nodes %d, unschedulable %v; want the pod unschedulable for its volume", len(plan.NewNodes), plan.Unschedulable)
	}
}
