package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"strings"
)

// bootAL2 runs the user data's call of /etc/eks/bootstrap.sh as the EKS AL2 AMI
// does: its options (bootstrap.sh's documented list), the kubelet configuration it
// writes from its template, and --kubelet-extra-args appended to the kubelet's
// command line.
func bootAL2(n Node) (*kubeletBoot, error) {
	scripts, err := shellScripts(n.UserData)
	if err != nil {
		return nil, err
	}
	var args []string
	found := false
	for i, s := range scripts {
		if err := shellSyntax([]byte(s)); err != nil {
			return nil, fmt.Errorf("user data script %d does not parse: %w", i, err)
		}
		if a, ok, err := commandArgs(s, "/etc/eks/bootstrap.sh"); err != nil {
			return nil, err
		} else if ok {
			args, found = a, true
		}
	}
	if !found {
		return nil, fmt.Errorf("the user data never calls /etc/eks/bootstrap.sh: the node never joins")
	}
	opts, warnings, err := bootstrapOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh: %w", err)
	}
	ca, err := base64.StdEncoding.DecodeString(opts["--b64-cluster-ca"])
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh: --b64-cluster-ca is not base64: %w", err)
	}
	if opts["--b64-cluster-ca"] == "" {
		ca = mustCA(n.Cluster) // bootstrap.sh asks DescribeCluster for what is left out
	}
	endpoint := opts["--apiserver-endpoint"]
	if endpoint == "" {
		endpoint = n.Cluster.Endpoint
	}
	if err := sameCluster(n.Cluster, opts["cluster"], endpoint, ca, ""); err != nil {
		return nil, fmt.Errorf("bootstrap.sh: %w", err)
	}
	if rt := opts["--container-runtime"]; rt != "" && rt != "containerd" {
		return nil, fmt.Errorf("bootstrap.sh: --container-runtime %s: the AL2 EKS AMIs for Kubernetes 1.24 and later run containerd only", rt)
	}
	dns := opts["--dns-cluster-ip"]
	if dns == "" {
		if opts["--ip-family"] == "ipv6" {
			if dns, err = clusterDNS(opts["--service-ipv6-cidr"]); err != nil {
				return nil, fmt.Errorf("bootstrap.sh: --ip-family ipv6 needs --service-ipv6-cidr: %w", err)
			}
		} else {
			// bootstrap.sh's guess from the VPC's range: 10.100.0.10, or
			// 172.20.0.10 in a 10.0.0.0/8 VPC.
			dns = "10.100.0.10"
		}
	}
	if want, err := clusterDNS(n.Cluster.ServiceCIDR); err == nil && n.Cluster.ServiceCIDR != "" && dns != want {
		return nil, fmt.Errorf("bootstrap.sh: the cluster DNS would be %s, the cluster's is %s: pods could not resolve names", dns, want)
	}

	family, err := bootstrapIPFamily(opts, n.Cluster)
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh: %w", err)
	}
	internalIP, err := nodeIP(n, family == "ipv6")
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh: %w", err)
	}

	maxPods, err := eniMaxPods(n.InstanceType)
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh: %w", err)
	}
	config := map[string]any{
		"apiVersion":            "kubelet.config.k8s.io/v1beta1",
		"kind":                  "KubeletConfiguration",
		"address":               "0.0.0.0",
		"authentication":        map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"cacheTTL": "2m0s", "enabled": true}, "x509": map[string]any{"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
		"authorization":         map[string]any{"mode": "Webhook", "webhook": map[string]any{"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}},
		"clusterDomain":         "cluster.local",
		"clusterDNS":            []string{dns},
		"hairpinMode":           "hairpin-veth",
		"readOnlyPort":          0,
		"cgroupDriver":          "systemd",
		"cgroupRoot":            "/",
		"featureGates":          map[string]bool{"RotateKubeletServerCertificate": true},
		"protectKernelDefaults": true,
		"serializeImagePulls":   false,
		"serverTLSBootstrap":    true,
		"evictionHard":          map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
		// Reserved memory follows the ENI max pods whatever --use-max-pods says.
		"kubeReserved":             eksKubeReserved(n.VCPUs, maxPods),
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
	}
	switch opts["--use-max-pods"] {
	case "", "true":
		config["maxPods"] = maxPods
	case "false":
	default:
		return nil, fmt.Errorf("bootstrap.sh: --use-max-pods %q is neither true nor false", opts["--use-max-pods"])
	}
	b := &kubeletBoot{flags: []string{"--cloud-provider=external"}, warnings: warnings, nodeIP: internalIP}
	if b.config, err = json.Marshal(config); err != nil {
		return nil, err
	}
	extra, err := shellWords(opts["--kubelet-extra-args"])
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh: --kubelet-extra-args: %w", err)
	}
	b.flags = append(b.flags, extra...)
	switch opts["--local-disks"] {
	case "":
	case "raid0":
		if n.InstanceStoreGB > 0 {
			b.ephemeralBytes = n.InstanceStoreGB * 1e9
		}
	case "mount":
	default:
		return nil, fmt.Errorf("bootstrap.sh: --local-disks %q is neither raid0 nor mount", opts["--local-disks"])
	}
	return b, nil
}

