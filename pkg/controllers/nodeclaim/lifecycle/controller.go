// Package lifecycle carries a NodeClaim from creation to a ready node: Launched
// (the cloud created the instance), Registered (its Node appeared and took the
// claim's labels and taints), Initialized (the Node is ready, its startup taints are
// gone and its extended resources are there). A claim that does not launch within
// LaunchTimeout, or whose Node does not register within RegistrationTimeout, is
// deleted so its pods can be provisioned for again.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	cpmetrics "github.com/nodetailor/tailor/pkg/cloudprovider/metrics"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

// Event reasons on NodeClaims: Karpenter's where Karpenter has the event
// (InsufficientCapacityError, NodeClassNotReady), the condition's name otherwise.
const (
	ReasonLaunched             = "Launched"
	ReasonRegistered           = "Registered"
	ReasonInsufficientCapacity = "InsufficientCapacityError"
	ReasonNodeClassNotReady    = "NodeClassNotReady"
)

// Liveness timeouts, as Karpenter's.
const (
	LaunchTimeout       = 5 * time.Minute
	RegistrationTimeout = 15 * time.Minute
)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

// Controller is the NodeClaim lifecycle controller.
type Controller struct {
	kube        client.Client
	cloud       cloudprovider.CloudProvider
	unavailable *cloudprovider.UnavailableOfferings
	recorder    record.EventRecorder
	clock       clock.Clock
	// writes keeps the controller from acting on a copy older than its own
	// last write to a claim.
	writes *nodeclaim.Writes[*v1.NodeClaim]
	// launches holds each claim the cloud launched, by provider ID, until its
	// Node is registered: the Node can be registered from it before the claim's
	// own writes are done (see RegisterNode).
	launches *launches
	// nodes does for the Nodes it registers what writes does for claims: both the
	// Node and the claim side register, and the second must see the first's write.
	nodes *nodeclaim.Writes[*corev1.Node]
	// release holds a batch's larger nodes unregistered until its smaller ones are
	// up (see nodeclaim.ReleaseOrder); nil holds nothing.
	release *nodeclaim.ReleaseOrder
	// bootLog reads what an instance printed while it booted, for the message of
	// a claim whose node never registered; nil when the cloud cannot.
	bootLog func(ctx context.Context, providerID string) (string, error)
}

// WithBootLog has a claim whose node never registers say how its instance's boot
// log ends (cloudprovider.BootLogs of the undecorated provider).
func (c *Controller) WithBootLog(read func(ctx context.Context, providerID string) (string, error)) *Controller {
	c.bootLog = read
	return c
}

// bootLogTail is the end of the instance's boot log, for a message: its last
// non-empty lines, at most about 600 bytes; "" when there is none.
func (c *Controller) bootLogTail(ctx context.Context, providerID string) string {
	if c.bootLog == nil || providerID == "" {
		return ""
	}
	out, err := c.bootLog(ctx, providerID)
	if err != nil {
		log.FromContext(ctx).V(1).Info("reading the boot log", "providerID", providerID, "error", err.Error())
		return ""
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	tail, size := []string{}, 0
	for i := len(lines) - 1; i >= 0 && len(tail) < 5 && size+len(lines[i]) <= 600; i-- {
		tail = append([]string{lines[i]}, tail...)
		size += len(lines[i])
	}
	return strings.Join(tail, " | ")
}

// OrderReleases has registration follow the provisioner's release order.
func (c *Controller) OrderReleases(o *nodeclaim.ReleaseOrder) *Controller {
	c.release = o
	return c
}

// NewController returns the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, unavailable *cloudprovider.UnavailableOfferings, recorder record.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, unavailable: unavailable, recorder: recorder, clock: clk,
		writes: nodeclaim.NewWrites[*v1.NodeClaim](clk, 5*time.Second), launches: newLaunches(clk),
		nodes: nodeclaim.NewWrites[*corev1.Node](clk, 5*time.Second)}
}

