package operator

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

func fullPod() *corev1.Pod {
	req := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{v1.DoNotDisruptAnnotationKey: "true",
				corev1.LastAppliedConfigAnnotation: `{"a":"very long copy"}`},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "sidecar", Image: "envoy", RestartPolicy: &always, Resources: req,
				Command: []string{"envoy"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: req, Args: []string{"--serve"},
				Ports:          []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				LivenessProbe:  &corev1.Probe{PeriodSeconds: 10},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 5}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}},
			NodeSelector:      map[string]string{"pool": "a"},
			Tolerations:       []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			Affinity:          &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
			PriorityClassName: "system-cluster-critical",
			Overhead:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse},
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}},
			PodIP: "10.0.0.1", QOSClass: corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1"}}},
	}
}

// The trimmed pod must look the same to everything that reads pods.
func TestTrimPodKeepsWhatTailorReads(t *testing.T) {
	full := fullPod()
	got, err := trimPod(fullPod())
	if err != nil {
		t.Fatal(err)
	}
	pod := got.(*corev1.Pod)
	if diff := cmp.Diff(scheduling.PodRequests(full), scheduling.PodRequests(pod)); diff != "" {
		t.Errorf("requests changed (-full +trimmed):\n%s", diff)
	}
	if !state.Provisionable(pod) {
		t.Error("the trimmed pod is no longer provisionable")
	}
	same := func(name string, a, b any) {
		t.Helper()
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s changed (-full +trimmed):\n%s", name, diff)
		}
	}
	same("labels", full.Labels, pod.Labels)
	same("owners", full.OwnerReferences, pod.OwnerReferences)
	same("do-not-disrupt", full.Annotations[v1.DoNotDisruptAnnotationKey], pod.Annotations[v1.DoNotDisruptAnnotationKey])
	same("ports", full.Spec.Containers[0].Ports, pod.Spec.Containers[0].Ports)
	same("node selector", full.Spec.NodeSelector, pod.Spec.NodeSelector)
	same("tolerations", full.Spec.Tolerations, pod.Spec.Tolerations)
	same("affinity", full.Spec.Affinity, pod.Spec.Affinity)
	same("spread", full.Spec.TopologySpreadConstraints, pod.Spec.TopologySpreadConstraints)
	same("priority class", full.Spec.PriorityClassName, pod.Spec.PriorityClassName)
	same("volumes", full.Spec.Volumes[:1], pod.Spec.Volumes)
	same("phase", full.Status.Phase, pod.Status.Phase)

	if pod.ManagedFields != nil || pod.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
		t.Error("managedFields or the last-applied annotation were kept")
	}
	c := pod.Spec.Containers[0]
	if c.Image != "" || c.Args != nil || c.LivenessProbe != nil || c.VolumeMounts != nil || pod.Spec.InitContainers[0].Env != nil {
		t.Errorf("container kept what nothing reads: %+v", c)
	}
	if pod.Status.ContainerStatuses != nil {
		t.Error("container statuses were kept")
	}
	kept := func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled || c.Type == corev1.PodReady }
	if !slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled }) ||
		!slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady }) ||
		slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return !kept(c) }) ||
		pod.Status.PodIP != "" || pod.Status.QOSClass != "" {
		t.Errorf("status kept what nothing reads: %+v", pod.Status)
	}

	// A relist hands an object in again: trimming twice changes nothing more.
	again, _ := trimPod(pod.DeepCopy())
	same("second trim", pod, again)
}

func TestTrimNode(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "sim:///a/i-1", Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"pause"}}}},
	}
	want := node.DeepCopy()
	want.ManagedFields, want.Status.Images = nil, nil
	got, err := trimNode(node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
