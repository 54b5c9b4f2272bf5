package fakeaws

import (
	"bufio"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
)

// bootConfig is what a node's kubelet takes from the instance's user data: the
// labels and taints it registers with, and the settings that decide its
// allocatable. The fake kubelet reads the user data as the node would, so a
// provider that forgets a label or the unregistered taint there is caught.
type bootConfig struct {
	labels  map[string]string
	taints  []corev1.Taint
	kubelet allocatable.Kubelet
}

// parseUserData reads the three forms EKS nodes boot from: AL2023's MIME
// multi-part with nodeadm NodeConfig parts (and shell scripts), Bottlerocket's
// TOML settings, and a bare script calling bootstrap.sh with kubelet flags.
func parseUserData(ud string) (bootConfig, error) {
	bc := bootConfig{labels: map[string]string{}}
	switch {
	case strings.HasPrefix(strings.TrimSpace(ud), "MIME-Version") || strings.Contains(ud, "Content-Type: multipart/"):
		return bc, bc.readMIME(ud)
	case strings.Contains(ud, "[settings."):
		return bc, bc.readBottlerocket(ud)
	}
	return bc, bc.readFlags(ud)
}

func (bc *bootConfig) readMIME(ud string) error {
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(ud, "\r\n")))
	if err != nil {
		return fmt.Errorf("reading the MIME user data: %w", err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return fmt.Errorf("the MIME user data has no multipart boundary: %v", err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading a MIME part: %w", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return fmt.Errorf("reading a MIME part: %w", err)
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch ct {
		case "application/node.eks.aws":
			if err := bc.readNodeConfig(body); err != nil {
				return err
			}
		default:
			if err := bc.readFlags(string(body)); err != nil {
				return err
			}
		}
	}
}

// nodeConfig is the part of nodeadm's NodeConfig the kubelet's registration
// depends on. Parts are merged in order, as nodeadm does.
type nodeConfig struct {
	Spec struct {
		Kubelet struct {
			Config struct {
				MaxPods        *int32            `json:"maxPods"`
				PodsPerCore    *int32            `json:"podsPerCore"`
				SystemReserved map[string]string `json:"systemReserved"`
				KubeReserved   map[string]string `json:"kubeReserved"`
				EvictionHard   map[string]string `json:"evictionHard"`
				EvictionSoft   map[string]string `json:"evictionSoft"`
			} `json:"config"`
			Flags []string `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

func (bc *bootConfig) readNodeConfig(body []byte) error {
	var nc nodeConfig
	if err := yaml.Unmarshal(body, &nc); err != nil {
		return fmt.Errorf("reading a NodeConfig: %w", err)
	}
	k, c := &bc.kubelet, nc.Spec.Kubelet.Config
	if c.MaxPods != nil {
		k.MaxPods = c.MaxPods
	}
	if c.PodsPerCore != nil {
		k.PodsPerCore = c.PodsPerCore
	}
	k.SystemReserved = mergeSettings(k.SystemReserved, c.SystemReserved)
	k.KubeReserved = mergeSettings(k.KubeReserved, c.KubeReserved)
	k.EvictionHard = mergeSettings(k.EvictionHard, c.EvictionHard)
	k.EvictionSoft = mergeSettings(k.EvictionSoft, c.EvictionSoft)
	return bc.readFlags(strings.Join(nc.Spec.Kubelet.Flags, " "))
}

func mergeSettings(into, from map[string]string) map[string]string {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

var kubeletFlag = regexp.MustCompile(`--(node-labels|register-with-taints|max-pods)[= ]["']?([^\s"']*)`)

// readFlags finds kubelet flags in a script or a NodeConfig's flags.
func (bc *bootConfig) readFlags(text string) error {
	for _, m := range kubeletFlag.FindAllStringSubmatch(text, -1) {
		switch m[1] {
		case "node-labels":
			for _, kv := range splitList(m[2]) {
				k, v, _ := strings.Cut(kv, "=")
				bc.labels[k] = v
			}
		case "register-with-taints":
			for _, spec := range splitList(m[2]) {
				t, err := parseTaint(spec)
				if err != nil {
					return err
				}
				bc.taints = append(bc.taints, t)
			}
		case "max-pods":
			n, err := strconv.ParseInt(m[2], 10, 32)
			if err != nil {
				return fmt.Errorf("--max-pods=%s: %w", m[2], err)
			}
			bc.kubelet.MaxPods = ptr(int32(n))
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseTaint reads the kubelet's key[=value]:Effect.
func parseTaint(spec string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect", spec)
	}
	k, v, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return t, nil
	}
	return corev1.Taint{}, fmt.Errorf("taint %q: unknown effect %q", spec, effect)
}

// readBottlerocket reads the TOML settings Bottlerocket nodes boot from, line by
// line: the sections and value forms its Kubernetes settings use (strings,
// integers, arrays of strings), not TOML at large.
func (bc *bootConfig) readBottlerocket(ud string) error {
	section := ""
	sc := bufio.NewScanner(strings.NewReader(ud))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[] ")
			continue
		}
		rawKey, rawValue, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key := strings.Trim(strings.TrimSpace(rawKey), `"`)
		value := strings.TrimSpace(rawValue)
		k := &bc.kubelet
		switch section {
		case "settings.kubernetes":
			switch key {
			case "max-pods":
				n, err := strconv.ParseInt(value, 10, 32)
				if err != nil {
					return fmt.Errorf("settings.kubernetes.max-pods = %s: %w", value, err)
				}
				k.MaxPods = ptr(int32(n))
			case "pods-per-core":
				n, err := strconv.ParseInt(value, 10, 32)
				if err != nil {
					return fmt.Errorf("settings.kubernetes.pods-per-core = %s: %w", value, err)
				}
				k.PodsPerCore = ptr(int32(n))
			}
		case "settings.kubernetes.node-labels":
			bc.labels[key] = strings.Trim(value, `"`)
		case "settings.kubernetes.node-taints":
			// "key" = ["value:Effect", …]; the value may be empty (":Effect").
			for _, item := range splitList(strings.Trim(value, "[]")) {
				v, effect, _ := strings.Cut(strings.Trim(item, `"`), ":")
				t, err := parseTaint(key + "=" + v + ":" + effect)
				if err != nil {
					return err
				}
				bc.taints = append(bc.taints, t)
			}
		case "settings.kubernetes.kube-reserved":
			k.KubeReserved = mergeSettings(k.KubeReserved, map[string]string{key: strings.Trim(value, `"`)})
		case "settings.kubernetes.system-reserved":
			k.SystemReserved = mergeSettings(k.SystemReserved, map[string]string{key: strings.Trim(value, `"`)})
		case "settings.kubernetes.eviction-hard":
			k.EvictionHard = mergeSettings(k.EvictionHard, map[string]string{key: strings.Trim(value, `"`)})
		}
	}
	return sc.Err()
}

func ptr[T any](v T) *T { return &v }
