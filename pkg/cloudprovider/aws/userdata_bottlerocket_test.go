package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
)

// The user's Bottlerocket TOML is merged as Karpenter v1.14 merges it: the
// cluster, DNS, max pods, the NodeClass's kubelet settings (each replacing the
// user's setting as a whole) and the claim's taints are Tailor's; the claim's
// labels join the user's; keys Karpenter does not know are dropped; the user's
// other settings stay.
func TestBottlerocketUserDataMerge(t *testing.T) {
	cluster := Cluster{Name: "test-cluster", Endpoint: "https://test-cluster", CABundle: "Y2EtYnVuZGxlCg==", ServiceCIDR: "10.0.100.0/24"}
	labels := map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"}
	taints := []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoExecute}, {Key: "baz", Value: "bin", Effect: corev1.TaintEffectNoExecute},
		{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}
	const ours = `
[settings.kubernetes]
api-server = 'https://test-cluster'
cluster-certificate = 'Y2EtYnVuZGxlCg=='
cluster-name = 'test-cluster'
cluster-dns-ip = '10.0.100.10'
max-pods = 110
[settings.kubernetes.node-labels]
'karpenter.sh/capacity-type' = 'on-demand'
'karpenter.sh/nodepool' = 'default'
[settings.kubernetes.node-taints]
baz = ['bin:NoExecute']
foo = ['bar:NoExecute']
'karpenter.sh/unregistered' = [':NoExecute']
`
	for _, tc := range []struct {
		name     string
		cluster  *Cluster
		kubelet  *awsv1.KubeletConfiguration
		raid0    bool
		userData string
		want     string
	}{
		{
			name: "no user data",
			want: ours,
		},
		{
			// Karpenter's own fixture (br_userdata_input / br_userdata_merged), as a user would write it.
			name: "Karpenter's merge example",
			userData: `[settings.kubernetes]
"unknown-setting" = "unknown"
api-server = 'replaceme'
cloud-provider = 'external'
cluster-certificate = "replaceme"
cluster-name = 'replaceme'
max-pods = 9999999999

[settings.kubernetes.eviction-hard]
"memory.available" = "12%"

[settings.kubernetes.labels]
"replace" = "me"

[settings.kubernetes.node-labels]
"custom-node-label" = "custom"
"karpenter.sh/nodepool" = "should-be-overridden"

[settings.kubernetes.node-taints]
"replace" = ["me:NoSchedule"]

[settings.network]
hostname = "test.local"
https-proxy = "1.2.3.4:8080"
no-proxy = ["localhost", "127.0.0.1"]

[settings.ntp]
time-servers = ["169.254.169.123"]
`,
			want: `
[settings.kubernetes]
api-server = 'https://test-cluster'
cloud-provider = 'external'
cluster-certificate = 'Y2EtYnVuZGxlCg=='
cluster-name = 'test-cluster'
cluster-dns-ip = '10.0.100.10'
max-pods = 110
[settings.kubernetes.node-labels]
custom-node-label = 'custom'
'karpenter.sh/capacity-type' = 'on-demand'
'karpenter.sh/nodepool' = 'default'
[settings.kubernetes.node-taints]
baz = ['bin:NoExecute']
foo = ['bar:NoExecute']
'karpenter.sh/unregistered' = [':NoExecute']
[settings.kubernetes.eviction-hard]
'memory.available' = '12%'
[settings.network]
hostname = 'test.local'
https-proxy = '1.2.3.4:8080'
no-proxy = ['localhost', '127.0.0.1']
[settings.ntp]
time-servers = ['169.254.169.123']
`,
		},
		{
			name: "each kubelet setting of the NodeClass replaces the user's as a whole; the user's others stay",
			kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(35), ClusterDNS: []string{"10.0.1.100"},
				EvictionHard:                map[string]awsv1.EvictionThreshold{"memory.available": "5%"},
				KubeReserved:                map[string]awsv1.ReservedQuantity{"memory": "1Gi"},
				EvictionSoftGracePeriod:     map[string]metav1.Duration{"memory.available": {Duration: time.Minute}},
				EvictionSoft:                map[string]awsv1.EvictionThreshold{"memory.available": "10%"},
				ImageGCHighThresholdPercent: aws.Int32(85), EvictionMaxPodGracePeriod: aws.Int32(10), CPUCFSQuota: aws.Bool(false)},
			userData: `[settings.kubernetes]
max-pods = 500
cluster-dns-ip = "10.9.9.9"
image-gc-high-threshold-percent = 95
image-gc-low-threshold-percent = 70
kube-api-qps = 30
shutdown-grace-period = "30s"
[settings.kubernetes.eviction-hard]
"memory.available" = "12%"
"nodefs.available" = "20%"
[settings.kubernetes.kube-reserved]
cpu = "1"
[settings.kubernetes.system-reserved]
cpu = "100m"
`,
			want: `
[settings.kubernetes]
api-server = 'https://test-cluster'
cluster-certificate = 'Y2EtYnVuZGxlCg=='
cluster-name = 'test-cluster'
cluster-dns-ip = '10.0.1.100'
max-pods = 35
image-gc-high-threshold-percent = 85
image-gc-low-threshold-percent = 70
eviction-max-pod-grace-period = 10
cpu-cfs-quota-enforced = false
kube-api-qps = 30
shutdown-grace-period = "30s"
[settings.kubernetes.eviction-hard]
'memory.available' = '5%'
[settings.kubernetes.eviction-soft]
'memory.available' = '10%'
[settings.kubernetes.eviction-soft-grace-period]
'memory.available' = '1m0s'
[settings.kubernetes.kube-reserved]
memory = '1Gi'
[settings.kubernetes.system-reserved]
cpu = '100m'
[settings.kubernetes.node-labels]
'karpenter.sh/capacity-type' = 'on-demand'
'karpenter.sh/nodepool' = 'default'
[settings.kubernetes.node-taints]
baz = ['bin:NoExecute']
foo = ['bar:NoExecute']
'karpenter.sh/unregistered' = [':NoExecute']
`,
		},
		{
			name:     "the user's cluster DNS stays when Tailor knows none",
			cluster:  &Cluster{Name: "test-cluster", Endpoint: "https://test-cluster", CABundle: "Y2EtYnVuZGxlCg=="},
			userData: "[settings.kubernetes]\ncluster-dns-ip = '10.9.9.9'\n",
			want:     replaceLine(ours, "cluster-dns-ip = '10.0.100.10'", "cluster-dns-ip = '10.9.9.9'"),
		},
		{
			name: "outside settings.kubernetes: only [settings] is kept; entries lose the fields Karpenter does not know; RAID0's command replaces the user's of its name",
			userData: `top-level = "dropped"
[settings.kubernetes.credential-providers.ecr-credential-provider]
enabled = true
image-patterns = ["*.dkr.ecr.*.amazonaws.com"]
unknown-field = "dropped"
[settings.kubernetes.static-pods.probe]
enabled = true
manifest = "bWFuaWZlc3Q="
size = 3
[settings.bootstrap-commands.010-mine]
commands = [["echo", "hi"]]
mode = "once"
essential = false
color = "dropped"
[settings.bootstrap-commands.000-mount-instance-storage]
commands = [["true"]]
mode = "off"
essential = false
[settings.host-containers.admin]
enabled = true
`,
			raid0: true,
			want: ours + `
[settings.kubernetes.credential-providers.ecr-credential-provider]
enabled = true
image-patterns = ['*.dkr.ecr.*.amazonaws.com']
[settings.kubernetes.static-pods.probe]
enabled = true
manifest = 'bWFuaWZlc3Q='
[settings.bootstrap-commands.010-mine]
commands = [['echo', 'hi']]
mode = 'once'
essential = false
[settings.bootstrap-commands.000-mount-instance-storage]
commands = [['apiclient', 'ephemeral-storage', 'init'], ['apiclient', 'ephemeral-storage', 'bind', '--dirs', '/var/lib/containerd', '/var/lib/kubelet', '/var/log/pods']]
mode = 'always'
essential = true
[settings.host-containers.admin]
enabled = true
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster
			if tc.cluster != nil {
				c = *tc.cluster
			}
			maxPods := int32(110)
			if tc.kubelet != nil && tc.kubelet.MaxPods != nil {
				maxPods = *tc.kubelet.MaxPods
			}
			b := Bootstrap{Cluster: c, Family: awsv1.AMIFamilyBottlerocket, Kubelet: tc.kubelet, MaxPods: maxPods,
				Labels: labels, Taints: taints, RAID0: tc.raid0}
			if tc.userData != "" {
				b.UserData = &tc.userData
			}
			got, err := UserData(b)
			if err != nil {
				t.Fatal(err)
			}
			var gotDoc, wantDoc map[string]any
			if _, err := toml.Decode(got, &gotDoc); err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			if _, err := toml.Decode(tc.want, &wantDoc); err != nil {
				t.Fatalf("the test's want: %v", err)
			}
			if diff := cmp.Diff(wantDoc, gotDoc); diff != "" {
				t.Errorf("merged user data (-want +got):\n%s\n%s", diff, got)
			}
		})
	}
}

// replaceLine replaces the one line of s that is old.
func replaceLine(s, old, new string) string {
	lines := strings.Split(s, "\n")
	i := slices.Index(lines, old)
	if i < 0 {
		panic("replaceLine: no line " + old)
	}
	lines[i] = new
	return strings.Join(lines, "\n")
}

// Merged user data boots on the referee (Bottlerocket's settings API and the
// kubelet, hack/eksnode): a user data that Bottlerocket would refuse whole (keys it
// does not know) still joins, with the user's labels and settings Tailor leaves
// alone, the claim's taints only, and the NodeClass's kubelet settings in place of
// the user's.
func TestBottlerocketMergeBootsOnTheReferee(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"))
	cluster := Cluster{Name: "tailor", Endpoint: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com", CABundle: ca, ServiceCIDR: "10.100.0.0/16"}
	fakeCluster := fakeaws.Cluster{Name: cluster.Name, Endpoint: cluster.Endpoint, CertificateAuthority: ca, ServiceIPv4CIDR: cluster.ServiceCIDR}
	labels := map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"}
	taints := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}
	user := `[settings.kubernetes]
"unknown-setting" = "unknown"
cluster-name = "someone-else"
api-server = "https://elsewhere"
max-pods = 9999
kube-api-qps = 30
[settings.kubernetes.labels]
"replace" = "me"
[settings.kubernetes.node-labels]
"custom-node-label" = "custom"
"karpenter.sh/nodepool" = "should-be-overridden"
[settings.kubernetes.node-taints]
"replace" = ["me:NoSchedule"]
[settings.kubernetes.eviction-hard]
"memory.available" = "12%"
"nodefs.available" = "20%"
[settings.kubernetes.system-reserved]
cpu = "150m"
[settings.ntp]
time-servers = ["169.254.169.123"]
`
	for _, tc := range []struct {
		name    string
		kubelet *awsv1.KubeletConfiguration
		// evictionHard and systemReserved the kubelet runs with.
		evictionHard, systemReserved map[string]string
		pods                         string
	}{
		{name: "no kubelet settings: the user's stand", evictionHard: map[string]string{"memory.available": "12%", "nodefs.available": "20%"},
			systemReserved: map[string]string{"cpu": "150m"}, pods: "58"},
		{name: "the NodeClass's replace the user's", kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(40),
			EvictionHard: map[string]awsv1.EvictionThreshold{"memory.available": "5%"}, EvictionSoft: map[string]awsv1.EvictionThreshold{"memory.available": "10%"},
			EvictionSoftGracePeriod: map[string]metav1.Duration{"memory.available": {Duration: time.Minute}}},
			evictionHard: map[string]string{"memory.available": "5%"}, systemReserved: map[string]string{"cpu": "150m"}, pods: "40"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxPods := int32(58)
			if tc.kubelet != nil && tc.kubelet.MaxPods != nil {
				maxPods = *tc.kubelet.MaxPods
			}
			ud, err := UserData(Bootstrap{Cluster: cluster, Family: awsv1.AMIFamilyBottlerocket, Kubelet: tc.kubelet, MaxPods: maxPods,
				Labels: labels, Taints: taints, UserData: &user})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			node, err := fakeaws.Boot(ctx, fakeaws.BootRequest{Family: "Bottlerocket", InstanceType: "m5.2xlarge", VCPUs: 8, MemoryMiB: 32768, UserData: ud, Cluster: fakeCluster})
			if err != nil {
				t.Fatalf("%v\nuser data:\n%s", err, ud)
			}
			wantLabels := map[string]string{"custom-node-label": "custom", "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"}
			for k, v := range wantLabels {
				if node.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
				}
			}
			var gotTaints []string
			for _, taint := range node.Taints {
				gotTaints = append(gotTaints, taint.ToString())
			}
			slices.Sort(gotTaints)
			if diff := cmp.Diff([]string{"dedicated=gpu:NoSchedule", "karpenter.sh/unregistered:NoExecute"}, gotTaints); diff != "" {
				t.Errorf("taints: the claim's only (-want +got):\n%s", diff)
			}
			if got := node.Allocatable[corev1.ResourcePods]; got.Cmp(resource.MustParse(tc.pods)) != 0 {
				t.Errorf("pods %s, want %s", got.String(), tc.pods)
			}
			if node.Kubelet["kubeAPIQPS"] != float64(30) {
				t.Errorf("kubeAPIQPS %v: the user's setting must stay", node.Kubelet["kubeAPIQPS"])
			}
			for field, want := range map[string]map[string]string{"evictionHard": tc.evictionHard, "systemReserved": tc.systemReserved} {
				got := map[string]string{}
				m, _ := node.Kubelet[field].(map[string]any)
				for k, v := range m {
					got[k] = fmt.Sprint(v)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("kubelet %s (-want +got):\n%s", field, diff)
				}
			}
		})
	}
}
