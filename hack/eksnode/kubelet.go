package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	_ "k8s.io/kubernetes/pkg/features" // registers the kubelet's feature gates
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletconversion "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/util/codec"
)

// kubeletBoot is what a boot agent hands the kubelet: its configuration file, the
// drop-in files after it (kubelet.conf.d, merged in order as JSON merge patches),
// and its command line.
type kubeletBoot struct {
	config  []byte
	dropIns [][]byte
	flags   []string
	// ephemeralBytes is the size of the file system the kubelet's root directory is
	// on when it is not the EBS volume (instance store in RAID0); zero otherwise.
	ephemeralBytes int64
	// windows: the node runs Windows.
	windows bool
	// nodeIP is the --node-ip the boot agent passes, the Node's InternalIP.
	nodeIP string
	// warnings are settings the boot agent or the kubelet would drop: the node
	// joins without them.
	warnings []string
}

// register runs the kubelet's configuration loading on b and answers with the
// Node it registers.
func (b *kubeletBoot) register(n Node) (Result, error) {
	kc, kf, err := b.load()
	if err != nil {
		return Result{}, err
	}
	if err := options.ValidateKubeletFlags(kf); err != nil {
		return Result{}, fmt.Errorf("kubelet: %w", err)
	}
	if err := validation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
		return Result{}, fmt.Errorf("kubelet: %w", err)
	}
	thresholds, err := eviction.ParseThresholdConfig(kc.EnforceNodeAllocatable, kc.EvictionHard, kc.EvictionSoft, kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim)
	if err != nil {
		return Result{}, fmt.Errorf("kubelet: failed to parse eviction thresholds: %w", err)
	}

	res := Result{Labels: kf.NodeLabels, ClusterDNS: kc.ClusterDNS, Warnings: b.warnings, NodeIP: b.nodeIP}
	versioned := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := kubeletconversion.Convert_config_KubeletConfiguration_To_v1beta1_KubeletConfiguration(kc, versioned, nil); err != nil {
		return Result{}, err
	}
	if res.Kubelet, err = json.Marshal(versioned); err != nil {
		return Result{}, err
	}
	for _, t := range kc.RegisterWithTaints {
		res.Taints = append(res.Taints, Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	capacity := b.capacity(n, kc)
	if b.windows {
		// The VPC resource controller advertises the primary interface's
		// secondary addresses on a Windows node; every Windows pod requests one.
		ips, err := windowsMaxPods(n.InstanceType)
		if err != nil {
			return Result{}, err
		}
		capacity["vpc.amazonaws.com/PrivateIPv4Address"] = *resource.NewQuantity(int64(ips), resource.DecimalSI)
	}
	res.Capacity, res.Allocatable = map[string]string{}, map[string]string{}
	for name, q := range capacity {
		res.Capacity[name] = q.String()
		alloc := q.DeepCopy()
		for field, reserved := range map[string]map[string]string{"kubeReserved": kc.KubeReserved, "systemReserved": kc.SystemReserved} {
			r, ok := reserved[name]
			if !ok {
				continue
			}
			// The kubelet refuses to start on a reservation it cannot parse.
			rq, err := resource.ParseQuantity(r)
			if err != nil {
				return Result{}, fmt.Errorf("kubelet: %s[%s] %q: %w", field, name, r, err)
			}
			alloc.Sub(rq)
		}
		// The kubelet keeps room for its hard eviction thresholds only (the node
		// allocatable design: soft thresholds are not reserved).
		for _, t := range thresholds {
			if t.GracePeriod != 0 || !reservesFrom(t.Signal, name) {
				continue
			}
			c := q.DeepCopy()
			alloc.Sub(*evictionapi.GetThresholdQuantity(t.Value, &c))
		}
		if alloc.Sign() < 0 {
			alloc = resource.Quantity{}
		}
		res.Allocatable[name] = alloc.String()
	}
	return res, nil
}

// nodeIP is the address a boot agent gives the kubelet as --node-ip: IMDS's
// local-ipv4 in an IPv4 cluster; in an IPv6 one, the primary interface's IPv6
// address, read from network/interfaces/macs/<mac>/ipv6s (nodeadm's getNodeIp,
// bootstrap.sh, Bottlerocket's pluto). IMDS answers 404 there when the interface
// has no IPv6 address, and each agent then fails before the kubelet starts.
func nodeIP(n Node, ipv6 bool) (string, error) {
	if !ipv6 {
		return n.PrivateIPv4, nil
	}
	if n.IPv6Address == "" {
		return "", fmt.Errorf("the cluster is IPv6 and the instance's primary network interface has no IPv6 address: " +
			"IMDS answers 404 Not Found for network/interfaces/macs/<mac>/ipv6s, so the kubelet has no node IP " +
			"(launch it with an IPv6 address, Ipv6AddressCount on its network interface, into a subnet with an IPv6 CIDR block)")
	}
	return n.IPv6Address, nil
}

// reservesFrom says which capacity a hard eviction signal keeps room in, as the
// kubelet's node allocatable reservation does.
func reservesFrom(signal evictionapi.Signal, res string) bool {
	switch signal {
	case evictionapi.SignalMemoryAvailable:
		return res == "memory"
	case evictionapi.SignalNodeFsAvailable:
		return res == "ephemeral-storage"
	}
	return false
}

// load reads the configuration file, merges the drop-ins and parses the command
// line over them, as the kubelet does at start.
func (b *kubeletBoot) load() (*kubeletconfig.KubeletConfiguration, *options.KubeletFlags, error) {
	_, codecs, err := kubeletscheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		return nil, nil, err
	}
	kc, err := b.decode(codecs, b.config, "the kubelet configuration file")
	if err != nil {
		return nil, nil, err
	}
	for i, dropIn := range b.dropIns {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(dropIn, &meta); err != nil {
			return nil, nil, fmt.Errorf("kubelet: drop-in %d: %w", i, err)
		}
		if meta.APIVersion != kubeletconfigv1beta1.SchemeGroupVersion.String() || meta.Kind != "KubeletConfiguration" {
			return nil, nil, fmt.Errorf("kubelet: failed to load kubelet dropin file %d, unknown apiVersion/kind: %s, Kind=%s", i, meta.APIVersion, meta.Kind)
		}
		versioned := &kubeletconfigv1beta1.KubeletConfiguration{}
		if err := kubeletconversion.Convert_config_KubeletConfiguration_To_v1beta1_KubeletConfiguration(kc, versioned, nil); err != nil {
			return nil, nil, err
		}
		base, err := json.Marshal(versioned)
		if err != nil {
			return nil, nil, err
		}
		merged, err := jsonpatch.MergePatch(base, dropIn)
		if err != nil {
			return nil, nil, fmt.Errorf("kubelet: failed to merge drop-in %d and current config: %w", i, err)
		}
		if kc, err = b.decode(codecs, merged, fmt.Sprintf("kubelet drop-in %d", i)); err != nil {
			return nil, nil, err
		}
	}
	// Flags win over the files: the kubelet parses its command line again over
	// the loaded configuration.
	kf := options.NewKubeletFlags()
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	kf.AddFlags(fs)
	options.AddKubeletConfigFlags(fs, kc)
	if err := fs.Parse(b.flags); err != nil {
		return nil, nil, fmt.Errorf("kubelet: failed to parse kubelet flag: %w", err)
	}
	if args := fs.Args(); len(args) > 0 {
		return nil, nil, fmt.Errorf("kubelet: unknown command %+s", args[0])
	}
	return kc, kf, nil
}