// Name is the controller's name.
func (c *Controller) Name() string { return ControllerName }

// Register adds the controller, and the provider ID indexes it reads by, to mgr.
func (c *Controller) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := nodeclaim.IndexProviderIDs(ctx, mgr); err != nil {
		return err
	}
	informer, err := mgr.GetCache().GetInformer(ctx, &v1.NodeClaim{})
	if err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			if nc, ok := o.(*v1.NodeClaim); ok {
				c.writes.Observed(nc.Name, nc.ResourceVersion)
			}
		},
		DeleteFunc: func(o any) {
			// A delete missed during a relist comes as a tombstone: the launch it
			// forgets would otherwise be kept for good.
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if nc, ok := o.(*v1.NodeClaim); ok {
				c.writes.Forget(nc.Name)
				c.launches.forgetClaim(nc.Name)
			}
		},
	}); err != nil {
		return err
	}
	nodes, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return err
	}
	if _, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			if n, ok := o.(*corev1.Node); ok {
				c.nodes.Observed(n.Name, n.ResourceVersion)
			}
		},
		DeleteFunc: func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				c.nodes.Forget(n.Name)
			}
		},
	}); err != nil {
		return err
	}
	// A new Node is registered on its own as soon as it appears: its claim may
	// still be busy writing its launch, and pods wait for the unregistered taint
	// to go.
	if err := ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.registration").
		WithOptions(controller.Options{MaxConcurrentReconciles: RegistrationConcurrency}).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(unregistered))).
		Complete(reconcile.Func(c.RegisterNode)); err != nil {
		return err
	}
	// Each claim waits on the cloud and on a few writes; hundreds launch at once
	// after a large batch, and ten at a time would queue them for seconds.
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.lifecycle").
		WithOptions(controller.Options{MaxConcurrentReconciles: Concurrency}).
		For(&v1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.claimsOfNode)).
		Complete(c)
}

// claimsOfNode maps a Node to its claim through the cache's provider ID index, or,
// while the cache has not delivered the claim's launch yet, through that write.
// With no registration delay the Node can appear before the launch is cached; its
// claim would then wait for the Node's next change to register it.
func (c *Controller) claimsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	if reqs := nodeclaim.ClaimsOfNode(c.kube)(ctx, o); len(reqs) > 0 {
		return reqs
	}
	id := o.(*corev1.Node).Spec.ProviderID
	if id == "" {
		return nil
	}
	if name := c.writes.Find(func(nc *v1.NodeClaim) bool { return nc.Status.ProviderID == id }); name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	return nil
}

// Concurrency is how many claims the controller moves along at once: a reconcile
// mostly waits on the cloud and the API server. 200 and 500 did no better in the
// scale test (the API server, not the workers, sets the pace) and held more memory.
const Concurrency = 100

// RegistrationConcurrency is how many Nodes are registered at once: one write each.
const RegistrationConcurrency = 100

// Reconcile moves one claim along its lifecycle. Its writes are merge patches
// without a resource version (see patch), so they do not conflict with others'.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx = cpmetrics.WithController(ctx, ControllerName)
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cloudprovider.Manages(c.cloud, nc) {
		return reconcile.Result{}, nil // another controller's claim (Karpenter's, in a cut-over)
	}
	if nc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // termination's job
	}
	// The cache may not have our last write yet: go on from that write.
	nc = c.writes.Fresh(nc)
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		patch := client.MergeFrom(nc.DeepCopy())
		controllerutil.AddFinalizer(nc, v1.TerminationFinalizer)
		if err := c.patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if nc.Status.ProviderID == "" {
		return c.launch(ctx, nc)
	}
	node, err := nodeclaim.NodeOf(ctx, c.kube, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		return c.awaitRegistration(ctx, nc)
	}
	if hold := c.holdBack(ctx, nc, node); hold > 0 {
		return reconcile.Result{RequeueAfter: hold}, nil
	}
	if err := c.register(ctx, nc, node); err != nil {
		return reconcile.Result{}, err
	}
	if err := c.initialize(ctx, nc, node); err != nil {
		return reconcile.Result{}, err
	}
	res, err := c.awaitInitialization(ctx, nc)
	if again := c.keepNominations(ctx, nc, node); again > 0 && err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > again) {
		res.RequeueAfter = again
	}
	return res, err
}

