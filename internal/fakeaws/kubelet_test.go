package fakeaws

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The cluster the referee tests' nodes join.
var refCluster = refereeCluster{Name: "tailor", Endpoint: "https://example.com",
	CertificateAuthority: base64.StdEncoding.EncodeToString([]byte("CA")), ServiceCIDR: "10.100.0.0/16"}

// al2023UserData is a NodeConfig for cluster c, in Karpenter's MIME layout, with
// kubelet settings and a shell script part.
func al2023UserData(c refereeCluster, kubeletConfig string) string {
	return `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: ` + c.Name + `
    apiServerEndpoint: ` + c.Endpoint + `
    certificateAuthority: ` + c.CertificateAuthority + `
    cidr: ` + c.ServiceCIDR + `
  kubelet:
    config:
` + kubeletConfig + `
    flags:
    - --node-labels="karpenter.sh/nodepool=default,karpenter.sh/capacity-type=on-demand"
    - --register-with-taints="karpenter.sh/unregistered:NoExecute,dedicated=gpu:NoSchedule"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo hello

--//--
`
}

const al2023Kubelet = `      maxPods: 20
      kubeReserved:
        cpu: 100m`

func bottlerocketUserData(c refereeCluster, extra string) string {
	return `[settings.kubernetes]
cluster-name = "` + c.Name + `"
api-server = "` + c.Endpoint + `"
cluster-certificate = "` + c.CertificateAuthority + `"
max-pods = 17
` + extra + `
[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "br"

[settings.kubernetes.node-taints]
"karpenter.sh/unregistered" = [":NoExecute"]
"dedicated" = ["gpu:NoSchedule"]
`
}

func bootstrapUserData(c refereeCluster, extraArgs string) string {
	return `#!/bin/bash -xe
/etc/eks/bootstrap.sh '` + c.Name + `' --apiserver-endpoint '` + c.Endpoint + `' --b64-cluster-ca '` + c.CertificateAuthority + `' \
--container-runtime containerd \
--dns-cluster-ip '10.100.0.10' \
--use-max-pods false \
--kubelet-extra-args '--node-labels="karpenter.sh/nodepool=custom" --register-with-taints="karpenter.sh/unregistered:NoExecute" ` + extraArgs + `'
`
}

func windowsUserData(c refereeCluster, extraArgs string) string {
	return `<powershell>
[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"
& $EKSBootstrapScriptFile -EKSClusterName '` + c.Name + `' -APIServerEndpoint '` + c.Endpoint + `' -Base64ClusterCA '` + c.CertificateAuthority + `' -KubeletExtraArgs '--node-labels="karpenter.sh/nodepool=win" ` + extraArgs + `' -DNSClusterIP '10.100.0.10' -ContainerRuntime "containerd"
</powershell>`
}

