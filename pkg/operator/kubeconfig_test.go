package operator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

func writeKubeconfig(t *testing.T, dir, host string) string {
	t.Helper()
	p := filepath.Join(dir, host+".kubeconfig")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(testKubeconfig, "%s", host)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The cluster is found in --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config, in
// that order; when there is none, the error names each place and what it found.
func TestRESTConfig(t *testing.T) {
	dir := t.TempDir()
	explicit, fromEnv := writeKubeconfig(t, dir, "explicit"), writeKubeconfig(t, dir, "env")
	home, emptyHome := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(writeKubeconfig(t, dir, "home"), filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	inPod := func() (*rest.Config, error) { return &rest.Config{Host: "https://in-cluster"}, nil }
	notInPod := func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	env := func(kubeconfig, home string, inCluster func() (*rest.Config, error)) kubeconfigEnv {
		return kubeconfigEnv{
			lookup: func(k string) (string, bool) {
				if k == "KUBECONFIG" && kubeconfig != "" {
					return kubeconfig, true
				}
				return "", false
			},
			home:      func() (string, error) { return home, nil },
			inCluster: inCluster,
		}
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name     string
		explicit string
		env      kubeconfigEnv
		host     string   // the cluster found, or
		errs     []string // what the error says
	}{
		{"--kubeconfig first", explicit, env(fromEnv, home, inPod), "https://explicit:6443", nil},
		{"then $KUBECONFIG", "", env(fromEnv, home, inPod), "https://env:6443", nil},
		{"$KUBECONFIG lists several", "", env(missing+string(filepath.ListSeparator)+fromEnv, home, inPod), "https://env:6443", nil},
		{"then in-cluster", "", env("", home, inPod), "https://in-cluster", nil},
		{"then ~/.kube/config", "", env("", home, notInPod), "https://home:6443", nil},
		{"--kubeconfig missing", missing, env(fromEnv, home, inPod), "", []string{"--kubeconfig " + missing + ": no such file"}},
		{"nothing anywhere", "", env("", emptyHome, notInPod), "", []string{
			"no cluster to connect to. Looked at --kubeconfig: not given; $KUBECONFIG: not set; in-cluster: not in a pod",
			"~/.kube/config: " + filepath.Join(emptyHome, ".kube", "config") + " does not exist",
			"Pass --kubeconfig FILE or set KUBECONFIG"}},
		// $KUBECONFIG set is the only place looked, as for kubectl.
		{"$KUBECONFIG names nothing", "", env(missing, home, inPod), "", []string{
			"$KUBECONFIG: " + missing + " does not exist", "in-cluster and ~/.kube/config: not tried while $KUBECONFIG is set"}},
		{"a broken pod", "", env("", home, func() (*rest.Config, error) { return nil, errors.New("open token: no such file") }), "",
			[]string{"in-cluster configuration (in a pod, as $KUBERNETES_SERVICE_HOST says): open token: no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := restConfig(tc.explicit, tc.env)
			if tc.errs == nil {
				if err != nil || cfg.Host != tc.host {
					t.Fatalf("got %v, %v; want the cluster %s", cfg, err, tc.host)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %s, want an error", cfg.Host)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "KUBERNETES_MASTER") {
				t.Errorf("error %q passes on client-go's hint", err)
			}
		})
	}
}
