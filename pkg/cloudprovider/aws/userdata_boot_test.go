package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
// the cluster DNS at the range's tenth address, as EKS runs kube-dns there.
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
			node, err := fakeaws.Boot(t.Context(), fakeaws.BootRequest{Family: referee, InstanceType: "m5.large", VCPUs: 2, MemoryMiB: 8192, UserData: ud, Cluster: fakeCluster})
			if err != nil {
				t.Fatalf("%v\nuser data:\n%s", err, ud)
			}
			if dns, _ := node.Kubelet["clusterDNS"].([]any); len(dns) != 1 || dns[0] != "fd00:ab::a" {
				t.Errorf("clusterDNS %v, want [fd00:ab::a]", node.Kubelet["clusterDNS"])
			}
		})
	}
}

// End to end in an IPv6 cluster: the provider reads the IPv6 service range from
// DescribeCluster by the cluster's IP family, and the instance it launches joins
// (the fake's kubelet boots it through the referee).
func TestIPv6ClusterNodeJoins(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{PendingDelay: time.Millisecond, Cluster: fakeaws.Cluster{ServiceIPv6CIDR: "fd00:ab::/108"}})
	nc := e.nodeClass(t, nil)
	claim, err := e.cloud.Create(t.Context(), e.claim(nc, "v6"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := fakeclient.NewClientBuilder().Build()
	k := fakeaws.NewKubelet(e.fake, nodes, fakeaws.KubeletOptions{})
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k.Sync(t.Context())
		list := &corev1.NodeList{}
		if lerr := nodes.List(t.Context(), list); lerr != nil {
			t.Fatal(lerr)
		}
		if len(list.Items) == 1 {
			if list.Items[0].Spec.ProviderID != claim.Status.ProviderID {
				t.Errorf("node %s, want the claim's %s", list.Items[0].Spec.ProviderID, claim.Status.ProviderID)
			}
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("no node joined: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
