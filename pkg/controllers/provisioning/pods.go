package provisioning

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/state"
)

// PodTrigger wakes the provisioner when a pod the kube-scheduler could not place
// appears or changes.
type PodTrigger struct {
	kube        client.Client
	provisioner *Provisioner
}

// NewPodTrigger returns the controller.
func NewPodTrigger(kube client.Client, p *Provisioner) *PodTrigger {
	return &PodTrigger{kube: kube, provisioner: p}
}

// Name is the controller's name.
func (c *PodTrigger) Name() string { return "provisioning.pods" }

// Register adds the controller to a manager. A NodeClaim that goes away (its launch
// failed, its node was removed) wakes the provisioner too: the pods it was for are
// still pending, and nothing else about them changed. So does a NodePool that is
// new, changed, or turned ready (its NodeClass came): pods no NodePool could take
// may fit it now, and the kube-scheduler may not look at them again for minutes.
func (c *PodTrigger) Register(_ context.Context, mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named(c.Name()).For(&corev1.Pod{})
	if c.provisioner.opts.CapacityBuffers && BuffersServed(mgr.GetRESTMapper()) {
		// A buffer created, changed or deleted changes the room to keep.
		b = b.Watches(&cb.CapacityBuffer{}, handler.Funcs{
			CreateFunc: func(context.Context, event.TypedCreateEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				c.provisioner.Trigger()
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				// Its status is the provisioner's own writing.
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
					c.provisioner.Trigger()
				}
			},
			DeleteFunc: func(context.Context, event.TypedDeleteEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				c.provisioner.Trigger()
			},
		})
	}
	return b.
		Watches(&v1.NodeClaim{}, handler.Funcs{
			DeleteFunc: func(context.Context, event.TypedDeleteEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				c.provisioner.Trigger()
			},
		}).
		Watches(&v1.NodePool{}, handler.Funcs{
			CreateFunc: func(context.Context, event.TypedCreateEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				c.provisioner.Trigger()
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if NodePoolChangeMatters(e.ObjectOld.(*v1.NodePool), e.ObjectNew.(*v1.NodePool)) {
					c.provisioner.Trigger()
				}
			},
		}).
		Complete(c)
}

// NodePoolChangeMatters reports a change that can let pending pods fit: the spec
// (a new generation) or readiness, including readiness confirmed for a new
// generation. Its status counts of nodes and resources change with every claim and
// do not.
func NodePoolChangeMatters(old, updated *v1.NodePool) bool {
	wasReady, _ := state.NodePoolReady(old)
	isReady, _ := state.NodePoolReady(updated)
	return old.Generation != updated.Generation || wasReady != isReady
}

// Reconcile triggers a batch for a provisionable pod.
func (c *PodTrigger) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := c.kube.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if state.Provisionable(pod) {
		c.provisioner.TriggerFor(pod.UID)
		// Seen pending: the pod metrics time its wait for a decision from now.
		c.provisioner.times.Ack(req.NamespacedName, c.provisioner.clock.Now())
	}
	return reconcile.Result{}, nil
}
