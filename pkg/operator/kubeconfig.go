package operator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigEnv is what RESTConfig reads besides the options; tests pass their own.
type kubeconfigEnv struct {
	lookup    func(string) (string, bool)
	home      func() (string, error)
	inCluster func() (*rest.Config, error)
}

// RESTConfig finds the cluster to run against, in controller-runtime's order: the
// --kubeconfig file; else the files $KUBECONFIG lists; else the pod's service
// account (in-cluster); else ~/.kube/config. When there is none, the error says
// where it looked and what it found, not client-go's hint to set KUBERNETES_MASTER.
func RESTConfig(opts Options) (*rest.Config, error) {
	return restConfig(opts.Kubeconfig, kubeconfigEnv{lookup: os.LookupEnv, home: os.UserHomeDir, inCluster: rest.InClusterConfig})
}

func restConfig(explicit string, env kubeconfigEnv) (*rest.Config, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--kubeconfig %s: no such file", explicit)
		}
		cfg, err := loadKubeconfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: explicit})
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", explicit, err)
		}
		return cfg, nil
	}
	looked := []string{"--kubeconfig: not given"}
	if v, _ := env.lookup(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		// As kubectl: $KUBECONFIG, when set, is the only place to look. Going on to
		// ~/.kube/config could reach another cluster than the one meant.
		files := filepath.SplitList(v)
		cfg, err := loadKubeconfig(&clientcmd.ClientConfigLoadingRules{Precedence: files})
		switch {
		case err == nil:
			return cfg, nil
		case !clientcmd.IsEmptyConfig(err):
			return nil, fmt.Errorf("$KUBECONFIG %s: %w", v, err)
		}
		return nil, noCluster(append(looked, "$KUBECONFIG: "+describeKubeconfigs(files),
			"in-cluster and ~/.kube/config: not tried while $KUBECONFIG is set"))
	}
	looked = append(looked, "$KUBECONFIG: not set")
	cfg, err := env.inCluster()
	switch {
	case err == nil:
		return cfg, nil
	case errors.Is(err, rest.ErrNotInCluster):
		looked = append(looked, "in-cluster: not in a pod ($KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT are not set)")
	default:
		return nil, fmt.Errorf("in-cluster configuration (in a pod, as $KUBERNETES_SERVICE_HOST says): %w", err)
	}
	home, err := env.home()
	if err != nil {
		return nil, noCluster(append(looked, fmt.Sprintf("~/.kube/config: no home directory (%v)", err)))
	}
	path := filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	cfg, err = loadKubeconfig(&clientcmd.ClientConfigLoadingRules{Precedence: []string{path}})
	switch {
	case err == nil:
		return cfg, nil
	case !clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nil, noCluster(append(looked, "~/.kube/config: "+describeKubeconfigs([]string{path})))
}

// loadKubeconfig reads the kubeconfig files of rules as kubectl does.
func loadKubeconfig(rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// describeKubeconfigs says why kubeconfig files that gave no configuration gave none.
func describeKubeconfigs(files []string) string {
	var out []string
	for _, f := range files {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			out = append(out, f+" does not exist")
		} else {
			out = append(out, f+" names no cluster (no current context)")
		}
	}
	return strings.Join(out, ", ")
}

func noCluster(looked []string) error {
	return fmt.Errorf("no cluster to connect to. Looked at %s. Pass --kubeconfig FILE or set KUBECONFIG "+
		"(`tailor sandbox up` prints one for a local cluster)", strings.Join(looked, "; "))
}
