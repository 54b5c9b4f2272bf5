package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/inspect"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/simulate"
)

// clusterFlags are how tailor cost and explain reach the cluster and price it.
type clusterFlags struct {
	kubeconfig, context string
	instanceTypes       string
	output              string
}

func (f *clusterFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster, as kubectl)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVar(&f.instanceTypes, "instance-types", "", "price every node from this catalog, in the Karpenter kwok JSON format (default: a SimNodeClass's own catalog, else the embedded AWS us-east-1 catalog)")
	fs.VarP(enumValue{&f.output, []string{"table", "json", "yaml"}}, "output", "o", "output format")
}

// read reads the cluster once, as the user's kubeconfig lets them.
func (f *clusterFlags) read(ctx context.Context) (client.Client, *inspect.Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("reaching the cluster: %w", err)
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, nil, err
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("reaching the cluster: %w", err)
	}
	opts := inspect.Options{Now: time.Now()}
	if f.instanceTypes != "" {
		listed, err := catalog.Load(f.instanceTypes)
		if err != nil {
			return nil, nil, err
		}
		if opts.Catalog, err = listed.InstanceTypes(allocatable.DefaultEKS()); err != nil {
			return nil, nil, err
		}
	}
	c, err := inspect.Read(ctx, kube, opts)
	return kube, c, err
}

func writeObject(w io.Writer, output string, obj any, table func(io.Writer)) error {
	switch output {
	case "json":
		return simulate.WriteJSON(w, []any{obj})
	case "yaml":
		return simulate.WriteYAML(w, []any{obj})
	}
	table(w)
	return nil
}

