package fakeaws

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const al2023UserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: tailor
  kubelet:
    config:
      maxPods: 20
      kubeReserved:
        cpu: 100m
    flags:
    - --node-labels="karpenter.sh/nodepool=default,karpenter.sh/capacity-type=on-demand"
    - --register-with-taints="karpenter.sh/unregistered:NoExecute,dedicated=gpu:NoSchedule"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo hello

--//--
`

const bottlerocketUserData = `[settings.kubernetes]
api-server = "https://example.com"
max-pods = 17

[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "br"

[settings.kubernetes.node-taints]
"karpenter.sh/unregistered" = [":NoExecute"]
"dedicated" = ["gpu:NoSchedule"]
`

const bootstrapUserData = `#!/bin/bash
/etc/eks/bootstrap.sh tailor --kubelet-extra-args '--node-labels=karpenter.sh/nodepool=custom --register-with-taints=karpenter.sh/unregistered:NoExecute --max-pods=11'
`

func TestParseUserData(t *testing.T) {
	unregistered := corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name, userData string
		labels         map[string]string
		taints         []corev1.Taint
		maxPods        int32
	}{
		{"al2023", al2023UserData, map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"}, []corev1.Taint{unregistered, gpu}, 20},
		{"bottlerocket", bottlerocketUserData, map[string]string{"karpenter.sh/nodepool": "br"}, []corev1.Taint{unregistered, gpu}, 17},
		{"bootstrap.sh", bootstrapUserData, map[string]string{"karpenter.sh/nodepool": "custom"}, []corev1.Taint{unregistered}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bc, err := parseUserData(tc.userData)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.labels, bc.labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.taints, bc.taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if bc.kubelet.MaxPods == nil || *bc.kubelet.MaxPods != tc.maxPods {
				t.Errorf("maxPods %v, want %d", bc.kubelet.MaxPods, tc.maxPods)
			}
		})
	}
	if _, err := parseUserData("#!/bin/bash\n/etc/eks/bootstrap.sh c --kubelet-extra-args '--register-with-taints=a:Sometimes'"); err == nil {
		t.Errorf("a taint with an unknown effect should not parse")
	}
}

func TestKubeletRegistersAndRemovesNodes(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: 10 * time.Second, TerminationDelay: time.Second})
	c := ec2Client(s)
	inv := s.InventorySnapshot()
	var image string
	for _, im := range inv.Images {
		if im.Architecture == "x86_64" {
			image = im.ID
		}
	}
	lt := must(c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("nodes"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(al2023UserData)))},
	})).ok(t)
	out := must(c.CreateFleet(ctx(t), &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(inv.Subnets[0].ID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})).ok(t)
	id := out.Instances[0].InstanceIds[0]

	kube := fake.NewClientBuilder().Build()
	k := NewKubelet(s, kube, KubeletOptions{RegistrationDelay: 5 * time.Second})
	nodes := func() []corev1.Node {
		list := &corev1.NodeList{}
		if err := kube.List(ctx(t), list); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	sync := func() {
		t.Helper()
		if err := k.Sync(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	clk.Step(10 * time.Second) // running
	sync()
	if n := len(nodes()); n != 0 {
		t.Fatalf("%d nodes before the registration delay", n)
	}
	clk.Step(5 * time.Second)
	sync()
	got := nodes()
	if len(got) != 1 {
		t.Fatalf("%d nodes, want 1", len(got))
	}
	inst, _ := s.Instance(id)
	n := got[0]
	if n.Name != inst.PrivateDNSName || n.Spec.ProviderID != "aws:///us-east-1a/"+id || n.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Errorf("node %s providerID %s annotations %v", n.Name, n.Spec.ProviderID, n.Annotations)
	}
	for k, v := range map[string]string{
		"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
		"topology.kubernetes.io/region": "us-east-1", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Key != "karpenter.sh/unregistered" {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	// m5.large with maxPods 20 and kube-reserved cpu 100m: memory 8192Mi less 7.5%
	// (615Mi) is 7577Mi; kube-reserved memory 11Mi × 20 + 255Mi = 475Mi; eviction 100Mi.
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m"), corev1.ResourceMemory: resource.MustParse("7002Mi"), corev1.ResourcePods: resource.MustParse("20")}
	for name, q := range want {
		if have := n.Status.Allocatable[name]; have.Cmp(q) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, have.String(), q.String())
		}
	}
	sync()
	if len(nodes()) != 1 {
		t.Fatalf("a second sync registered again")
	}

	// Nodes that are not the kubelet's are left alone.
	other := &corev1.Node{}
	other.Name = "someone-else"
	if err := kube.Create(ctx(t), other); err != nil {
		t.Fatal(err)
	}
	must(c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).ok(t)
	sync()
	if len(nodes()) != 2 {
		t.Fatalf("the node went while its instance was shutting down")
	}
	clk.Step(time.Second)
	sync()
	left := nodes()
	if len(left) != 1 || left[0].Name != "someone-else" {
		t.Fatalf("after termination: %v", left)
	}
	if err := kube.Get(ctx(t), client.ObjectKey{Name: inst.PrivateDNSName}, &corev1.Node{}); err == nil {
		t.Errorf("the terminated instance's node is still there")
	}
}