// bootstrapIPFamily is the IP family bootstrap.sh settles on: --ip-family;
// ipv6 when --service-ipv6-cidr is given; DescribeCluster's ipFamily when it
// describes the cluster (--b64-cluster-ca or --apiserver-endpoint left out);
// else ipv4, whatever the cluster's family is.
func bootstrapIPFamily(opts map[string]string, cluster Cluster) (string, error) {
	family := strings.ToLower(opts["--ip-family"])
	if family != "" && family != "ipv4" && family != "ipv6" {
		return "", fmt.Errorf("invalid --ip-family %q: only ipv4 or ipv6 are allowed", opts["--ip-family"])
	}
	if opts["--service-ipv6-cidr"] != "" {
		if family == "ipv4" {
			return "", fmt.Errorf("--ip-family should be ipv6 when --service-ipv6-cidr is specified")
		}
		family = "ipv6"
	}
	if family == "" && (opts["--b64-cluster-ca"] == "" || opts["--apiserver-endpoint"] == "") {
		family = "ipv4"
		if strings.Contains(cluster.ServiceCIDR, ":") {
			family = "ipv6"
		}
	}
	return cmp.Or(family, "ipv4"), nil
}

// bootstrapOptions reads bootstrap.sh's command line as its option loop does: the
// options it knows take the next word; anything else is a positional argument
// (the first is the cluster name, the rest are ignored), so an unknown option
// (or the --opt=value form, which it does not read) is dropped: a warning.
func bootstrapOptions(args []string) (map[string]string, []string, error) {
	known := map[string]bool{ // bootstrap.sh's case arms, options that take a value
		"--apiserver-endpoint": true, "--aws-api-retry-attempts": true, "--b64-cluster-ca": true,
		"--cluster-id": true, "--container-runtime": true, "--containerd-config-file": true,
		"--dns-cluster-ip": true, "--docker-config-json": true, "--enable-docker-bridge": true,
		"--enable-local-outpost": true, "--ip-family": true, "--kubelet-extra-args": true,
		"--local-disks": true, "--mount-bpf-fs": true, "--pause-container-account": true,
		"--pause-container-version": true, "--service-ipv4-cidr": true, "--service-ipv6-cidr": true,
		"--use-max-pods": true,
	}
	opts := map[string]string{}
	var positional, warnings []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !known[a] {
			positional = append(positional, a)
			continue
		}
		if i+1 >= len(args) {
			return nil, nil, fmt.Errorf("option %s has no value", a)
		}
		opts[a] = args[i+1]
		i++
	}
	if len(positional) == 0 {
		return nil, nil, fmt.Errorf("no cluster name")
	}
	opts["cluster"] = positional[0]
	if strings.HasPrefix(positional[0], "-") {
		return nil, nil, fmt.Errorf("the cluster name would be %q: an option bootstrap.sh does not know came first", positional[0])
	}
	for _, p := range positional[1:] {
		warnings = append(warnings, fmt.Sprintf("bootstrap.sh ignores %q (not an option it knows; it takes it for a positional argument)", p))
	}
	return opts, warnings, nil
}

