package reliability

import (
	"fmt"
	"strconv"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/faults"
)

// TestWriteFaults scales up and then to zero while a fraction of the controller's
// writes (every POST, PUT, PATCH and DELETE: NodeClaims, Nodes, SimInstances,
// finalizers, evictions, events, status) fail with 500 or 503, or reach the API
// server and time out. Every pod must run; no NodeClaim may get two instances; at
// zero, every Node, NodeClaim and instance is gone and nothing is stuck.
func TestWriteFaults(t *testing.T) {
	e := newEnv(t, 1)
	e.create(simNodeClass(0), nodePool("default", func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
			requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r"),
			requirement("karpenter.k8s.aws/instance-generation", v1.NodeSelectorOpGt, "5")}
	}))
	ctrl := e.startController("faulty", false,
		fmt.Sprintf("%s=%v", faults.EnvWriteRate, suite.faultRate),
		faults.EnvSeed+"="+strconv.FormatUint(seed, 10), faults.EnvTimeout+"=1s")
	t.Logf("write faults: %.0f%% of the controller's writes fail (a third each: 500, 503, applied then timed out after 1s)", 100*suite.faultRate)

	// Five shapes, as the scale test mixes them.
	sizes := []struct{ cpu, mem string }{{"100m", "128Mi"}, {"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"1500m", "3Gi"}}
	var names []string
	for i, s := range sizes {
		name := fmt.Sprintf("mix-%d", i)
		names = append(names, name)
		e.create(deployment(name, suite.faultPods/len(sizes), s.cpu, s.mem))
	}
	if !e.eventually(fmt.Sprintf("scale up under write faults: all %d pods running", suite.faultPods), suite.deadline, e.podsRunning) {
		e.checkInvariants(false)
		return
	}
	inv, err := e.inventory(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after scale up: %d nodeclaims, %d nodes, %d instances", len(inv.claims), len(inv.nodes), len(inv.instances))
	e.note("after scale up: %d nodeclaims, %d nodes, %d instances", len(inv.claims), len(inv.nodes), len(inv.instances))
	e.claimsMatchInstances("after scale up: one instance per nodeclaim, one nodeclaim per instance")

	for _, name := range names {
		e.scale(name, 0)
	}
	e.settleToZero("scale to zero under write faults: every node, nodeclaim and instance gone")

	families, err := ctrl.metrics()
	if err != nil {
		t.Fatalf("reading the controller's metrics: %v", err)
	}
	byFault := byLabel(families, "tailor_faults_injected_total", "fault")
	byResource := byLabel(families, "tailor_faults_injected_total", "resource")
	injected, writes := 0.0, 0.0
	for _, n := range byFault {
		injected += n
	}
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		writes += sum(families, "rest_client_requests_total", map[string]string{"method": method})
	}
	t.Logf("faults injected: %.0f of %.0f writes (%s); by resource: %s", injected, writes, formatCounts(byFault), formatCounts(byResource))
	e.note("faults injected: %.0f of %.0f writes (%s)", injected, writes, formatCounts(byFault))
	if injected == 0 {
		t.Error("no write fault was injected: the suite tested nothing")
	}
}
