// Package sandbox runs Tailor on a laptop: the local control plane with kwok, the
// CRDs, a default NodePool over the simulated cloud (or over a fake AWS account,
// internal/fakeaws, with --cloud aws), and the controller, all as background
// processes that outlive the command that started them.
package sandbox

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/pkg/operator"
)

//go:embed default.yaml
var defaults []byte

// DefaultDir is where the sandbox lives unless told otherwise.
func DefaultDir() string { return filepath.Join(os.TempDir(), "tailor-sandbox") }

// Options say where the sandbox lives and what runs the controller.
type Options struct {
	Dir string
	// Tailor is the tailor binary that runs `tailor controller` (and
	// `tailor sandbox fake-aws`).
	Tailor string
	// Cloud is CloudSim (the default) or CloudAWS.
	Cloud string
	// SystemNode adds the system node (see SystemNode).
	SystemNode bool
	// Latency is the simulated cloud's latency model: LatencyNone (the default:
	// nodes launch and register at once) or LatencyRealistic (see
	// v1alpha1.Latency). CloudSim only.
	Latency string
}

// The values of --latency.
const (
	LatencyNone      = "none"
	LatencyRealistic = "realistic"
)

// Up brings the sandbox up and prints how to reach it.
func Up(ctx context.Context, opts Options, out io.Writer) (err error) {
	if opts.Cloud == "" {
		opts.Cloud = CloudSim
	}
	if opts.Cloud != CloudSim && opts.Cloud != CloudAWS {
		return fmt.Errorf("cloud %q: want %s or %s", opts.Cloud, CloudSim, CloudAWS)
	}
	switch opts.Latency {
	case "", LatencyNone:
	case LatencyRealistic:
		if opts.Cloud != CloudSim {
			return fmt.Errorf("latency %s: only the sim cloud has a latency model", opts.Latency)
		}
	default:
		return fmt.Errorf("latency %q: want %s or %s", opts.Latency, LatencyNone, LatencyRealistic)
	}
	if err := claimDir(opts.Dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "sandbox: starting etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok in %s\n", opts.Dir)
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: opts.Dir, Scheduler: true, ControllerManager: true, Kwok: true, Detach: true})
	if err != nil {
		_ = localcluster.StopDetached(opts.Dir, 5*time.Second)
		return err
	}
	defer func() {
		if err != nil {
			_ = localcluster.StopDetached(opts.Dir, 5*time.Second)
		}
	}()
	if err := startKwokResync(opts); err != nil {
		return err
	}
	if opts.SystemNode {
		fmt.Fprintf(out, "sandbox: adding the node %s (1 cpu, 2Gi, untainted, labelled %s), which Tailor does not manage\n", SystemNode, SystemNodeRole)
		if err := addSystemNode(ctx, cluster.Config, opts.Dir); err != nil {
			return err
		}
	}
	var manifests [][]byte
	var controllerArgs, controllerEnv []string
	switch opts.Cloud {
	case CloudSim:
		fmt.Fprintln(out, "sandbox: installing the CRDs, a SimNodeClass, the default NodePool and DaemonSets on every node (kube-proxy, cni-agent, log-agent)")
		manifests = [][]byte{defaults}
		if opts.Latency == LatencyRealistic {
			fmt.Fprintln(out, "sandbox: the SimNodeClass times launches as EC2's (registrations of about 25 s with a tail), fails 2% of them for insufficient capacity, and answers slowly")
			manifests = [][]byte{realisticDefaults()}
		}
	case CloudAWS:
		fmt.Fprintf(out, "sandbox: starting the fake AWS (EC2, SSM, Pricing, EKS cluster %s, IAM, SQS; subnets in 3 zones), whose instances register kwok Nodes\n", AWSCluster)
		url, err := startFakeAWS(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "sandbox: installing the CRDs, the default EC2NodeClass (al2023@latest), the default NodePool and DaemonSets on every node (kube-proxy, cni-agent, log-agent)")
		manifests = [][]byte{awsManifests(), daemonSets()}
		controllerArgs, controllerEnv = awsControllerArgs(), awsControllerEnv(url)
	}
	if err := crd.Install(ctx, cluster.Config); err != nil {
		return err
	}
	for _, m := range manifests {
		if err := apply(ctx, cluster.Config, m); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "sandbox: starting the Tailor controller")
	if err := startController(ctx, opts, cluster.Kubeconfig, controllerArgs, controllerEnv); err != nil {
		return err
	}
	fmt.Fprintf(out, "sandbox: up. Use it with:\n  export KUBECONFIG=%s\n", cluster.Kubeconfig)
	return nil
}

// Marker is the file that makes a directory a sandbox's: up replaces and down
// removes only a directory that has it, since --dir may name anything.
const Marker = ".tailor-sandbox"

func isSandbox(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, Marker))
	return err == nil
}

