package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"os/exec"
	"strings"

	nodeadm "github.com/awslabs/amazon-eks-ami/nodeadm/api"
	"github.com/awslabs/amazon-eks-ami/nodeadm/api/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// bootAL2023 reads the user data as nodeadm does (its configprovider, re-stated:
// that package is internal to nodeadm) and writes the kubelet configuration it
// would (its kubelet package, likewise).
func bootAL2023(n Node) (*kubeletBoot, error) {
	configs, warnings, err := nodeConfigs([]byte(n.UserData))
	if err != nil {
		return nil, fmt.Errorf("nodeadm: %w", err)
	}
	cfg := configs[0]
	for _, c := range configs[1:] {
		mergeNodeConfig(cfg, c)
	}
	if err := validateNodeConfig(cfg, n.Cluster); err != nil {
		return nil, fmt.Errorf("nodeadm: %w", err)
	}

	maxPods, err := eniMaxPods(n.InstanceType)
	if err != nil {
		return nil, fmt.Errorf("nodeadm: %w", err)
	}
	base := nodeadmKubeletConfig(cfg.Spec.Cluster.CIDR, n.VCPUs, maxPods)
	b := &kubeletBoot{flags: []string{"--cloud-provider=external"}, warnings: warnings}
	// nodeadm's getNodeIp: the node IP is of the service CIDR's family.
	ip, _, _ := net.ParseCIDR(cfg.Spec.Cluster.CIDR)
	if b.nodeIP, err = nodeIP(n, ip != nil && ip.To4() == nil); err != nil {
		return nil, fmt.Errorf("nodeadm: %w", err)
	}
	if b.config, err = json.Marshal(base); err != nil {
		return nil, err
	}
	// nodeadm writes the user's kubelet config as a drop-in file (kubelet ≥1.28),
	// with the KubeletConfiguration type filled in when left out.
	if len(cfg.Spec.Kubelet.Config) > 0 {
		dropIn := map[string]any{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
		for k, raw := range cfg.Spec.Kubelet.Config {
			var v any
			if err := json.Unmarshal(raw.Raw, &v); err != nil {
				return nil, fmt.Errorf("nodeadm: spec.kubelet.config.%s: %w", k, err)
			}
			dropIn[k] = v
		}
		data, err := json.Marshal(dropIn)
		if err != nil {
			return nil, err
		}
		b.dropIns = append(b.dropIns, data)
	}
	b.flags = append(b.flags, nodeadmKubeletArgs(cfg.Spec.Kubelet.Flags)...)
	if cfg.Spec.Instance.LocalStorage.Strategy == v1alpha1.LocalStorageRAID0 && n.InstanceStoreGB > 0 {
		// The RAID0 array of the instance store is mounted at the kubelet's and
		// containerd's directories.
		b.ephemeralBytes = n.InstanceStoreGB * 1e9
	}
	return b, nil
}

// nodeConfigs are the NodeConfig documents of the user data, in order. As nodeadm:
// user data that reads as a MIME multi-part message (from its first byte) gives its
// application/node.eks.aws parts; anything else must be one NodeConfig.
func nodeConfigs(userData []byte) ([]*v1alpha1.NodeConfig, []string, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(userData))
	multipartBody := err == nil
	var params map[string]string
	if multipartBody {
		var mediaType string
		mediaType, params, err = mime.ParseMediaType(msg.Header.Get("Content-Type"))
		multipartBody = err == nil && strings.HasPrefix(mediaType, "multipart/")
	}
	if !multipartBody {
		c, warning, err := decodeNodeConfig(userData)
		if err != nil {
			return nil, nil, err
		}
		return []*v1alpha1.NodeConfig{c}, nonEmpty(warning), nil
	}
	var configs []*v1alpha1.NodeConfig
	var warnings []string
	parts := multipart.NewReader(msg.Body, params["boundary"])
	for i := 0; ; i++ {
		part, err := parts.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, nil, err
		}
		header := part.Header.Get("Content-Type")
		if header == "" {
			continue
		}
		mediaType, _, err := mime.ParseMediaType(header)
		if err != nil {
			return nil, nil, err
		}
		switch mediaType {
		case "application/" + nodeadm.GroupName:
			c, warning, err := decodeNodeConfig(body)
			if err != nil {
				return nil, nil, err
			}
			configs = append(configs, c)
			warnings = append(warnings, nonEmpty(warning)...)
		case "text/x-shellscript":
			// cloud-init runs it; one that does not parse stops the boot.
			if err := shellSyntax(body); err != nil {
				return nil, nil, fmt.Errorf("the shell script in MIME part %d does not parse: %w", i, err)
			}
		}
	}
	if len(configs) == 0 {
		return nil, nil, fmt.Errorf("Could not find NodeConfig within UserData")
	}
	return configs, warnings, nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// decodeNodeConfig decodes one NodeConfig with nodeadm's API types, leniently as