// boot asks the referee about one node of type m5.large (2 vCPUs, 8 GiB, 3 ENIs of
// 10 addresses: 29 pods) unless the request says otherwise.
func boot(t *testing.T, n refereeNode) refereeResult {
	t.Helper()
	if n.InstanceType == "" {
		n.InstanceType, n.VCPUs, n.MemoryMiB = "m5.large", 2, 8192
	}
	n.Instance, n.VMMemoryOverheadPercent, n.KubeletVolumeGiB = "i-0", DefaultVMMemoryOverheadPercent, 20
	if n.Cluster == (refereeCluster{}) {
		n.Cluster = refCluster
	}
	k := NewKubelet(nil, nil, KubeletOptions{})
	res, err := k.referee(ctx(t), []bootingInstance{{request: n}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// Each family's user data is read as its boot agent reads it: the labels, taints
// and max pods the node registers with.
func TestRefereeBootsEachFamily(t *testing.T) {
	unregistered := refereeTaint{Key: "karpenter.sh/unregistered", Effect: "NoExecute"}
	gpu := refereeTaint{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}
	for _, tc := range []struct {
		name, family, userData string
		labels                 map[string]string
		taints                 []refereeTaint
		pods, cpu, memory      string
	}{
		// 7577Mi seen; nodeadm reserves 11Mi × 29 ENI pods + 255Mi whatever maxPods
		// says, and the user's kubeReserved cpu replaces nodeadm's 70m.
		{"al2023", "AL2023", al2023UserData(refCluster, al2023Kubelet), map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"},
			[]refereeTaint{unregistered, gpu}, "20", "1900m", "6903Mi"},
		{"bottlerocket", "Bottlerocket", bottlerocketUserData(refCluster, ""), map[string]string{"karpenter.sh/nodepool": "br"}, []refereeTaint{unregistered, gpu}, "17", "1930m", "6903Mi"},
		{"bootstrap.sh", "AL2", bootstrapUserData(refCluster, "--max-pods=11"), map[string]string{"karpenter.sh/nodepool": "custom"}, []refereeTaint{unregistered}, "11", "1930m", "6903Mi"},
		// Windows: the primary interface's addresses less the node's own.
		// 7577Mi less 11Mi × 9 + 255Mi and 100Mi.
		{"windows", "Windows", windowsUserData(refCluster, "--max-pods=9"), map[string]string{"karpenter.sh/nodepool": "win"}, nil, "9", "1930m", "7123Mi"},
		{"sniffed", "", al2023UserData(refCluster, al2023Kubelet), map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"},
			[]refereeTaint{unregistered, gpu}, "20", "1900m", "6903Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := boot(t, refereeNode{Family: tc.family, UserData: tc.userData})
			if r.Error != "" {
				t.Fatalf("the node does not join: %s", r.Error)
			}
			if diff := cmp.Diff(tc.labels, r.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.taints, r.Taints, cmpopts.SortSlices(func(a, b refereeTaint) bool { return a.Key < b.Key })); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			for name, want := range map[string]string{"pods": tc.pods, "cpu": tc.cpu, "memory": tc.memory} {
				if got := resource.MustParse(r.Allocatable[name]); got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("allocatable %s = %s, want %s", name, r.Allocatable[name], want)
				}
			}
		})
	}
}

// User data the real boot agent or kubelet refuses, or that joins the wrong
// cluster, leaves a node that never registers, and says why.
func TestRefereeRefuses(t *testing.T) {
	other := refCluster
	other.CertificateAuthority = base64.StdEncoding.EncodeToString([]byte("another CA"))
	noCIDR := refCluster
	noCIDR.ServiceCIDR = ""
	for _, tc := range []struct {
		name, family, userData, want string
	}{
		{"evictionSoft without its grace period", "AL2023", al2023UserData(refCluster, "      evictionSoft:\n        memory.available: 5%"),
			"grace period must be specified for the soft eviction threshold memory.available"},
		{"no service CIDR", "AL2023", al2023UserData(noCIDR, al2023Kubelet), "CIDR is missing in cluster configuration"},
		{"a CA that is not base64", "AL2023", strings.Replace(al2023UserData(refCluster, al2023Kubelet), "certificateAuthority: "+refCluster.CertificateAuthority, "certificateAuthority: cluster-ca", 1), "illegal base64"},
		{"another cluster's CA", "AL2023", al2023UserData(other, al2023Kubelet), "certificate authority is not the cluster's"},
		// nodeadm reads the MIME headers from the first byte.
		{"MIME after a blank line", "AL2023", "\n" + al2023UserData(refCluster, al2023Kubelet), "decoding a NodeConfig"},
		{"a shell part that does not parse", "AL2023", strings.Replace(al2023UserData(refCluster, al2023Kubelet), "echo hello", "if then fi", 1), "does not parse"},
		{"a kubernetes.io label the kubelet may not set", "AL2023", strings.Replace(al2023UserData(refCluster, al2023Kubelet), "karpenter.sh/nodepool=default", "kubernetes.io/role=worker", 1), "unknown 'kubernetes.io' or 'k8s.io' labels"},
		{"an unknown kubelet flag", "AL2", bootstrapUserData(refCluster, "--max-pod=11"), "unknown flag: --max-pod"},
		{"a taint with an unknown effect", "AL2", bootstrapUserData(refCluster, "--register-with-taints=a:Sometimes"), "Sometimes"},
		{"an unknown option before the cluster name", "AL2", strings.Replace(bootstrapUserData(refCluster, ""), "/etc/eks/bootstrap.sh '", "/etc/eks/bootstrap.sh --max-pods 11 '", 1), `the cluster name would be "--max-pods"`},
		{"a reservation that is not a quantity", "AL2", bootstrapUserData(refCluster, "--kube-reserved=memory=lots"), `kubeReserved[memory] "lots"`},
		{"imageGC low above high", "AL2", bootstrapUserData(refCluster, "--image-gc-high-threshold=50 --image-gc-low-threshold=60"), "imageGCLowThresholdPercent"},
		{"a Bottlerocket setting it does not know", "Bottlerocket", bottlerocketUserData(refCluster, `eviction-soft-grace = "1m"`), "unknown setting settings.kubernetes.eviction-soft-grace"},
		{"Bottlerocket evictionSoft without its grace period", "Bottlerocket", bottlerocketUserData(refCluster, "[settings.kubernetes.eviction-soft]\n\"memory.available\" = \"10%\"\n"), "grace period must be specified"},
		{"a Windows parameter it does not know", "Windows", strings.Replace(windowsUserData(refCluster, ""), "-ContainerRuntime", "-Runtime", 1), "parameter name \"Runtime\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := boot(t, refereeNode{Family: tc.family, UserData: tc.userData})
			if !strings.Contains(r.Error, tc.want) {
				t.Errorf("error %q, want one saying %q", r.Error, tc.want)
			}
		})
	}
}

