package simulate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A CSINode in the manifests limits its node's volumes as in the cluster: the node
// attaches one EBS volume and has it already, so the pod with another goes to a new
// node though the node has room.
func TestCSINodeLimitsVolumes(t *testing.T) {
	const manifests = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {kubernetes.io/hostname: n1, kubernetes.io/arch: amd64, kubernetes.io/os: linux, topology.kubernetes.io/zone: us-east-1a}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "58"}
  capacity: {cpu: "8", memory: 32Gi, pods: "58"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec:
  drivers:
  - {name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 1}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-old}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-old}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-new}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-new}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: old, namespace: default}
spec: {volumeName: pv-old, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: new, namespace: default}
spec: {volumeName: pv-new, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
status: {phase: Bound}
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: default}
spec:
  nodeName: n1
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: old}}]
---
apiVersion: v1
kind: Pod
metadata: {name: new, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: new}}]
`
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := Load(t.Context(), []string{path}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.CSINodes) != 1 || len(w.Skipped) != 0 {
		t.Fatalf("read %d CSINodes, skipped %v; want the CSINode read", len(w.CSINodes), w.Skipped)
	}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Bindings) != 0 || len(res.Plan.NewNodes) != 1 {
		t.Errorf("bindings %d, new nodes %d; want the pod on a new node, n1 attaching no more EBS volumes",
			len(res.Plan.Bindings), len(res.Plan.NewNodes))
	}
	for _, u := range res.Plan.Unschedulable {
		t.Errorf("unschedulable: %s: %s", u.Pod.Name, u.Reason)
	}
}
