package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
)

// Tailor's user data for every AMI family, with every kubelet setting an
// EC2NodeClass can carry, boots on the referee: the node's own boot agent and
// kubelet (hack/eksnode) accept it, and the node registers with the claim's labels
// and taints and the allocatable the settings ask for.
func TestUserDataBootsOnTheReferee(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"))
	cluster := Cluster{Name: "tailor", Endpoint: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com", CABundle: ca, ServiceCIDR: "10.100.0.0/16"}
	fakeCluster := fakeaws.Cluster{Name: cluster.Name, Endpoint: cluster.Endpoint, CertificateAuthority: ca, ServiceIPv4CIDR: cluster.ServiceCIDR}
	q := func(s string) awsv1.ReservedQuantity { return awsv1.ReservedQuantity(s) }
	e := func(s string) awsv1.EvictionThreshold { return awsv1.EvictionThreshold(s) }
	full := &awsv1.KubeletConfiguration{
		MaxPods: aws.Int32(58), PodsPerCore: aws.Int32(20),
		SystemReserved:            map[string]awsv1.ReservedQuantity{"cpu": q("100m"), "memory": q("200Mi"), "ephemeral-storage": q("1Gi")},
		KubeReserved:              map[string]awsv1.ReservedQuantity{"cpu": q("200m"), "memory": q("300Mi"), "ephemeral-storage": q("2Gi")},
		EvictionHard:              map[string]awsv1.EvictionThreshold{"memory.available": e("5%"), "nodefs.available": e("10%"), "nodefs.inodesFree": e("10%")},
		EvictionSoft:              map[string]awsv1.EvictionThreshold{"memory.available": e("10%"), "nodefs.available": e("15%")},
		EvictionSoftGracePeriod:   map[string]metav1.Duration{"memory.available": {Duration: time.Minute}, "nodefs.available": {Duration: 90 * time.Second}},
		EvictionMaxPodGracePeriod: aws.Int32(60), ImageGCHighThresholdPercent: aws.Int32(85), ImageGCLowThresholdPercent: aws.Int32(80),
		CPUCFSQuota: aws.Bool(false),
	}
	labels := map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
		"node.kubernetes.io/instance-type": "m5.2xlarge", "team": "a"}
	taints := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}
	for _, tc := range []struct {
		family, referee string
		kubelet         *awsv1.KubeletConfiguration
		// pods: m5.2xlarge has 58 ENI pods; podsPerCore 20 × 8 vCPUs does not cap it.
		pods string
	}{
		{awsv1.AMIFamilyAL2023, "AL2023", nil, "58"},
		{awsv1.AMIFamilyAL2023, "AL2023", full, "58"},
		{awsv1.AMIFamilyAL2, "AL2", nil, "58"},
		{awsv1.AMIFamilyAL2, "AL2", full, "58"},
		{awsv1.AMIFamilyBottlerocket, "Bottlerocket", nil, "58"},
		{awsv1.AMIFamilyBottlerocket, "Bottlerocket", full, "58"},
		{awsv1.AMIFamilyWindows2022, "Windows", nil, "14"},
		{awsv1.AMIFamilyWindows2022, "Windows", &awsv1.KubeletConfiguration{MaxPods: aws.Int32(10), EvictionHard: full.EvictionHard,
			EvictionSoft: full.EvictionSoft, EvictionSoftGracePeriod: full.EvictionSoftGracePeriod, KubeReserved: full.KubeReserved}, "10"},
	} {
		name := tc.family + "/default"
		if tc.kubelet != nil {
			name = tc.family + "/every kubelet field"
		}
		t.Run(name, func(t *testing.T) {
			maxPods := int32(58)
			if tc.referee == "Windows" {
				maxPods = 14
			}
			if tc.kubelet != nil && tc.kubelet.MaxPods != nil {
				maxPods = *tc.kubelet.MaxPods
			}
			ud, err := UserData(Bootstrap{Cluster: cluster, Family: tc.family, Kubelet: tc.kubelet, MaxPods: maxPods, Labels: labels, Taints: taints})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			node, err := fakeaws.Boot(ctx, fakeaws.BootRequest{Family: tc.referee, InstanceType: "m5.2xlarge", VCPUs: 8, MemoryMiB: 32768, UserData: ud, Cluster: fakeCluster})
			if err != nil {
				t.Fatalf("%v\nuser data:\n%s", err, ud)
			}
			if len(node.Warnings) > 0 {
				t.Errorf("the boot agent or kubelet drop part of Tailor's user data: %q", node.Warnings)
			}
			for k, v := range labels {
				if node.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
				}
			}
			for _, want := range taints {
				found := false
				for _, got := range node.Taints {
					found = found || got.MatchTaint(&want)
				}
				if !found {
					t.Errorf("taint %v missing from %v", want, node.Taints)
				}
			}
			if got := node.Allocatable[corev1.ResourcePods]; got.Cmp(resource.MustParse(tc.pods)) != 0 {
				t.Errorf("pods %s, want %s", got.String(), tc.pods)
			}
			// Every setting asked for reaches the kubelet.
			if k := tc.kubelet; k != nil {
				cfg := node.Kubelet
				for field, want := range map[string]any{"maxPods": k.MaxPods, "podsPerCore": k.PodsPerCore, "evictionMaxPodGracePeriod": k.EvictionMaxPodGracePeriod,
					"imageGCHighThresholdPercent": k.ImageGCHighThresholdPercent, "imageGCLowThresholdPercent": k.ImageGCLowThresholdPercent} {
					if p := want.(*int32); p != nil && cfg[field] != float64(*p) {
						t.Errorf("kubelet %s = %v, want %d", field, cfg[field], *p)
					}
				}
				if k.CPUCFSQuota != nil && cfg["cpuCFSQuota"] != *k.CPUCFSQuota {
					t.Errorf("kubelet cpuCFSQuota = %v, want %v", cfg["cpuCFSQuota"], *k.CPUCFSQuota)
				}
				for field, want := range map[string]map[string]string{"kubeReserved": toStrings(k.KubeReserved), "systemReserved": toStrings(k.SystemReserved),
					"evictionHard": toStrings(k.EvictionHard), "evictionSoft": toStrings(k.EvictionSoft)} {
					got, _ := cfg[field].(map[string]any)
					for key, v := range want {
						if got[key] != v {
							t.Errorf("kubelet %s[%s] = %v, want %s (all: %v)", field, key, got[key], v, got)
						}
					}
				}
				got, _ := cfg["evictionSoftGracePeriod"].(map[string]any)
				for key, d := range k.EvictionSoftGracePeriod {
					if parsed, err := time.ParseDuration(fmt.Sprint(got[key])); err != nil || parsed != d.Duration {
						t.Errorf("kubelet evictionSoftGracePeriod[%s] = %v, want %s", key, got[key], d.Duration)
					}
				}
			}
		})
	}
}