// Max pods come from AWS's own per-type limits, the default network card's
// interfaces only (as EKS publishes: p5.48xlarge 100, not 3,138).
func TestRefereeMaxPodsFromAWSLimits(t *testing.T) {
	for typ, want := range map[string]string{"p5.48xlarge": "100", "m5.large": "29", "m5.24xlarge": "737", "t3.micro": "4", "trn1.32xlarge": "247"} {
		r := boot(t, refereeNode{Family: "Bottlerocket", UserData: strings.Replace(bottlerocketUserData(refCluster, ""), "max-pods = 17\n", "", 1),
			InstanceType: typ, VCPUs: 8, MemoryMiB: 32768})
		if r.Error != "" || r.Capacity["pods"] != want {
			t.Errorf("%s: pods %q (%s), want %s", typ, r.Capacity["pods"], r.Error, want)
		}
	}
}

func TestKubeletRegistersAndRemovesNodes(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: 10 * time.Second, TerminationDelay: time.Second})
	c := ec2Client(s)
	id := launchAL2023(t, s, clusterOf(s))

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
	// (615Mi) is 7577Mi; nodeadm's kube-reserved memory follows the ENI max pods,
	// 11Mi × 29 + 255Mi = 574Mi; eviction 100Mi.
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m"), corev1.ResourceMemory: resource.MustParse("6903Mi"), corev1.ResourcePods: resource.MustParse("20")}
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

// clusterOf is the cluster a server's nodes join, as the referee is told it.
func clusterOf(s *Server) refereeCluster {
	c := s.Cluster()
	return refereeCluster{Name: c.Name, Endpoint: c.Endpoint, CertificateAuthority: c.CertificateAuthority, ServiceCIDR: c.ServiceIPv4CIDR}
}

// An instance whose user data its boot agent refuses runs, but its node never
// registers, and the kubelet says why.
func TestKubeletOfARefusedBoot(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: time.Second})
	c := ec2Client(s)
	wrong := clusterOf(s)
	wrong.Endpoint = "https://elsewhere.example.com"
	id := launchAL2023(t, s, wrong)
	kube := fake.NewClientBuilder().Build()
	k := NewKubelet(s, kube, KubeletOptions{})
	clk.Step(time.Second)
	if err := k.Sync(ctx(t)); err == nil || !strings.Contains(err.Error(), "never joins") {
		t.Errorf("sync: %v, want the instance's node refused", err)
	}
	if err := k.Sync(ctx(t)); err != nil {
		t.Errorf("a second sync asked again: %v", err)
	}
	if why := k.BootError(id); !strings.Contains(why, "API server endpoint") {
		t.Errorf("BootError %q, want the wrong endpoint named", why)
	}
	// The instance's console says so too, as EC2's GetConsoleOutput serves it.
	console := must(c.GetConsoleOutput(ctx(t), &ec2.GetConsoleOutputInput{InstanceId: aws.String(id), Latest: aws.Bool(true)})).ok(t)
	if text, err := base64.StdEncoding.DecodeString(aws.ToString(console.Output)); err != nil || !strings.Contains(string(text), "API server endpoint") {
		t.Errorf("console output %q (%v), want the boot failure", text, err)
	}
	list := &corev1.NodeList{}
	if err := kube.List(ctx(t), list); err != nil || len(list.Items) != 0 {
		t.Errorf("nodes %v (%v), want none", list.Items, err)
	}
}