// claimDir makes dir a new sandbox's directory: one that does not exist or is empty
// is marked; a stopped sandbox is cleared first; anything else is refused untouched.
func claimDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0):
	case err != nil:
		return err
	case !isSandbox(dir):
		return fmt.Errorf("%s exists and is not a sandbox (it has no %s file); nothing was changed: choose another --dir, or empty it yourself", dir, Marker)
	default:
		procs, _ := localcluster.Processes(dir)
		for name, running := range procs {
			if running {
				return fmt.Errorf("a sandbox already runs in %s (%s is up): run `tailor sandbox down` first", dir, name)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("clearing the stopped sandbox in %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, Marker), []byte("made by `tailor sandbox up`; `tailor sandbox down` removes this directory\n"), 0o644)
}

// Kubeconfig is the sandbox's admin kubeconfig.
func Kubeconfig(dir string) string { return filepath.Join(dir, "kubeconfig") }

// startController runs `tailor controller` with args added, and env (when set) as
// its whole environment.
func startController(ctx context.Context, opts Options, kubeconfig string, args, env []string) error {
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	cmd := exec.Command(opts.Tailor, "controller", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(ports[1]))
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = env
	exited, logFile, err := startDetached(opts.Dir, "tailor-controller", "tailor.log", cmd)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "metrics-address"), []byte("127.0.0.1:"+strconv.Itoa(ports[0])), 0o644); err != nil {
		return err
	}
	deadline := time.After(60 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the controller exited (%v); see %s", err, logFile)
		case <-deadline:
			return fmt.Errorf("the controller is not ready after 60s; see %s", logFile)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startKwokResync runs ServeKwokResync in the background: the sandbox's
// components outlive `up`, so the resync the tests' clusters run in-process
// needs a process of its own here.
func startKwokResync(opts Options) error {
	_, _, err := startDetached(opts.Dir, "kwok-resync", "kwok-resync.log", exec.Command(opts.Tailor, "sandbox", "kwok-resync", "--dir", opts.Dir))
	return err
}

// startDetached starts cmd in a session of its own, its output in dir/logName,
// and records it as name for Status and Down. exited receives its end; logPath
// is for errors that send the user to the log.
func startDetached(dir, name, logName string, cmd *exec.Cmd) (exited <-chan error, logPath string, err error) {
	logPath = filepath.Join(dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", name, err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	if err := localcluster.RecordProcess(dir, name, cmd.Process.Pid); err != nil {
		return nil, "", err
	}
	return ch, logPath, nil
}

// ServeKwokResync runs localcluster.ResyncKwokPods on the sandbox until ctx ends.
func ServeKwokResync(ctx context.Context, dir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(dir))
	if err != nil {
		return err
	}
	return localcluster.ResyncKwokPods(ctx, cfg)
}

// newClient is a client of the sandbox's API server that knows Tailor's types.
func newClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := operator.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// apply creates the objects of a multi-document YAML.
func apply(ctx context.Context, cfg *rest.Config, manifests []byte) error {
	kube, err := newClient(cfg)
	if err != nil {
		return err
	}
	objs, err := documents(manifests)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		// crd.Install waits for discovery; a kind still unknown after it gets a
		// few more tries, each with a new client (a client keeps what its
		// discovery said).
		var noMatch error
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			err := kube.Create(ctx, obj)
			if !meta.IsNoMatchError(err) {
				return true, err
			}
			noMatch = err
			if kube, err = newClient(cfg); err != nil {
				return false, err
			}
			return false, nil
		})
		if wait.Interrupted(err) && noMatch != nil {
			err = noMatch
		}
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// realisticDefaults are the defaults with the SimNodeClass's latency profile
// Realistic (seed 0).
func realisticDefaults() []byte {
	const spec = "kind: SimNodeClass\nmetadata:\n  name: default\nspec:\n"
	return bytes.Replace(defaults, []byte(spec), []byte(spec+"  latency: {profile: Realistic}\n"), 1)
}

// daemonSets are the DaemonSets of the defaults, which every cloud's sandbox runs.
func daemonSets() []byte {
	var out []byte
	for _, doc := range bytes.Split(defaults, []byte("\n---\n")) {
		if bytes.Contains(doc, []byte("\nkind: DaemonSet\n")) {
			out = append(append(out, doc...), "\n---\n"...)
		}
	}
	return out
}

// documents reads the objects of a multi-document YAML file, skipping empty ones.
func documents(manifests []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// Down stops everything the sandbox runs and removes its directory. It signals
// only processes it started (see localcluster.StopDetached) and touches only a
// directory that is a sandbox's.
func Down(dir string, out io.Writer) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "sandbox: nothing runs in %s\n", dir)
		return nil
	}
	if !isSandbox(dir) {
		return fmt.Errorf("%s is not a sandbox (it has no %s file): not stopping what its files name, nor removing it", dir, Marker)
	}
	err := localcluster.StopDetached(dir, 10*time.Second)
	if errors.Is(err, fs.ErrNotExist) { // up stopped before starting anything
		err = os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "sandbox: stopped")
	return nil
}

// Status says what runs. A directory that does not exist holds no sandbox, which
// is an answer; one that is not a sandbox's (--dir mistyped, say) is an error.
func Status(dir string, out io.Writer) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(out, "sandbox: not running (no %s)\n", dir)
		return nil
	case err != nil:
		return err
	case !info.IsDir():
		return fmt.Errorf("%s is not a sandbox: it is a file, not a directory", dir)
	case !isSandbox(dir):
		return fmt.Errorf("%s is not a sandbox (it has no %s file): name the directory `tailor sandbox up --dir` made", dir, Marker)
	}
	procs, err := localcluster.Processes(dir)
	if err != nil {
		if os.IsNotExist(err) {
			fmt.Fprintf(out, "sandbox: not running (no %s)\n", filepath.Join(dir, localcluster.PidFile))
			return nil
		}
		return err
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "kwok-resync", "fake-aws", "tailor-controller"} {
		if up, ok := procs[name]; ok {
			state := "running"
			if !up {
				state = "stopped"
			}
			fmt.Fprintf(out, "%-24s %s\n", name, state)
		}
	}
	fmt.Fprintf(out, "kubeconfig: %s\n", Kubeconfig(dir))
	return nil
}
