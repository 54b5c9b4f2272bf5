// Package provisioning turns pods the kube-scheduler cannot place into NodeClaims:
// it batches the pods as they appear, asks the scheduling engine for a plan, and
// creates one NodeClaim per new node of the plan.
package provisioning

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Options tune batching.
type Options struct {
	// BatchIdle closes a batch when no new pending pod arrived for this long.
	BatchIdle time.Duration
	// BatchMax closes a batch this long after its first pod, however busy.
	BatchMax time.Duration
}

// InstanceTypes supplies a NodePool's instance types.
type InstanceTypes func(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error)

// Provisioner creates NodeClaims for pending pods.
type Provisioner struct {
	kube     client.Client
	cluster  *state.Cluster
	types    InstanceTypes
	recorder record.EventRecorder
	clock    clock.Clock
	opts     Options
	trigger  chan struct{}
	// nominated maps a pod to the NodeClaim made for it. While that claim comes up
	// the pod waits for it rather than being planned for again; only the
	// provisioning loop touches it.
	nominated map[k8stypes.UID]string
}

// NewProvisioner returns a provisioner; Start runs it.
func NewProvisioner(kube client.Client, cluster *state.Cluster, types InstanceTypes, recorder record.EventRecorder, clk clock.Clock, opts Options) *Provisioner {
	return &Provisioner{kube: kube, cluster: cluster, types: types, recorder: recorder, clock: clk, opts: opts,
		trigger: make(chan struct{}, 1), nominated: map[k8stypes.UID]string{}}
}

// Trigger says a pod may need a node; it never blocks.
func (p *Provisioner) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Start batches triggers and provisions once per batch until ctx ends.
func (p *Provisioner) Start(ctx context.Context) error {
	var recheck <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
		case <-recheck:
		}
		recheck = nil
		if !p.waitForBatch(ctx) {
			return nil
		}
		if err := p.Provision(ctx); err != nil {
			log.FromContext(ctx).Error(err, "provisioning")
			// Try again soon: the pods are still pending.
			recheck = p.clock.After(time.Second)
			continue
		}
		// Pods waiting on their claims change nothing when a nomination lapses, so
		// nothing would wake us: look again while any wait.
		if len(p.nominated) > 0 {
			recheck = p.clock.After(NominationGrace / 3)
		}
	}
}

// waitForBatch returns once no trigger came for BatchIdle, or BatchMax passed.
func (p *Provisioner) waitForBatch(ctx context.Context) bool {
	deadline := p.clock.After(p.opts.BatchMax)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return true
		case <-p.trigger:
		case <-p.clock.After(p.opts.BatchIdle):
			return true
		}
	}
}

