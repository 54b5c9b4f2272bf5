// Command karpenter-kwok is Karpenter's kwok controller (sigs.k8s.io/karpenter/kwok)
// as the side-by-side benchmark runs it (test/sidebyside): Karpenter's own operator,
// controllers and kwok cloud provider, used as a library at the version go.mod pins.
// The only addition is optional: with TAILOR_LATENCY_DRAWS naming a file of draws
// (written by the benchmark from Tailor's sim cloud's realistic latency model), the
// cloud provider is wrapped so that its launches, registrations and API calls take
// the same times, launch for launch, as the sim cloud's (see latency.go).
//
// Configuration is Karpenter's: KUBECONFIG, INSTANCE_TYPES_FILE_PATH (the catalog, in
// the kwok JSON format), DISABLE_LEADER_ELECTION, METRICS_PORT, HEALTH_PROBE_PORT and
// the rest of Karpenter's options as flags or environment variables.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/log"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed constructing instance types")
		os.Exit(1)
	}
	var provider cloudprovider.CloudProvider = kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes)
	if path := os.Getenv("TAILOR_LATENCY_DRAWS"); path != "" {
		draws, err := readDraws(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "TAILOR_LATENCY_DRAWS:", err)
			os.Exit(1)
		}
		provider = newLatencyCloud(op.GetClient(), instanceTypes, draws, op.Clock)
		log.FromContext(ctx).Info("kwok cloud timed by draws", "file", path, "launches", len(draws.Launches), "calls", len(draws.API))
	}
	decorated := overlay.Decorate(provider, op.GetClient(), op.InstanceTypeStore)
	cluster := state.NewCluster(op.Clock, op.GetClient(), decorated)
	op.WithControllers(ctx, controllers.NewControllers(ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder,
		decorated, provider, cluster, op.InstanceTypeStore)...).Start(ctx)
}
