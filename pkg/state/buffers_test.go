package state

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func bufferOf(name string, mutate func(*cb.CapacityBufferSpec)) *cb.CapacityBuffer {
	b := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-" + "name"}}
	mutate(&b.Spec)
	return b
}

func shape(cpu, mem string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"karpenter.sh/do-not-disrupt": "true"}},
		Spec: corev1.PodSpec{NodeName: "somewhere", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

// Each buffer resolves to the placeholder pods its spec asks for, or is refused
// with a reason: nothing a buffer asks is accepted and then ignored.
func TestResolveBuffers(t *testing.T) {
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "ns", Generation: 3}, Template: shape("1", "1Gi")}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Template: shape("500m", "512Mi")},
		Status: appsv1.DeploymentStatus{Replicas: 15}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: appsv1.StatefulSetSpec{Template: shape("2", "4Gi")},
		Status: appsv1.StatefulSetStatus{Replicas: 4}}
	limits := func(cpu string) *cb.ResourceList {
		return &cb.ResourceList{"cpu": resource.MustParse(cpu)}
	}
	byTemplate := func(s *cb.CapacityBufferSpec) { s.PodTemplateRef = &cb.LocalObjectRef{Name: "chunk"} }
	byDeploy := func(s *cb.CapacityBufferSpec) {
		s.ScalableRef = &cb.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}
	}
	type want struct {
		pods     int
		replicas int32
		refused  string
		cpu      string // of each pod
	}
	for _, tc := range []struct {
		name string
		spec func(*cb.CapacityBufferSpec)
		want want
	}{
		{"replicas of a PodTemplate", func(s *cb.CapacityBufferSpec) { byTemplate(s); s.Replicas = ptr[int32](3) }, want{pods: 3, replicas: 3, cpu: "1"}},
		{"limits alone: as many as fit", func(s *cb.CapacityBufferSpec) { byTemplate(s); s.Limits = limits("2500m") }, want{pods: 2, replicas: 2, cpu: "1"}},
		{"limits cap replicas", func(s *cb.CapacityBufferSpec) { byTemplate(s); s.Replicas = ptr[int32](5); s.Limits = limits("3") }, want{pods: 3, replicas: 3, cpu: "1"}},
		{"limits the pod does not request do not cap replicas", func(s *cb.CapacityBufferSpec) {
			byTemplate(s)
			s.Replicas = ptr[int32](2)
			s.Limits = &cb.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}, want{pods: 2, replicas: 2, cpu: "1"}},
		{"percentage of a Deployment's replicas, rounded up", func(s *cb.CapacityBufferSpec) { byDeploy(s); s.Percentage = ptr[int32](10) }, want{pods: 2, replicas: 2, cpu: "500m"}},
		{"the larger of replicas and percentage", func(s *cb.CapacityBufferSpec) { byDeploy(s); s.Percentage = ptr[int32](10); s.Replicas = ptr[int32](4) }, want{pods: 4, replicas: 4, cpu: "500m"}},
		{"a StatefulSet's shape", func(s *cb.CapacityBufferSpec) {
			s.ScalableRef = &cb.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "db"}
			s.Percentage = ptr[int32](50)
		}, want{pods: 2, replicas: 2, cpu: "2"}},
		{"zero replicas: ready, no pods", func(s *cb.CapacityBufferSpec) { byTemplate(s); s.Replicas = ptr[int32](0) }, want{}},
		{"another strategy is refused", func(s *cb.CapacityBufferSpec) {
			byTemplate(s)
			s.Replicas = ptr[int32](1)
			s.ProvisioningStrategy = ptr("example.com/warm-pool")
		}, want{refused: BufferUnsupportedStrategy}},
		{"a kind Tailor cannot read is refused", func(s *cb.CapacityBufferSpec) {
			s.ScalableRef = &cb.ScalableRef{APIGroup: "argoproj.io", Kind: "Rollout", Name: "web"}
			s.Replicas = ptr[int32](1)
		}, want{refused: BufferUnsupportedScalableRef}},
		{"a missing PodTemplate is refused", func(s *cb.CapacityBufferSpec) {
			s.PodTemplateRef = &cb.LocalObjectRef{Name: "nope"}
			s.Replicas = ptr[int32](1)
		}, want{refused: BufferPodTemplateNotFound}},
		{"a missing workload is refused", func(s *cb.CapacityBufferSpec) {
			s.ScalableRef = &cb.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "nope"}
			s.Replicas = ptr[int32](1)
		}, want{refused: BufferScalableRefNotFound}},
		{"no shape is refused", func(s *cb.CapacityBufferSpec) { s.Replicas = ptr[int32](1) }, want{refused: BufferNoShape}},
		{"percentage of a PodTemplate is refused", func(s *cb.CapacityBufferSpec) { byTemplate(s); s.Percentage = ptr[int32](10) }, want{refused: BufferInvalidSpec}},
		{"no size is refused", func(s *cb.CapacityBufferSpec) { byDeploy(s) }, want{refused: BufferInvalidSpec}},
		{"limits alone that bound nothing are refused", func(s *cb.CapacityBufferSpec) {
			byTemplate(s)
			s.Limits = &cb.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}, want{refused: BufferInvalidSpec}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := &Objects{CapacityBuffers: []*cb.CapacityBuffer{bufferOf("b", tc.spec)}, PodTemplates: []*corev1.PodTemplate{tmpl},
				Deployments: []*appsv1.Deployment{deploy}, StatefulSets: []*appsv1.StatefulSet{sts}}
			snap := Build(objs, func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil }, BuildOptions{})
			if len(snap.Buffers) != 1 {
				t.Fatalf("buffers = %d, want 1", len(snap.Buffers))
			}
			b := snap.Buffers[0]
			got := want{pods: len(b.Pods), replicas: b.Replicas, refused: b.Refused}
			if len(b.Pods) > 0 {
				req := scheduling.PodRequests(b.Pods[0])
				got.cpu = req.Cpu().String()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got)\n%s\nmessage: %s", diff, b.Message)
			}
			if b.Refused != "" && b.Message == "" {
				t.Error("refused without a message")
			}
			if len(snap.Input.Pods) != 0 {
				t.Errorf("placeholders among the pending pods: %d", len(snap.Input.Pods))
			}
			for _, p := range b.Pods {
				if !IsBufferPod(p) || p.Spec.NodeName != "" || p.Namespace != "ns" || p.Labels["app"] != "web" {
					t.Errorf("placeholder %s: buffer pod %v, node %q, namespace %q, labels %v", p.Name, IsBufferPod(p), p.Spec.NodeName, p.Namespace, p.Labels)
				}
				if _, ok := p.Annotations[v1alpha1.CapacityBufferPodAnnotationKey]; !ok || len(p.Annotations) != 1 {
					t.Errorf("placeholder %s annotations %v, want only the buffer's", p.Name, p.Annotations)
				}
			}
		})
	}
}
