package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nodetailor/tailor/pkg/sandbox"
)

// sandboxFlags are the flags every `tailor sandbox` command takes.
type sandboxFlags struct {
	dir        string
	cloud      string
	systemNode bool
	latency    string
}

func newSandboxCommand(s streams) *cobra.Command {
	f := &sandboxFlags{}
	cmd := &cobra.Command{
		Use:   "sandbox up|down|status|demo [--dir DIR] [--cloud sim|aws] [--system-node] [--latency none|realistic]",
		Short: "a local control plane with kwok and Tailor: up, down, status, demo",
		Long: `Runs a local control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager), kwok for nodes, and the Tailor controller on this machine.`,
		RunE: needsSubcommand(s),
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.dir, "dir", sandbox.DefaultDir(), "where the sandbox keeps its data, logs, pids and kubeconfig")
	pf.StringVar(&f.cloud, "cloud", sandbox.CloudSim, "up: the cloud the sandbox runs on: sim, or aws (a fake AWS account served locally)")
	sub := func(use, short string, run func(ctx context.Context) error) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  noArgs(""),
			RunE: func(*cobra.Command, []string) error {
				ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
				defer stop()
				return failed(run(ctx))
			},
		}
	}
	up := sub("up", "start the sandbox and print the KUBECONFIG to use", func(ctx context.Context) error {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		return sandbox.Up(ctx, sandbox.Options{Dir: f.dir, Tailor: self, Cloud: f.cloud, SystemNode: f.systemNode, Latency: f.latency}, s.out)
	})
	up.Flags().BoolVar(&f.systemNode, "system-node", false,
		"add a small untainted node Tailor does not manage (named "+sandbox.SystemNode+", labelled "+sandbox.SystemNodeRole+"), for system workloads such as the tailor chart's controller")
	up.Flags().StringVar(&f.latency, "latency", sandbox.LatencyNone,
		"the sim cloud's latency: none (nodes launch and register at once) or realistic (as EC2: registrations of about 25 s with a tail, out of launch order, 2% of launches out of capacity, a slow API)")
	down := sub("down", "stop every process the sandbox started and remove its directory", func(context.Context) error {
		return sandbox.Down(f.dir, s.out)
	})
	status := sub("status", "say what runs", func(context.Context) error {
		return sandbox.Status(f.dir, s.out)
	})
	demo := sub("demo", "run a short demonstration against the sandbox", func(ctx context.Context) error {
		return sandbox.Demo(ctx, sandbox.Kubeconfig(f.dir), s.out, isTerminal(s.out))
	})
	// internal: the process `up --cloud aws` starts
	fakeAWS := sub("fake-aws", "serve the sandbox's fake AWS account", func(ctx context.Context) error {
		return sandbox.ServeFakeAWS(ctx, f.dir)
	})
	fakeAWS.Hidden = true
	// internal: the process `up` starts beside kwok
	kwokResync := sub("kwok-resync", "start pods kwok missed, as a kubelet's periodic sync would", func(ctx context.Context) error {
		return sandbox.ServeKwokResync(ctx, f.dir)
	})
	kwokResync.Hidden = true
	cmd.AddCommand(up, down, status, demo, fakeAWS, kwokResync)
	return cmd
}

// isTerminal says whether w is a terminal, for output that may use its features.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
