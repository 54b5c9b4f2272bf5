package provisioning

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// At debug level (--log-level debug, verbosity 1) a plan's decisions are logged:
// each new node with its instance type and price, and why a pod fits nowhere; at
// info level none is.
func TestLogPlanAtDebugLevel(t *testing.T) {
	pool := &v1.NodePool{}
	pool.Name = "default"
	huge := pod("huge", "1000")
	plan, err := scheduling.Solve(&scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(4)}},
		Pods: []*corev1.Pod{pod("small", "1"), huge}}, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 1 || len(plan.Unschedulable) != 1 {
		t.Fatalf("%d new nodes, %d unschedulable; want one of each", len(plan.NewNodes), len(plan.Unschedulable))
	}
	logged := func(verbosity int) string {
		var out strings.Builder
		logPlan(funcr.New(func(prefix, args string) { out.WriteString(args + "\n") }, funcr.Options{Verbosity: verbosity}), plan, false)
		return out.String()
	}
	debug := logged(1)
	for _, want := range []string{`"msg"="planned"`, `"msg"="planned a new node"`, `"instanceType"="` + plan.NewNodes[0].InstanceType.Name + `"`,
		`"msg"="a pod fits nowhere"`, `"name"="huge"`, `no instance type offers 1000 cpu`} {
		if !strings.Contains(debug, want) {
			t.Errorf("the debug log lacks %s:\n%s", want, debug)
		}
	}
	if info := logged(0); info != "" {
		t.Errorf("at info level the plan was logged:\n%s", info)
	}
	logPlan(logr.Discard(), plan, false) // a logger that drops everything costs nothing
}