// In an IPv6 cluster (service range fd00:ab::/108) every family's node joins with
// the cluster DNS at the range's tenth address, as EKS runs kube-dns there, and
// every Linux family's boot agent registers the node with its IPv6 address (AL2's
// bootstrap.sh only when told --ip-family ipv6: given the endpoint and CA it
// does not ask EKS, and takes the cluster for IPv4). Windows, which EKS does not
// run in IPv6 clusters, registers its IPv4 address.
func TestUserDataBootsInAnIPv6Cluster(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString([]byte("CA"))
	cluster := Cluster{Name: "v6", Endpoint: "https://V6.gr7.us-west-2.eks.amazonaws.com", CABundle: ca, ServiceCIDR: "fd00:ab::/108"}
	fakeCluster := fakeaws.Cluster{Name: cluster.Name, Endpoint: cluster.Endpoint, CertificateAuthority: ca, ServiceIPv4CIDR: cluster.ServiceCIDR}
	for family, referee := range map[string]string{awsv1.AMIFamilyAL2023: "AL2023", awsv1.AMIFamilyAL2: "AL2", awsv1.AMIFamilyBottlerocket: "Bottlerocket", awsv1.AMIFamilyWindows2022: "Windows"} {
		t.Run(family, func(t *testing.T) {
			ud, err := UserData(Bootstrap{Cluster: cluster, Family: family, MaxPods: 29, Labels: map[string]string{"karpenter.sh/nodepool": "v6"},
				Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}})
			if err != nil {
				t.Fatal(err)
			}
			node, err := fakeaws.Boot(t.Context(), fakeaws.BootRequest{Family: referee, InstanceType: "m5.large", VCPUs: 2, MemoryMiB: 8192, UserData: ud, Cluster: fakeCluster,
				PrivateIP: "10.0.3.7", IPv6Address: "2600:1f14:1:a00::7"})
			if err != nil {
				t.Fatalf("%v\nuser data:\n%s", err, ud)
			}
			if dns, _ := node.Kubelet["clusterDNS"].([]any); len(dns) != 1 || dns[0] != "fd00:ab::a" {
				t.Errorf("clusterDNS %v, want [fd00:ab::a]", node.Kubelet["clusterDNS"])
			}
			want := "2600:1f14:1:a00::7"
			if referee == "Windows" {
				want = "10.0.3.7"
			}
			if node.NodeIP != want {
				t.Errorf("node IP %s, want %s\nuser data:\n%s", node.NodeIP, want, ud)
			}
		})
	}
}

