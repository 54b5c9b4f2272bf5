package aws

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// Cluster is what a node needs to know to join the cluster.
type Cluster struct {
	Name     string
	Endpoint string
	// CABundle is the cluster CA, base64-encoded PEM, as EKS returns it.
	CABundle string
	// ServiceCIDRError says why ServiceCIDR is unknown, when the lookup failed.
	ServiceCIDRError error
	// ServiceCIDR is the cluster's service range, IPv4 or else IPv6; the DNS service is its
	// tenth address, as on EKS.
	ServiceCIDR string
	// DNS overrides the cluster DNS addresses derived from ServiceCIDR.
	DNS []string
}

// Bootstrap is what goes into one launch template's user data.
type Bootstrap struct {
	Cluster Cluster
	Family  string // AMI family: AL2023, Bottlerocket, Custom, …
	Kubelet *awsv1.KubeletConfiguration
	// MaxPods is the node's max pods (the instance types of a launch template share it).
	MaxPods int32
	Labels  map[string]string
	Taints  []corev1.Taint
	// UserData is the NodeClass's spec.userData.
	UserData *string
	// RAID0: the instance-store disks are striped into one array that holds the
	// kubelet's and containerd's directories (instanceStorePolicy RAID0).
	RAID0 bool
}

// BootstrapFor is the bootstrap of a claim's nodes: its labels that the kubelet may
// set (and karpenter.sh/do-not-sync-taints but on Custom), its taints and startup
// taints, and the unregistered taint Tailor removes once the Node is registered.
func BootstrapFor(claim *v1.NodeClaim, nc *awsv1.EC2NodeClass, cluster Cluster, maxPods int32) Bootstrap {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		if kubeletMaySet(k) {
			labels[k] = v
		}
	}
	if nc.AMIFamily() != awsv1.AMIFamilyCustom {
		// The kubelet registers with the claim's taints, so registration leaves
		// them alone: a startup taint a DaemonSet removed before then is not put
		// back. Karpenter labels every family but Custom so (its user data may not
		// register the taints).
		labels[v1.NodeDoNotSyncTaintsLabelKey] = "true"
	}
	taints := append(slices.Clone(claim.Spec.Taints), claim.Spec.StartupTaints...)
	if !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.MatchTaint(&v1.UnregisteredNoExecuteTaint) }) {
		taints = append(taints, v1.UnregisteredNoExecuteTaint)
	}
	return Bootstrap{Cluster: cluster, Family: nc.AMIFamily(), Kubelet: nc.Spec.Kubelet, MaxPods: maxPods,
		Labels: labels, Taints: taints, UserData: nc.Spec.UserData,
		RAID0: deref(nc.Spec.InstanceStorePolicy) == awsv1.InstanceStorePolicyRAID0}
}

// kubeletMaySet: the NodeRestriction admission plugin refuses node labels in the
// kubernetes.io and k8s.io domains other than these.
func kubeletMaySet(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	if !strings.HasSuffix(domain, "kubernetes.io") && !strings.HasSuffix(domain, "k8s.io") {
		return true
	}
	switch key {
	case v1.LabelArch, v1.LabelOS, v1.LabelInstanceType, v1.LabelZone, v1.LabelRegion, v1.LabelHostname,
		"beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
		"failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region":
		return true
	}
	return strings.HasSuffix(domain, "node.kubernetes.io") || strings.HasSuffix(domain, "node-restriction.kubernetes.io")
}

// clusterDNS is the kubelet's clusterDNS: the NodeClass's, the cluster's, or the
// tenth address of the service range.
func (b Bootstrap) clusterDNS() []string {
	switch {
	case b.Kubelet != nil && len(b.Kubelet.ClusterDNS) > 0:
		return b.Kubelet.ClusterDNS
	case len(b.Cluster.DNS) > 0:
		return b.Cluster.DNS
	}
	// EKS's DNS service is the tenth address of the range, IPv4 or IPv6 alike
	// (10.100.0.10; fd00:ab::a).
	prefix, err := netip.ParsePrefix(b.Cluster.ServiceCIDR)
	if err != nil {
		return nil
	}
	addr := prefix.Masked().Addr()
	for range 10 {
		addr = addr.Next()
	}
	return []string{addr.String()}
}