// nodeadm does (its bridge decoder drops fields its types lack). What a strict
// decoder would refuse comes back as a warning: the node joins, but without that
// setting.
func decodeNodeConfig(data []byte) (*v1alpha1.NodeConfig, string, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	warning := ""
	if _, _, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil); err != nil && runtime.IsStrictDecodingError(err) {
		warning = "nodeadm ignores part of a NodeConfig: " + err.Error()
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, "", fmt.Errorf("decoding a NodeConfig: %w", err)
	}
	if gvk.Kind != nodeadm.KindNodeConfig || gvk.Group != nodeadm.GroupName {
		return nil, "", fmt.Errorf("failed to decode %q (wrong Kind or group %s)", gvk.Kind, gvk.Group)
	}
	return obj.(*v1alpha1.NodeConfig), warning, nil
}

// mergeNodeConfig merges src over dst as nodeadm merges its NodeConfig parts:
// values set in a later part win, kubelet flags are appended, and the kubelet config
// documents are merged key by key (maps recursively).
func mergeNodeConfig(dst, src *v1alpha1.NodeConfig) {
	d, s := &dst.Spec, &src.Spec
	set := func(to *string, from string) {
		if from != "" {
			*to = from
		}
	}
	set(&d.Cluster.Name, s.Cluster.Name)
	set(&d.Cluster.APIServerEndpoint, s.Cluster.APIServerEndpoint)
	set(&d.Cluster.CIDR, s.Cluster.CIDR)
	set(&d.Cluster.ID, s.Cluster.ID)
	if len(s.Cluster.CertificateAuthority) > 0 {
		d.Cluster.CertificateAuthority = s.Cluster.CertificateAuthority
	}
	if s.Cluster.EnableOutpost != nil {
		d.Cluster.EnableOutpost = s.Cluster.EnableOutpost
	}
	set(&d.Containerd.Config, s.Containerd.Config)
	if s.Instance.LocalStorage.Strategy != "" {
		d.Instance.LocalStorage.Strategy = s.Instance.LocalStorage.Strategy
	}
	d.Kubelet.Flags = append(d.Kubelet.Flags, s.Kubelet.Flags...)
	if len(d.Kubelet.Config) == 0 {
		d.Kubelet.Config = s.Kubelet.Config
		return
	}
	for k, raw := range s.Kubelet.Config {
		old, ok := d.Kubelet.Config[k]
		if !ok {
			d.Kubelet.Config[k] = raw
			continue
		}
		var a, b any
		if json.Unmarshal(old.Raw, &a) != nil || json.Unmarshal(raw.Raw, &b) != nil {
			d.Kubelet.Config[k] = raw
			continue
		}
		merged, _ := json.Marshal(deepMerge(a, b))
		d.Kubelet.Config[k] = runtime.RawExtension{Raw: merged}
	}
}

func deepMerge(a, b any) any {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		return b
	}
	for k, v := range bm {
		if old, ok := am[k]; ok {
			am[k] = deepMerge(old, v)
		} else {
			am[k] = v
		}
	}
	return am
}

// validateNodeConfig is nodeadm's validation (its messages), and then whether the
// node would reach this cluster: the endpoint, CA and service CIDR must be the
// cluster's, or the kubelet never authenticates or gets the wrong cluster DNS.
func validateNodeConfig(cfg *v1alpha1.NodeConfig, cluster Cluster) error {
	c := cfg.Spec.Cluster
	switch {
	case c.Name == "":
		return fmt.Errorf("Name is missing in cluster configuration")
	case c.APIServerEndpoint == "":
		return fmt.Errorf("Apiserver endpoint is missing in cluster configuration")
	case c.CertificateAuthority == nil:
		return fmt.Errorf("Certificate authority is missing in cluster configuration")
	case c.CIDR == "":
		return fmt.Errorf("CIDR is missing in cluster configuration")
	}
	if _, _, err := net.ParseCIDR(c.CIDR); err != nil {
		return fmt.Errorf("%s is not a valid IP Address. error: %v", c.CIDR, err)
	}
	return sameCluster(cluster, c.Name, c.APIServerEndpoint, c.CertificateAuthority, c.CIDR)
}

