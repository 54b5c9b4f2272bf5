package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodetailor/tailor/pkg/operator"
	"github.com/nodetailor/tailor/pkg/sandbox"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// flagValues are the values shell completion offers for the flags that take one of
// a few words but are plain strings, by flag name, whichever command has them.
// Flags of type enumValue offer their allowed values themselves.
var flagValues = map[string][]string{
	"cloud":             {sandbox.CloudSim, sandbox.CloudAWS},
	"latency":           {sandbox.LatencyNone, sandbox.LatencyRealistic},
	"cloud-provider":    {"sim", "aws"},
	"node-overhead":     {"eks", "kwok"},
	"preference-policy": {string(scheduling.PreferencePolicyRespect), string(scheduling.PreferencePolicyIgnore)},
	"min-values-policy": {string(scheduling.MinValuesPolicyStrict), string(scheduling.MinValuesPolicyBestEffort)},
	"log-level":         operator.LogLevels,
}

// values is what shell completion offers for an enumValue flag.
func (e enumValue) values() []string { return e.allowed }

// completeFlagValues registers the completion of every enumerated flag of root's
// commands (-o, --cloud, --cloud-provider, …), of --feature-gates, and of
// directories for --dir, so `tailor simulate -o <TAB>` offers table, json and yaml.
func completeFlagValues(root *cobra.Command) {
	seen := map[*pflag.Flag]bool{}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{cmd.LocalNonPersistentFlags(), cmd.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if seen[f] {
					return
				}
				seen[f] = true
				var complete cobra.CompletionFunc
				switch v := f.Value.(type) {
				case interface{ values() []string }:
					complete = cobra.FixedCompletions(v.values(), cobra.ShellCompDirectiveNoFileComp)
				default:
					switch {
					case flagValues[f.Name] != nil:
						complete = cobra.FixedCompletions(flagValues[f.Name], cobra.ShellCompDirectiveNoFileComp)
					case f.Name == "feature-gates":
						complete = completeFeatureGates
					case f.Name == "dir":
						complete = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
							return nil, cobra.ShellCompDirectiveFilterDirs
						}
					}
				}
				if complete != nil {
					// Only fails for a flag registered twice, which seen rules out.
					_ = cmd.RegisterFlagCompletionFunc(f.Name, complete)
				}
			})
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeFeatureGates completes the last item of a comma-separated
// --feature-gates value: a gate not named yet, =true or =false (only =false for a
// gate Tailor does not implement, which it refuses to turn on).
func completeFeatureGates(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	var named []string
	for _, item := range strings.Split(done, ",") {
		if name, _, _ := strings.Cut(item, "="); name != "" {
			named = append(named, strings.TrimSpace(name))
		}
	}
	var out []string
	for _, name := range operator.FeatureGateNames() {
		if slices.Contains(named, name) {
			continue
		}
		for _, v := range operator.FeatureGateValues(name) {
			if item := name + "=" + v; strings.HasPrefix(item, last) {
				out = append(out, done+item)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