func (c *Controller) launch(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	// A launch whose writes failed is written again, not launched again: its
	// instance exists, and the cloud's idempotency may not see it yet. The launch
	// is not timed out either: it happened.
	launched := c.launches.result(nc.UID)
	if launched == nil {
		if age := c.clock.Since(nc.CreationTimestamp.Time); age > LaunchTimeout {
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchTimedOut", "Not launched after %s; deleting the NodeClaim", age.Round(time.Second))
			return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
		}
		var err error
		if launched, err = c.cloud.Create(ctx, nc); err != nil {
			return c.launchFailed(ctx, nc, err)
		}
	}
	return c.recordLaunch(ctx, nc, launched)
}

// launchFailed handles an error of cloud.Create.
func (c *Controller) launchFailed(ctx context.Context, nc *v1.NodeClaim, err error) (reconcile.Result, error) {
	switch {
	case cloudprovider.IsInsufficientCapacity(err):
		var ice *cloudprovider.InsufficientCapacityError
		if errors.As(err, &ice) {
			c.unavailable.Mark(ice.Offerings...)
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonInsufficientCapacity, "No capacity for any allowed offering; deleting the NodeClaim so the pods are planned again: %v", err)
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
	case cloudprovider.IsNodeClassNotReady(err):
		status := client.MergeFrom(nc.DeepCopy())
		news := c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionFalse, ReasonNodeClassNotReady, err.Error())
		if uerr := c.patchStatus(ctx, nc, status); uerr != nil {
			return reconcile.Result{}, client.IgnoreNotFound(uerr)
		}
		// Asked again every 10 seconds: said once, and again only when it changes.
		if news {
			c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonNodeClassNotReady, "Cannot launch: %v", err)
		}
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	return reconcile.Result{}, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
}

// recordLaunch writes the launch onto the claim: labels first, then status (a
// claim whose status has a provider ID is launched).
func (c *Controller) recordLaunch(ctx context.Context, nc *v1.NodeClaim, launched *v1.NodeClaim) (reconcile.Result, error) {
	labels := client.MergeFrom(nc.DeepCopy())
	for k, v := range launched.Labels {
		metav1.SetMetaDataLabel(&nc.ObjectMeta, k, v)
	}
	if !c.launches.add(launched.Status.ProviderID, nc, launched) {
		return reconcile.Result{}, c.abandon(ctx, nc, launched)
	}
	if err := c.patch(ctx, nc, labels); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.abandon(ctx, nc, launched)
		}
		return reconcile.Result{}, fmt.Errorf("labelling nodeclaim %s: %w", nc.Name, err)
	}
	status := client.MergeFrom(nc.DeepCopy())
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.ImageID = launched.Status.ImageID
	nc.Status.Capacity = launched.Status.Capacity
	nc.Status.Allocatable = launched.Status.Allocatable
	c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	// The Node often appears, and is registered from its side, while the labels
	// are written: record that in the same write, a claim write fewer.
	node, err := nodeclaim.NodeOf(ctx, c.kube, nc)
	registered := err == nil && node != nil && c.holdBack(ctx, nc, node) == 0 && c.registerNode(ctx, nc, node) == nil
	if registered {
		c.recordRegistration(nc, node)
	}
	if err := c.patchStatus(ctx, nc, status); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.abandon(ctx, nc, launched)
		}
		// The instance exists; the retry writes this launch again (see
		// launches.result), and garbage collection reclaims it if the claim is lost.
		return reconcile.Result{}, fmt.Errorf("recording the launch of nodeclaim %s: %w", nc.Name, err)
	}
	c.launches.recorded(nc.UID)
	log.FromContext(ctx).Info("launched", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID,
		"instanceType", nc.Labels[v1.LabelInstanceType], "zone", nc.Labels[v1.LabelZone], "capacityType", nc.Labels[v1.CapacityTypeLabelKey])
	c.recorder.Event(nc, corev1.EventTypeNormal, ReasonLaunched, launchedMessage(nc))
	if registered {
		c.launches.forget(nc.Status.ProviderID)
		log.FromContext(ctx).Info("registered", "nodeclaim", nc.Name, "node", node.Name)
		c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonRegistered, "Registered Node %s", node.Name)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: time.Second}, nil
}

