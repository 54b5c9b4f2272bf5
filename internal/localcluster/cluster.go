package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options choose what runs.
type Options struct {
	// BinDir holds the binaries; empty means the repository's bin/ (see BinDir).
	BinDir string
	// Dir is the working directory (data, keys, logs, kubeconfig). Empty means a new
	// temporary directory, removed by Stop.
	Dir string
	// Scheduler, ControllerManager and Kwok start those components too.
	Scheduler, ControllerManager, Kwok bool
	// KubeAPIQPS, when set, is the client QPS of the scheduler and the
	// controller-manager (burst twice that). Their defaults, 50 and 20, have the
	// ReplicaSet controller create 20 pods a second: a scale test wants more.
	KubeAPIQPS int
	// ReadyTimeout bounds each component's readiness wait; zero means 90s.
	ReadyTimeout time.Duration
	// Detach leaves the components running after the caller exits (tailor sandbox);
	// StopDetached ends them later from their pid file.
	Detach bool
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir is the working directory; Kubeconfig is the admin kubeconfig in it.
	Dir, Kubeconfig string
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// SchedulerURL is the kube-scheduler's secure endpoint (its /metrics takes
	// Config's bearer token); empty when the scheduler does not run.
	SchedulerURL string

	procs  []*process
	ownDir bool
	detach bool
	// stopResync ends ResyncKwokPods, run beside kwok when not detached.
	stopResync func()
}

// Start brings up the control plane and waits until every component is ready. On
// failure it stops whatever it started and returns an error naming the component,
// with the tail of its log.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	c := &Cluster{Dir: opts.Dir, detach: opts.Detach}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "tailor-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, schedPort, kcmPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	bin := func(name string) string { return filepath.Join(binDir, name) }

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	etcd, err := c.start("etcd", bin("etcd"),
		"--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--unsafe-no-fsync", "--quota-backend-bytes", strconv.Itoa(4<<30))
	if err != nil {
		return nil, err
	}
	if err := etcd.waitReady(ctx, timeout, httpProbe(http.DefaultClient, etcdURL+"/health", "")); err != nil {
		return nil, err
	}

	token, err := c.writeCredentials()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(c.Dir, "pki")
	apiArgs := []string{
		"--etcd-servers", etcdURL,
		"--secure-port", strconv.Itoa(apiPort), "--bind-address", "127.0.0.1",
		"--cert-dir", certDir,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(c.Dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(c.Dir, "sa.key"),
		"--token-auth-file", filepath.Join(c.Dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--allow-privileged=true",
	}
	if !opts.ControllerManager {
		// Without the controller-manager no namespace gets its default ServiceAccount,
		// so the ServiceAccount admission plugin would refuse every pod.
		apiArgs = append(apiArgs, "--disable-admission-plugins", "ServiceAccount")
	}
	api, err := c.start("kube-apiserver", bin("kube-apiserver"), apiArgs...)
	if err != nil {
		return nil, err
	}
	apiURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := api.waitReady(ctx, timeout, httpProbe(insecureClient(), apiURL+"/readyz", token)); err != nil {
		return nil, err
	}
	caData, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading the API server's certificate: %w", err)
	}
	c.Config = &rest.Config{Host: apiURL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caData},
		QPS: 200, Burst: 400}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, apiURL, caData, token); err != nil {
		return nil, err
	}

	kubeconfigArgs := []string{"--kubeconfig", c.Kubeconfig,
		"--authentication-kubeconfig", c.Kubeconfig, "--authorization-kubeconfig", c.Kubeconfig,
		"--leader-elect=false", "--bind-address", "127.0.0.1"}
	if opts.KubeAPIQPS > 0 {
		kubeconfigArgs = append(kubeconfigArgs, "--kube-api-qps", strconv.Itoa(opts.KubeAPIQPS), "--kube-api-burst", strconv.Itoa(2*opts.KubeAPIQPS))
	}
	if opts.Scheduler {
		p, err := c.start("kube-scheduler", bin("kube-scheduler"),
			append(kubeconfigArgs, "--secure-port", strconv.Itoa(schedPort))...)
		if err != nil {
			return nil, err
		}
		c.SchedulerURL = "https://127.0.0.1:" + strconv.Itoa(schedPort)
		if err := p.waitReady(ctx, timeout, httpProbe(insecureClient(), c.SchedulerURL+"/healthz", "")); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		p, err := c.start("kube-controller-manager", bin("kube-controller-manager"),
			append(kubeconfigArgs, "--secure-port", strconv.Itoa(kcmPort),
				"--controllers", "*,-nodeipam,-serviceaccount-token",
				"--service-account-private-key-file", filepath.Join(c.Dir, "sa.key"),
				"--root-ca-file", filepath.Join(certDir, "apiserver.crt"))...)
		if err != nil {
			return nil, err
		}
		if err := p.waitReady(ctx, timeout, httpProbe(insecureClient(), "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", "")); err != nil {
			return nil, err
		}
	}
	if opts.Kwok {
		args := []string{"--kubeconfig", c.Kubeconfig, "--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
			"--cidr=10.1.0.1/16", "--node-ip=10.1.0.1", "--node-lease-duration-seconds=40",
			"--server-address", "127.0.0.1:" + strconv.Itoa(kwokPort)}
		stages, err := filepath.Glob(filepath.Join(binDir, "kwok-stages", "*.yaml"))
		if err != nil || len(stages) == 0 {
			return nil, fmt.Errorf("kwok: no stage configs in %s (build them with `make tools`)", filepath.Join(binDir, "kwok-stages"))
		}
		for _, s := range stages {
			args = append(args, "--config", s)
		}
		// kwok plays every node's kubelet with 4 workers by default, so pods on a
		// hundred new nodes would start one after another; real kubelets work side
		// by side.
		kwokConfig := filepath.Join(c.Dir, "kwok.yaml")
		if err := os.WriteFile(kwokConfig, []byte(kwokConfiguration), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config", kwokConfig)
		p, err := c.start("kwok", bin("kwok"), args...)
		if err != nil {
			return nil, err
		}
		if err := p.waitReady(ctx, timeout, httpProbe(http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(kwokPort)+"/healthz", "")); err != nil {
			return nil, err
		}
		if err := createControlPlaneNode(ctx, c.Config); err != nil {
			return nil, err
		}
		if !opts.Detach { // a detached cluster's owner runs it (tailor sandbox)
			resyncCtx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = ResyncKwokPods(resyncCtx, c.Config)
			}()
			c.stopResync = func() { cancel(); <-done }
		}
	}
	return c, nil
}