// UserData renders the user data of the bootstrap's AMI family.
func UserData(b Bootstrap) (string, error) {
	switch b.Family {
	case awsv1.AMIFamilyAL2023:
		return al2023UserData(b)
	case awsv1.AMIFamilyBottlerocket:
		return bottlerocketUserData(b)
	case awsv1.AMIFamilyAL2:
		return al2UserData(b)
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return windowsUserData(b), nil
	case awsv1.AMIFamilyCustom, "":
		return deref(b.UserData), nil
	}
	return "", fmt.Errorf("AMI family %s is not supported by Tailor's AWS provider", b.Family)
}

// mimeBoundary is the boundary of Tailor's multi-part user data; "//" cannot occur
// in a YAML or shell part's own lines as a whole line.
const mimeBoundary = "//"

// al2023UserData is a MIME multi-part document: the user's parts first, then a
// nodeadm NodeConfig with the cluster and kubelet settings, which nodeadm merges
// over them.
func al2023UserData(b Bootstrap) (string, error) {
	type nodeConfig struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Cluster struct {
				Name                 string `json:"name"`
				APIServerEndpoint    string `json:"apiServerEndpoint"`
				CertificateAuthority string `json:"certificateAuthority"`
				CIDR                 string `json:"cidr,omitempty"`
			} `json:"cluster"`
			Kubelet struct {
				Config map[string]any `json:"config,omitempty"`
				Flags  []string       `json:"flags,omitempty"`
			} `json:"kubelet"`
			Instance *struct {
				LocalStorage struct {
					Strategy string `json:"strategy"`
				} `json:"localStorage"`
			} `json:"instance,omitempty"`
		} `json:"spec"`
	}
	var doc nodeConfig
	doc.APIVersion, doc.Kind = "node.eks.aws/v1alpha1", "NodeConfig"
	c := &doc.Spec.Cluster
	if b.Cluster.ServiceCIDR == "" {
		// nodeadm refuses a NodeConfig without spec.cluster.cidr: the node would
		// never join.
		why := "EKS did not report it"
		if b.Cluster.ServiceCIDRError != nil {
			why = b.Cluster.ServiceCIDRError.Error()
		}
		return "", fmt.Errorf("AL2023 user data needs cluster %s's service CIDR for nodeadm's spec.cluster.cidr, and it is unknown (%s); allow eks:DescribeCluster to the controller", b.Cluster.Name, why)
	}
	c.Name, c.APIServerEndpoint, c.CertificateAuthority, c.CIDR = b.Cluster.Name, b.Cluster.Endpoint, b.Cluster.CABundle, b.Cluster.ServiceCIDR
	config := map[string]any{}
	if b.MaxPods > 0 {
		config["maxPods"] = b.MaxPods
	}
	if dns := b.clusterDNS(); len(dns) > 0 {
		config["clusterDNS"] = dns
	}
	if k := b.Kubelet; k != nil {
		putMap(config, "systemReserved", k.SystemReserved)
		putMap(config, "kubeReserved", k.KubeReserved)
		putMap(config, "evictionHard", k.EvictionHard)
		putMap(config, "evictionSoft", k.EvictionSoft)
		if len(k.EvictionSoftGracePeriod) > 0 {
			grace := map[string]string{}
			for sig, d := range k.EvictionSoftGracePeriod {
				grace[sig] = d.Duration.String()
			}
			config["evictionSoftGracePeriod"] = grace
		}
		putPtr(config, "evictionMaxPodGracePeriod", k.EvictionMaxPodGracePeriod)
		putPtr(config, "podsPerCore", k.PodsPerCore)
		putPtr(config, "imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent)
		putPtr(config, "imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent)
		putPtr(config, "cpuCFSQuota", k.CPUCFSQuota)
	}
	if len(config) > 0 {
		doc.Spec.Kubelet.Config = config
	}
	if b.RAID0 {
		// nodeadm stripes the instance-store disks and mounts the array under
		// the kubelet's and containerd's directories.
		doc.Spec.Instance = &struct {
			LocalStorage struct {
				Strategy string `json:"strategy"`
			} `json:"localStorage"`
		}{}
		doc.Spec.Instance.LocalStorage.Strategy = "RAID0"
	}
	if len(b.Labels) > 0 {
		doc.Spec.Kubelet.Flags = append(doc.Spec.Kubelet.Flags, "--node-labels="+joinLabels(b.Labels))
	}
	if len(b.Taints) > 0 {
		var ts []string
		for _, t := range b.Taints {
			ts = append(ts, t.ToString())
		}
		doc.Spec.Kubelet.Flags = append(doc.Spec.Kubelet.Flags, "--register-with-taints="+strings.Join(ts, ","))
	}
	ours, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	parts, err := userParts(deref(b.UserData), "application/node.eks.aws")
	if err != nil {
		return "", fmt.Errorf("spec.userData: %w", err)
	}
	parts = append(parts, mimePart{contentType: "application/node.eks.aws", body: ours})
	return renderMIME(parts)
}

const shellScript = `text/x-shellscript; charset="us-ascii"`

// al2UserData is a MIME multi-part document: the user's parts first, then a
// script calling the EKS AMI's bootstrap.sh with the cluster and kubelet flags.
func al2UserData(b Bootstrap) (string, error) {
	var script strings.Builder
	fmt.Fprintf(&script, "#!/bin/bash -xe\n/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s' --b64-cluster-ca '%s'",
		b.Cluster.Name, b.Cluster.Endpoint, b.Cluster.CABundle)
	if dns := b.clusterDNS(); len(dns) > 0 {
		// Given the endpoint and CA, bootstrap.sh does not describe the cluster and
		// takes it for IPv4: without --ip-family ipv6 an IPv6 cluster's node would
		// register its IPv4 address as the node IP. The family is the cluster
		// DNS's, as Karpenter decides it.
		if a, err := netip.ParseAddr(dns[0]); err == nil && a.Is6() && !a.Is4In6() {
			script.WriteString(" --ip-family ipv6")
		}
		fmt.Fprintf(&script, " --dns-cluster-ip '%s'", dns[0])
	}
	if b.RAID0 {
		// bootstrap.sh stripes the instance-store disks (setup-local-disks) for
		// the kubelet's and containerd's directories.
		script.WriteString(" --local-disks raid0")
	}
	// bootstrap.sh would otherwise compute its own max pods over Tailor's.
	fmt.Fprintf(&script, " --use-max-pods false --kubelet-extra-args '%s'\n", strings.Join(b.kubeletFlags(), " "))
	parts, err := userParts(deref(b.UserData), shellScript)
	if err != nil {
		return "", fmt.Errorf("spec.userData: %w", err)
	}
	parts = append(parts, mimePart{contentType: shellScript, body: []byte(script.String())})
	return renderMIME(parts)
}

// windowsUserData is a PowerShell script: the user's commands, then the EKS
// Windows AMI's Start-EKSBootstrap.ps1 with the cluster and kubelet flags.
func windowsUserData(b Bootstrap) string {
	user := strings.TrimSpace(deref(b.UserData))
	user = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(user, "<powershell>"), "</powershell>"))
	var script strings.Builder
	script.WriteString("<powershell>\n")
	if user != "" {
		script.WriteString(user + "\n")
	}
	script.WriteString("[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n")
	fmt.Fprintf(&script, "& $EKSBootstrapScriptFile -EKSClusterName '%s' -APIServerEndpoint '%s' -Base64ClusterCA '%s' -KubeletExtraArgs '%s'",
		b.Cluster.Name, b.Cluster.Endpoint, b.Cluster.CABundle, strings.Join(b.kubeletFlags(), " "))
	if dns := b.clusterDNS(); len(dns) > 0 {
		fmt.Fprintf(&script, " -DNSClusterIP '%s'", dns[0])
	}
	script.WriteString("\n</powershell>\n")
	return script.String()
}

