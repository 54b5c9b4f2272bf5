package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodetailor/tailor/pkg/operator"
)

// environment is what the controller reads besides its flags; tests pass their own.
type environment struct {
	lookup   func(string) (string, bool)
	readFile func(string) ([]byte, error)
}

var osEnvironment = environment{lookup: os.LookupEnv, readFile: os.ReadFile}

// parseController parses the controller's flags, then the environment variables
// of the flags the command line left out, as `tailor controller` does.
func parseController(args []string, stderr io.Writer) (operator.Options, error) {
	return parseControllerEnv(args, osEnvironment, stderr)
}

// envVar is the environment variable a controller flag reads when the command line
// does not give it: flag > variable > default, as in Karpenter.
type envVar struct {
	flag string
	// name is the variable, "" for none.
	name string
	// value turns the variable's value into the flag's; nil keeps it.
	value func(string) (string, error)
	// sameAs are other flags for the same setting: when one is given, the variable
	// is not read.
	sameAs []string
}

// envExceptions are the flags whose variable is not their name in upper case with
// underscores (CLUSTER_NAME for --cluster-name, the rule Karpenter's settings follow).
var envExceptions = []envVar{
	// client-go reads $KUBECONFIG itself, and it may list several files.
	{flag: "kubeconfig"},
	// DISABLE_LEADER_ELECTION, through --disable-leader-election, is Karpenter's.
	{flag: "leader-elect"},
	{flag: "disable-leader-election", name: "DISABLE_LEADER_ELECTION", sameAs: []string{"leader-elect"}},
	// Karpenter's chart passes ports; Tailor's flags take addresses.
	{flag: "metrics-bind-address", name: "METRICS_PORT", value: portAddress},
	{flag: "health-probe-bind-address", name: "HEALTH_PROBE_PORT", value: portAddress},
}

// envName is the variable a flag reads unless envExceptions says otherwise.
func envName(flag string) string {
	return strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagEnv lists the variable of every flag in fs, in flag-name order.
func flagEnv(fs *pflag.FlagSet) []envVar {
	var out []envVar
	fs.VisitAll(func(f *pflag.Flag) {
		i := slices.IndexFunc(envExceptions, func(e envVar) bool { return e.flag == f.Name })
		if i >= 0 {
			out = append(out, envExceptions[i])
			return
		}
		out = append(out, envVar{flag: f.Name, name: envName(f.Name)})
	})
	return out
}

// documentEnv appends each flag's variable to its usage, as "[$NAME]": --help is
// where the chart's tests and people look the variables up.
func documentEnv(fs *pflag.FlagSet, vars []envVar) {
	for _, e := range vars {
		if e.name != "" {
			f := fs.Lookup(e.flag)
			f.Usage += " [$" + e.name + "]"
		}
	}
}

// applyEnv sets each flag of vars the command line left out from its variable.
// An empty variable counts as unset. A bad value is an error naming the variable.
func applyEnv(fs *pflag.FlagSet, vars []envVar, lookup func(string) (string, bool)) error {
	given := func(name string) bool { return fs.Changed(name) }
	var errs []error
	for _, e := range vars {
		if e.name == "" || given(e.flag) || slices.ContainsFunc(e.sameAs, given) {
			continue
		}
		raw, ok := lookup(e.name)
		if !ok || raw == "" {
			continue
		}
		v := raw
		if e.value != nil {
			var err error
			if v, err = e.value(raw); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s=%q: %v", e.name, raw, err))
				continue
			}
		}
		if err := fs.Set(e.flag, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q (for --%s): %v", e.name, raw, e.flag, err))
		}
	}
	return errors.Join(errs...)
}

// portAddress turns a port (METRICS_PORT=8080) into a listen address (":8080");
// port 0 turns the endpoint off, as address "0" does.
func portAddress(v string) (string, error) {
	port, err := strconv.ParseUint(v, 10, 16)
	if err != nil {
		return "", fmt.Errorf("want a port number from 0 to 65535")
	}
	if port == 0 {
		return "0", nil
	}
	return ":" + strconv.FormatUint(port, 10), nil
}

// addOperationFlags defines the flags of running the controller in a cluster:
// logging, memory, and the leader Lease.
func addOperationFlags(fs *pflag.FlagSet, opts *operator.Options) {
	fs.Func("log-level", fmt.Sprintf("log verbosity: %s (default %s)", strings.Join(operator.LogLevels, ", "), opts.LogLevel), func(v string) error {
		level, err := operator.ParseLogLevel(v)
		opts.LogLevel = level
		return err
	})
	fs.Int64Var(&opts.MemoryLimit, "memory-limit", opts.MemoryLimit, "the container's memory limit in bytes; the Go runtime keeps its heap under 90% of it (unless $GOMEMLIMIT is set; -1: none)")
	fs.StringVar(&opts.LeaderElectionID, "leader-election-name", opts.LeaderElectionID, "name of the leader Lease")
	fs.BoolFunc("disable-leader-election", "do not elect a leader: run as the only replica (the opposite of --leader-elect)", func(v string) error {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		opts.LeaderElection = !off
		return nil
	})
}

// finishController fills in what depends on the environment beyond the flags' own
// variables: the leader Lease's namespace defaults to the controller's own.
func finishController(opts *operator.Options, env environment) {
	if opts.LeaderElectionNamespace == "" {
		opts.LeaderElectionNamespace = operator.LeaseNamespace(env.lookup, env.readFile)
	}
}
