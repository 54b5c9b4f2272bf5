// Command tailor is the Tailor node autoscaler. Subcommands:
//
//	tailor controller  run the autoscaler against a cluster
//	tailor console     a read-only web page of the live cluster: nodes, prices, pending pods, decisions, cost
//	tailor convert     turn Karpenter's older APIs into v1 NodePools and EC2NodeClasses
//	tailor cost        what the live cluster costs, per node and by NodePool, namespace or workload
//	tailor explain     why a pod is pending or a node exists and stays, from the live cluster
//	tailor sandbox     a local cluster with Tailor: up, down, status, demo
//	tailor simulate    plan nodes for manifests, offline
//	tailor version     print the version
//	tailor completion  a shell completion script (bash, zsh, fish, powershell)
//
// Exit codes: 0 success, 1 the command failed, 2 a usage error, 3 simulate
// --fail-on-unschedulable found pods that fit nowhere.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/nodetailor/tailor/pkg/operator"
)

// Exit codes, documented in docs/cli.md.
const (
	exitFailed        = 1
	exitUsage         = 2
	exitUnschedulable = 3
)

// streams are a command's standard input and outputs; tests pass buffers.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// exitError is a failure after the command line was understood: its code is the
// exit status. Any other error from a command is a usage error.
type exitError struct {
	code int
	// err is printed on stderr; nil when the command printed what it had to say.
	err error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// failed marks err as the command failing (exit 1) rather than being misused.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitFailed, err: err}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return runStreams(args, streams{in: os.Stdin, out: stdout, err: stderr})
}

// runStreams runs the command line and returns the exit code. Help goes to stdout;
// errors, warnings and progress to stderr.
func runStreams(args []string, s streams) int {
	root := newRootCommand(s)
	// Non-nil, or cobra reads os.Args.
	root.SetArgs(append([]string{}, args...))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.err != nil {
			fmt.Fprintf(s.err, "%s: %v\n", cmd.CommandPath(), exit.err)
		}
		return exit.code
	}
	fmt.Fprintf(s.err, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return exitUsage
}

func newRootCommand(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "tailor",
		Short: "Tailor, a Kubernetes node autoscaler serving Karpenter's v1 API",
		Long: `Tailor is a Kubernetes node autoscaler serving Karpenter's v1 API.

Exit codes: 0 success, 1 the command failed, 2 a usage error,
3 simulate --fail-on-unschedulable found pods that fit nowhere.`,
		Version:       versionText(Build()),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          needsSubcommand(s),
	}
	// The whole text is the Version, so no build value is read as a template.
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(flagError)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.AddCommand(
		newControllerCommand(osEnvironment, func(opts operator.Options) error { return failed(runController(opts, s.err)) }),
		newConvertCommand(s, func(o *convertOptions) error { return failed(runConvert(o, s)) }),
		newConsoleCommand(s),
		newCostCommand(s),
		newExplainCommand(s),
		newSandboxCommand(s),
		newSimulateCommand(s, func(o *simulateOptions) error { return runSimulateCommand(o, s) }),
		newVersionCommand(s),
	)
	strictCompletion(root, s)
	completeFlagValues(root)
	return root
}

// strictCompletion makes cobra's completion command refuse a shell it has no script
// for (cobra prints its help and exits 0), and alone behave as `tailor sandbox`
// does: both are usage errors.
func strictCompletion(root *cobra.Command, s streams) {
	root.InitDefaultCompletionCmd()
	comp, _, err := root.Find([]string{"completion"})
	if err != nil || comp == root {
		return
	}
	var shells []string
	for _, c := range comp.Commands() {
		if c.Name() != "help" {
			shells = append(shells, c.Name())
		}
	}
	comp.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown shell %q: want %s", args[0], orList(shells))
		}
		return nil
	}
	comp.RunE = needsSubcommand(s)
}

// needsSubcommand is the RunE of a command that only groups others: alone, it prints
// its usage on stderr and exits 2; cobra leaves an unknown subcommand to it.
func needsSubcommand(s streams) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		fmt.Fprint(s.err, cmd.UsageString())
		return &exitError{code: exitUsage}
	}
}

// singleDash finds a long flag given with one dash, which Go's flag package took
// and pflag reads as shorthands ("unknown shorthand flag: 'k' in -kubeconfig").
var singleDash = regexp.MustCompile(`shorthand flag: '.' in -([a-z][a-z0-9-]+)`)

// flagError adds a hint to a flag error when the flag had one dash too few.
func flagError(_ *cobra.Command, err error) error {
	if m := singleDash.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%w (long flags take two dashes: --%s)", err, m[1])
	}
	return err
}

// noArgs rejects positional arguments, saying what to do instead.
func noArgs(hint string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected argument %q%s", args[0], hint)
		}
		return nil
	}
}

// parseOnly runs cmd alone on args, for tests of its parsing: output is discarded
// and the command's run func is what the caller gave when building it.
func parseOnly(cmd *cobra.Command, args []string, stderr io.Writer) error {
	cmd.SetArgs(append([]string{}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(stderr)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	return cmd.Execute()
}
