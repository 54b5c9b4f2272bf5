package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/simulate"
)

// simulateOptions are the flags of `tailor simulate`, parsed once.
type simulateOptions struct {
	files         []string
	instanceTypes string
	output        string
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
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: tailor simulate -f FILE_OR_DIR [-f ...] [--instance-types FILE] [--output table|json|yaml]

Plans nodes for the pending pods in the manifests (Pods, Deployments, StatefulSets,
ReplicaSets, Jobs, DaemonSets, NodePools, Nodes and their bound Pods, volumes), with
the scheduling engine the controller runs.`)
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
	return opts, nil
}

func runSimulate(ctx context.Context, opts *simulateOptions, stdout, stderr io.Writer) error {
	w, err := simulate.Load(ctx, opts.files)
	if err != nil {
		return err
	}
	if len(w.Skipped) > 0 {
		fmt.Fprintf(stderr, "skipped %d objects of kinds simulate does not use: %s\n", len(w.Skipped), strings.Join(w.Skipped, ", "))
	}
	if len(w.NodePools) == 0 {
		fmt.Fprintln(stderr, "warning: no NodePool in the input; only existing nodes can take pods")
	}
	var types []*scheduling.InstanceType
	if opts.instanceTypes != "" {
		types, err = catalog.Load(opts.instanceTypes)
	} else {
		types, err = catalog.AWSUSEast1()
	}
	if err != nil {
		return err
	}
	result, err := simulate.Run(w, types)
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