// Provision plans for the pending pods and creates the NodeClaims, then waits until
// the cache shows them, so the next plan counts them and no pod is provisioned for
// twice.
func (p *Provisioner) Provision(ctx context.Context) error {
	snap, err := p.cluster.Snapshot(ctx, func(np *v1.NodePool) ([]*scheduling.InstanceType, error) { return p.types(ctx, np) })
	if err != nil {
		return err
	}
	snap.Input.Pods = p.unnominated(snap)
	if len(snap.Input.Pods) == 0 {
		return nil
	}
	start := p.clock.Now()
	plan, err := scheduling.Solve(snap.Input, scheduling.Options{})
	if err != nil {
		return err
	}
	SchedulingDuration.Observe(p.clock.Since(start).Seconds())
	pools := map[string]*v1.NodePool{}
	for _, np := range snap.NodePools {
		pools[np.Name] = np
	}
	var created []*v1.NodeClaim
	for _, n := range plan.NewNodes {
		nc := NodeClaim(pools[n.NodePool], n)
		if err := p.kube.Create(ctx, nc); err != nil {
			return fmt.Errorf("creating a NodeClaim for NodePool %s: %w", n.NodePool, err)
		}
		created = append(created, nc)
		NodeClaimsCreated.WithLabelValues(n.NodePool, "provisioning").Inc()
		for _, pod := range n.Pods {
			p.nominated[pod.UID] = nc.Name
			p.recorder.Eventf(pod, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/%s", nc.Name)
		}
	}
	for _, f := range plan.Unschedulable {
		p.recorder.Eventf(f.Pod, corev1.EventTypeWarning, "FailedScheduling", "No NodePool can provision a node for this pod: %s", f.Reason)
	}
	if len(created) > 0 {
		log.FromContext(ctx).Info("provisioned", "nodeclaims", len(created), "pods", len(snap.Input.Pods)-len(plan.Unschedulable),
			"unschedulable", len(plan.Unschedulable), "pricePerHour", plan.Cost())
	}
	return p.waitForCache(ctx, created)
}

// NominationGrace is how long after its claim's node is ready a nominated pod may
// stay pending before it is planned for again (the kube-scheduler needs a moment,
// and someone else may have taken the room).
const NominationGrace = 30 * time.Second

// unnominated drops the pending pods that wait for a claim still coming up, and
// forgets nominations whose claim is gone or has been ready for a while.
func (p *Provisioner) unnominated(snap *state.Snapshot) []*corev1.Pod {
	claims := map[string]*v1.NodeClaim{}
	for _, nc := range snap.Claims {
		claims[nc.Name] = nc
	}
	waiting := func(pod *corev1.Pod) bool {
		name, ok := p.nominated[pod.UID]
		if !ok {
			return false
		}
		nc := claims[name]
		if nc == nil || nc.DeletionTimestamp != nil {
			delete(p.nominated, pod.UID)
			return false
		}
		if ready := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); ready != nil &&
			ready.Status == metav1.ConditionTrue && p.clock.Since(ready.LastTransitionTime.Time) > NominationGrace {
			delete(p.nominated, pod.UID)
			return false
		}
		return true
	}
	pending := make(map[k8stypes.UID]bool, len(snap.Input.Pods))
	out := snap.Input.Pods[:0:0]
	for _, pod := range snap.Input.Pods {
		pending[pod.UID] = true
		if !waiting(pod) {
			out = append(out, pod)
		}
	}
	for uid := range p.nominated {
		if !pending[uid] {
			delete(p.nominated, uid) // bound, or gone
		}
	}
	return out
}

func (p *Provisioner) waitForCache(ctx context.Context, created []*v1.NodeClaim) error {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, nc := range created {
			if err := p.kube.Get(ctx, client.ObjectKeyFromObject(nc), &v1.NodeClaim{}); err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
		}
		return true, nil
	})
}

// NodeClaim makes the claim for a planned node: the NodePool's template (labels,
// annotations, taints, startup taints, node class, expiry, grace period), the
// requirements narrowed to the instance types the plan chose, and the requests of
// the pods it is for.
func NodeClaim(np *v1.NodePool, n *scheduling.NewNode) *v1.NodeClaim {
	t := np.Spec.Template
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       map[string]string{v1.NodePoolLabelKey: np.Name},
			Annotations:  map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool",
				Name: np.Name, UID: np.UID, BlockOwnerDeletion: ptr(true)}},
		},
		Spec: v1.NodeClaimSpec{
			Taints:                 t.Spec.Taints,
			StartupTaints:          t.Spec.StartupTaints,
			Requirements:           n.Requirements.ToNodeSelector(),
			Resources:              v1.ResourceRequirements{Requests: n.Requests},
			NodeClassRef:           t.Spec.NodeClassRef,
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
			ExpireAfter:            t.Spec.ExpireAfter,
		},
	}
	for k, v := range t.Labels {
		nc.Labels[k] = v
	}
	for k, v := range t.Annotations {
		nc.Annotations[k] = v
	}
	if hash, ok := np.Annotations[v1.NodePoolHashAnnotationKey]; ok {
		nc.Annotations[v1.NodePoolHashAnnotationKey] = hash
	}
	return nc
}

func ptr[T any](v T) *T { return &v }
