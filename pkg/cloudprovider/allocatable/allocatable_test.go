package allocatable

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func shape(cpu, memory string, pods int64, arch string) Shape {
	return Shape{CPU: resource.MustParse(cpu), Memory: resource.MustParse(memory), Pods: pods, Arch: arch}
}

// view prints the resources the scheduler counts, as Karpenter's instance-type
// reference lists them (cpu in millicores, memory in MiB, storage in GiB where whole).
func view(list corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			out[string(name)] = resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI).String()
		case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			out[string(name)] = resource.NewQuantity(q.Value(), resource.BinarySI).String()
		default:
			out[string(name)] = q.String()
		}
	}
	return out
}

func alloc(cpu, memory, storage, pods string) map[string]string {
	return map[string]string{"cpu": cpu, "memory": memory, "ephemeral-storage": storage, "pods": pods}
}

// The EKS model gives what Karpenter's instance-type reference publishes for AL2023
// nodes with no block device mappings (karpenter.sh, Reference → Instance Types).
func TestEKSMatchesKarpenterReference(t *testing.T) {
	for name, tc := range map[string]struct {
		shape Shape
		want  map[string]string
	}{
		"a1.medium (arm64)":  {shape("1", "2048Mi", 8, "arm64"), alloc("940m", "1392Mi", "17Gi", "8")},
		"a1.large (arm64)":   {shape("2", "4096Mi", 29, "arm64"), alloc("1930m", "3055Mi", "17Gi", "29")},
		"c1.medium":          {shape("2", "1740Mi", 12, "amd64"), alloc("1930m", "1122Mi", "17Gi", "12")},
		"c3.xlarge":          {shape("4", "7680Mi", 58, "amd64"), alloc("3920m", "6111Mi", "17Gi", "58")},
		"c3.8xlarge":         {shape("32", "61440Mi", 234, "amd64"), alloc("31850m", "53903Mi", "17Gi", "234")},
		"c4.8xlarge":         {shape("36", "61440Mi", 234, "amd64"), alloc("35840m", "53903Mi", "17Gi", "234")},
		"m6in.large":         {shape("2", "8Gi", 29, "amd64"), alloc("1930m", "6903Mi", "17Gi", "29")},
		"m6idn.16xlarge":     {shape("64", "256Gi", 737, "amd64"), alloc("63770m", "234021Mi", "17Gi", "737")},
		"m5.large (as m6in)": {shape("2", "8Gi", 29, "amd64"), alloc("1930m", "6903Mi", "17Gi", "29")},
		// 512Mi less 39Mi of VM overhead, 299Mi kube-reserved (4 pods) and 100Mi eviction.
		"t3a.nano": {shape("2", "512Mi", 4, "amd64"), alloc("1930m", "74Mi", "17Gi", "4")},
	} {
		t.Run(name, func(t *testing.T) {
			node, err := DefaultEKS().Node(tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, view(node.Allocatable())); diff != "" {
				t.Errorf("allocatable (-want +got):\n%s", diff)
			}
		})
	}
}

