package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// bottlerocketKubernetesSettings are the settings.kubernetes keys Bottlerocket's
// API accepts (its settings reference, "Kubernetes settings"). User data with any
// other key is refused by the API server as a whole, and the node never boots.
var bottlerocketKubernetesSettings = map[string]bool{
	"allowed-unsafe-sysctls": true, "api-server": true, "authentication-mode": true, "bootstrap-token": true,
	"cloud-provider": true, "cluster-certificate": true, "cluster-dns-ip": true, "cluster-domain": true,
	"cluster-name": true, "container-log-max-files": true, "container-log-max-size": true,
	"cpu-cfs-quota-enforced": true, "cpu-manager-policy": true, "cpu-manager-policy-options": true,
	"cpu-manager-reconcile-period": true, "credential-providers": true, "device-ownership-from-security-context": true,
	"event-burst": true, "event-qps": true, "eviction-hard": true, "eviction-max-pod-grace-period": true,
	"eviction-soft": true, "eviction-soft-grace-period": true, "hostname-override": true,
	"hostname-override-source": true, "image-gc-high-threshold-percent": true, "image-gc-low-threshold-percent": true,
	"kube-api-burst": true, "kube-api-qps": true, "kube-reserved": true, "log-level": true, "max-pods": true,
	"memory-manager-policy": true, "memory-manager-reserved-memory": true, "node-labels": true, "node-taints": true,
	"pod-pids-limit": true, "pods-per-core": true, "provider-id": true, "registry-burst": true, "registry-qps": true,
	"seccomp-default": true, "server-certificate": true, "server-key": true, "server-tls-bootstrap": true,
	"shutdown-grace-period": true, "shutdown-grace-period-for-critical-pods": true, "standalone-mode": true,
	"static-pods": true, "system-reserved": true, "topology-manager-policy": true, "topology-manager-scope": true,
	"max-parallel-image-pulls": true, "image-maximum-gc-age": true, "image-minimum-gc-age": true,
	"single-process-oom-kill": true, "ids-per-pod": true, "reserved-cpus": true,
	"topology-manager-policy-options": true, "container-log-max-workers": true, "container-log-monitor-interval": true,
}

