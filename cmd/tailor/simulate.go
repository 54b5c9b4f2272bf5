package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

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
	// validate is what to do with unknown fields, as kubectl apply --validate.
	validate string
	// failOnUnschedulable makes a plan with unschedulable pods exit 3.
	failOnUnschedulable bool
	// nodeOverhead is what each node keeps back from its capacity.
	nodeOverhead allocatable.Model
	// scheduling are the engine's preference and minValues policies.
	scheduling scheduling.Options
	// progressAfter is how long a solve runs before a progress line goes to
	// stderr: at once on a terminal.
	progressAfter time.Duration
}

// stdinName stands for standard input (-f -) in messages.
const stdinName = "<stdin>"

// slowSolve is how long a solve runs before simulate says on stderr that it is
// working, when stderr is not a terminal.
const slowSolve = 2 * time.Second

// errRefused fails the command (exit 1) after the plan of the rest is printed, as
// kubectl apply applies the rest and fails.
type errRefused struct {
	objects int
	// unknownFields says some were refused for unknown fields alone.
	unknownFields bool
}

func (e errRefused) Error() string {
	msg := fmt.Sprintf("%s refused, as the API server would, and left out of the plan (listed above)", plural(e.objects, "object"))
	if e.unknownFields {
		msg += "; --validate=warn drops unknown fields instead"
	}
	return msg
}

// plural renders "1 object", "2 objects".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// errUnschedulable is --fail-on-unschedulable failing the command (exit 3).
type errUnschedulable struct{ pods int }

func (e errUnschedulable) Error() string {
	return fmt.Sprintf("unschedulable pods: %d (--fail-on-unschedulable)", e.pods)
}

// enumValue is a flag that takes one of a few words.
type enumValue struct {
	value   *string
	allowed []string
}

func (e enumValue) String() string { return *e.value }
func (e enumValue) Type() string   { return strings.Join(e.allowed, "|") }
func (e enumValue) Set(v string) error {
	if !slices.Contains(e.allowed, v) {
		return fmt.Errorf("want %s", orList(e.allowed))
	}
	*e.value = v
	return nil
}

// orList renders [a b c] as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// addFileFlag defines -f/--filename, where "-" is standard input.
func addFileFlag(fs *pflag.FlagSet, files *[]string, formats string) {
	// The back-quoted word names the value in --help.
	fs.StringArrayVarP(files, "filename", "f", nil, "a manifest `FILE_OR_DIR` ("+formats+"), or - for standard input; repeatable")
}