// Capacity already holds the VM overhead deduction; Overhead is the rest.
func TestEKSCapacityAndOverhead(t *testing.T) {
	node, err := DefaultEKS().Node(shape("2", "8Gi", 29, "amd64"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(alloc("2", "7577Mi", "20Gi", "29"), view(node.Capacity)); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	// kube-reserved 70m, 574Mi, 1Gi; eviction 100Mi and 10% of 20Gi.
	want := map[string]string{"cpu": "70m", "memory": "674Mi", "ephemeral-storage": "3Gi"}
	if diff := cmp.Diff(want, view(node.Overhead)); diff != "" {
		t.Errorf("overhead (-want +got):\n%s", diff)
	}
}

func TestEKSKubelet(t *testing.T) {
	m5 := shape("2", "8Gi", 29, "amd64")
	ptr := func(v int32) *int32 { return &v }
	for name, tc := range map[string]struct {
		model EKS
		shape Shape
		want  map[string]string
	}{
		// kube-reserved memory follows the pods: 11Mi × 110 + 255Mi.
		"maxPods": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{MaxPods: ptr(110)}}, m5, alloc("1930m", "6012Mi", "17Gi", "110")},
		"podsPerCore below the ENI limit": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{PodsPerCore: ptr(10)}}, m5,
			alloc("1930m", "7002Mi", "17Gi", "20")},
		"podsPerCore above maxPods": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{MaxPods: ptr(8), PodsPerCore: ptr(10)}}, m5,
			alloc("1930m", "7134Mi", "17Gi", "8")},
		"podsPerCore 0 is unset": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{PodsPerCore: ptr(0)}}, m5,
			alloc("1930m", "6903Mi", "17Gi", "29")},
		"no pod limit from the network": {DefaultEKS(), shape("2", "8Gi", 0, "amd64"), alloc("1930m", "6012Mi", "17Gi", "110")},
		// Each resource named replaces its computed default; the others stay.
		"kubeReserved": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{KubeReserved: map[string]string{"cpu": "200m", "memory": "1Gi"}}}, m5,
			alloc("1800m", "6453Mi", "17Gi", "29")},
		"systemReserved adds": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"}}}, m5,
			alloc("1830m", "6803Mi", "16Gi", "29")},
		// 5% of the 7577Mi capacity (397253018 bytes, rounded up); 15% of 20Gi.
		"evictionHard percentages": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "15%"}}}, m5,
			alloc("1930m", "6945924710", "16Gi", "29")},
		// The kubelet subtracts only the hard thresholds from allocatable.
		"evictionSoft above evictionHard takes nothing": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{EvictionHard: map[string]string{"memory.available": "200Mi"}, EvictionSoft: map[string]string{"memory.available": "500Mi"}}}, m5,
			alloc("1930m", "6803Mi", "17Gi", "29")},
		"evictionHard above evictionSoft": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{EvictionHard: map[string]string{"memory.available": "500Mi"}, EvictionSoft: map[string]string{"memory.available": "200Mi"}}}, m5,
			alloc("1930m", "6503Mi", "17Gi", "29")},
		"evictionSoft alone leaves the hard default": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{EvictionSoft: map[string]string{"memory.available": "500Mi"}}}, m5,
			alloc("1930m", "6903Mi", "17Gi", "29")},
		"100% disables a signal": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{EvictionHard: map[string]string{"nodefs.available": "100%"}}}, m5,
			alloc("1930m", "6903Mi", "19Gi", "29")},
		"other signals take no room": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{EvictionHard: map[string]string{"pid.available": "10%", "imagefs.available": "15%"}}}, m5,
			alloc("1930m", "6903Mi", "17Gi", "29")},
		"no VM overhead": {EKS{}, m5, alloc("1930m", "7518Mi", "17Gi", "29")},
		"a larger root volume": {DefaultEKS(), Shape{CPU: resource.MustParse("2"), Memory: resource.MustParse("8Gi"), Pods: 29, RootVolume: resource.MustParse("100Gi")},
			alloc("1930m", "6903Mi", "89Gi", "29")},
		// The kubelet never reports less than nothing.
		"reservations beyond the node": {EKS{VMMemoryOverheadPercent: 0.075, Kubelet: Kubelet{KubeReserved: map[string]string{"memory": "1Gi", "cpu": "3"}}}, shape("2", "512Mi", 4, "amd64"),
			alloc("0", "0", "17Gi", "4")},
	} {
		t.Run(name, func(t *testing.T) {
			node, err := tc.model.Node(tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, view(node.Allocatable())); diff != "" {
				t.Errorf("allocatable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEKSErrors(t *testing.T) {
	m5 := shape("2", "8Gi", 29, "amd64")
	for name, tc := range map[string]struct {
		model EKS
		want  string
	}{
		"kubeReserved quantity":    {EKS{Kubelet: Kubelet{KubeReserved: map[string]string{"memory": "lots"}}}, `kubelet.kubeReserved.memory: "lots" is not a quantity`},
		"systemReserved negative":  {EKS{Kubelet: Kubelet{SystemReserved: map[string]string{"cpu": "-1"}}}, `kubelet.systemReserved.cpu: "-1" is negative`},
		"evictionHard percentage":  {EKS{Kubelet: Kubelet{EvictionHard: map[string]string{"memory.available": "120%"}}}, `kubelet.evictionHard.memory.available: "120%" is not a percentage`},
		"evictionSoft quantity":    {EKS{Kubelet: Kubelet{EvictionSoft: map[string]string{"nodefs.available": "1 GB"}}}, `kubelet.evictionSoft.nodefs.available: "1 GB" is neither a quantity nor a percentage`},
		"VM overhead out of range": {EKS{VMMemoryOverheadPercent: 7.5}, "VM memory overhead 7.5"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.model.Node(m5)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestKwok(t *testing.T) {
	node, err := Kwok{}.Node(Shape{CPU: resource.MustParse("2"), Memory: resource.MustParse("8Gi"), Pods: 29, RootVolume: resource.MustParse("20Gi")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(alloc("1900m", "8182Mi", "20Gi", "29"), view(node.Allocatable())); diff != "" {
		t.Errorf("allocatable (-want +got):\n%s", diff)
	}
	// As kwok reads its format: 110 pods when the file has none, no storage unless listed.
	node, _ = Kwok{}.Node(shape("1", "1Gi", 0, ""))
	if diff := cmp.Diff(map[string]string{"cpu": "1", "memory": "1Gi", "pods": "110"}, view(node.Capacity)); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
}

func TestReservedCPU(t *testing.T) {
	for milli, want := range map[int64]int64{0: 0, 500: 30, 1000: 60, 1500: 65, 2000: 70, 3000: 75, 4000: 80, 8000: 90, 96000: 310, 192000: 550} {
		if got := reservedCPU(milli); got != want {
			t.Errorf("reservedCPU(%d) = %dm, want %dm", milli, got, want)
		}
	}
}

// Whatever the shape and settings the model accepts, allocatable lies between zero
// and capacity.
func FuzzEKS(f *testing.F) {
	f.Add(int64(2000), int64(8<<30), int64(29), int32(0), int32(0), "70m", "1Gi", "5%", "arm64")
	f.Add(int64(96000), int64(384<<30), int64(737), int32(110), int32(4), "", "", "100Mi", "amd64")
	f.Fuzz(func(t *testing.T, milli, memory, pods int64, maxPods, podsPerCore int32, cpuReserved, memReserved, evict, arch string) {
		if milli < 0 || memory < 0 || milli > 1e9 || memory > 1<<50 {
			return
		}
		m := DefaultEKS()
		if maxPods > 0 {
			m.Kubelet.MaxPods = &maxPods
		}
		if podsPerCore > 0 {
			m.Kubelet.PodsPerCore = &podsPerCore
		}
		m.Kubelet.KubeReserved = map[string]string{}
		if cpuReserved != "" {
			m.Kubelet.KubeReserved["cpu"] = cpuReserved
		}
		if memReserved != "" {
			m.Kubelet.KubeReserved["memory"] = memReserved
		}
		m.Kubelet.EvictionHard = map[string]string{"memory.available": evict}
		node, err := m.Node(Shape{CPU: *resource.NewMilliQuantity(milli, resource.DecimalSI), Memory: *resource.NewQuantity(memory, resource.BinarySI), Pods: pods, Arch: arch})
		if err != nil {
			return
		}
		a := node.Allocatable()
		for name, c := range node.Capacity {
			q := a[name]
			if q.Sign() < 0 || q.Cmp(c) > 0 {
				t.Errorf("%s: allocatable %s outside [0, capacity %s]", name, q.String(), c.String())
			}
		}
	})
}