// End to end in an IPv6 cluster: the provider reads the IPv6 service range from
// DescribeCluster by the cluster's IP family, and the instance it launches joins
// (the fake's kubelet boots it through the referee) with the IPv6 address of its
// primary interface, from its subnet's IPv6 block, as its InternalIP. The fake's
// dual-stack subnets assign no IPv6 address on creation, so the instance has one
// only because the launch template asks for it.
func TestIPv6ClusterNodeJoins(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{PendingDelay: time.Millisecond, Cluster: fakeaws.Cluster{ServiceIPv6CIDR: "fd00:ab::/108"}})
	// AL2, which EKS publishes no images of for 1.33 and later, boots in
	// TestUserDataBootsInAnIPv6Cluster.
	for _, family := range []string{"al2023", "bottlerocket"} {
		t.Run(family, func(t *testing.T) {
			nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
				nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: family + "@latest"}}
			})
			claim, err := e.cloud.Create(t.Context(), e.claim(nc, "v6-"+family))
			if err != nil {
				t.Fatal(err)
			}
			inst := e.instanceOf(t, claim)
			node := joinedNode(t, e, inst)
			subnet := slices.IndexFunc(e.fake.InventorySnapshot().Subnets, func(s fakeaws.Subnet) bool { return s.ID == inst.SubnetID })
			block := netip.MustParsePrefix(e.fake.InventorySnapshot().Subnets[subnet].IPv6CIDR)
			want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: inst.IPv6},
				{Type: corev1.NodeHostName, Address: inst.PrivateDNSName}, {Type: corev1.NodeInternalDNS, Address: inst.PrivateDNSName}}
			if a, err := netip.ParseAddr(inst.IPv6); err != nil || !block.Contains(a) {
				t.Errorf("instance IPv6 address %q, want one of its subnet's block %s", inst.IPv6, block)
			}
			if diff := cmp.Diff(want, node.Status.Addresses); diff != "" {
				t.Errorf("node addresses (-want +got):\n%s", diff)
			}
			if node.Spec.ProviderID != claim.Status.ProviderID || node.Name != inst.PrivateDNSName {
				t.Errorf("node %s (%s), want the claim's %s named %s", node.Name, node.Spec.ProviderID, claim.Status.ProviderID, inst.PrivateDNSName)
			}
			// It takes pods: Ready, with the pod capacity the claim was planned with
			// (the ENI formula, in an IPv6 cluster too).
			ready := slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			})
			if pods := node.Status.Allocatable[corev1.ResourcePods]; !ready || pods.Value() != claim.Status.Allocatable.Pods().Value() || pods.Value() == 0 {
				t.Errorf("node ready %v, allocatable pods %s; want ready with the claim's %s", ready, pods.String(), claim.Status.Allocatable.Pods().String())
			}
		})
	}
}

// In an IPv6 cluster whose subnets have no IPv6 block, EC2 refuses the launch:
// the launch template asks for an IPv6 address, which such a subnet cannot give.
func TestIPv6ClusterWithoutDualStackSubnets(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{PendingDelay: time.Millisecond, Cluster: fakeaws.Cluster{ServiceIPv6CIDR: "fd00:ab::/108"},
		Inventory: func(inv *fakeaws.Inventory) {
			for i := range inv.Subnets {
				inv.Subnets[i].IPv6CIDR = ""
			}
		}})
	nc := e.nodeClass(t, nil)
	if _, err := e.cloud.Create(t.Context(), e.claim(nc, "v4-subnets")); err == nil || !strings.Contains(err.Error(), "IPv6") {
		t.Errorf("launch: %v, want EC2's refusal of an IPv6 address in an IPv4-only subnet", err)
	}
}

// joinedNode syncs the fake's kubelets until the instance's node registers.
func joinedNode(t *testing.T, e *testEnv, inst fakeaws.Instance) corev1.Node {
	t.Helper()
	nodes := fakeclient.NewClientBuilder().Build()
	k := fakeaws.NewKubelet(e.fake, nodes, fakeaws.KubeletOptions{})
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k.Sync(t.Context())
		list := &corev1.NodeList{}
		if lerr := nodes.List(t.Context(), list); lerr != nil {
			t.Fatal(lerr)
		}
		for _, n := range list.Items {
			if n.Annotations[fakeaws.InstanceAnnotation] == inst.ID {
				return n
			}
		}
		if why := k.BootError(inst.ID); why != "" {
			t.Fatalf("the node of %s never joins: %s", inst.ID, why)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node joined: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
