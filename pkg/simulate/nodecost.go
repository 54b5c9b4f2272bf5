package simulate

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/aws"
	"github.com/nodetailor/tailor/pkg/cloudprovider/sim"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// What each new node costs besides its instance, from the NodeClasses of the
// input: an EC2NodeClass's volumes (its blockDeviceMappings, or its AMI family's
// defaults) and public address (associatePublicIPAddress: true; offline there are
// no subnets to ask), a SimNodeClass's perNodeCost; and every NodePool's
// tailor.sh/per-node-cost annotation (state.Build adds it).

var nodeClassKinds = map[schema.GroupVersionKind]bool{
	awsv1.SchemeGroupVersion.WithKind("EC2NodeClass"):    true,
	v1alpha1.SchemeGroupVersion.WithKind("SimNodeClass"): true,
}

// nodeClass files an EC2NodeClass or SimNodeClass of the input.
func (l *loader) nodeClass(js []byte, gvk schema.GroupVersionKind, what string) error {
	w := l.w
	switch gvk.Kind {
	case "EC2NodeClass":
		nc := &awsv1.EC2NodeClass{}
		if err := json.Unmarshal(js, nc); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if w.EC2NodeClasses == nil {
			w.EC2NodeClasses = map[string]*awsv1.EC2NodeClass{}
		}
		w.EC2NodeClasses[nc.Name] = nc
	default:
		nc := &v1alpha1.SimNodeClass{}
		if err := json.Unmarshal(js, nc); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if _, err := sim.NodeClassCost(nc); err != nil {
			return err
		}
		if w.SimNodeClasses == nil {
			w.SimNodeClasses = map[string]*v1alpha1.SimNodeClass{}
		}
		w.SimNodeClasses[nc.Name] = nc
	}
	return nil
}

// NodeCosts prices each NodePool's nodes besides their instances, from its
// NodeClass in the input, at the region's prices; a NodeClass not in the input
// costs nothing.
func (w *Workload) NodeCosts(region string) func(*v1.NodePool) (scheduling.NodeCost, error) {
	return func(np *v1.NodePool) (scheduling.NodeCost, error) {
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			return scheduling.NodeCost{}, nil
		}
		switch {
		case ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass":
			if nc, ok := w.EC2NodeClasses[ref.Name]; ok {
				return aws.NodeClassCost(nc, region, aws.PublicAddress(nc, false)), nil
			}
		case ref.Group == v1alpha1.Group && ref.Kind == "SimNodeClass":
			if nc, ok := w.SimNodeClasses[ref.Name]; ok {
				return sim.NodeClassCost(nc)
			}
		}
		return scheduling.NodeCost{}, nil
	}
}

// unpricedNodeClasses are notes naming the NodePools whose EC2NodeClass is not in
// the input: their volumes and addresses are left out of the price.
func (w *Workload) unpricedNodeClasses() []string {
	var notes []string
	for _, np := range w.NodePools {
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
			continue
		}
		if _, ok := w.EC2NodeClasses[ref.Name]; !ok {
			notes = append(notes, fmt.Sprintf("NodePool %s: EC2NodeClass %s is not in the input; its nodes' volumes and public addresses are not priced", np.Name, ref.Name))
		}
	}
	return notes
}

// Region is the region of the instance types' zones ("us-east-1a" is in
// us-east-1), or "" when they name none of that form.
func Region(types []*scheduling.InstanceType) string {
	for _, it := range types {
		for _, o := range it.Offerings {
			if z := strings.TrimRight(o.Zone, "abcdefghijklmnopqrstuvwxyz"); z != o.Zone && strings.Count(z, "-") == 2 {
				return z
			}
		}
	}
	return ""
}