// abandon terminates an instance whose claim was deleted while it launched: the
// claim's termination saw no provider ID and had nothing to terminate, and its
// Node must not take pods.
func (c *Controller) abandon(ctx context.Context, nc *v1.NodeClaim, launched *v1.NodeClaim) error {
	c.launches.forget(launched.Status.ProviderID)
	c.launches.recorded(nc.UID)
	if err := c.cloud.Delete(ctx, launched); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
		// Garbage collection reclaims it after its grace period.
		return fmt.Errorf("terminating the instance of nodeclaim %s, deleted while it launched: %w", nc.Name, err)
	}
	log.FromContext(ctx).Info("terminated the instance of a nodeclaim deleted while it launched", "nodeclaim", nc.Name,
		"providerID", launched.Status.ProviderID)
	return nil
}

func (c *Controller) awaitRegistration(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	launched := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched)
	since := nc.CreationTimestamp.Time
	if launched != nil {
		since = launched.LastTransitionTime.Time
	}
	if waited := c.clock.Since(since); waited > RegistrationTimeout {
		message := fmt.Sprintf("No node registered after %s; deleting the NodeClaim", waited.Round(time.Second))
		if tail := c.bootLogTail(ctx, nc.Status.ProviderID); tail != "" {
			message += "; the instance's boot log ends: " + tail
		}
		return reconcile.Result{}, c.giveUp(ctx, nc, v1.ConditionTypeRegistered, nodeclaim.ReasonRegistrationTimedOut, message)
	}
	return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
}

// register records the claim's Node, registering it first if the Node side has
// not (see RegisterNode), and initialization in the same write: a node is often
// ready by then.
func (c *Controller) register(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) error {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) && nc.Status.NodeName == node.Name {
		return nil
	}
	if err := c.registerNode(ctx, nc, node); err != nil {
		return err
	}
	c.launches.forget(nc.Status.ProviderID)
	status := client.MergeFrom(nc.DeepCopy())
	c.recordRegistration(nc, node)
	if err := c.patchStatus(ctx, nc, status); err != nil {
		return err
	}
	NodesCreated.WithLabelValues(nc.Labels[v1.NodePoolLabelKey], nc.Labels[corev1.LabelTopologyZone]).Inc()
	log.FromContext(ctx).Info("registered", "nodeclaim", nc.Name, "node", node.Name)
	c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonRegistered, "Registered Node %s", node.Name)
	return nil
}

// launchedMessage says what was launched for the claim: "Launched
// aws:///us-east-1a/i-0abc: m5.large, spot, us-east-1a".
func launchedMessage(nc *v1.NodeClaim) string {
	var what []string
	for _, key := range []string{v1.LabelInstanceType, v1.CapacityTypeLabelKey, v1.LabelZone} {
		if v := nc.Labels[key]; v != "" {
			what = append(what, v)
		}
	}
	if len(what) == 0 {
		return "Launched " + nc.Status.ProviderID
	}
	return "Launched " + nc.Status.ProviderID + ": " + strings.Join(what, ", ")
}

// recordRegistration sets the claim's Registered condition and node name, and
// Initialized as the Node is.
func (c *Controller) recordRegistration(nc *v1.NodeClaim, node *corev1.Node) {
	nc.Status.NodeName = node.Name
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	c.setInitialized(nc, notInitialized(nc, node))
}