// bootBottlerocket reads the user data as Bottlerocket's settings API does (TOML,
// its Kubernetes settings) and renders the kubelet configuration from them as its
// template does: its defaults for max pods, kube-reserved and eviction-hard where
// a setting is left out.
func bootBottlerocket(n Node) (*kubeletBoot, error) {
	var doc map[string]any
	if _, err := toml.Decode(n.UserData, &doc); err != nil {
		return nil, fmt.Errorf("bottlerocket: the user data is not TOML: %w", err)
	}
	settings, _ := doc["settings"].(map[string]any)
	k, _ := settings["kubernetes"].(map[string]any)
	if k == nil {
		return nil, fmt.Errorf("bottlerocket: no [settings.kubernetes]: the node never joins")
	}
	for _, key := range sortedKeys(k) {
		if !bottlerocketKubernetesSettings[key] {
			return nil, fmt.Errorf("bottlerocket: unknown setting settings.kubernetes.%s: the settings API refuses the user data", key)
		}
	}
	str := func(key string) (string, error) {
		v, ok := k[key]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("bottlerocket: settings.kubernetes.%s must be a string, not %T", key, v)
		}
		return s, nil
	}
	name, err := str("cluster-name")
	if err != nil {
		return nil, err
	}
	endpoint, err := str("api-server")
	if err != nil {
		return nil, err
	}
	caText, err := str("cluster-certificate")
	if err != nil {
		return nil, err
	}
	if name == "" || endpoint == "" || caText == "" {
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes needs cluster-name, api-server and cluster-certificate to join")
	}
	ca, err := base64.StdEncoding.DecodeString(caText)
	if err != nil {
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-certificate is not base64: %w", err)
	}
	if err := sameCluster(n.Cluster, name, endpoint, ca, ""); err != nil {
		return nil, fmt.Errorf("bottlerocket: %w", err)
	}

	maxPods, err := eniMaxPods(n.InstanceType)
	if err != nil {
		return nil, fmt.Errorf("bottlerocket: %w", err)
	}
	eniPods := maxPods
	if v, ok := k["max-pods"]; ok {
		i, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("bottlerocket: settings.kubernetes.max-pods must be an integer, not %T", v)
		}
		maxPods = int32(i)
	}
	dns := []string{}
	switch v := k["cluster-dns-ip"].(type) {
	case nil:
		if d, err := clusterDNS(n.Cluster.ServiceCIDR); err == nil {
			dns = append(dns, d)
		}
	case string:
		dns = append(dns, v)
	case []any:
		for _, d := range v {
			s, ok := d.(string)
			if !ok {
				return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-dns-ip must list strings")
			}
			dns = append(dns, s)
		}
	default:
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-dns-ip must be a string or a list, not %T", v)
	}
	config := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"clusterDNS": dns, "clusterDomain": "cluster.local", "maxPods": maxPods,
		"cgroupDriver": "systemd", "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"serverTLSBootstrap": true, "protectKernelDefaults": true,
		// Bottlerocket's default reserve follows the ENI max pods.
		"kubeReserved": eksKubeReserved(n.VCPUs, eniPods),
		"evictionHard": map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
	}
	// A table replaces the default as a whole; its values must be strings.
	for setting, field := range map[string]string{"kube-reserved": "kubeReserved", "system-reserved": "systemReserved",
		"eviction-hard": "evictionHard", "eviction-soft": "evictionSoft", "eviction-soft-grace-period": "evictionSoftGracePeriod"} {
		v, ok := k[setting]
		if !ok {
			continue
		}
		table, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bottlerocket: settings.kubernetes.%s must be a table, not %T", setting, v)
		}
		out := map[string]string{}
		for key, val := range table {
			s, ok := val.(string)
			if !ok {
				return nil, fmt.Errorf("bottlerocket: settings.kubernetes.%s.%s must be a string, not %T", setting, key, val)
			}
			out[key] = s
		}
		if setting == "kube-reserved" {
			// Keys left out keep Bottlerocket's computed value.
			merged := eksKubeReserved(n.VCPUs, eniPods)
			for key, val := range out {
				merged[key] = val
			}
			out = merged
		}
		config[field] = out
	}
	for setting, field := range map[string]string{"pods-per-core": "podsPerCore", "eviction-max-pod-grace-period": "evictionMaxPodGracePeriod",
		"image-gc-high-threshold-percent": "imageGCHighThresholdPercent", "image-gc-low-threshold-percent": "imageGCLowThresholdPercent",
		"cpu-cfs-quota-enforced": "cpuCFSQuota", "kube-api-qps": "kubeAPIQPS", "kube-api-burst": "kubeAPIBurst",
		"registry-qps": "registryPullQPS", "registry-burst": "registryBurst", "event-qps": "eventRecordQPS", "event-burst": "eventBurst",
		"cpu-manager-policy": "cpuManagerPolicy", "topology-manager-policy": "topologyManagerPolicy",
		"topology-manager-scope": "topologyManagerScope", "shutdown-grace-period": "shutdownGracePeriod",
		"shutdown-grace-period-for-critical-pods": "shutdownGracePeriodCriticalPods", "container-log-max-size": "containerLogMaxSize",
		"container-log-max-files": "containerLogMaxFiles", "pod-pids-limit": "podPidsLimit", "seccomp-default": "seccompDefault",
		"allowed-unsafe-sysctls": "allowedUnsafeSysctls", "cpu-manager-reconcile-period": "cpuManagerReconcilePeriod"} {
		if v, ok := k[setting]; ok {
			if s, isString := v.(string); isString && strings.HasSuffix(setting, "percent") {
				return nil, fmt.Errorf("bottlerocket: settings.kubernetes.%s must be an integer, not the string %q", setting, s)
			}
			config[field] = v
		}
	}

	var taints []string
	if v, ok := k["node-taints"]; ok {
		table, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-taints must be a table")
		}
		for _, key := range sortedKeys(table) {
			var values []string
			switch tv := table[key].(type) {
			case string:
				values = []string{tv}
			case []any:
				for _, x := range tv {
					s, ok := x.(string)
					if !ok {
						return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-taints.%s must list strings", key)
					}
					values = append(values, s)
				}
			default:
				return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-taints.%s must be a string or a list", key)
			}
			for _, value := range values {
				if !strings.Contains(value, ":") {
					return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-taints.%s = %q has no effect (value:Effect)", key, value)
				}
				taints = append(taints, key+"="+value)
			}
		}
	}
	var labels []string
	if v, ok := k["node-labels"]; ok {
		table, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-labels must be a table")
		}
		for _, key := range sortedKeys(table) {
			s, ok := table[key].(string)
			if !ok {
				return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-labels.%s must be a string", key)
			}
			labels = append(labels, key+"="+s)
		}
	}
	sort.Strings(labels)
	b := &kubeletBoot{flags: []string{"--cloud-provider=external"}}
	// pluto's node-ip: the address of the first cluster DNS address's family.
	var first net.IP
	if len(dns) > 0 {
		first = net.ParseIP(dns[0])
	}
	if b.nodeIP, err = nodeIP(n, first != nil && first.To4() == nil); err != nil {
		return nil, fmt.Errorf("bottlerocket: %w", err)
	}
	if len(labels) > 0 {
		b.flags = append(b.flags, "--node-labels="+strings.Join(labels, ","))
	}
	if len(taints) > 0 {
		b.flags = append(b.flags, "--register-with-taints="+strings.Join(taints, ","))
	}
	if b.config, err = json.Marshal(config); err != nil {
		return nil, err
	}
	// Instance storage striped by a bootstrap command (apiclient ephemeral-storage
	// init, then bind) holds the kubelet's directory.
	if cmds, ok := settings["bootstrap-commands"].(map[string]any); ok && n.InstanceStoreGB > 0 {
		for _, c := range cmds {
			if strings.Contains(fmt.Sprint(c), "ephemeral-storage") && strings.Contains(fmt.Sprint(c), "/var/lib/kubelet") {
				b.ephemeralBytes = n.InstanceStoreGB * 1e9
			}
		}
	}
	return b, nil
}
