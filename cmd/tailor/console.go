package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/console"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// consoleFlags are tailor console's flags.
type consoleFlags struct {
	kubeconfig, context string
	instanceTypes       string
	address             string
}

func newConsoleCommand(s streams) *cobra.Command {
	f := &consoleFlags{address: "127.0.0.1:8080"}
	cmd := &cobra.Command{
		Use:   "console [--address 127.0.0.1:8080]",
		Short: "a read-only web page of the live cluster: nodes and their prices, pending pods, Tailor's decisions, cost",
		Long: `Serves a web page of the live cluster as Tailor sees it, read with your
kubeconfig (your RBAC; nothing is installed in the cluster and nothing is written
to it): each node's NodePool, type, zone, capacity type, price (as tailor cost
prices it), cpu and memory requested against allocatable, pods, age and lifecycle
state; the cluster's totals; pending pods with Tailor's reason per NodePool (as
tailor explain pod says it); a timeline of the events Tailor's controllers
recorded; and the cost by NodePool and namespace with the idle room. The page is
updated from watches as the cluster changes. It listens on 127.0.0.1 unless
--address says otherwise. docs/console.md says more.`,
		Example: `  tailor console
  tailor console --context prod --address 127.0.0.1:9090`,
		Args: noArgs(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return failed(runConsole(ctx, f, s, nil))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster, as kubectl)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVar(&f.instanceTypes, "instance-types", "", "price every node from this catalog, in the Karpenter kwok JSON format (default: a SimNodeClass's own catalog, else the embedded AWS us-east-1 catalog)")
	fs.StringVar(&f.address, "address", f.address, "the address to serve the page on; anything but a loopback address serves your cluster's data, read with your credentials, to whoever reaches it")
	return cmd
}

// runConsole serves the console until ctx ends; ready, when set, is called with
// the page's URL once the first model is computed.
func runConsole(ctx context.Context, f *consoleFlags, s streams, ready func(url string)) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("reaching the cluster: %w", err)
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return err
	}
	var its []*scheduling.InstanceType
	if f.instanceTypes != "" {
		listed, err := catalog.Load(f.instanceTypes)
		if err != nil {
			return err
		}
		if its, err = listed.InstanceTypes(allocatable.DefaultEKS()); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", f.address)
	if err != nil {
		return fmt.Errorf("serving the console: %w", err)
	}
	defer ln.Close()
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		fmt.Fprintf(s.err, "warning: the console listens on %s, not on a loopback address: whoever reaches it sees your cluster as your kubeconfig lets you see it\n", ln.Addr())
	}
	fmt.Fprintf(s.err, "tailor console: watching the cluster ...\n")
	src, err := console.NewSource(ctx, cfg, scheme)
	if err != nil {
		return err
	}
	if err := src.Start(ctx); err != nil {
		return err
	}
	c := console.New(src, its)
	c.Refresh(ctx)
	go c.Run(ctx)

	srv := &http.Server{Handler: c.Handler(ln.Addr()), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(s.out, "Tailor console at %s (read-only; Ctrl-C stops it)\n", url)
	if ready != nil {
		ready(url)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serving the console: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Streams never end by themselves: close what Shutdown does not.
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	_ = srv.Close()
	return nil
}