// RegisterNode registers a new Node whose claim launched, without waiting for the
// claim's own reconcile: that one may still be writing the launch (two writes,
// each a second or more when a burst loads the API server) while pods wait for
// the Node's unregistered taint to go. The claim records the registration later.
func (c *Controller) RegisterNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !unregistered(node) || node.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	nc := c.launches.get(node.Spec.ProviderID)
	if nc == nil {
		// Not launched by this process (a restart): the claim's reconcile
		// registers it.
		return reconcile.Result{}, nil
	}
	if hold := c.holdBack(ctx, nc, node); hold > 0 {
		return reconcile.Result{RequeueAfter: hold}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.registerNode(ctx, nc, node))
}

// holdBack is how long the claim's Node is to stay unregistered for the release
// order: 0 once it may register, or has.
func (c *Controller) holdBack(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) time.Duration {
	node = c.nodes.Fresh(node)
	if c.release == nil || !unregistered(node) {
		return 0
	}
	if closed(node) {
		// Opened now, the node would turn its pods away (see announce); it opens
		// when nothing else keeps them off.
		if wait := c.release.Closed(nc.Name); wait > 0 {
			return wait
		}
	}
	hold, known := c.release.Due(nc.Name)
	switch {
	case !known || len(c.release.Planned(nc.Name)) == 0:
		return hold
	case hold > nodeclaim.AnnounceLead:
		// Back in time to announce the node to its pods.
		return hold - nodeclaim.AnnounceLead
	}
	return max(hold, c.announce(ctx, nc, node))
}

// announce names the node to the pods planned for it, as their
// status.nominatedNodeName, shortly before it registers (and again as it does,
// to the pods whose nomination a failed attempt cleared meanwhile), and says how
// much longer it is to wait for the kube-scheduler to see them. The kube-scheduler tries a
// pod's nominated node first, and counts the pods nominated to a node when it
// fits other pods there: the pods land where they were planned, and the room
// planned for one pod is not given to another that came first (left to its
// scoring, it spreads pods over the emptiest nodes and the pods that come last
// find no room). A pod already bound or nominated (by preemption) is left alone;
// a nomination the kube-scheduler cannot honour it clears itself.
func (c *Controller) announce(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) time.Duration {
	c.nominate(ctx, nc, node)
	return c.release.Announce(nc.Name)
}

// keepNominations names the node again, once it is open, to its pods whose
// nomination the kube-scheduler cleared (it clears it on every failed attempt,
// and a pod is tried when any node opens, its own perhaps not yet): without it,
// the room kept for the pod goes to the next pod that fits. It says when to look
// again; 0 once the pods had time to land (see ReleaseOrder.Keep).
func (c *Controller) keepNominations(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) time.Duration {
	if c.release == nil {
		return 0
	}
	again := c.release.Keep(nc.Name)
	if again > 0 {
		c.nominate(ctx, nc, node)
	}
	return again
}

// nominate sets status.nominatedNodeName to the node on the pods planned for it
// that are pending with none.
func (c *Controller) nominate(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) {
	for _, key := range c.release.Planned(nc.Name) {
		pod := &corev1.Pod{}
		if err := c.kube.Get(ctx, key, pod); err != nil {
			continue
		}
		if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Status.NominatedNodeName = node.Name
		if err := c.kube.Status().Patch(ctx, pod, patch); err != nil {
			// Only a hint: the pod is placed by the kube-scheduler's scoring.
			log.FromContext(ctx).V(1).Info("nominating a pod to its planned node", "pod", key, "node", node.Name, "error", err)
		}
	}
}

// closed reports a node that would turn pods away even without the unregistered
// taint: not ready yet, or still tainted so (by the API server's admission, the
// node lifecycle controller or the cloud controller). Startup taints and extended
// resources do not count: the agents that clear them (a device plugin, say) may
// not tolerate the unregistered taint, and would wait for registration.
func closed(node *corev1.Node) bool {
	return !nodeReady(node) || slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return slices.ContainsFunc(v1.KnownEphemeralTaints, func(e corev1.Taint) bool { return e.Key == t.Key })
	})
}

