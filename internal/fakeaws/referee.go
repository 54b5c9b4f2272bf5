package fakeaws

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetailor/tailor/internal/localcluster"
)

// The request and answer of the eks-node-referee binary (hack/eksnode), which
// boots an instance as its real boot agent and kubelet would. Its types live in
// its own module; these mirror their JSON.
type refereeNode struct {
	Instance                string  `json:"instance"`
	Family                  string  `json:"family,omitempty"`
	UserData                string  `json:"userData"`
	InstanceType            string  `json:"instanceType"`
	VCPUs                   int64   `json:"vcpus"`
	MemoryMiB               int64   `json:"memoryMiB"`
	VMMemoryOverheadPercent float64 `json:"vmMemoryOverheadPercent"`
	KubeletVolumeGiB        int64   `json:"kubeletVolumeGiB"`
	InstanceStoreGB         int64   `json:"instanceStoreGB,omitempty"`
	// PrivateIPv4 and IPv6Address are what IMDS tells the boot agent: local-ipv4,
	// and the primary interface's ipv6s (empty: it has no IPv6 address).
	PrivateIPv4 string         `json:"privateIPv4,omitempty"`
	IPv6Address string         `json:"ipv6Address,omitempty"`
	Cluster     refereeCluster `json:"cluster"`
}

type refereeCluster struct {
	Name                 string `json:"name"`
	Endpoint             string `json:"endpoint"`
	CertificateAuthority string `json:"certificateAuthority"`
	ServiceCIDR          string `json:"serviceCIDR"`
}

type refereeResult struct {
	Instance    string            `json:"instance"`
	Error       string            `json:"error"`
	Family      string            `json:"family"`
	Labels      map[string]string `json:"labels"`
	Taints      []refereeTaint    `json:"taints"`
	Capacity    map[string]string `json:"capacity"`
	Allocatable map[string]string `json:"allocatable"`
	NodeIP      string            `json:"nodeIP"`
	ClusterDNS  []string          `json:"clusterDNS"`
	Kubelet     json.RawMessage   `json:"kubelet"`
	Warnings    []string          `json:"warnings"`
}

type refereeTaint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

// requestLocked is what the referee is told of an instance: EC2's facts about it
// and its image, and the cluster DescribeCluster describes.
func (k *Kubelet) requestLocked(i *instance, t *instanceType, im *Image, cluster Cluster) refereeNode {
	family, device := imageFamily(im)
	return refereeNode{
		Instance: i.ID, Family: family, UserData: i.UserData, InstanceType: t.Name,
		VCPUs: int64(t.VCPUs), MemoryMiB: t.MemoryMiB, VMMemoryOverheadPercent: k.opts.VMMemoryOverheadPercent,
		KubeletVolumeGiB: k.server.volumeSizeLocked(i, im, device), InstanceStoreGB: t.StorageGB,
		PrivateIPv4: i.PrivateIP, IPv6Address: i.IPv6,
		Cluster: refereeCluster{Name: cluster.Name, Endpoint: cluster.Endpoint,
			CertificateAuthority: cluster.CertificateAuthority, ServiceCIDR: cluster.serviceCIDR()},
	}
}

// imageFamily is the operating system an image boots, from its name and platform
// as EKS publishes them, and the device the kubelet's directory is on (the root
// volume, or Bottlerocket's data volume). Unknown images leave it to the user data.
func imageFamily(im *Image) (family, device string) {
	if im == nil {
		return "", "/dev/xvda"
	}
	name := strings.ToLower(im.Name)
	switch {
	case im.Platform == "windows":
		return "Windows", im.RootDeviceName
	case strings.Contains(name, "bottlerocket"):
		return "Bottlerocket", "/dev/xvdb"
	case strings.Contains(name, "al2023"):
		return "AL2023", im.RootDeviceName
	case strings.HasPrefix(name, "amazon-eks-node-") || strings.HasPrefix(name, "amazon-eks-gpu-node-") || strings.HasPrefix(name, "amazon-eks-arm64-node-"):
		return "AL2", im.RootDeviceName
	}
	return "", im.RootDeviceName
}

// volumeSizeLocked is the size of the instance's volume on device: the launch
// template's mapping if it has one for it, else the image's.
func (s *Server) volumeSizeLocked(i *instance, im *Image, device string) int64 {
	if lt := s.ec2.templates[i.TemplateID]; lt != nil {
		for n := 1; ; n++ {
			dev, ok := lt.Data["BlockDeviceMapping."+strconv.Itoa(n)+".DeviceName"]
			if !ok {
				break
			}
			if dev == device {
				if v, err := strconv.ParseInt(lt.Data["BlockDeviceMapping."+strconv.Itoa(n)+".Ebs.VolumeSize"], 10, 64); err == nil {
					return v
				}
			}
		}
	}
	if im != nil {
		for _, b := range im.BlockDevices {
			if b.DeviceName == device {
				return int64(b.VolumeSize)
			}
		}
	}
	return 20
}