// sameCluster checks that a node's bootstrap settings are the cluster's own.
func sameCluster(cluster Cluster, name, endpoint string, ca []byte, cidr string) error {
	if cluster.Name != "" && name != cluster.Name {
		return fmt.Errorf("the cluster name %q is not the cluster's (%q)", name, cluster.Name)
	}
	if cluster.Endpoint != "" && endpoint != cluster.Endpoint {
		return fmt.Errorf("the API server endpoint %q is not the cluster's (%q): the kubelet never reaches it", endpoint, cluster.Endpoint)
	}
	if cluster.CertificateAuthority != "" {
		want, err := base64.StdEncoding.DecodeString(cluster.CertificateAuthority)
		if err == nil && !bytes.Equal(ca, want) {
			return fmt.Errorf("the certificate authority is not the cluster's: the kubelet cannot trust the API server")
		}
	}
	if cidr != "" && cluster.ServiceCIDR != "" && cidr != cluster.ServiceCIDR {
		return fmt.Errorf("the service CIDR %s is not the cluster's (%s): pods would get the wrong cluster DNS", cidr, cluster.ServiceCIDR)
	}
	return nil
}

// clusterDNS is the kube-dns address nodeadm derives from the service CIDR: the
// tenth address (…​.10 for IPv4, …a for IPv6).
func clusterDNS(cidr string) (string, error) {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	if ip.To4() != nil {
		return cidr[:strings.LastIndex(cidr, ".")] + ".10", nil
	}
	return strings.Split(cidr, "/")[0] + "a", nil
}

// nodeadmKubeletConfig is the configuration file nodeadm writes for the kubelet
// (its defaults, cluster DNS and reserved resources).
func nodeadmKubeletConfig(cidr string, vcpus int64, maxPods int32) map[string]any {
	dns, _ := clusterDNS(cidr)
	return map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		"address":    "0.0.0.0",
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true, "cacheTTL": "2m0s"},
			"x509":      map[string]any{"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
		},
		"authorization":            map[string]any{"mode": "Webhook", "webhook": map[string]any{"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}},
		"cgroupDriver":             "systemd",
		"cgroupRoot":               "/",
		"clusterDomain":            "cluster.local",
		"clusterDNS":               []string{dns},
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"evictionHard":             map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
		"featureGates":             map[string]bool{"RotateKubeletServerCertificate": true},
		"hairpinMode":              "hairpin-veth",
		"protectKernelDefaults":    true,
		"readOnlyPort":             0,
		"serializeImagePulls":      false,
		"serverTLSBootstrap":       true,
		"systemReservedCgroup":     "/system",
		"kubeReservedCgroup":       "/runtime",
		"maxPods":                  maxPods,
		"kubeReserved":             eksKubeReserved(vcpus, maxPods),
	}
}

// nodeadmKubeletArgs is the kubelet's command line from the NodeConfig's flags.
// nodeadm joins them with spaces into NODEADM_KUBELET_ARGS="…" in an environment
// file; systemd reads that file with shell-like quoting (so a flag's own double
// quotes pair up with the outer ones and vanish) and splits $NODEADM_KUBELET_ARGS
// at whitespace on the kubelet's ExecStart line.
func nodeadmKubeletArgs(flags []string) []string {
	value := `"` + strings.Join(flags, " ") + `"`
	var out strings.Builder
	quote := byte(0)
	for i := 0; i < len(value); i++ {
		c := value[i]
		switch {
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote != 0 && c == quote:
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(value) && strings.IndexByte("\"\\`$", value[i+1]) >= 0:
			i++
			out.WriteByte(value[i])
		case quote == 0 && c == '\\' && i+1 < len(value):
			i++
			out.WriteByte(value[i])
		default:
			out.WriteByte(c)
		}
	}
	return strings.Fields(out.String())
}

// shellSyntax checks a script with bash -n, as far as bash can without running it.
func shellSyntax(script []byte) error {
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = bytes.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s", strings.TrimSpace(string(out)))
	}
	return nil
}