func nodeReady(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

func unregistered(o client.Object) bool {
	node, ok := o.(*corev1.Node)
	return ok && node.Spec.ProviderID != "" && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == v1.UnregisteredNoExecuteTaint.Key
	})
}

// registerNode makes the Node the claim's: its labels and taints, the termination
// finalizer, and the unregistered taint removed so pods may land; and marks it
// initialized if it is.
func (c *Controller) registerNode(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) error {
	node = c.nodes.Fresh(node)
	patch := client.MergeFrom(node.DeepCopy())
	for k, v := range nc.Labels {
		metav1.SetMetaDataLabel(&node.ObjectMeta, k, v)
	}
	// The NodePool template's annotations are the node's too; Tailor's own
	// bookkeeping on the claim is not.
	for k, v := range nc.Annotations {
		if k != v1.NodePoolHashAnnotationKey && k != v1.NodePoolHashVersionAnnotationKey && k != v1.NodeClaimTerminationTimestampAnnotationKey {
			metav1.SetMetaDataAnnotation(&node.ObjectMeta, k, v)
		}
	}
	metav1.SetMetaDataLabel(&node.ObjectMeta, v1.NodeRegisteredLabelKey, "true")
	controllerutil.AddFinalizer(node, v1.TerminationFinalizer)
	taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return t.Key == v1.UnregisteredNoExecuteTaint.Key
	})
	// A kubelet that registers with its taints itself says so with a label.
	if node.Labels[v1.NodeDoNotSyncTaintsLabelKey] != "true" {
		for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
			if !slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect }) {
				taints = append(taints, t)
			}
		}
	}
	node.Spec.Taints = taints
	if notInitialized(nc, node) == "" {
		metav1.SetMetaDataLabel(&node.ObjectMeta, v1.NodeInitializedLabelKey, "true")
	}
	// The Node side may have registered it already, or a claim whose status write
	// failed comes back with its Node registered: patch the Node only with news.
	if data, err := patch.Data(node); err != nil || string(data) != "{}" {
		if err := c.kube.Patch(ctx, node, patch); err != nil {
			return fmt.Errorf("registering node %s: %w", node.Name, err)
		}
		c.nodes.Wrote(node)
	}
	return nil
}

// launches maps provider IDs to the claims launched for them, until registered;
// and claims to what the cloud launched for them, until that is written.
type launches struct {
	mu   sync.Mutex
	byID map[string]*v1.NodeClaim
	// byClaim holds each launch, as cloud.Create returned it, by claim UID until
	// the claim's status records it: a retry after a failed write re-uses it.
	byClaim map[types.UID]launch
	// deleted holds when each recently deleted claim went, so a launch that was
	// in flight when its claim went is not registered.
	deleted map[string]time.Time
	clock   clock.Clock
}

func newLaunches(clk clock.Clock) *launches {
	return &launches{byID: map[string]*v1.NodeClaim{}, byClaim: map[types.UID]launch{}, deleted: map[string]time.Time{}, clock: clk}
}

// add remembers a launch, the claim for registration and what was launched for
// the claim's retries, unless the claim is gone.
func (l *launches) add(id string, nc, launched *v1.NodeClaim) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, gone := l.deleted[nc.Name]; gone {
		return false
	}
	l.byID[id] = nc.DeepCopy()
	if nc.UID != "" { // only a claim read from the API server has one
		l.byClaim[nc.UID] = launch{claim: nc.Name, launched: launched.DeepCopy()}
	}
	return true
}

// launch is what the cloud launched for a claim.
type launch struct {
	claim    string
	launched *v1.NodeClaim
}

