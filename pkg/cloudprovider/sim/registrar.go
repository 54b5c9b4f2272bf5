package sim

import (
	"context"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// KwokNodeAnnotation hands a Node to kwok, which plays its kubelet.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=tailor.sh,resources=siminstances,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=tailor.sh,resources=siminstances/status,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create;delete

// Registrar is the simulated cloud's side of a node's life: once an instance's
// registration delay has passed it registers the Node, as a kubelet would (with the
// claim's labels and taints and karpenter.sh/unregistered); when the instance is
// gone it removes the Node, as a cloud controller manager would; at an announced
// interruption it reclaims the instance.
type Registrar struct {
	kube  client.Client
	cloud *CloudProvider
	clock clock.Clock
	// kubeletVersion is what the nodes' kubelets report (v1.34.4).
	kubeletVersion string
}

// NewRegistrar returns the registrar of cloud.
func NewRegistrar(kube client.Client, cloud *CloudProvider, clk clock.Clock) *Registrar {
	return &Registrar{kube: kube, cloud: cloud, clock: clk}
}

// WithKubeletVersion has the nodes report version as their kubelet's
// (status.nodeInfo.kubeletVersion): the control plane's, as a cluster's nodes
// usually run. Left unset, kwok reports "fake".
func (r *Registrar) WithKubeletVersion(version string) *Registrar {
	r.kubeletVersion = version
	return r
}

// Name names the controller.
func (r *Registrar) Name() string { return "sim.registrar" }

// Register adds the controller to a manager.
func (r *Registrar) Register(mgr ctrl.Manager) error {
	// A cloud boots its instances side by side, not ten at a time.
	return ctrl.NewControllerManagedBy(mgr).Named(r.Name()).For(&v1alpha1.SimInstance{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 100}).Complete(r)
}

// Reconcile registers or removes the Node of one instance.
func (r *Registrar) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	inst := &v1alpha1.SimInstance{}
	if err := r.kube.Get(ctx, req.NamespacedName, inst); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.removeNode(ctx, req.Name)
		}
		return reconcile.Result{}, err
	}
	if inst.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if at := inst.Spec.InterruptAt; at != nil {
		// The market takes the instance back at the announced time, whether or
		// not anyone acted on the notice.
		wait := at.Sub(r.clock.Now())
		if wait <= 0 {
			return reconcile.Result{}, client.IgnoreNotFound(r.kube.Delete(ctx, inst))
		}
		if inst.Status.State == "Running" {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if inst.Status.State == "Running" {
		return reconcile.Result{}, nil
	}
	if wait := inst.Spec.RegisterAfter.Sub(r.clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	// The cache may not show this instance Running yet though its Node exists:
	// look before creating it again.
	if err := r.kube.Get(ctx, client.ObjectKey{Name: inst.Name}, &corev1.Node{}); apierrors.IsNotFound(err) {
		if err := r.kube.Create(ctx, r.node(ctx, inst)); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("registering the node of %s: %w", inst.Name, err)
		}
	} else if err != nil {
		return reconcile.Result{}, err
	}
	base := inst.DeepCopy()
	inst.Status.State, inst.Status.NodeName = "Running", inst.Name
	var res reconcile.Result
	if at := inst.Spec.InterruptAt; at != nil {
		res.RequeueAfter = at.Sub(r.clock.Now())
	}
	return res, client.IgnoreNotFound(r.kube.Status().Patch(ctx, inst, client.MergeFrom(base)))
}

// launchedFor reports whether inst is the instance the sim cloud launched for claim.
func (r *Registrar) launchedFor(inst *v1alpha1.SimInstance, claim *v1.NodeClaim) bool {
	return cloudprovider.Manages(r.cloud, claim) && instanceName(claim.UID) == inst.Name
}

func (r *Registrar) node(ctx context.Context, inst *v1alpha1.SimInstance) *corev1.Node {
	it := r.cloud.typeOf(ctx, inst)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.Name, Labels: map[string]string{},
		Annotations: map[string]string{KwokNodeAnnotation: "fake"}}}
	node.Spec.ProviderID = ProviderID(inst)
	node.Spec.Taints = []corev1.Taint{v1.UnregisteredNoExecuteTaint}
	// The kubelet starts with the claim's labels and taints (its user data), if
	// the claim is the one the instance was launched for: a claim of the same name
	// may be another's (Karpenter's, in a cut-over) or a later one.
	claim := &v1.NodeClaim{}
	if err := r.kube.Get(ctx, client.ObjectKey{Name: inst.Spec.NodeClaim}, claim); err == nil && r.launchedFor(inst, claim) {
		for k, v := range claim.Labels {
			node.Labels[k] = v
		}
		node.Spec.Taints = append(node.Spec.Taints, claim.Spec.Taints...)
		node.Spec.Taints = append(node.Spec.Taints, claim.Spec.StartupTaints...)
	}
	for k, v := range NodeLabels(inst, it) {
		node.Labels[k] = v
	}
	node.Labels[corev1.LabelHostname] = inst.Name
	// A kubelet still sets the beta os and arch labels (without them the node
	// lifecycle controller patches them in, a write per node), and the cloud
	// controller the beta instance-type, zone and region.
	for beta, ga := range map[string]string{"beta.kubernetes.io/os": corev1.LabelOSStable, "beta.kubernetes.io/arch": corev1.LabelArchStable,
		"beta.kubernetes.io/instance-type": corev1.LabelInstanceTypeStable, "failure-domain.beta.kubernetes.io/zone": corev1.LabelTopologyZone,
		"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion} {
		if v, ok := node.Labels[ga]; ok {
			node.Labels[beta] = v
		}
	}
	if it != nil {
		// The same capacity and overhead the engine planned with.
		node.Status.Capacity = it.Capacity.DeepCopy()
		node.Status.Allocatable = nodeAllocatable(it)
	}
	node.Status.NodeInfo.Architecture = node.Labels[corev1.LabelArchStable]
	node.Status.NodeInfo.OperatingSystem = node.Labels[corev1.LabelOSStable]
	node.Status.NodeInfo.KubeletVersion = r.kubeletVersion
	r.posted(node, inst)
	return node
}

// posted fills in the status a kubelet sends with its registration (it registers
// with its conditions already set): a booted instance's kubelet is ready at once.
// Registered NotReady, the Node would wait for the node lifecycle controller to
// add and then remove node.kubernetes.io/not-ready, two writes and seconds per
// node in a burst.
func (r *Registrar) posted(node *corev1.Node, inst *v1alpha1.SimInstance) {
	now := metav1.NewTime(r.clock.Now())
	condition := func(kind corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: kind, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	node.Status.Conditions = []corev1.NodeCondition{
		condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
	// kwok keeps a Running node's heartbeat.
	node.Status.Phase = corev1.NodeRunning
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: privateIP(inst.Name)}, {Type: corev1.NodeHostName, Address: inst.Name}}
}

// privateIP makes up an instance's address in 10.0.0.0/8 from its name.
func privateIP(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	v := h.Sum32()
	return fmt.Sprintf("10.%d.%d.%d", byte(v>>16), byte(v>>8), byte(v)|1)
}

func (r *Registrar) removeNode(ctx context.Context, instance string) error {
	nodes := &corev1.NodeList{}
	if err := r.kube.List(ctx, nodes, client.MatchingLabels{InstanceLabel: instance}); err != nil {
		return err
	}
	for i := range nodes.Items {
		if err := r.kube.Delete(ctx, &nodes.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
