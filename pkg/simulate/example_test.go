package simulate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/simulate"
)

// Load reads manifests as `kubectl apply` would take them (a NodePool and a
// Deployment here), and Run plans nodes for their pods: what `tailor simulate`
// does, with four synthetic instance types (1 to 4 vCPU) as the catalog.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "simulate-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	manifests := `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	file := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	w, err := simulate.Load(context.Background(), []string{file}, simulate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	result, err := simulate.Run(w, schedtest.SyntheticTypes(4), scheduling.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range result.Plan.NewNodes {
		fmt.Printf("%s %s: %d pods, $%.4f/h\n", n.InstanceType.Name, n.Offering.CapacityType, len(n.Pods), n.Offering.Price)
	}
	fmt.Println("pods planned:", result.Pods)
	// Output:
	// fake-it-3 on-demand: 3 pods, $0.1080/h
	// fake-it-3 on-demand: 3 pods, $0.1080/h
	// pods planned: 6
}
