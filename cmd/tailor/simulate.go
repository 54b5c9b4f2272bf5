package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/simulate"
)

// simulateOptions are the flags of `tailor simulate`, parsed once.
type simulateOptions struct {
	files         []string
	instanceTypes string
	output        string
	consolidate   bool
	minSavings    float64
	limits        simulate.Limits
	// nodeOverhead is what each node keeps back from its capacity.
	nodeOverhead allocatable.Model
	// scheduling are the engine's preference and minValues policies.
	scheduling scheduling.Options
}

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func parseSimulate(args []string, stderr io.Writer) (*simulateOptions, error) {
	opts := &simulateOptions{}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var((*fileList)(&opts.files), "f", "a manifest file or directory (repeatable; YAML or JSON, optionally gzipped)")
	fs.StringVar(&opts.instanceTypes, "instance-types", "", "instance types in the Karpenter kwok JSON format (default: the embedded AWS us-east-1 catalog)")
	fs.StringVar(&opts.output, "output", "table", "table, json or yaml")
	fs.BoolVar(&opts.consolidate, "consolidate", false, "instead of planning for pending pods, show which existing nodes disruption would remove or replace, and the saving")
	fs.Float64Var(&opts.minSavings, "consolidation-min-savings", disruption.DefaultMinSavings, "with --consolidate: the fraction of the price a replacement must save")
	maxInput := fs.String("max-input-size", resource.NewQuantity(simulate.DefaultMaxBytes, resource.BinarySI).String(),
		"the most input read, over all files and after decompression (a quantity: 64Mi, 1Gi)")
	fs.IntVar(&opts.limits.MaxPods, "max-pods", simulate.DefaultMaxPods, "the most pods (and StatefulSet volume claims) the manifests may make")
	preferencePolicy := fs.String("preference-policy", string(scheduling.PreferencePolicyRespect), "Respect or Ignore pods' preferences (preferred affinities, ScheduleAnyway spreads), as the controller's flag")
	minValuesPolicy := fs.String("min-values-policy", string(scheduling.MinValuesPolicyStrict), "Strict or BestEffort: whether NodePools' minValues may be relaxed when pods would otherwise fit nowhere, as the controller's flag")
	overhead := fs.String("node-overhead", "eks", "what a new node keeps back from its capacity: eks (as an EKS node: VM overhead, kube-reserved from its cpu and pods, eviction thresholds) or kwok (100m cpu and 10Mi memory, as Karpenter's kwok provider, to compare plans with it)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: tailor simulate -f FILE_OR_DIR [-f ...] [--instance-types FILE] [--output table|json|yaml] [--consolidate]
                       [--max-input-size 64Mi] [--max-pods N] [--node-overhead eks|kwok]
                       [--preference-policy Respect|Ignore] [--min-values-policy Strict|BestEffort]

Plans nodes for the pending pods in the manifests (Pods, Deployments, StatefulSets,
ReplicaSets, Jobs, DaemonSets, NodePools, Nodes and their bound Pods, volumes), with
the scheduling engine the controller runs. With --consolidate, shows instead what
disruption would do to the existing nodes (labelled karpenter.sh/nodepool) and their
pods: which nodes it would remove or replace, pass after pass, and the saving.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if len(opts.files) == 0 {
		fs.Usage()
		return nil, errors.New("simulate: at least one -f is required")
	}
	switch opts.output {
	case "table", "json", "yaml":
	default:
		return nil, fmt.Errorf("simulate: --output %q: want table, json or yaml", opts.output)
	}
	q, err := resource.ParseQuantity(*maxInput)
	if err != nil || q.Sign() <= 0 {
		return nil, fmt.Errorf("simulate: --max-input-size %q: want a positive size such as 64Mi", *maxInput)
	}
	opts.limits.MaxBytes = q.Value()
	if opts.limits.MaxPods <= 0 {
		return nil, fmt.Errorf("simulate: --max-pods %d: want a positive number", opts.limits.MaxPods)
	}
	if opts.scheduling.PreferencePolicy, err = scheduling.ParsePreferencePolicy(*preferencePolicy); err != nil {
		return nil, fmt.Errorf("simulate: --preference-policy: %w", err)
	}
	if opts.scheduling.MinValuesPolicy, err = scheduling.ParseMinValuesPolicy(*minValuesPolicy); err != nil {
		return nil, fmt.Errorf("simulate: --min-values-policy: %w", err)
	}
	switch *overhead {
	case "eks":
		opts.nodeOverhead = allocatable.DefaultEKS()
	case "kwok":
		opts.nodeOverhead = allocatable.Kwok{}
	default:
		return nil, fmt.Errorf("simulate: --node-overhead %q: want eks or kwok", *overhead)
	}
	return opts, nil
}

func runSimulate(ctx context.Context, opts *simulateOptions, stdout, stderr io.Writer) error {
	w, err := simulate.Load(ctx, opts.files, opts.limits)
	if err != nil {
		return err
	}
	if len(w.Skipped) > 0 {
		fmt.Fprintf(stderr, "skipped %d objects of kinds simulate does not use: %s\n", len(w.Skipped), strings.Join(w.Skipped, ", "))
	}
	if len(w.NodePools) == 0 {
		fmt.Fprintln(stderr, "warning: no NodePool in the input; only existing nodes can take pods")
	}
	var listed *catalog.Catalog
	if opts.instanceTypes != "" {
		listed, err = catalog.Load(opts.instanceTypes)
	} else {
		listed, err = catalog.EmbeddedAWSUSEast1()
	}
	if err != nil {
		return err
	}
	types, err := listed.InstanceTypes(opts.nodeOverhead)
	if err != nil {
		return err
	}
	if opts.consolidate {
		return writeConsolidation(w, types, opts, stdout, stderr)
	}
	result, err := simulate.Run(w, types, opts.scheduling)
	if err != nil {
		return err
	}
	report := simulate.NewReport(result, Version())
	switch opts.output {
	case "json":
		return report.WriteJSON(stdout)
	case "yaml":
		return report.WriteYAML(stdout)
	default:
		return report.WriteTable(stdout)
	}
}

func writeConsolidation(w *simulate.Workload, types []*scheduling.InstanceType, opts *simulateOptions, stdout, stderr io.Writer) error {
	if len(w.Pods) > 0 {
		fmt.Fprintf(stderr, "note: %d pending pods are left out of --consolidate\n", len(w.Pods))
	}
	c, err := simulate.Consolidate(w, types, disruption.Options{MinSavings: opts.minSavings, Scheduling: opts.scheduling})
	if err != nil {
		return err
	}
	switch opts.output {
	case "json":
		return json.NewEncoder(stdout).Encode(c)
	case "yaml":
		out, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	default:
		simulate.WriteConsolidation(stdout, c)
		return nil
	}
}
