package simulate

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// The plan counts what each node costs besides its instance, from the input's
// EC2NodeClass (its default 20Gi gp3 root volume and a public IPv4 address) and
// the NodePool's tailor.sh/per-node-cost, and the report splits the price. Issue
// 26's example: 100 pods of 1 cpu and 1Gi were planned as 100 t3a.small spot.
func TestPlanCountsNodeCosts(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	if r := Region(types); r != "us-east-1" {
		t.Fatalf("region %q", r)
	}
	plan := func(files ...string) (*Workload, *Result) {
		w, err := Load(t.Context(), files, Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(w, types, scheduling.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return w, res
	}
	bare, listed := plan("testdata/nodecost/inflate.yaml")
	if len(bare.Notes) != 1 || !strings.Contains(bare.Notes[0], "EC2NodeClass default is not in the input; its nodes' volumes and public addresses are not priced") {
		t.Errorf("notes %q", bare.Notes)
	}
	if c := listed.Plan.Costs(); c.NodeCost != (scheduling.NodeCost{}) {
		t.Errorf("without the EC2NodeClass: per-node costs %+v", c)
	}
	_, real := plan("testdata/nodecost/inflate.yaml", "testdata/nodecost/ec2nodeclass-public.yaml")
	n := float64(len(real.Plan.NewNodes))
	perNode := 20*0.08/730 + 0.005
	billed := listed.Plan.Cost() + float64(len(listed.Plan.NewNodes))*perNode
	t.Logf("list price: %d nodes $%.4f/h (billed $%.4f/h); counted: %d nodes $%.4f/h %+v",
		len(listed.Plan.NewNodes), listed.Plan.Cost(), billed, len(real.Plan.NewNodes), real.Plan.Cost(), real.Plan.Costs())
	if len(real.Plan.NewNodes) >= len(listed.Plan.NewNodes) || real.Plan.Cost() >= billed {
		t.Errorf("with per-node costs %d nodes at $%.4f/h; by list price %d nodes, billed $%.4f/h", len(real.Plan.NewNodes), real.Plan.Cost(), len(listed.Plan.NewNodes), billed)
	}
	c := real.Plan.Costs()
	if math.Abs(c.Volumes-n*20*0.08/730) > 1e-9 || math.Abs(c.Addresses-n*0.005) > 1e-9 || c.PerNode != 0 {
		t.Errorf("split %+v for %v nodes", c, n)
	}

	rep := NewReport(real, "v0.0.0-test")
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "Per hour: instances $") || !strings.Contains(table.String(), "addresses $0.0800") {
		t.Errorf("table without the split:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rep.Objects()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `{"costs":{"instances":`) || !strings.Contains(js.String(), `"node_cost_per_hour":0.007192`) {
		t.Errorf("json without the split:\n%.600s", js.String())
	}
}

// The NodePool's tailor.sh/per-node-cost counts on every new node; one that
// cannot be read plans nothing from the pool, saying why.
func TestPerNodeCostAnnotation(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{"0.01": "", "ten cents": "annotation tailor.sh/per-node-cost"} {
		w, err := Load(t.Context(), []string{"testdata/nodecost/inflate.yaml"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.NodePools[0].Annotations = map[string]string{"tailor.sh/per-node-cost": value}
		res, err := Run(w, types, scheduling.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want != "" {
			if len(res.Plan.NewNodes) != 0 || len(res.Plan.Unschedulable) == 0 || !strings.Contains(res.Plan.Unschedulable[0].Reason, want) {
				t.Errorf("%q: %d nodes, unschedulable %v", value, len(res.Plan.NewNodes), res.Plan.Unschedulable[:min(1, len(res.Plan.Unschedulable))])
			}
			continue
		}
		if c := res.Plan.Costs(); math.Abs(c.PerNode-0.01*float64(len(res.Plan.NewNodes))) > 1e-9 || len(res.Plan.NewNodes) >= 100 {
			t.Errorf("%q: %d nodes, split %+v", value, len(res.Plan.NewNodes), c)
		}
	}
}