// A field nodeadm or the kubelet does not know is dropped, as they drop it (the
// node joins without the setting), and the referee says so.
func TestRefereeWarnsOfIgnoredFields(t *testing.T) {
	for _, tc := range []struct{ name, userData, want string }{
		{"a kubelet field the kubelet does not know", al2023UserData(refCluster, "      maxPod: 20"), `unknown field "maxPod"`},
		{"a NodeConfig field nodeadm does not know", strings.Replace(al2023UserData(refCluster, al2023Kubelet), "  kubelet:", "  kubelets: {}\n  kubelet:", 1), `unknown field "spec.kubelets"`},
		// bootstrap.sh reads --opt value only; the --opt=value form is a positional
		// argument it drops.
		{"a bootstrap.sh option in the --opt=value form", strings.Replace(bootstrapUserData(refCluster, ""), "--use-max-pods false", "--use-max-pods false --local-disks=raid0", 1), `bootstrap.sh ignores "--local-disks=raid0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			family := "AL2023"
			if strings.Contains(tc.userData, "bootstrap.sh") {
				family = "AL2"
			}
			r := boot(t, refereeNode{Family: family, UserData: tc.userData})
			if r.Error != "" {
				t.Fatalf("the node does not join: %s", r.Error)
			}
			if !strings.Contains(strings.Join(r.Warnings, "; "), tc.want) {
				t.Errorf("warnings %q, want one saying %q", r.Warnings, tc.want)
			}
		})
	}
	if r := boot(t, refereeNode{Family: "AL2023", UserData: al2023UserData(refCluster, al2023Kubelet)}); len(r.Warnings) > 0 {
		t.Errorf("warnings %q for user data both know", r.Warnings)
	}
}

// Karpenter's own user data (its AWS provider's merged goldens, testdata/karpenter)
// boots on the referee: the referee is no stricter than the boot agents Karpenter's
// nodes boot with. The AL2023 goldens carry a user NodeConfig with a field nodeadm
// does not know (clusterEndpoint), which nodeadm drops: a warning, not a refusal.
func TestRefereeBootsKarpentersUserData(t *testing.T) {
	cluster := refereeCluster{Name: "test-cluster", Endpoint: "https://test-cluster", CertificateAuthority: "Y2EtYnVuZGxlCg=="}
	for file, tc := range map[string]struct {
		family, cidr, warning string
	}{
		"al2023_mime_userdata_merged.golden":  {"AL2023", "10.100.0.0/16", `unknown field "spec.cluster.clusterEndpoint"`},
		"al2023_yaml_userdata_merged.golden":  {"AL2023", "10.100.0.0/16", `unknown field "spec.cluster.clusterEndpoint"`},
		"al2023_shell_userdata_merged.golden": {"AL2023", "10.100.0.0/16", ""},
		"al2_userdata_merged.golden":          {"AL2", "", ""},
		"br_userdata_merged.golden":           {"Bottlerocket", "", ""},
		"windows_userdata_merged.golden":      {"Windows", "", ""},
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "karpenter", file))
			if err != nil {
				t.Fatal(err)
			}
			// The goldens' placeholders: the NodeClass and NodePool names, and the
			// fmt escape of a literal %. Their user NodeConfig's made-up CA
			// ("cluster-ca") is not base64, which nodeadm refuses outright (the
			// field is bytes): it gets the cluster's.
			ud := strings.NewReplacer("%s=%s", "karpenter.sh/nodepool=default", "'%s' = '%s'", "'karpenter.sh/nodepool' = 'default'",
				"%s", "default", "%%", "%", "certificateAuthority: cluster-ca", "certificateAuthority: Y2EtYnVuZGxlCg==").Replace(string(data))
			c := cluster
			c.ServiceCIDR = tc.cidr
			r := boot(t, refereeNode{Family: tc.family, UserData: ud, Cluster: c})
			if r.Error != "" {
				t.Fatalf("Karpenter's user data does not join: %s", r.Error)
			}
			if got := strings.Join(r.Warnings, "; "); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
			if r.Labels["karpenter.sh/nodepool"] != "default" || r.Capacity["pods"] != "110" {
				t.Errorf("labels %v, pods %s: want Karpenter's nodepool label and its 110 pods", r.Labels, r.Capacity["pods"])
			}
		})
	}
}

// launchAL2023 launches one m5.large of the fake's AL2023 image whose user data
// joins cluster c, and returns its instance ID.
func launchAL2023(t *testing.T, s *Server, c refereeCluster) string {
	t.Helper()
	id, errs := launchAL2023In(t, s, c, s.InventorySnapshot().Subnets[0].ID, nil)
	if id == "" {
		t.Fatalf("no instance launched: %v", errs)
	}
	return id
}

// launchAL2023In launches an AL2023 node of cluster c into a subnet, with the
// launch template's network interfaces, and answers with its instance ID (""
// when the fleet launched none) and the fleet's errors.
func launchAL2023In(t *testing.T, s *Server, c refereeCluster, subnetID string, interfaces []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) (string, []ec2types.CreateFleetError) {
	t.Helper()
	ec := ec2Client(s)
	inv := s.InventorySnapshot()
	var image string
	for _, im := range inv.Images {
		if im.Architecture == "x86_64" && strings.Contains(im.Name, "al2023") {
			image = im.ID
		}
	}
	lt := must(ec.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(fmt.Sprintf("nodes-%d", len(s.Instances()))),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), NetworkInterfaces: interfaces,
			UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(al2023UserData(c, al2023Kubelet))))},
	})).ok(t)
	out := must(ec.CreateFleet(ctx(t), &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(subnetID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})).ok(t)
	if len(out.Instances) == 0 {
		return "", out.Errors
	}
	return out.Instances[0].InstanceIds[0], out.Errors
}

// In an IPv6 cluster the subnets are dual-stack; an instance gets an IPv6
// address on its primary interface when its launch asks (or its subnet assigns
// one), and its node registers with it as its InternalIP. An instance without
// one runs, but its boot agent finds no IPv6 address in IMDS and its node never
// joins, and the console says why; asking for one in an IPv4-only subnet fails
// the launch.
func TestIPv6ClusterNodes(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: time.Second, Cluster: Cluster{ServiceIPv6CIDR: "fd00:ab::/108"},
		Inventory: func(inv *Inventory) {
			vpc := inv.VPCID
			inv.Subnets = append(inv.Subnets,
				Subnet{ID: "subnet-0000000000000v4", VPCID: vpc, Zone: "us-east-1a", CIDR: "10.1.0.0/24"},
				Subnet{ID: "subnet-000000000000auto", VPCID: vpc, Zone: "us-east-1a", CIDR: "10.1.1.0/24",
					IPv6CIDR: "2600:1f14:aaaa:bb00::/64", AssignIPv6OnCreation: true})
		}})
	ec := ec2Client(s)
	cl := s.Cluster()
	cluster := refereeCluster{Name: cl.Name, Endpoint: cl.Endpoint, CertificateAuthority: cl.CertificateAuthority, ServiceCIDR: cl.serviceCIDR()}
	inv := s.InventorySnapshot()
	dual := inv.Subnets[0]
	if dual.IPv6CIDR == "" || dual.AssignIPv6OnCreation {
		t.Fatalf("default subnet %+v: want a dual-stack subnet that does not assign IPv6 addresses itself", dual)
	}
	subnets := must(ec.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{flt("ipv6-cidr-block-association.ipv6-cidr-block", dual.IPv6CIDR)}})).ok(t).Subnets
	if len(subnets) != 1 || len(subnets[0].Ipv6CidrBlockAssociationSet) != 1 ||
		aws.ToString(subnets[0].Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlock) != dual.IPv6CIDR ||
		subnets[0].Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlockState.State != ec2types.SubnetCidrBlockStateCodeAssociated {
		t.Fatalf("DescribeSubnets by its IPv6 block: %+v", subnets)
	}
	asks := []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{DeviceIndex: aws.Int32(0), PrimaryIpv6: aws.Bool(true), Ipv6AddressCount: aws.Int32(1)}}

	withV6, _ := launchAL2023In(t, s, cluster, dual.ID, asks)
	auto, _ := launchAL2023In(t, s, cluster, "subnet-000000000000auto", nil)
	without, _ := launchAL2023In(t, s, cluster, dual.ID, nil)
	if id, errs := launchAL2023In(t, s, cluster, "subnet-0000000000000v4", asks); id != "" || len(errs) != 1 || aws.ToString(errs[0].ErrorCode) != "InvalidParameterValue" {
		t.Errorf("an IPv6 address in an IPv4-only subnet: instance %q, errors %+v; want EC2 to refuse it", id, errs)
	}

	in := func(id, cidr string) string {
		t.Helper()
		i, _ := s.Instance(id)
		if a, err := netip.ParseAddr(i.IPv6); err != nil || !netip.MustParsePrefix(cidr).Contains(a) {
			t.Errorf("instance %s: IPv6 %q, want an address of %s", id, i.IPv6, cidr)
		}
		return i.IPv6
	}
	v6 := in(withV6, dual.IPv6CIDR)
	in(auto, "2600:1f14:aaaa:bb00::/64")
	if i, _ := s.Instance(without); i.IPv6 != "" {
		t.Errorf("an instance that asked for no IPv6 address in a subnet that assigns none got %s", i.IPv6)
	}
	described := must(ec.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{withV6}})).ok(t).Reservations[0].Instances[0]
	if aws.ToString(described.Ipv6Address) != v6 || len(described.NetworkInterfaces) != 1 || len(described.NetworkInterfaces[0].Ipv6Addresses) != 1 ||
		aws.ToString(described.NetworkInterfaces[0].Ipv6Addresses[0].Ipv6Address) != v6 || !aws.ToBool(described.NetworkInterfaces[0].Ipv6Addresses[0].IsPrimaryIpv6) {
		t.Errorf("DescribeInstances: Ipv6Address %q, interfaces %+v; want %s, the primary interface's primary IPv6 address", aws.ToString(described.Ipv6Address), described.NetworkInterfaces, v6)
	}

	kube := fake.NewClientBuilder().Build()
	k := NewKubelet(s, kube, KubeletOptions{})
	clk.Step(time.Second)
	if err := k.Sync(ctx(t)); err == nil || !strings.Contains(err.Error(), without) {
		t.Errorf("sync: %v, want the node of %s refused", err, without)
	}
	inst, _ := s.Instance(withV6)
	node := &corev1.Node{}
	if err := kube.Get(ctx(t), client.ObjectKey{Name: inst.PrivateDNSName}, node); err != nil {
		t.Fatal(err)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: v6}, {Type: corev1.NodeHostName, Address: inst.PrivateDNSName}, {Type: corev1.NodeInternalDNS, Address: inst.PrivateDNSName}}
	if diff := cmp.Diff(wantAddrs, node.Status.Addresses); diff != "" {
		t.Errorf("node addresses (-want +got):\n%s", diff)
	}
	// Max pods are the ENI formula in an IPv6 cluster too (nodeadm's, whatever
	// the family); the user data says 20.
	if pods := node.Status.Capacity[corev1.ResourcePods]; pods.Value() != 20 {
		t.Errorf("pods %s, want 20", pods.String())
	}
	if why := k.BootError(without); !strings.Contains(why, "no IPv6 address") {
		t.Errorf("BootError %q, want the missing IPv6 address named", why)
	}
	console := must(ec.GetConsoleOutput(ctx(t), &ec2.GetConsoleOutputInput{InstanceId: aws.String(without), Latest: aws.Bool(true)})).ok(t)
	if text, err := base64.StdEncoding.DecodeString(aws.ToString(console.Output)); err != nil || !strings.Contains(string(text), "network/interfaces/macs/<mac>/ipv6s") {
		t.Errorf("console output %q (%v), want the boot failure", text, err)
	}
}

// The device plugins' resources come from the type's EC2 facts: Neuron devices and
// their cores, Gaudi, AMD GPUs; EFA only as launched.
func TestDevicePluginResources(t *testing.T) {
	s := start(t, Options{})
	for typ, want := range map[string]map[corev1.ResourceName]int64{
		"inf2.xlarge":  {"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 2},
		"dl1.24xlarge": {"habana.ai/gaudi": 8},
		"g4ad.xlarge":  {"amd.com/gpu": 1},
		"g5.12xlarge":  {"nvidia.com/gpu": 4},
		"m5.large":     {},
	} {
		it := s.inv.types[typ]
		if it == nil {
			t.Errorf("%s is not in the fake's catalog", typ)
			continue
		}
		if got := devicePluginResources(it, 0); !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", typ, got, want)
		}
	}
	if got := devicePluginResources(s.inv.types["p5.48xlarge"], 4)["vpc.amazonaws.com/efa"]; got != 4 {
		t.Errorf("p5.48xlarge launched with 4 EFA interfaces: efa %d, want 4", got)
	}
}