func newSimulateCommand(s streams, run func(*simulateOptions) error) *cobra.Command {
	opts := &simulateOptions{output: "table", validate: string(simulate.FieldValidationStrict), progressAfter: slowSolve}
	if isTerminal(s.err) {
		opts.progressAfter = 0
	}
	cmd := &cobra.Command{
		Use:   "simulate -f FILE_OR_DIR [-f ...] [flags]",
		Short: "plan nodes for pods, NodePools and nodes read from manifests, offline",
		Long: `Plans nodes for the pending pods in the manifests (Pods, Deployments, StatefulSets,
ReplicaSets, Jobs, DaemonSets, NodePools, Nodes and their bound Pods, volumes), with
the scheduling engine the controller runs. With --consolidate, shows instead what
disruption would do to the existing nodes (labelled karpenter.sh/nodepool) and their
pods: which nodes it would remove or replace, pass after pass, and the saving.

An object the API server would refuse (an invalid NodePool, an unknown field under
--validate=strict) is reported on stderr and left out; the rest is planned, and the
command then exits 1, as kubectl apply does.

The table puts the new nodes of one NodePool and instance type on one line, with
their zones, capacity types, price and the pods of each workload they take.
--output json prints one JSON object a line: the summary first, then one line per
new node, binding to an existing node, unschedulable pod, warning and refused
object. --output yaml prints the same objects as YAML documents. docs/cli.md
describes the fields.`,
		Example: `  tailor simulate -f examples/seed
  kubectl get pods,nodes,nodepools -A -o yaml | tailor simulate -f - -o json
  tailor simulate --consolidate -f examples/consolidate`,
		Args: noArgs("; pass manifests with -f"),
	}
	fs := cmd.Flags()
	addFileFlag(fs, &opts.files, "YAML or JSON, optionally gzipped")
	fs.StringVar(&opts.instanceTypes, "instance-types", "", "instance types in the Karpenter kwok JSON format (default: the embedded AWS us-east-1 catalog)")
	fs.VarP(enumValue{&opts.output, []string{"table", "json", "yaml"}}, "output", "o", "output format")
	fs.Var(enumValue{&opts.validate, []string{string(simulate.FieldValidationStrict), string(simulate.FieldValidationWarn), string(simulate.FieldValidationIgnore)}},
		"validate", "fields the object's schema does not declare, as kubectl apply --validate: strict refuses the object, warn drops the fields with a warning, ignore drops them")
	fs.BoolVar(&opts.consolidate, "consolidate", false, "instead of planning for pending pods, show which existing nodes disruption would remove or replace, and the saving")
	fs.Float64Var(&opts.minSavings, "consolidation-min-savings", disruption.DefaultMinSavings, "with --consolidate: the fraction of the price a replacement must save")
	maxInput := fs.String("max-input-size", resource.NewQuantity(simulate.DefaultMaxBytes, resource.BinarySI).String(),
		"the most input read, over all files and after decompression (a quantity: 64Mi, 1Gi)")
	fs.IntVar(&opts.limits.MaxPods, "max-pods", simulate.DefaultMaxPods, "the most pods (and StatefulSet volume claims) the manifests may make")
	preferencePolicy := fs.String("preference-policy", string(scheduling.PreferencePolicyRespect), "Respect or Ignore pods' preferences (preferred affinities, ScheduleAnyway spreads), as the controller's flag")
	minValuesPolicy := fs.String("min-values-policy", string(scheduling.MinValuesPolicyStrict), "Strict or BestEffort: whether NodePools' minValues may be relaxed when pods would otherwise fit nowhere, as the controller's flag")
	overhead := fs.String("node-overhead", "eks", "what a new node keeps back from its capacity: eks (as an EKS node: VM overhead, kube-reserved from its cpu and pods, eviction thresholds) or kwok (100m cpu and 10Mi memory, as Karpenter's kwok provider, to compare plans with it)")
	fs.BoolVar(&opts.failOnUnschedulable, "fail-on-unschedulable", false, "exit with status 3 when any pod fits nowhere (after printing the plan)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if len(opts.files) == 0 {
			return errors.New("at least one -f is required")
		}
		if n := countStdin(opts.files); n > 1 {
			return fmt.Errorf("-f - given %d times; standard input can be read once", n)
		}
		if opts.consolidate && opts.failOnUnschedulable {
			return errors.New("--fail-on-unschedulable plans for pending pods, which --consolidate leaves out: give one")
		}
		q, err := resource.ParseQuantity(*maxInput)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("--max-input-size %q: want a positive size such as 64Mi", *maxInput)
		}
		opts.limits.MaxBytes = q.Value()
		if opts.limits.MaxPods <= 0 {
			return fmt.Errorf("--max-pods %d: want a positive number", opts.limits.MaxPods)
		}
		if opts.scheduling.PreferencePolicy, err = scheduling.ParsePreferencePolicy(*preferencePolicy); err != nil {
			return fmt.Errorf("--preference-policy: %w", err)
		}
		if opts.scheduling.MinValuesPolicy, err = scheduling.ParseMinValuesPolicy(*minValuesPolicy); err != nil {
			return fmt.Errorf("--min-values-policy: %w", err)
		}
		switch *overhead {
		case "eks":
			opts.nodeOverhead = allocatable.DefaultEKS()
		case "kwok":
			opts.nodeOverhead = allocatable.Kwok{}
		default:
			return fmt.Errorf("--node-overhead %q: want eks or kwok", *overhead)
		}
		return run(opts)
	}
	return cmd
}

// parseSimulate parses args as `tailor simulate` does.
func parseSimulate(args []string, stderr io.Writer) (*simulateOptions, error) {
	var got *simulateOptions
	cmd := newSimulateCommand(streams{in: strings.NewReader(""), out: io.Discard, err: stderr}, func(o *simulateOptions) error { got = o; return nil })
	err := parseOnly(cmd, args, stderr)
	return got, err
}

func countStdin(files []string) int {
	n := 0
	for _, f := range files {
		if f == "-" {
			n++
		}
	}
	return n
}

// runSimulateCommand runs simulate and turns its outcome into an exit code.
func runSimulateCommand(opts *simulateOptions, s streams) error {
	err := runSimulate(context.Background(), opts, s)
	var unschedulable errUnschedulable
	if errors.As(err, &unschedulable) {
		return &exitError{code: exitUnschedulable, err: err}
	}
	return failed(err)
}