// bootWindows runs the user data's call of the EKS Windows bootstrap script
// (Start-EKSBootstrap.ps1): its parameters and -KubeletExtraArgs on the kubelet's
// command line. Windows nodes reserve as Linux ones do; memory eviction is the
// kubelet's default there.
func bootWindows(n Node) (*kubeletBoot, error) {
	start := strings.Index(n.UserData, "<powershell>")
	end := strings.Index(n.UserData, "</powershell>")
	if start < 0 || end < start {
		return nil, fmt.Errorf("the user data has no <powershell> block: EC2Launch runs nothing and the node never joins")
	}
	script := n.UserData[start+len("<powershell>") : end]
	re := regexp.MustCompile(`(?m)^\s*&\s*\$EKSBootstrapScriptFile\s+(.*)$`)
	m := re.FindStringSubmatch(script)
	if m == nil || !strings.Contains(script, `Start-EKSBootstrap.ps1`) {
		return nil, fmt.Errorf("the user data never calls Start-EKSBootstrap.ps1: the node never joins")
	}
	words, err := powershellWords(m[1])
	if err != nil {
		return nil, fmt.Errorf("Start-EKSBootstrap.ps1: %w", err)
	}
	known := map[string]bool{"-EKSClusterName": true, "-KubeletExtraArgs": true, "-KubeProxyExtraArgs": true,
		"-APIServerEndpoint": true, "-Base64ClusterCA": true, "-DNSClusterIP": true, "-ServiceCIDR": true,
		"-ExcludedSnatCIDRs": true, "-ContainerRuntime": true}
	params := map[string]string{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		name := ""
		for k := range known {
			if strings.EqualFold(w, k) {
				name = k
			}
		}
		if name == "" {
			return nil, fmt.Errorf("Start-EKSBootstrap.ps1: a parameter cannot be found that matches parameter name %q", strings.TrimPrefix(w, "-"))
		}
		if i+1 >= len(words) {
			return nil, fmt.Errorf("Start-EKSBootstrap.ps1: missing an argument for parameter %q", strings.TrimPrefix(w, "-"))
		}
		params[name] = words[i+1]
		i++
	}
	if params["-EKSClusterName"] == "" {
		return nil, fmt.Errorf("Start-EKSBootstrap.ps1: -EKSClusterName is mandatory")
	}
	ca := mustCA(n.Cluster)
	if v := params["-Base64ClusterCA"]; v != "" {
		if ca, err = base64.StdEncoding.DecodeString(v); err != nil {
			return nil, fmt.Errorf("Start-EKSBootstrap.ps1: -Base64ClusterCA is not base64: %w", err)
		}
	}
	endpoint := params["-APIServerEndpoint"]
	if endpoint == "" {
		endpoint = n.Cluster.Endpoint
	}
	if err := sameCluster(n.Cluster, params["-EKSClusterName"], endpoint, ca, ""); err != nil {
		return nil, fmt.Errorf("Start-EKSBootstrap.ps1: %w", err)
	}
	dns := params["-DNSClusterIP"]
	if want, err := clusterDNS(n.Cluster.ServiceCIDR); err == nil && dns != "" && dns != want {
		return nil, fmt.Errorf("Start-EKSBootstrap.ps1: the cluster DNS would be %s, the cluster's is %s", dns, want)
	} else if dns == "" {
		dns = want
	}
	maxPods, err := windowsMaxPods(n.InstanceType)
	if err != nil {
		return nil, err
	}
	config := map[string]any{
		"apiVersion":    "kubelet.config.k8s.io/v1beta1",
		"kind":          "KubeletConfiguration",
		"clusterDNS":    []string{dns},
		"clusterDomain": "cluster.local",
		"maxPods":       maxPods,
		"evictionHard":  map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		"kubeReserved":  eksKubeReserved(n.VCPUs, maxPods),
		"cgroupsPerQOS": false, "enforceNodeAllocatable": []string{},
	}
	// The node IP is taken to be the IPv4 address: EKS runs no Windows pods in
	// IPv6 clusters, and the script's handling of them is not re-stated here.
	b := &kubeletBoot{windows: true, flags: []string{"--cloud-provider=external"}, nodeIP: n.PrivateIPv4}
	if b.config, err = json.Marshal(config); err != nil {
		return nil, err
	}
	extra, err := shellWords(params["-KubeletExtraArgs"])
	if err != nil {
		return nil, fmt.Errorf("Start-EKSBootstrap.ps1: -KubeletExtraArgs: %w", err)
	}
	b.flags = append(b.flags, extra...)
	return b, nil
}

// mustCA is the cluster's CA, as DescribeCluster gives it to a boot script.
func mustCA(c Cluster) []byte {
	ca, _ := base64.StdEncoding.DecodeString(c.CertificateAuthority)
	return ca
}

// shellScripts are the scripts cloud-init runs from the user data: its
// text/x-shellscript parts when it is a MIME multi-part message, else all of it.
func shellScripts(userData string) ([]string, error) {
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	if err != nil {
		return []string{userData}, nil
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return []string{userData}, nil
	}
	var scripts []string
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return scripts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the MIME user data: %w", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, err
		}
		if t, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); t == "text/x-shellscript" {
			scripts = append(scripts, string(body))
		}
	}
}

// commandArgs finds the command's invocation in a script (continued lines joined)
// and splits its arguments as the shell would.
func commandArgs(script, command string) ([]string, bool, error) {
	joined := strings.ReplaceAll(script, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		i := strings.Index(line, command)
		if i < 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		words, err := shellWords(line[i+len(command):])
		if err != nil {
			return nil, true, fmt.Errorf("%s: %w", command, err)
		}
		return words, true, nil
	}
	return nil, false, nil
}

// shellWords splits a command line as a POSIX shell does for words, quotes and
// backslashes (no expansions: a $ is kept as written).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur bytes.Buffer
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == ';' || c == '&' || c == '|' || c == '#' && !inWord:
			// The command ends here.
			if inWord {
				words = append(words, cur.String())
			}
			return words, nil
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// powershellWords splits PowerShell command arguments: single quotes (” is a
// quote), double quotes (` escapes), bare words.
func powershellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			i++
			for ; i < len(s); i++ {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						cur.WriteByte('\'')
						i++
						continue
					}
					break
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated single quote")
			}
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '`' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// sniffFamily tells the boot agent from the user data when the image does not.
func sniffFamily(userData string) string {
	switch {
	case strings.Contains(userData, "<powershell>"):
		return "Windows"
	case strings.Contains(userData, "application/node.eks.aws") || strings.Contains(userData, "kind: NodeConfig"):
		return "AL2023"
	case strings.Contains(userData, "[settings."):
		return "Bottlerocket"
	case strings.Contains(userData, "/etc/eks/bootstrap.sh"):
		return "AL2"
	}
	return ""
}