// decode decodes a KubeletConfiguration with the kubelet's own codecs, as its
// config file loader does: strictly, falling back to lenient decoding when the
// strict one fails, which the kubelet only logs. Here that is a warning, since a
// setting the kubelet drops is a setting the user lost.
func (b *kubeletBoot) decode(codecs *serializer.CodecFactory, data []byte, what string) (*kubeletconfig.KubeletConfiguration, error) {
	if _, _, err := codecs.UniversalDecoder().Decode(data, nil, nil); err != nil && runtime.IsStrictDecodingError(err) {
		b.warnings = append(b.warnings, fmt.Sprintf("kubelet: %s: the kubelet ignores part of it (it logs \"Using lenient decoding as strict decoding failed\"): %v", what, err))
	}
	kc, err := codec.DecodeKubeletConfiguration(context.Background(), codecs, data)
	if err != nil {
		return nil, fmt.Errorf("kubelet: %s: %w", what, err)
	}
	return kc, nil
}

// capacity is the node's capacity as its kubelet reports it.
func (b *kubeletBoot) capacity(n Node, kc *kubeletconfig.KubeletConfiguration) map[string]resource.Quantity {
	memory := int64(math.Floor(float64(n.MemoryMiB) * (1 - n.VMMemoryOverheadPercent)))
	pods := int64(kc.MaxPods)
	if kc.PodsPerCore > 0 && int64(kc.PodsPerCore)*n.VCPUs < pods {
		pods = int64(kc.PodsPerCore) * n.VCPUs
	}
	storage := n.KubeletVolumeGiB << 30
	if b.ephemeralBytes > 0 {
		storage = b.ephemeralBytes
	}
	return map[string]resource.Quantity{
		"cpu":               *resource.NewQuantity(n.VCPUs, resource.DecimalSI),
		"memory":            *resource.NewQuantity(memory<<20, resource.BinarySI),
		"pods":              *resource.NewQuantity(pods, resource.DecimalSI),
		"ephemeral-storage": *resource.NewQuantity(storage, resource.BinarySI),
	}
}

// eksKubeReserved is the kube-reserved every EKS boot agent (nodeadm, bootstrap.sh,
// Bottlerocket) computes for a node: CPU by the tiers of the EKS AMI's
// get_cpu_millicores_to_reserve (6% of the first core, 1% of the second, 0.5% of the
// next two, 0.25% of the rest), memory 11 MiB per pod plus 255 MiB, and 1 GiB of
// ephemeral storage.
func eksKubeReserved(vcpus int64, maxPods int32) map[string]string {
	cpu := 0.0
	for core := int64(1); core <= vcpus; core++ {
		switch {
		case core == 1:
			cpu += 60
		case core == 2:
			cpu += 10
		case core <= 4:
			cpu += 5
		default:
			cpu += 2.5
		}
	}
	return map[string]string{
		"cpu":               fmt.Sprintf("%dm", int64(cpu)),
		"memory":            fmt.Sprintf("%dMi", 11*int64(maxPods)+255),
		"ephemeral-storage": "1Gi",
	}
}

// sortedKeys lists a map's keys in order, for messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