// kubeletFlags are the kubelet's command-line flags for families that bootstrap
// through a script (AL2, Windows): labels, taints, max pods, reservations.
func (b Bootstrap) kubeletFlags() []string {
	var flags []string
	if len(b.Labels) > 0 {
		flags = append(flags, fmt.Sprintf("--node-labels=%q", joinLabels(b.Labels)))
	}
	if len(b.Taints) > 0 {
		var ts []string
		for _, t := range b.Taints {
			ts = append(ts, t.ToString())
		}
		flags = append(flags, fmt.Sprintf("--register-with-taints=%q", strings.Join(ts, ",")))
	}
	if b.MaxPods > 0 {
		flags = append(flags, fmt.Sprintf("--max-pods=%d", b.MaxPods))
	}
	if k := b.Kubelet; k != nil {
		for _, f := range []struct {
			name string
			m    map[string]string
		}{{"system-reserved", toStrings(k.SystemReserved)}, {"kube-reserved", toStrings(k.KubeReserved)},
			{"eviction-hard", toStrings(k.EvictionHard)}, {"eviction-soft", toStrings(k.EvictionSoft)}} {
			if len(f.m) > 0 {
				sep := "="
				if strings.HasPrefix(f.name, "eviction") {
					sep = "<"
				}
				var kv []string
				for _, key := range slices.Sorted(maps.Keys(f.m)) {
					kv = append(kv, key+sep+f.m[key])
				}
				flags = append(flags, fmt.Sprintf("--%s=%q", f.name, strings.Join(kv, ",")))
			}
		}
		// The kubelet refuses a soft threshold without its grace period.
		if len(k.EvictionSoftGracePeriod) > 0 {
			var kv []string
			for _, key := range slices.Sorted(maps.Keys(k.EvictionSoftGracePeriod)) {
				kv = append(kv, key+"="+k.EvictionSoftGracePeriod[key].Duration.String())
			}
			flags = append(flags, fmt.Sprintf("--eviction-soft-grace-period=%q", strings.Join(kv, ",")))
		}
		if k.EvictionMaxPodGracePeriod != nil {
			flags = append(flags, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
		}
		if k.PodsPerCore != nil {
			flags = append(flags, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
		}
		if k.ImageGCHighThresholdPercent != nil {
			flags = append(flags, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
		}
		if k.ImageGCLowThresholdPercent != nil {
			flags = append(flags, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
		}
		if k.CPUCFSQuota != nil {
			flags = append(flags, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
		}
	}
	return flags
}

func putMap[V ~string](config map[string]any, key string, m map[string]V) {
	if len(m) == 0 {
		return
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	config[key] = out
}

func putPtr[T any](config map[string]any, key string, p *T) {
	if p != nil {
		config[key] = *p
	}
}

func joinLabels(labels map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return strings.Join(kv, ",")
}

type mimePart struct {
	contentType string
	body        []byte
}

// userParts reads the user's user data: a MIME multi-part document's parts, or the
// whole as one part, a shell script by its first line or else of the family's
// default content type.
func userParts(s, defaultType string) ([]mimePart, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	// A YAML block scalar or a template easily leaves blank lines or spaces before
	// the headers, and header names are case-insensitive: such a document is still
	// MIME, not a shell script or NodeConfig to wrap whole.
	if doc := strings.TrimLeft(s, " \t\r\n"); isMIME(doc) {
		msg, err := mail.ReadMessage(bufio.NewReader(strings.NewReader(doc)))
		if err != nil {
			return nil, fmt.Errorf("reading the MIME document: %w", err)
		}
		mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
			return nil, fmt.Errorf("a MIME document must be multipart, got Content-Type %q", msg.Header.Get("Content-Type"))
		}
		r := multipart.NewReader(msg.Body, params["boundary"])
		var out []mimePart
		for {
			p, err := r.NextPart()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("reading a MIME part: %w", err)
			}
			body, err := io.ReadAll(p)
			if err != nil {
				return nil, err
			}
			out = append(out, mimePart{contentType: p.Header.Get("Content-Type"), body: body})
		}
	}
	contentType := defaultType
	if strings.HasPrefix(s, "#!") {
		contentType = shellScript
	}
	return []mimePart{{contentType: contentType, body: []byte(s)}}, nil
}

// isMIME reports whether user data starts with a MIME document's headers.
func isMIME(s string) bool {
	head := strings.ToLower(s[:min(len(s), 64)])
	return strings.HasPrefix(head, "mime-version:") || strings.HasPrefix(head, "content-type: multipart")
}

func renderMIME(parts []mimePart) (string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if err := w.SetBoundary(mimeBoundary); err != nil {
		return "", err
	}
	for _, p := range parts {
		pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.contentType}})
		if err != nil {
			return "", err
		}
		if _, err := pw.Write(p.body); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + mimeBoundary + "\"\n\n" + body.String(), nil
}

// bottlerocketUserData merges Tailor's settings into the user's TOML as Karpenter
// merges them: of the user's document only [settings] is kept, and in
// settings.kubernetes only the keys Karpenter knows (the rest are dropped, so a
// misspelt key cannot make Bottlerocket's API refuse the whole user data and the
// node never join). Then the cluster (name, endpoint, CA), the cluster DNS and max
// pods replace the user's; every kubelet setting of the NodeClass replaces the
// user's setting of the same name as a whole (an evictionHard of the NodeClass
// leaves none of the user's eviction-hard thresholds); the claim's labels are
// added to the user's node-labels, winning on a clash; and the claim's taints
// replace the user's node-taints. The user's other settings (network, ntp,
// host-containers, bootstrap-commands, …) stay as written.
func bottlerocketUserData(b Bootstrap) (string, error) {
	user := map[string]any{}
	if s := deref(b.UserData); strings.TrimSpace(s) != "" {
		if _, err := toml.Decode(s, &user); err != nil {
			return "", fmt.Errorf("spec.userData is not TOML: %w", err)
		}
	}
	settings := table(user, "settings")
	doc := map[string]any{"settings": settings}
	k8s := table(settings, "kubernetes")
	keepKnown(k8s, bottlerocketKubernetesKeys)
	if cmds, ok := settings["bootstrap-commands"].(map[string]any); ok {
		for _, c := range cmds {
			if c, ok := c.(map[string]any); ok {
				keepKnown(c, bottlerocketBootstrapCommandKeys)
			}
		}
	}
	k8s["cluster-name"] = b.Cluster.Name
	k8s["api-server"] = b.Cluster.Endpoint
	k8s["cluster-certificate"] = b.Cluster.CABundle
	if dns := b.clusterDNS(); len(dns) == 1 {
		k8s["cluster-dns-ip"] = dns[0]
	} else if len(dns) > 1 {
		k8s["cluster-dns-ip"] = dns
	}
	if b.MaxPods > 0 {
		k8s["max-pods"] = int64(b.MaxPods)
	}
	if k := b.Kubelet; k != nil {
		var grace map[string]string
		if k.EvictionSoftGracePeriod != nil {
			grace = map[string]string{}
			for key, d := range k.EvictionSoftGracePeriod {
				grace[key] = d.Duration.String()
			}
		}
		for _, s := range []struct {
			key string
			m   map[string]string
		}{{"system-reserved", nilOrStrings(k.SystemReserved)}, {"kube-reserved", nilOrStrings(k.KubeReserved)},
			{"eviction-hard", nilOrStrings(k.EvictionHard)}, {"eviction-soft", nilOrStrings(k.EvictionSoft)},
			{"eviction-soft-grace-period", grace}} {
			switch {
			case s.m == nil:
				// Not set in the NodeClass: the user's stands.
			case len(s.m) == 0:
				delete(k8s, s.key)
			default:
				t := map[string]any{}
				for name, v := range s.m {
					t[name] = v
				}
				k8s[s.key] = t
			}
		}
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = int64(*k.ImageGCHighThresholdPercent)
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = int64(*k.ImageGCLowThresholdPercent)
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
		if k.EvictionMaxPodGracePeriod != nil {
			k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
		}
		if k.PodsPerCore != nil {
			// Karpenter folds podsPerCore into max-pods only; Bottlerocket takes
			// it as a setting too, so the kubelet enforces it as on other families.
			k8s["pods-per-core"] = int64(*k.PodsPerCore)
		}
	}
	if len(b.Labels) > 0 {
		labels := table(k8s, "node-labels")
		for name, v := range b.Labels {
			labels[name] = v
		}
	}
	// The claim's taints are the node's: a taint the user wrote in the user data
	// would be on the node without the NodePool or the scheduling engine knowing.
	delete(k8s, "node-taints")
	if len(b.Taints) > 0 {
		taints := map[string]any{}
		for _, t := range b.Taints {
			entry := t.Value + ":" + string(t.Effect)
			have, _ := taints[t.Key].([]any)
			if !slices.Contains(have, any(entry)) {
				taints[t.Key] = append(have, entry)
			}
		}
		k8s["node-taints"] = taints
	}
	if b.RAID0 {
		// Bottlerocket (1.22 and later) formats the instance-store disks as one
		// array and binds the kubelet's, containerd's and pod logs' directories
		// onto it, before the kubelet starts; the command replaces a user's of
		// the same name.
		table(settings, "bootstrap-commands")[raid0Command] = map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				[]any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"mode":      "always",
			"essential": true,
		}
	}
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(doc); err != nil {
		return "", err
	}
	return out.String(), nil
}

// bottlerocketKubernetesKeys are the settings.kubernetes keys Karpenter v1.14
// carries over from a Bottlerocket user data (its documented "unknown TOML fields
// will be ignored"); for the tables among them, the keys of each entry.
var bottlerocketKubernetesKeys = map[string]map[string]bool{
	"api-server": nil, "cloud-provider": nil, "cluster-certificate": nil, "cluster-name": nil, "cluster-dns-ip": nil,
	"credential-providers": keySet("enabled", "cache-duration", "image-patterns", "environment"),
	"node-labels":          nil, "node-taints": nil, "max-pods": nil,
	"static-pods":   keySet("enabled", "manifest"),
	"eviction-hard": nil, "eviction-soft": nil, "eviction-soft-grace-period": nil, "eviction-max-pod-grace-period": nil,
	"kube-reserved": nil, "system-reserved": nil, "allowed-unsafe-sysctls": nil, "server-tls-bootstrap": nil,
	"registry-qps": nil, "registry-burst": nil, "event-qps": nil, "event-burst": nil, "kube-api-qps": nil, "kube-api-burst": nil,
	"container-log-max-size": nil, "container-log-max-files": nil, "cpu-manager-policy": nil, "cpu-manager-policy-options": nil,
	"cpu-manager-reconcile-period": nil, "memory-manager-policy": nil, "topology-manager-scope": nil, "topology-manager-policy": nil,
	"image-gc-high-threshold-percent": nil, "image-gc-low-threshold-percent": nil, "ids-per-pod": nil, "cpu-cfs-quota-enforced": nil,
	"shutdown-grace-period": nil, "shutdown-grace-period-for-critical-pods": nil, "cluster-domain": nil, "seccomp-default": nil,
	"pod-pids-limit": nil, "device-ownership-from-security-context": nil, "single-process-oom-kill": nil,
	"container-log-max-workers": nil, "container-log-monitor-interval": nil, "hostname-override-source": nil, "log-level": nil,
	"topology-manager-policy-options": nil,
}

// bottlerocketBootstrapCommandKeys are the keys of a settings.bootstrap-commands
// entry Karpenter carries over.
var bottlerocketBootstrapCommandKeys = map[string]map[string]bool{"commands": nil, "mode": nil, "essential": nil}

func keySet(keys ...string) map[string]bool {
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	return set
}

// keepKnown drops the keys of t that known does not list, and of each entry of a
// listed table of named entries, the keys its set does not list.
func keepKnown(t map[string]any, known map[string]map[string]bool) {
	for key, v := range t {
		sub, ok := known[key]
		if !ok {
			delete(t, key)
			continue
		}
		if sub == nil {
			continue
		}
		if entries, ok := v.(map[string]any); ok {
			for _, e := range entries {
				if e, ok := e.(map[string]any); ok {
					for k := range e {
						if !sub[k] {
							delete(e, k)
						}
					}
				}
			}
		}
	}
}

// raid0Command names the Bottlerocket bootstrap command that sets up the
// instance-store disks, as Karpenter names it.
const raid0Command = "000-mount-instance-storage"

// table returns the named sub-table of t, creating it when missing (or when the
// user set that key to something other than a table).
func table(t map[string]any, key string) map[string]any {
	if sub, ok := t[key].(map[string]any); ok {
		return sub
	}
	sub := map[string]any{}
	t[key] = sub
	return sub
}

// nilOrStrings is toStrings that keeps a nil map nil: a NodeClass setting left
// out is told from one set empty.
func nilOrStrings[V ~string](m map[string]V) map[string]string {
	if m == nil {
		return nil
	}
	return toStrings(m)
}

func toStrings[V ~string](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}