// ControlPlaneNode names the Node a cluster with kwok starts with, as a kind
// cluster does: the machine the control plane runs on, tainted so that workloads
// stay off it. A real cluster has nodes before its autoscaler adds any, and the
// kube-scheduler treats a cluster with none differently: it cannot say which
// plugin rejected a pod, so it retries every pending pod on a doubling backoff (up
// to 10s) instead of waiting for a node that could take it, and pods whose nodes
// are up wait out that backoff.
const ControlPlaneNode = "control-plane"

func createControlPlaneNode(ctx context.Context, cfg *rest.Config) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ControlPlaneNode,
		Annotations: map[string]string{KwokNodeAnnotation: "fake"},
		Labels: map[string]string{corev1.LabelHostname: ControlPlaneNode, "node-role.kubernetes.io/control-plane": "",
			corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}},
	}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the control-plane node: %w", err)
	}
	return nil
}

const kwokConfiguration = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 32
  nodePlayStageParallelism: 32
  nodeLeaseParallelism: 16
`

// KwokResyncInterval is how often ResyncKwokPods looks, and how long a bound pod
// waits for kwok before it is touched: a kubelet notices a missed pod at its next
// sync, seconds later.
const KwokResyncInterval = 5 * time.Second

// KwokNodeAnnotation marks the Nodes kwok manages (value "fake").
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Stop ends every component, newest first, and removes the working directory if
// Start created it. It is safe to call more than once.
func (c *Cluster) Stop() {
	if c.stopResync != nil {
		c.stopResync()
		c.stopResync = nil
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	c.procs = nil
	if c.ownDir && c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// LogLines returns, for each component, the last n lines of its log that contain
// s: what a failing test shows of the control plane's side.
func (c *Cluster) LogLines(s string, n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		lines := p.logLines(s, n)
		fmt.Fprintf(&b, "--- %s: %d lines with %q\n", p.name, len(lines), s)
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// Pids returns the process ids of the running components.
func (c *Cluster) Pids() []int {
	var pids []int
	for _, p := range c.procs {
		if !p.exited() {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}

func (c *Cluster) start(name, bin string, args ...string) (*process, error) {
	p, err := startProcess(name, bin, args, c.Dir, c.detach)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	if c.detach {
		if err := RecordProcess(c.Dir, name, p.cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// writeCredentials writes the service-account key pair and an admin token file, and
// returns the token.
func (c *Cluster) writeCredentials() (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw)
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.Dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return token, nil
}

func writeKubeconfig(path, server string, caData []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["tailor"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["tailor"] = &clientcmdapi.Context{Cluster: "tailor", AuthInfo: "admin"}
	cfg.CurrentContext = "tailor"
	return clientcmd.WriteToFile(*cfg, path)
}

// httpProbe succeeds when url answers 200.
func httpProbe(client *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	}
}

// insecureClient probes health endpoints before the serving certificate is known.
func insecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health probe only
	}}
}

// BinDir finds the binaries: $TAILOR_BIN_DIR, else bin/ at the root of the
// repository that contains the working directory.
func BinDir() (string, error) {
	if dir := os.Getenv("TAILOR_BIN_DIR"); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools.sh")); err == nil {
			return filepath.Join(dir, "bin"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("cannot find the binaries: set TAILOR_BIN_DIR, or run inside the Tailor repository after `make tools`")
		}
	}
}