// referee asks the eks-node-referee binary to boot the instances, in one run.
func (k *Kubelet) referee(ctx context.Context, booting []bootingInstance) ([]refereeResult, error) {
	bin := k.opts.Referee
	if bin == "" {
		dir, err := localcluster.BinDir()
		if err != nil {
			return nil, err
		}
		bin = filepath.Join(dir, "eks-node-referee")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the fake AWS boots nodes with %s, which is missing: run `make tools TOOLS=eks-node-referee`", bin)
	}
	req := struct {
		Nodes []refereeNode `json:"nodes"`
	}{}
	for _, b := range booting {
		req.Nodes = append(req.Nodes, b.request)
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("eks-node-referee: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var resp struct {
		Nodes []refereeResult `json:"nodes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("eks-node-referee's answer: %w", err)
	}
	if len(resp.Nodes) != len(booting) {
		return nil, fmt.Errorf("eks-node-referee answered %d instances of %d", len(resp.Nodes), len(booting))
	}
	return resp.Nodes, nil
}

// BootRequest is an instance to boot through the referee, for a provider's tests
// of its user data on its own.
type BootRequest struct {
	// Family is AL2023, AL2, Bottlerocket or Windows.
	Family       string
	InstanceType string
	VCPUs        int64
	MemoryMiB    int64
	UserData     string
	Cluster      Cluster
	// PrivateIP is the instance's private IPv4 address (10.0.0.10 when empty);
	// IPv6Address its primary interface's IPv6 address, which an IPv6 cluster's
	// node needs.
	PrivateIP   string
	IPv6Address string
}

// BootedNode is what an instance's kubelet registers with.
type BootedNode struct {
	Labels      map[string]string
	Taints      []corev1.Taint
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	// NodeIP is the kubelet's --node-ip, the Node's InternalIP.
	NodeIP string
	// Kubelet is the configuration the kubelet runs with (v1beta1 field names).
	Kubelet map[string]any
	// Warnings are settings the boot agent or kubelet dropped (fields they do not
	// know): the node joined without them.
	Warnings []string
}

// Boot asks the referee how the instance would boot: the Node its kubelet
// registers, or an error saying why it never joins.
func Boot(ctx context.Context, req BootRequest) (BootedNode, error) {
	k := NewKubelet(nil, nil, KubeletOptions{})
	n := refereeNode{Instance: "i-boot", Family: req.Family, UserData: req.UserData, InstanceType: req.InstanceType,
		VCPUs: req.VCPUs, MemoryMiB: req.MemoryMiB, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, KubeletVolumeGiB: 20,
		PrivateIPv4: cmp.Or(req.PrivateIP, "10.0.0.10"), IPv6Address: req.IPv6Address,
		Cluster: refereeCluster{Name: req.Cluster.Name, Endpoint: req.Cluster.Endpoint,
			CertificateAuthority: req.Cluster.CertificateAuthority, ServiceCIDR: req.Cluster.serviceCIDR()}}
	res, err := k.referee(ctx, []bootingInstance{{request: n}})
	if err != nil {
		return BootedNode{}, err
	}
	r := res[0]
	if r.Error != "" {
		return BootedNode{}, fmt.Errorf("the node never joins: %s", r.Error)
	}
	out := BootedNode{Labels: r.Labels, Capacity: corev1.ResourceList{}, Allocatable: corev1.ResourceList{}, NodeIP: r.NodeIP, Warnings: r.Warnings}
	if err := json.Unmarshal(r.Kubelet, &out.Kubelet); err != nil {
		return BootedNode{}, fmt.Errorf("the referee's kubelet configuration: %w", err)
	}
	for _, t := range r.Taints {
		out.Taints = append(out.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	for name, v := range r.Capacity {
		out.Capacity[corev1.ResourceName(name)] = resource.MustParse(v)
	}
	for name, v := range r.Allocatable {
		out.Allocatable[corev1.ResourceName(name)] = resource.MustParse(v)
	}
	return out, nil
}

// serviceCIDR is the range the cluster's services take addresses from.
func (c Cluster) serviceCIDR() string { return cmp.Or(c.ServiceIPv6CIDR, c.ServiceIPv4CIDR) }

// networkConfig is DescribeCluster's kubernetesNetworkConfig. An IPv6 cluster
// lists its IPv6 service range; the fake lists an IPv4 range beside it too, so a
// provider must go by ipFamily, not by which range is there.
func (c Cluster) networkConfig() map[string]any {
	if c.ServiceIPv6CIDR != "" {
		return map[string]any{"serviceIpv6Cidr": c.ServiceIPv6CIDR, "serviceIpv4Cidr": cmp.Or(c.ServiceIPv4CIDR, "172.20.0.0/16"), "ipFamily": "ipv6"}
	}
	return map[string]any{"serviceIpv4Cidr": c.ServiceIPv4CIDR, "ipFamily": "ipv4"}
}
