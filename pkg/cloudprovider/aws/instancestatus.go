package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// Node conditions of EC2's status checks, as node repair reads them: False while
// the check is impaired, since EC2 says it failed.
const (
	// ConditionSystemStatusOK is EC2's system status check: the host (power,
	// network, hardware) under the instance.
	ConditionSystemStatusOK corev1.NodeConditionType = "EC2SystemStatusOK"
	// ConditionInstanceStatusOK is EC2's instance status check: the instance
	// answers on its primary network interface.
	ConditionInstanceStatusOK corev1.NodeConditionType = "EC2InstanceStatusOK"
)

// statusCheckToleration is how long a status check may fail before the node is
// repaired: EC2's checks run every minute and a blip clears by the next, so two
// minutes, as Karpenter waits.
const statusCheckToleration = 2 * time.Minute

// RepairPolicies are the AWS provider's node repair policies, as Karpenter's: the
// kubelet's Ready; the EKS node monitoring agent's conditions (accelerated
// hardware 10 minutes, storage, networking, kernel and container runtime 30
// minutes); and EC2's status checks (see InstanceHealth).
var RepairPolicies = append(append([]cloudprovider.RepairPolicy(nil), cloudprovider.KubeletRepairPolicies...),
	cloudprovider.RepairPolicy{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, Toleration: 10 * time.Minute},
	cloudprovider.RepairPolicy{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	cloudprovider.RepairPolicy{ConditionType: "NetworkingReady", ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	cloudprovider.RepairPolicy{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	cloudprovider.RepairPolicy{ConditionType: "ContainerRuntimeReady", ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	cloudprovider.RepairPolicy{ConditionType: ConditionSystemStatusOK, ConditionStatus: corev1.ConditionFalse, Toleration: statusCheckToleration},
	cloudprovider.RepairPolicy{ConditionType: ConditionInstanceStatusOK, ConditionStatus: corev1.ConditionFalse, Toleration: statusCheckToleration},
)

// InstanceStatusInterval is how often EC2's status checks are read: they are
// refreshed every minute.
const InstanceStatusInterval = time.Minute

// InstanceHealth reads EC2's status checks (DescribeInstanceStatus) for node
// repair: an instance whose system or instance check is impaired gets a False
// condition of that check, since the time EC2 says it failed. Instances that pass
// get none, so a check that recovers ends its condition. The answer is kept for
// InstanceStatusInterval.
type InstanceHealth struct {
	ec2     *ec2.Client
	clock   clock.Clock
	timeout time.Duration

	mu     sync.Mutex
	readAt time.Time
	last   map[string][]corev1.NodeCondition
}

var _ cloudprovider.NodeHealthSource = (*InstanceHealth)(nil)

// NewInstanceHealth reads status checks through ec2Client.
func NewInstanceHealth(ec2Client *ec2.Client, clk clock.Clock) *InstanceHealth {
	return &InstanceHealth{ec2: ec2Client, clock: clk, timeout: 30 * time.Second}
}

// NodeConditions are the failed checks' conditions, by provider ID.
func (h *InstanceHealth) NodeConditions(ctx context.Context) (map[string][]corev1.NodeCondition, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && h.clock.Since(h.readAt) < InstanceStatusInterval {
		return h.last, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	out := map[string][]corev1.NodeCondition{}
	// Filters of different names are ANDed: one read per check.
	for _, check := range []string{"system-status.status", "instance-status.status"} {
		in := &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String(check), Values: []string{string(ec2types.SummaryStatusImpaired)}}}}
		for p := ec2.NewDescribeInstanceStatusPaginator(h.ec2, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("reading EC2 status checks: %w", err)
			}
			for _, s := range page.InstanceStatuses {
				pid := ProviderID(deref(s.AvailabilityZone), deref(s.InstanceId))
				for _, c := range statusConditions(s) {
					if !hasCondition(out[pid], c.Type) {
						out[pid] = append(out[pid], c)
					}
				}
			}
		}
	}
	h.last, h.readAt = out, h.clock.Now()
	return out, nil
}

// statusConditions are the conditions of an instance's impaired checks.
func statusConditions(s ec2types.InstanceStatus) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, c := range []struct {
		typ     corev1.NodeConditionType
		name    string
		summary *ec2types.InstanceStatusSummary
	}{{ConditionSystemStatusOK, "system", s.SystemStatus}, {ConditionInstanceStatusOK, "instance", s.InstanceStatus}} {
		if c.summary == nil || c.summary.Status != ec2types.SummaryStatusImpaired {
			continue
		}
		for _, d := range c.summary.Details {
			if d.Status != ec2types.StatusTypeFailed || d.ImpairedSince == nil {
				continue
			}
			out = append(out, corev1.NodeCondition{Type: c.typ, Status: corev1.ConditionFalse, Reason: "Impaired",
				LastTransitionTime: metav1.NewTime(*d.ImpairedSince),
				Message:            fmt.Sprintf("EC2's %s status check %s failed since %s", c.name, d.Name, d.ImpairedSince.UTC().Format(time.RFC3339))})
			break
		}
	}
	return out
}

func hasCondition(cs []corev1.NodeCondition, t corev1.NodeConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return true
		}
	}
	return false
}