// result is what was launched for the claim and not yet recorded, or nil.
func (l *launches) result(uid types.UID) *v1.NodeClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.byClaim[uid]; ok && uid != "" {
		return p.launched.DeepCopy()
	}
	return nil
}

// recorded forgets the claim's launch result: its status has it, or it is gone.
func (l *launches) recorded(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byClaim, uid)
}

func (l *launches) get(id string) *v1.NodeClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	if nc, ok := l.byID[id]; ok {
		return nc.DeepCopy()
	}
	return nil
}

func (l *launches) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byID, id)
}

// forgetClaim drops a deleted claim's launch, whose provider ID the deleted copy
// may not show (it can go before its launch was written).
func (l *launches) forgetClaim(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, nc := range l.byID {
		if nc.Name == name {
			delete(l.byID, id)
		}
	}
	for uid, p := range l.byClaim {
		if p.claim == name {
			delete(l.byClaim, uid)
		}
	}
	now := l.clock.Now()
	l.deleted[name] = now
	for n, at := range l.deleted {
		if now.Sub(at) > LaunchTimeout {
			delete(l.deleted, n) // no launch is in flight that long
		}
	}
}

// initialize marks the claim Initialized and Ready once its Node is ready, its
// startup taints are gone and the extended resources it was sized for are there.
func (c *Controller) initialize(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) error {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return nil
	}
	node = c.nodes.Fresh(node)
	why := notInitialized(nc, node)
	if why == "" && node.Labels[v1.NodeInitializedLabelKey] != "true" {
		patch := client.MergeFrom(node.DeepCopy())
		metav1.SetMetaDataLabel(&node.ObjectMeta, v1.NodeInitializedLabelKey, "true")
		if err := c.kube.Patch(ctx, node, patch); err != nil {
			return err
		}
		c.nodes.Wrote(node)
	}
	// Every heartbeat of the node lands here: write only news.
	status := client.MergeFrom(nc.DeepCopy())
	if !c.setInitialized(nc, why) {
		return nil
	}
	return client.IgnoreNotFound(c.patchStatus(ctx, nc, status))
}

// setInitialized sets Initialized (and Ready) from why the node is not initialized
// yet, "" when it is, and reports whether that changed anything.
func (c *Controller) setInitialized(nc *v1.NodeClaim, why string) bool {
	if why != "" {
		return c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionFalse, "NotInitialized", why)
	}
	initialized := c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	ready := c.setCondition(nc, v1.ConditionTypeReady, metav1.ConditionTrue, "Ready", "")
	return initialized || ready
}

func notInitialized(nc *v1.NodeClaim, node *corev1.Node) string {
	if !nodeReady(node) {
		return "node is not ready"
	}
	for _, st := range nc.Spec.StartupTaints {
		for _, t := range node.Spec.Taints {
			if t.Key == st.Key && t.Effect == st.Effect {
				return fmt.Sprintf("startup taint %s is still there", t.Key)
			}
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourcePods || name == corev1.ResourceEphemeralStorage || q.IsZero() {
			continue
		}
		if have, ok := node.Status.Allocatable[name]; !ok || have.IsZero() {
			return fmt.Sprintf("extended resource %s is not registered", name)
		}
	}
	return ""
}

// patch and patchStatus write the claim and remember the version written. Status
// is patched, not updated: this controller alone writes the claim's conditions, and
// the pods' last event time (written by podevents as pods bind, at the same moment
// as registration) must not turn each registration into a conflict and a retry.
func (c *Controller) patch(ctx context.Context, nc *v1.NodeClaim, patch client.Patch) error {
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return err
	}
	c.writes.Wrote(nc)
	return nil
}

func (c *Controller) patchStatus(ctx context.Context, nc *v1.NodeClaim, patch client.Patch) error {
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return err
	}
	c.writes.Wrote(nc)
	return nil
}

// setCondition sets a condition and reports whether that changed anything.
func (c *Controller) setCondition(nc *v1.NodeClaim, kind string, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: kind, Status: status, Reason: reason,
		Message: message, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
}