func runSimulate(ctx context.Context, opts *simulateOptions, s streams) error {
	files, cleanup, err := stdinToFile(opts.files, s.in, opts.limits.MaxBytes)
	if err != nil {
		return err
	}
	defer cleanup()
	w, err := simulate.Load(ctx, files, simulate.Options{Limits: opts.limits, FieldValidation: simulate.FieldValidation(opts.validate)})
	if err != nil {
		return renameStdin(err, files, opts.files)
	}
	refused := reportInput(w, s.err, func(msg string) string { return renameStdin(errors.New(msg), files, opts.files).Error() })
	if len(w.NodePools) == 0 {
		fmt.Fprintln(s.err, "warning: no NodePool in the input; only existing nodes can take pods")
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
		if err := writeConsolidation(w, types, opts, s); err != nil {
			return err
		}
		return refused
	}
	done := startProgress(s.err, fmt.Sprintf("planning %d pods", len(w.Pods)), opts.progressAfter)
	result, err := simulate.Run(w, types, opts.scheduling)
	done()
	if err != nil {
		return err
	}
	report := simulate.NewReport(result, Version())
	switch opts.output {
	case "json":
		err = simulate.WriteJSON(s.out, report.Objects())
	case "yaml":
		err = simulate.WriteYAML(s.out, report.Objects())
	default:
		err = report.WriteTable(s.out)
	}
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	if n := report.Summary.Unschedulable; opts.failOnUnschedulable && n > 0 {
		return errUnschedulable{pods: n}
	}
	return nil
}

// reportInput says on stderr what of the input the plan leaves out or plans for
// no pods, naming files as the user gave them (rename), and returns errRefused if
// the API server would refuse some of it.
func reportInput(w *simulate.Workload, stderr io.Writer, rename func(string) string) error {
	if len(w.Skipped) > 0 {
		fmt.Fprintf(stderr, "skipped %s of kinds simulate does not use: %s\n", plural(len(w.Skipped), "object"), strings.Join(w.Skipped, ", "))
	}
	for _, note := range w.Notes {
		fmt.Fprintf(stderr, "note: %s\n", rename(note))
	}
	for _, warning := range w.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", rename(warning))
	}
	if len(w.Refused) == 0 {
		return nil
	}
	refused := errRefused{objects: len(w.Refused)}
	for i, r := range w.Refused {
		msg := rename(r.Error())
		fmt.Fprintf(stderr, "error: %s\n", msg)
		w.Refused[i].File = rename(r.File)
		refused.unknownFields = refused.unknownFields || r.UnknownFields
	}
	return refused
}

func writeConsolidation(w *simulate.Workload, types []*scheduling.InstanceType, opts *simulateOptions, s streams) error {
	if len(w.Pods) > 0 {
		fmt.Fprintf(s.err, "note: %d pending pods are left out of --consolidate\n", len(w.Pods))
	}
	done := startProgress(s.err, fmt.Sprintf("consolidating %d nodes", len(w.Nodes)), opts.progressAfter)
	c, err := simulate.Consolidate(w, types, disruption.Options{MinSavings: opts.minSavings, Scheduling: opts.scheduling})
	done()
	if err != nil {
		return err
	}
	switch opts.output {
	case "json":
		return simulate.WriteJSON(s.out, []any{c.Object()})
	case "yaml":
		return simulate.WriteYAML(s.out, []any{c.Object()})
	default:
		simulate.WriteConsolidation(s.out, c)
		return nil
	}
}

// startProgress prints "what..." on w once delay has passed (at once for 0), so
// a long solve is not mistaken for a hang; done ends it, saying how long it took
// if the first line was printed. Nothing goes to stdout, which tools read.
func startProgress(w io.Writer, what string, delay time.Duration) (done func()) {
	start := time.Now()
	var mu sync.Mutex
	printed, finished := false, false
	show := func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			fmt.Fprintf(w, "%s...\n", what)
			printed = true
		}
	}
	var timer *time.Timer
	if delay <= 0 {
		show()
	} else {
		timer = time.AfterFunc(delay, show)
	}
	return func() {
		if timer != nil {
			timer.Stop()
		}
		mu.Lock()
		defer mu.Unlock()
		finished = true
		if printed {
			fmt.Fprintf(w, "%s: done in %.1fs\n", what, time.Since(start).Seconds())
		}
	}
}

// stdinToFile copies standard input, when a path is "-", into a temporary file,
// so the loader reads it as any other file (and sniffs gzip the same way). It reads
// at most limit bytes and one more, which the loader then refuses.
func stdinToFile(paths []string, in io.Reader, limit int64) ([]string, func(), error) {
	i := slices.Index(paths, "-")
	if i < 0 {
		return paths, func() {}, nil
	}
	f, err := os.CreateTemp("", "tailor-stdin-*")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	_, err = io.Copy(f, io.LimitReader(in, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("reading standard input: %w", err)
	}
	out := slices.Clone(paths)
	out[i] = f.Name()
	return out, cleanup, nil
}

// renameStdin names standard input in err as the user knows it, not by the
// temporary file it was copied to.
func renameStdin(err error, files, given []string) error {
	i := slices.Index(given, "-")
	if i < 0 {
		return err
	}
	return &renamedError{err: err, from: files[i], to: stdinName}
}

type renamedError struct {
	err      error
	from, to string
}

func (e *renamedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.from, e.to) }
func (e *renamedError) Unwrap() error { return e.err }