func newCostCommand(s streams) *cobra.Command {
	f := &clusterFlags{output: "table"}
	by := inspect.ByNodePool
	cmd := &cobra.Command{
		Use:   "cost [--by nodepool|namespace|workload] [-o table|json|yaml]",
		Short: "what the live cluster costs per hour and month, per node and by NodePool, namespace or workload",
		Long: `Reads the live cluster and prices every node as the scheduling engine does: its
instance (the offering its instance-type, zone and capacity-type labels name in its
NodePool's catalog) plus its NodePool's per-node costs (volumes, public addresses,
tailor.sh/per-node-cost), split as tailor simulate splits a plan. Then allocates
each node's price to its pods as OpenCost does: a pod pays for the larger of its
requests and its usage (metrics.k8s.io, when served) in cpu and memory, the node's
price split between its cpu and memory in OpenCost's default ratio; the room no pod
takes is the idle line. DaemonSet pods pay like any pod. docs/cli.md describes the
fields and where prices may be wrong.`,
		Example: `  tailor cost
  tailor cost --by namespace
  tailor cost --by workload -o json`,
		Args: noArgs(""),
		RunE: func(*cobra.Command, []string) error {
			return failed(runCost(f, by, s))
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().Var(enumValue{&by, inspect.Groupings}, "by", "allocate the cluster's price by nodepool, namespace or workload")
	return cmd
}

func runCost(f *clusterFlags, by string, s streams) error {
	ctx := context.Background()
	_, c, err := f.read(ctx)
	if err != nil {
		return err
	}
	rep, err := c.Cost(by)
	if err != nil {
		return err
	}
	return writeObject(s.out, f.output, rep, func(w io.Writer) { writeCostTable(w, rep) })
}

func writeCostTable(w io.Writer, rep *inspect.CostReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\tPODS\t$/HOUR\tIDLE $/HOUR")
	for _, n := range rep.Nodes {
		price, idle := fmt.Sprintf("%.4f", n.PerHour), fmt.Sprintf("%.4f", n.Idle)
		if n.Unpriced != "" {
			price, idle = "?", "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", n.Node, cmp.Or(n.NodePool, "-"), cmp.Or(n.InstanceType, "-"), cmp.Or(n.Zone, "-"),
			cmp.Or(n.CapacityType, "-"), n.Pods, price, idle)
	}
	tw.Flush()
	t := rep.Total
	fmt.Fprintf(w, "\n%d nodes priced at $%.4f/hour ($%.2f/month)", t.Nodes, t.PerHour, t.PerMonth)
	if t.Unpriced > 0 {
		fmt.Fprintf(w, ", %d not priced", t.Unpriced)
	}
	fmt.Fprintf(w, ". Per hour: instances $%.4f, volumes $%.4f, addresses $%.4f, per-node $%.4f.\n\n", t.Instances, t.Volumes, t.Addresses, t.PerNode)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tPODS\tCPU\tMEMORY\t$/HOUR\t$/MONTH\tSHARE\n", strings.ToUpper(rep.By))
	line := func(l inspect.CostLine) {
		share := 0.0
		if t.PerHour > 0 {
			share = 100 * l.PerHour / t.PerHour
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.2fGi\t%.4f\t%.2f\t%.1f%%\n", l.Name, l.Pods, l.CPU, l.Memory, l.PerHour, l.PerMonth, share)
	}
	for _, l := range rep.Lines {
		line(l)
	}
	line(rep.Idle)
	tw.Flush()
	fmt.Fprintf(w, "\nPods are charged for the larger of their requests and their usage (%s), cpu and memory weighted as OpenCost's defaults.\n", rep.Usage)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func newExplainCommand(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain pod NAMESPACE/NAME | node NAME",
		Short: "why a pod is pending or where it runs; why a node exists and is not consolidated",
		Long: `Reads the live cluster and answers with Tailor's own reasons, nothing changed in it:
'explain pod' says why a pending pod waits (per NodePool, with what would make it
fit, from the scheduling engine run read-only and the events the controller
recorded) or, for a bound pod, its node, why the node exists and what the pod
costs; 'explain node' says why the node exists, what it costs, what the
disruption loop decides about it now (read-only) and what would replace it.`,
		RunE: needsSubcommand(s),
	}
	f := &clusterFlags{output: "table"}
	f.add(cmd.PersistentFlags())
	pod := &cobra.Command{
		Use:     "pod NAMESPACE/NAME",
		Short:   "why a pod is pending, or where it runs, why that node exists and what the pod costs",
		Example: "  tailor explain pod default/web-7d9c5b-x2x4k\n  tailor explain pod default/web-7d9c5b-x2x4k -o json",
		Args:    exactlyOne("NAMESPACE/NAME"),
		RunE: func(_ *cobra.Command, args []string) error {
			ns, name, ok := strings.Cut(args[0], "/")
			if !ok {
				ns, name = "default", args[0]
			}
			return failed(runExplainPod(f, ns, name, s))
		},
	}
	node := &cobra.Command{
		Use:     "node NAME",
		Short:   "why a node exists, what it costs, why it is not consolidated and what would replace it",
		Example: "  tailor explain node ip-10-0-1-23.ec2.internal -o json",
		Args:    exactlyOne("NAME"),
		RunE: func(_ *cobra.Command, args []string) error {
			return failed(runExplainNode(f, args[0], s))
		},
	}
	cmd.AddCommand(pod, node)
	return cmd
}

func exactlyOne(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("want one %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

// events lists the events about one object, oldest first.
func events(ctx context.Context, kube client.Reader, namespace, kind, name string) []corev1.Event {
	var list corev1.EventList
	if err := kube.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingFields{"involvedObject.kind": kind, "involvedObject.name": name}); err != nil {
		return nil
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return list.Items
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

func runExplainPod(f *clusterFlags, ns, name string, s streams) error {
	ctx := context.Background()
	kube, c, err := f.read(ctx)
	if err != nil {
		return err
	}
	ex, err := c.ExplainPod(ns, name, events(ctx, kube, ns, "Pod", name), scheduling.Options{})
	if err != nil {
		return err
	}
	return writeObject(s.out, f.output, ex, func(w io.Writer) { writePodExplanation(w, ex) })
}

func writePodExplanation(w io.Writer, ex *inspect.PodExplanation) {
	fmt.Fprintf(w, "Pod %s (%s)\n", ex.Pod, cmp.Or(ex.Phase, "Pending"))
	if ex.Pending {
		fmt.Fprintf(w, "Pending: %s.\n", ex.Plan)
		for _, r := range ex.Reasons {
			if r.NodePool != "" {
				fmt.Fprintf(w, "  NodePool %s: %s\n", r.NodePool, r.Reason)
			} else {
				fmt.Fprintf(w, "  %s\n", r.Reason)
			}
			if r.Fix != "" {
				fmt.Fprintf(w, "    to fit: %s\n", r.Fix)
			}
		}
	} else if n := ex.Node; n != nil {
		fmt.Fprintf(w, "Runs on node %s (%s, %s, %s), NodePool %s, NodeClaim %s.\n", n.Node, cmp.Or(n.InstanceType, "-"), cmp.Or(n.Zone, "-"),
			cmp.Or(n.CapacityType, "-"), cmp.Or(n.NodePool, "-"), cmp.Or(n.NodeClaim, "-"))
		fmt.Fprintf(w, "Why the node exists: %s.\n", ex.Why)
		writeNodePrice(w, n)
		if c := ex.Cost; c != nil {
			fmt.Fprintf(w, "The pod pays $%.4f/hour ($%.2f/month) of it, for %.3f cpu and %.2fGi memory (its %s).\n", c.PerHour, c.PerMonth, c.CPU, c.Memory, c.Basis)
		}
	} else {
		fmt.Fprintf(w, "%s.\n", ex.Why)
	}
	writeEvents(w, ex.Events)
}

func writeNodePrice(w io.Writer, n *inspect.NodeLine) {
	if n.Unpriced != "" {
		fmt.Fprintf(w, "The node is not priced: %s.\n", n.Unpriced)
		return
	}
	fmt.Fprintf(w, "The node costs $%.4f/hour ($%.2f/month): instance $%.4f, volumes $%.4f, addresses $%.4f, per-node $%.4f; $%.4f/hour of it idle.\n",
		n.PerHour, n.PerMonth, n.Instance, n.Volumes, n.Addresses, n.PerNode, n.Idle)
}

func writeEvents(w io.Writer, evs []inspect.EventLine) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintln(w, "Events:")
	for _, e := range evs {
		fmt.Fprintf(w, "  %s %s %s: %s\n", cmp.Or(e.Last, "-"), e.Type, e.Reason, e.Message)
	}
}

func runExplainNode(f *clusterFlags, name string, s streams) error {
	ctx := context.Background()
	kube, c, err := f.read(ctx)
	if err != nil {
		return err
	}
	evs := events(ctx, kube, "", "Node", name)
	for _, p := range c.NodePrices() {
		if p.Node == name && p.NodeClaim != "" {
			evs = append(evs, events(ctx, kube, "", "NodeClaim", p.NodeClaim)...)
			slices.SortStableFunc(evs, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
		}
	}
	ex, err := c.ExplainNode(name, evs, disruption.Options{})
	if err != nil {
		return err
	}
	return writeObject(s.out, f.output, ex, func(w io.Writer) { writeNodeExplanation(w, ex) })
}

func writeNodeExplanation(w io.Writer, ex *inspect.NodeExplanation) {
	n := ex.Node
	fmt.Fprintf(w, "Node %s (%s, %s, %s), NodePool %s, NodeClaim %s, %d pods.\n", n.Node, cmp.Or(n.InstanceType, "-"), cmp.Or(n.Zone, "-"),
		cmp.Or(n.CapacityType, "-"), cmp.Or(n.NodePool, "-"), cmp.Or(n.NodeClaim, "-"), n.Pods)
	fmt.Fprintf(w, "Why it exists: %s.\n", ex.Why)
	writeNodePrice(w, &n)
	fmt.Fprintf(w, "Disruption: %s.\n", ex.Disruption)
	if ex.Drifted != "" {
		fmt.Fprintf(w, "Drifted: %s.\n", ex.Drifted)
	}
	if r := ex.Replacement; r != nil {
		fmt.Fprintf(w, "Without it: %s would move, %d onto other nodes", plural(r.Moved, "pod"), r.OntoExisting)
		if len(r.NewNodes) > 0 {
			fmt.Fprintf(w, ", the rest onto %s at $%.4f/hour", strings.Join(r.NewNodes, ", "), r.PerHour)
		}
		if r.Unplaceable > 0 {
			fmt.Fprintf(w, ", %d would fit nowhere", r.Unplaceable)
		}
		fmt.Fprintf(w, "; saving $%.4f/hour.\n", r.Saving)
	}
	writeEvents(w, ex.Events)
}
