// Command eks-node-referee says whether an EC2 instance would join an EKS cluster,
// and with what: it reads the instance's user data as the node's own boot agent
// does (nodeadm for AL2023, bootstrap.sh for AL2, the EKS bootstrap script for
// Windows, Bottlerocket's settings API), builds the kubelet configuration that agent
// would write, and checks it with the kubelet's own code (its config decoding,
// flags, validation and eviction-threshold parsing from k8s.io/kubernetes). It
// answers with the Node the kubelet would register: labels, taints, capacity and
// allocatable, or why the node never registers.
//
// The fake AWS's kubelet (internal/fakeaws) asks it, so that Tailor's user data and
// its allocatable model are judged by code Tailor does not share: nodeadm's public
// API types (github.com/awslabs/amazon-eks-ami/nodeadm, the only version the module
// proxy serves), the kubelet's packages, and AWS's published per-type network
// limits (github.com/aws/amazon-vpc-resource-controller-k8s). Where the agents'
// logic is internal to their projects it is re-stated here from their source, and
// each place says which.
//
// Usage: eks-node-referee < request.json > response.json (see Request, Response);
// eks-node-referee vpc-limits prints AWS's per-type network limits as JSON, the
// facts the fake AWS's DescribeInstanceTypes serves (internal/fakeaws/vpclimits.json).
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// Request is a batch of instances to boot.
type Request struct {
	Nodes []Node `json:"nodes"`
}

// Node is one instance: what EC2 knows of it and the cluster it should join.
type Node struct {
	// Instance is the EC2 instance id, echoed in the answer.
	Instance string `json:"instance"`
	// Family is the operating system the image boots: AL2023, AL2, Bottlerocket or
	// Windows; empty when the image says nothing, and then the user data decides.
	Family string `json:"family,omitempty"`
	// UserData is the instance's user data, decoded from base64.
	UserData string `json:"userData"`
	// InstanceType is the EC2 type name; its network limits come from AWS's table.
	InstanceType string `json:"instanceType"`
	VCPUs        int64  `json:"vcpus"`
	// MemoryMiB is the type's memory as EC2 lists it.
	MemoryMiB int64 `json:"memoryMiB"`
	// VMMemoryOverheadPercent is the share of that memory the OS does not see.
	VMMemoryOverheadPercent float64 `json:"vmMemoryOverheadPercent"`
	// KubeletVolumeGiB is the size of the EBS volume the kubelet's root directory is
	// on: the root volume, or Bottlerocket's data volume (its second).
	KubeletVolumeGiB int64 `json:"kubeletVolumeGiB"`
	// InstanceStoreGB is the type's local NVMe storage in GB (10^9 bytes, as EC2's
	// InstanceStorageInfo.TotalSizeInGB), if any.
	InstanceStoreGB int64 `json:"instanceStoreGB,omitempty"`
	// PrivateIPv4 is the instance's primary private IPv4 address (IMDS
	// local-ipv4); IPv6Address the IPv6 address of its primary network interface
	// (IMDS network/interfaces/macs/<mac>/ipv6s), empty when it has none.
	PrivateIPv4 string  `json:"privateIPv4,omitempty"`
	IPv6Address string  `json:"ipv6Address,omitempty"`
	Cluster     Cluster `json:"cluster"`
}

// Cluster is what DescribeCluster says of the cluster the node should join.
type Cluster struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	// CertificateAuthority is base64 of the PEM bundle, as EKS returns it.
	CertificateAuthority string `json:"certificateAuthority"`
	// ServiceCIDR is the service range, IPv4 or IPv6.
	ServiceCIDR string `json:"serviceCIDR"`
}

// Response answers a Request in its order.
type Response struct {
	Nodes []Result `json:"nodes"`
}

// Result is the Node an instance's kubelet registers, or why it does not.
type Result struct {
	Instance string `json:"instance"`
	// Error is why the node never registers; the rest is empty then.
	Error       string            `json:"error,omitempty"`
	Family      string            `json:"family,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Taints      []Taint           `json:"taints,omitempty"`
	Capacity    map[string]string `json:"capacity,omitempty"`
	Allocatable map[string]string `json:"allocatable,omitempty"`
	// Warnings are settings the boot agent or the kubelet would drop without
	// failing (fields they do not know): the node joins without them.
	Warnings []string `json:"warnings,omitempty"`
	// NodeIP is the kubelet's --node-ip, which the boot agent reads from IMDS in
	// the cluster's IP family: the Node's InternalIP.
	NodeIP string `json:"nodeIP,omitempty"`
	// ClusterDNS is the kubelet's clusterDNS.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// Kubelet is the configuration the kubelet runs with (kubelet.config.k8s.io/
	// v1beta1, after files, drop-ins, flags and defaults), so a setting that was
	// asked for and never arrived shows.
	Kubelet json.RawMessage `json:"kubelet,omitempty"`
}

// Taint is a taint the kubelet registers with.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "vpc-limits" {
		if err := printVPCLimits(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "eks-node-referee: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var req Request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "eks-node-referee: reading the request: %v\n", err)
		os.Exit(2)
	}
	resp := Response{Nodes: make([]Result, 0, len(req.Nodes))}
	for _, n := range req.Nodes {
		resp.Nodes = append(resp.Nodes, referee(n))
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		fmt.Fprintf(os.Stderr, "eks-node-referee: writing the answer: %v\n", err)
		os.Exit(2)
	}
}

// referee boots one node.
func referee(n Node) Result {
	family := n.Family
	if family == "" {
		family = sniffFamily(n.UserData)
	}
	var (
		boot *kubeletBoot
		err  error
	)
	switch family {
	case "AL2023":
		boot, err = bootAL2023(n)
	case "AL2":
		boot, err = bootAL2(n)
	case "Bottlerocket":
		boot, err = bootBottlerocket(n)
	case "Windows":
		boot, err = bootWindows(n)
	default:
		err = fmt.Errorf("the image's operating system is unknown and the user data is none of nodeadm's, bootstrap.sh's, Bottlerocket's or the Windows bootstrap's")
	}
	if err != nil {
		return Result{Instance: n.Instance, Family: family, Error: err.Error()}
	}
	res, err := boot.register(n)
	if err != nil {
		return Result{Instance: n.Instance, Family: family, Error: err.Error()}
	}
	res.Instance, res.Family = n.Instance, family
	return res
}
