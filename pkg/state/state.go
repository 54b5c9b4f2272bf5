// Package state is Tailor's view of the cluster, read from the informer cache: the
// nodes and the pods bound to them, the NodeClaims still launching, the pods the
// kube-scheduler could not place, NodePools, DaemonSets, volumes, CSI attach limits
// (CSINodes) and PodDisruptionBudgets. Its product is the scheduling engine's input;
// it gives none before its informers hold their initial lists.
package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Cluster reads the cluster through a (cache-backed) reader.
type Cluster struct {
	kube      client.Reader
	pods      PodStore
	synced    []Syncer
	nodeCosts func(context.Context, *v1.NodePool) (scheduling.NodeCost, error)
	// refs, when set, reads what CapacityBuffers refer to (see WithBuffers).
	refs client.Reader
}

// WithBuffers has Snapshot read CapacityBuffers (autoscaling.x-k8s.io/v1beta1)
// through the cache, and the PodTemplates and workloads they name through refs:
// an uncached reader, as the cache keeps no workload's pod template. Leave it out
// where the API server does not serve CapacityBuffers.
func (c *Cluster) WithBuffers(refs client.Reader) *Cluster {
	c.refs = refs
	return c
}

// Syncer is an informer: it says whether it holds its initial list yet.
type Syncer interface {
	HasSynced() bool
}

// ErrNotSynced is Snapshot's answer before every informer holds its initial list: a
// plan made from a partial view would launch nodes for pods that already have room,
// or miss nodes that count against a limit.
var ErrNotSynced = errors.New("the cluster view is not synced yet")

// PodStore hands out the cached pods themselves (an informer's store). A List
// through the cache copies every pod into its list, megabytes per snapshot at
// thousands of pods, and snapshots are taken every few seconds.
type PodStore interface {
	List() []any
}

// New returns a view reading through kube.
func New(kube client.Reader) *Cluster { return &Cluster{kube: kube} }

// WithPodStore has the view read pods from store instead of listing them.
func (c *Cluster) WithPodStore(store PodStore) *Cluster {
	c.pods = store
	return c
}

// WithNodeCosts has Snapshot ask the cloud what each NodePool's nodes cost besides
// their instances (volumes, addresses; see cloudprovider.NodeCoster).
func (c *Cluster) WithNodeCosts(costs func(context.Context, *v1.NodePool) (scheduling.NodeCost, error)) *Cluster {
	c.nodeCosts = costs
	return c
}

// WithSyncers has Snapshot wait for these informers (one per kind it reads).
func (c *Cluster) WithSyncers(syncers ...Syncer) *Cluster {
	c.synced = append(c.synced, syncers...)
	return c
}

// Synced reports whether every informer the view reads holds its initial list.
func (c *Cluster) Synced() bool {
	for _, s := range c.synced {
		if !s.HasSynced() {
			return false
		}
	}
	return true
}

// allPods lists the pods; they are shared with the cache and only read.
func (c *Cluster) allPods(ctx context.Context) ([]*corev1.Pod, error) {
	if c.pods != nil {
		objs := c.pods.List()
		pods := make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				pods = append(pods, p)
			}
		}
		return pods, nil
	}
	var list corev1.PodList
	if err := c.kube.List(ctx, &list, read); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// Snapshot is what one provisioning decision needs.
type Snapshot struct {
	Input *scheduling.Input
	// NodePools are the NodePools that may launch nodes (not being deleted).
	NodePools []*v1.NodePool
	// Claims are all NodeClaims, for bookkeeping by the caller.
	Claims []*v1.NodeClaim
	// PDBs are the PodDisruptionBudgets, for disruption.
	PDBs []*policyv1.PodDisruptionBudget
	// Owned counts the live pods (neither finished nor being deleted) of each
	// controlling owner by its UID: how many of its replicas a ReplicaSet, a
	// StatefulSet or a Job has made so far.
	Owned map[types.UID]int
	// Buffers are the CapacityBuffers, resolved into placeholder pods or
	// refused; the pods are in no list of Input.
	Buffers []*Buffer
	// TypesFailed names the NodePools whose instance types could not be read (a
	// NodeClass not resolved yet, a cloud API error): no object the caller
	// watches need change when they can be.
	TypesFailed []string
}

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups="",resources=pods;nodes;namespaces;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims;nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csinodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch

// Kinds are the kinds a snapshot reads. Start the cache's informers for them with
// the controller: an informer starts on first read otherwise, and the first batch
// would wait for its initial lists.
func Kinds() []client.Object {
	return []client.Object{&corev1.Pod{}, &corev1.Node{}, &v1.NodeClaim{}, &v1.NodePool{}, &appsv1.DaemonSet{},
		&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &storagev1.StorageClass{}, &storagev1.CSINode{},
		&corev1.Namespace{}, &policyv1.PodDisruptionBudget{}}
}

// read lists without deep copies: a snapshot is only read.
var read = client.UnsafeDisableDeepCopy

// Snapshot gathers the pending pods and everything they could go to. instanceTypes
// supplies each NodePool's instance types.
func (c *Cluster) Snapshot(ctx context.Context, instanceTypes func(*v1.NodePool) ([]*scheduling.InstanceType, error)) (*Snapshot, error) {
	if !c.Synced() {
		return nil, ErrNotSynced
	}
	pods, err := c.allPods(ctx)
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	var claims v1.NodeClaimList
	var pools v1.NodePoolList
	var daemonSets appsv1.DaemonSetList
	var pvcs corev1.PersistentVolumeClaimList
	var pvs corev1.PersistentVolumeList
	var classes storagev1.StorageClassList
	var csiNodes storagev1.CSINodeList
	var namespaces corev1.NamespaceList
	var pdbs policyv1.PodDisruptionBudgetList
	for _, list := range []client.ObjectList{&nodes, &claims, &pools, &daemonSets, &pvcs, &pvs, &classes, &csiNodes, &namespaces, &pdbs} {
		if err := c.kube.List(ctx, list, read); err != nil {
			return nil, fmt.Errorf("listing %T: %w", list, err)
		}
	}
	objs := &Objects{Pods: pods, Nodes: pointers(nodes.Items), NodeClaims: pointers(claims.Items), NodePools: pointers(pools.Items),
		DaemonSets: pointers(daemonSets.Items), PersistentVolumeClaims: pointers(pvcs.Items), PersistentVolumes: pointers(pvs.Items),
		StorageClasses: pointers(classes.Items), CSINodes: pointers(csiNodes.Items), Namespaces: pointers(namespaces.Items),
		PodDisruptionBudgets: pointers(pdbs.Items)}
	if err := c.readBuffers(ctx, objs); err != nil {
		return nil, err
	}
	return Build(objs, instanceTypes, BuildOptions{NodeCost: c.poolCosts(ctx)}), nil
}

// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets,verbs=get

// readBuffers adds the CapacityBuffers and what they name to objs. A reference
// not found is left out (the buffer is refused for it); any other error fails
// the snapshot, as a buffer must not lose its room to a passing API error.
func (c *Cluster) readBuffers(ctx context.Context, objs *Objects) error {
	if c.refs == nil {
		return nil
	}
	var buffers cb.CapacityBufferList
	if err := c.kube.List(ctx, &buffers, read); err != nil {
		return fmt.Errorf("listing CapacityBuffers: %w", err)
	}
	objs.CapacityBuffers = pointers(buffers.Items)
	for _, b := range objs.CapacityBuffers {
		var obj client.Object
		switch ref := b.Spec.PodTemplateRef; {
		case ref != nil:
			obj = &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}}
		case b.Spec.ScalableRef != nil && b.Spec.ScalableRef.APIGroup == "apps":
			name := metav1.ObjectMeta{Name: b.Spec.ScalableRef.Name}
			switch b.Spec.ScalableRef.Kind {
			case "Deployment":
				obj = &appsv1.Deployment{ObjectMeta: name}
			case "ReplicaSet":
				obj = &appsv1.ReplicaSet{ObjectMeta: name}
			case "StatefulSet":
				obj = &appsv1.StatefulSet{ObjectMeta: name}
			}
		}
		if obj == nil {
			continue
		}
		if err := c.refs.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: obj.GetName()}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading what CapacityBuffer %s/%s refers to: %w", b.Namespace, b.Name, err)
		}
		switch o := obj.(type) {
		case *corev1.PodTemplate:
			objs.PodTemplates = append(objs.PodTemplates, o)
		case *appsv1.Deployment:
			objs.Deployments = append(objs.Deployments, o)
		case *appsv1.ReplicaSet:
			objs.ReplicaSets = append(objs.ReplicaSets, o)
		case *appsv1.StatefulSet:
			objs.StatefulSets = append(objs.StatefulSets, o)
		}
	}
	return nil
}

// poolCosts is the cloud's per-node costs of a pool, for Build; nil without them.
func (c *Cluster) poolCosts(ctx context.Context) func(*v1.NodePool) (scheduling.NodeCost, error) {
	if c.nodeCosts == nil {
		return nil
	}
	return func(np *v1.NodePool) (scheduling.NodeCost, error) { return c.nodeCosts(ctx, np) }
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// Objects are what a plan is made from: listed from the cluster by the controller,
// read from manifests by tailor simulate.
type Objects struct {
	// Pods are all pods, bound or not.
	Pods                   []*corev1.Pod
	Nodes                  []*corev1.Node
	NodeClaims             []*v1.NodeClaim
	NodePools              []*v1.NodePool
	DaemonSets             []*appsv1.DaemonSet
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	Namespaces             []*corev1.Namespace
	PodDisruptionBudgets   []*policyv1.PodDisruptionBudget
	// CSINodes give the nodes' CSI volume attach limits.
	CSINodes []*storagev1.CSINode
	// CapacityBuffers ask for spare room; PodTemplates and the workloads
	// (Deployments, ReplicaSets, StatefulSets) their references name give it a
	// shape and a size (see Buffer).
	CapacityBuffers []*cb.CapacityBuffer
	PodTemplates    []*corev1.PodTemplate
	Deployments     []*appsv1.Deployment
	ReplicaSets     []*appsv1.ReplicaSet
	StatefulSets    []*appsv1.StatefulSet
}

// StaticUnavailable is why a static NodePool is not used for pending pods.
const StaticUnavailable = "static NodePool (spec.replicas)"

// BuildOptions say how to read objects that did not come from a live cluster.
type BuildOptions struct {
	// Offline objects come from manifests: no kube-scheduler has tried their pods,
	// so every unbound pod that would be provisionable is pending; NodePools without
	// a Ready condition (never reconciled) count as Ready; and Nodes labelled with a
	// NodePool but no NodeClaim stand for that NodePool's claims.
	Offline bool
	// NodeCost, when set, is what the cloud bills for each of a NodePool's nodes
	// besides its instance (volumes, addresses). The NodePool's own per-node cost
	// (annotation tailor.sh/per-node-cost) is added to it.
	NodeCost func(*v1.NodePool) (scheduling.NodeCost, error)
}

// Build assembles the scheduling engine's input from objects, the one way both the
// controller and tailor simulate do it (pure: no client, no clock). The objects are
// only read, and shared with the result.
func Build(objs *Objects, instanceTypes func(*v1.NodePool) ([]*scheduling.InstanceType, error), opts BuildOptions) *Snapshot {
	in := &scheduling.Input{}
	snap := &Snapshot{Input: in, Owned: map[types.UID]int{}}
	bound := map[string][]*corev1.Pod{}
	for _, p := range objs.Pods {
		if owner := metav1.GetControllerOf(p); owner != nil && p.DeletionTimestamp == nil && !scheduling.IsTerminal(p) {
			snap.Owned[owner.UID]++
		}
		switch {
		case p.Spec.NodeName != "":
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		case Provisionable(p) || opts.Offline && provisionableOffline(p):
			in.Pods = append(in.Pods, p)
		}
	}
	// Each pool's types by name, for the reservations of its claims not launched.
	typesOf := map[string]map[string]*scheduling.InstanceType{}
	poolOf := map[string]*v1.NodePool{}
	for _, np := range objs.NodePools {
		if np.DeletionTimestamp != nil {
			continue
		}
		poolOf[np.Name] = np
		pool := &scheduling.NodePool{NodePool: np}
		// One broken NodePool (its NodeClass missing, say) must not stop the others.
		// A NodePool not Ready would have every claim refused (a template label the
		// API server rejects, say).
		var err error
		if pool.InstanceTypes, err = instanceTypes(np); err != nil {
			pool.Unavailable = err.Error()
			snap.TypesFailed = append(snap.TypesFailed, np.Name)
		} else if np.IsStatic() {
			// Its nodes are kept by count (package static), never made for pods; its
			// nodes still take pods, as any node does.
			pool.Unavailable = StaticUnavailable
		} else if ready, why := NodePoolReady(np); !ready && !(opts.Offline && neverReconciled(np)) {
			pool.Unavailable = why
		}
		if cost, err := PoolNodeCost(np, opts.NodeCost); err != nil {
			if pool.Unavailable == "" {
				pool.Unavailable = err.Error()
			}
		} else {
			pool.NodeCost = cost
		}
		typesOf[np.Name] = TypesByName(pool.InstanceTypes)
		snap.NodePools = append(snap.NodePools, np)
		in.NodePools = append(in.NodePools, pool)
	}
	nodes, claims := objs.Nodes, objs.NodeClaims
	if opts.Offline {
		var standIns []*v1.NodeClaim
		nodes, standIns = standInClaims(nodes, claims, poolOf)
		claims = append(slices.Clone(claims), standIns...)
	}
	sorted := sortNodes(nodes, claims, typesOf)
	for _, n := range sorted.leaving {
		// Going away: its pods need a place now, before they are evicted, so that
		// their new node is on its way while the old one drains.
		for _, p := range bound[n.Name] {
			if scheduling.Reschedulable(p) {
				cp := *p
				// Planned as the pod that will replace it: unbound, not terminating.
				cp.Spec.NodeName, cp.DeletionTimestamp = "", nil
				in.Pods = append(in.Pods, &cp)
			}
		}
	}
	for _, n := range sorted.up {
		in.Nodes = append(in.Nodes, &scheduling.Node{Node: n, Pods: bound[n.Name]})
	}
	for _, n := range sorted.launching {
		in.Nodes = append(in.Nodes, &scheduling.Node{Node: n, Launching: true})
	}
	for _, pool := range in.NodePools {
		pool.Draining = countedDraining(pool.NodePool, sorted.draining[pool.NodePool.Name])
	}
	snap.Claims = objs.NodeClaims
	for _, ds := range objs.DaemonSets {
		p := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = ds.Name, ds.Namespace
		in.DaemonSets = append(in.DaemonSets, p)
	}
	in.PersistentVolumeClaims = objs.PersistentVolumeClaims
	in.PersistentVolumes = objs.PersistentVolumes
	in.StorageClasses = objs.StorageClasses
	in.CSINodes = objs.CSINodes
	in.Namespaces = objs.Namespaces
	snap.PDBs = objs.PodDisruptionBudgets
	snap.Buffers = ResolveBuffers(objs)
	slices.SortFunc(in.Pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return snap
}

// provisionableOffline is Provisionable for a pod no kube-scheduler has seen.
func provisionableOffline(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && p.DeletionTimestamp == nil && !scheduling.IsTerminal(p) && !scheduling.IsDaemonSetPod(p)
}

// neverReconciled: a NodePool from a manifest, which no controller has looked at.
func neverReconciled(np *v1.NodePool) bool {
	return meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady) == nil
}

// standInClaims describe, for manifests, the claims of Nodes labelled with a
// NodePool that have none in the input: initialized as the node's
// karpenter.sh/initialized label says, with the NodePool's startup taints, so a node
// still coming up is seen as it will be, as the controller sees it. Nodes without a
// provider ID get one (in a copy) to pair them with their stand-in.
func standInClaims(nodes []*corev1.Node, claims []*v1.NodeClaim, pools map[string]*v1.NodePool) ([]*corev1.Node, []*v1.NodeClaim) {
	known := map[string]bool{}
	for _, nc := range claims {
		known[nc.Status.ProviderID] = true
	}
	outNodes := make([]*corev1.Node, 0, len(nodes))
	var out []*v1.NodeClaim
	for _, n := range nodes {
		poolName, managed := n.Labels[v1.NodePoolLabelKey]
		if !managed || n.Spec.ProviderID != "" && known[n.Spec.ProviderID] {
			outNodes = append(outNodes, n)
			continue
		}
		if n.Spec.ProviderID == "" {
			n = n.DeepCopy()
			n.Spec.ProviderID = "manifest:///" + n.Name
		}
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
		nc.Status.ProviderID = n.Spec.ProviderID
		if np := pools[poolName]; np != nil {
			nc.Spec.StartupTaints = np.Spec.Template.Spec.StartupTaints
		}
		if n.Labels[v1.NodeInitializedLabelKey] == "true" {
			nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue}}
		}
		outNodes = append(outNodes, n)
		out = append(out, nc)
	}
	return outNodes, out
}

// sorted is the cluster's nodes and claims by what they are to a plan.
type sorted struct {
	// up are the nodes pods may go to, as they will be once up (see
	// withoutStartupTaints); launching, the claims not registered yet as the nodes
	// they will be.
	up, launching []*corev1.Node
	// leaving are the nodes going away (the node or its claim being deleted).
	leaving []*corev1.Node
	// draining is, by NodePool, the capacity of the claims going away: it counts
	// against the pool's limits until the claim is gone, which is once its
	// instance is.
	draining map[string]corev1.ResourceList
}

// sortNodes sorts nodes and claims; types are each pool's instance types by name,
// for the reservations of claims not launched yet.
func sortNodes(nodes []*corev1.Node, claims []*v1.NodeClaim, types map[string]map[string]*scheduling.InstanceType) sorted {
	out := sorted{draining: map[string]corev1.ResourceList{}}
	claimOf := map[string]*v1.NodeClaim{}
	for _, nc := range claims {
		if id := nc.Status.ProviderID; id != "" {
			claimOf[id] = nc
		}
	}
	registered := map[string]*corev1.Node{}
	for _, n := range nodes {
		registered[n.Spec.ProviderID] = n
		nc := claimOf[n.Spec.ProviderID]
		if n.DeletionTimestamp != nil || nc != nil && nc.DeletionTimestamp != nil {
			out.leaving = append(out.leaving, n)
			if nc != nil {
				add(out.draining, nc.Labels[v1.NodePoolLabelKey], limitCapacity(n))
			}
			continue
		}
		if nc != nil && !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			n = withoutStartupTaints(n, nc)
		} else {
			n = withoutStaleReadinessTaints(n)
		}
		out.up = append(out.up, n)
	}
	for _, nc := range claims {
		if nc.Status.ProviderID != "" && registered[nc.Status.ProviderID] != nil {
			continue // counted with its node
		}
		node := reservingNode(nc, types[nc.Labels[v1.NodePoolLabelKey]])
		if nc.DeletionTimestamp != nil {
			add(out.draining, nc.Labels[v1.NodePoolLabelKey], limitCapacity(node))
			continue
		}
		out.launching = append(out.launching, node)
	}
	return out
}

// reservingNode is the node a claim not registered yet will be, with the capacity
// it holds against its pool's limits: its instance's once launched, else its
// reservation (see Reservation); and, before launch, the room of the smallest of
// its instance-type options (see leastAllocatable).
func reservingNode(nc *v1.NodeClaim, types map[string]*scheduling.InstanceType) *corev1.Node {
	node := LaunchingNode(nc)
	if len(nc.Status.Capacity) == 0 {
		if reserved := Reservation(nc, types); len(reserved) > 0 {
			node.Status.Capacity = reserved
		}
	}
	if len(nc.Status.Allocatable) == 0 {
		if least := leastAllocatable(nc, types); len(least) > 0 {
			node.Status.Allocatable = least
		}
	}
	return node
}

// leastAllocatable is the room a claim not launched yet will have whichever of its
// instance-type options the cloud launches: for each resource, the least any
// option has, and never less than the claim's requests (the room its plan holds);
// nil when an option is not among types. Its requests alone hid the rest of
// that room (and counted 110 pods where a small type holds 4): pods of a batch
// planned a second after the last got new claims the last one's nodes had room
// for, once launched.
func leastAllocatable(nc *v1.NodeClaim, types map[string]*scheduling.InstanceType) corev1.ResourceList {
	var out corev1.ResourceList
	for _, r := range nc.Spec.Requirements {
		if r.Key != v1.LabelInstanceType || r.Operator != v1.NodeSelectorOpIn {
			continue
		}
		for _, option := range r.Values {
			it, ok := types[option]
			if !ok {
				return nil
			}
			alloc := it.Allocatable()
			if out == nil {
				out = alloc
				continue
			}
			for name, have := range out {
				if q, ok := alloc[name]; !ok {
					delete(out, name)
				} else if q.Cmp(have) < 0 {
					out[name] = q
				}
			}
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		if have, ok := out[name]; out != nil && (!ok || have.Cmp(q) < 0) {
			out[name] = q
		}
	}
	return out
}

// ClaimUsage is what a claim not registered yet counts against its NodePool's
// limits, as a snapshot counts it; types are the pool's instance types by name.
func ClaimUsage(nc *v1.NodeClaim, types map[string]*scheduling.InstanceType) corev1.ResourceList {
	return limitCapacity(reservingNode(nc, types))
}

// TypesByName indexes instance types by name.
func TypesByName(types []*scheduling.InstanceType) map[string]*scheduling.InstanceType {
	out := make(map[string]*scheduling.InstanceType, len(types))
	for _, it := range types {
		out[it.Name] = it
	}
	return out
}

// limitCapacity is what a node counts against its pool's limits, as the scheduling
// engine counts it: its capacity, else its allocatable; and one node.
func limitCapacity(n *corev1.Node) corev1.ResourceList {
	out := n.Status.Capacity.DeepCopy()
	if len(out) == 0 {
		out = n.Status.Allocatable.DeepCopy()
	}
	if out == nil { // a Node with no status yet
		out = corev1.ResourceList{}
	}
	out[resourceNodes] = *resource.NewQuantity(1, resource.DecimalSI)
	return out
}

// resourceNodes is the count of nodes a NodePool may limit.
const resourceNodes corev1.ResourceName = "nodes"

// add adds list to sums[pool].
func add(sums map[string]corev1.ResourceList, pool string, list corev1.ResourceList) {
	if pool == "" {
		return
	}
	sum := sums[pool]
	if sum == nil {
		sum = corev1.ResourceList{}
		sums[pool] = sum
	}
	for name, q := range list {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
}

// countedDraining is what the scheduling engine is to count of a pool's draining
// capacity: the count of nodes only where the pool limits it, as the engine counts
// nodes only then.
func countedDraining(np *v1.NodePool, draining corev1.ResourceList) corev1.ResourceList {
	if _, ok := np.Spec.Limits[resourceNodes]; ok || len(draining) == 0 {
		return draining
	}
	out := draining.DeepCopy()
	delete(out, resourceNodes)
	return out
}

// NodePoolReady reports whether new nodes may come from the NodePool: its Ready
// condition is True for its current generation (a changed template is checked
// again before use). Otherwise it says why not.
func NodePoolReady(np *v1.NodePool) (bool, string) {
	c := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady)
	switch {
	case c == nil:
		return false, "not Ready yet (no Ready condition)"
	case c.Status != metav1.ConditionTrue:
		return false, fmt.Sprintf("not Ready (%s): %s", c.Reason, c.Message)
	case c.ObservedGeneration != np.Generation:
		return false, fmt.Sprintf("not Ready yet: generation %d not validated", np.Generation)
	}
	return true, ""
}

// Usage is, by NodePool, what counts against its limits now: its nodes up, its
// claims launching (their reservations) and its claims going away, counted as a
// snapshot counts them. pools supply the instance types of the reservations. It
// reads the cache afresh, for a check just before creating claims.
func (c *Cluster) Usage(ctx context.Context, pools []*scheduling.NodePool) (map[string]corev1.ResourceList, error) {
	var nodes corev1.NodeList
	var claims v1.NodeClaimList
	for _, list := range []client.ObjectList{&nodes, &claims} {
		if err := c.kube.List(ctx, list, read); err != nil {
			return nil, fmt.Errorf("listing %T: %w", list, err)
		}
	}
	types := map[string]map[string]*scheduling.InstanceType{}
	for _, p := range pools {
		types[p.NodePool.Name] = TypesByName(p.InstanceTypes)
	}
	return usage(sortNodes(pointers(nodes.Items), pointers(claims.Items), types)), nil
}

// usage sums what the sorted nodes and claims count against each pool's limits.
func usage(s sorted) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for pool, list := range s.draining {
		add(out, pool, list)
	}
	for _, nodes := range [][]*corev1.Node{s.up, s.launching} {
		for _, n := range nodes {
			add(out, n.Labels[v1.NodePoolLabelKey], limitCapacity(n))
		}
	}
	return out
}

// cloudUninitializedTaint is on a Node until the cloud controller manager has
// initialized it (k8s.io/cloud-provider's TaintExternalCloudProvider).
const cloudUninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// withoutStartupTaints describes a node still coming up as it will be once up: the
// taints of registration, readiness, the cloud controller's initialization and the
// claim's startup taints are passing, and
// pods provisioned for it would otherwise be provisioned for again meanwhile.
func withoutStartupTaints(n *corev1.Node, nc *v1.NodeClaim) *corev1.Node {
	passing := func(t corev1.Taint) bool {
		if t.Key == v1.UnregisteredNoExecuteTaint.Key || t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable ||
			t.Key == cloudUninitializedTaint {
			return true
		}
		for _, st := range nc.Spec.StartupTaints {
			if st.Key == t.Key && st.Effect == t.Effect {
				return true
			}
		}
		return false
	}
	if !slices.ContainsFunc(n.Spec.Taints, passing) {
		return n
	}
	cp := n.DeepCopy()
	cp.Spec.Taints = slices.DeleteFunc(cp.Spec.Taints, passing)
	return cp
}

// withoutStaleReadinessTaints drops the not-ready and unreachable taints of a node
// whose Ready condition is True: the node lifecycle controller takes them off
// within its monitor period (5s by default), and the kube-scheduler binds to the
// node once it has. The cloud provider's uninitialized taint goes the same way
// (the cloud controller manager removes it once it has labelled the node), so a
// Ready node that still has it is in flight, not closed. Counting a node that is up as closed meanwhile would plan a
// new node for pods it has room for (seen at scale: a pod displaced to a node
// coming up, replanned while its planned node was in that window).
func withoutStaleReadinessTaints(n *corev1.Node) *corev1.Node {
	stale := func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable || t.Key == cloudUninitializedTaint
	}
	if !slices.ContainsFunc(n.Spec.Taints, stale) || !nodeReady(n) {
		return n
	}
	cp := n.DeepCopy()
	cp.Spec.Taints = slices.DeleteFunc(cp.Spec.Taints, stale)
	return cp
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Provisionable reports a pod Tailor should find room for: pending, marked
// unschedulable by the kube-scheduler, not finished or being deleted, and not a
// DaemonSet's (those follow nodes rather than cause them).
func Provisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || scheduling.IsTerminal(p) || scheduling.IsDaemonSetPod(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Reservation is what a claim that has not launched yet counts against its
// NodePool's limits: for each resource, the most any of its instance-type options
// has. The plan reserved the capacity of the cheapest option and kept only options
// no larger in a limited resource, so this is that reservation; counting only the
// requests the claim was made for would let the next batch, planning before the
// launch, go past a limit. types are the NodePool's instance types by name.
func Reservation(nc *v1.NodeClaim, types map[string]*scheduling.InstanceType) corev1.ResourceList {
	var options []string
	for _, r := range nc.Spec.Requirements {
		if r.Key == v1.LabelInstanceType && r.Operator == v1.NodeSelectorOpIn {
			options = r.Values
		}
	}
	out := corev1.ResourceList{}
	for _, option := range options {
		it, ok := types[option]
		if !ok {
			continue
		}
		for name, q := range it.Capacity {
			if have, ok := out[name]; !ok || q.Cmp(have) > 0 {
				out[name] = q
			}
		}
	}
	return out
}

// LaunchingNode describes the node a NodeClaim will become: the labels its
// requirements settle, its taints, and the room it was sized for (its allocatable
// once launched, else the requests it was created for).
func LaunchingNode(nc *v1.NodeClaim) *corev1.Node {
	labels := map[string]string{}
	for _, r := range nc.Spec.Requirements {
		if r.Operator == v1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	name := nc.Status.NodeName
	if name == "" {
		name = "nodeclaim/" + nc.Name
	}
	labels[corev1.LabelHostname] = name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.NodeSpec{Taints: nc.Spec.Taints}}
	alloc := nc.Status.Allocatable
	if len(alloc) == 0 {
		alloc = nc.Spec.Resources.Requests.DeepCopy()
		if alloc == nil { // a claim made without requests (not by Tailor)
			alloc = corev1.ResourceList{}
		}
		if _, ok := alloc[corev1.ResourcePods]; !ok {
			alloc[corev1.ResourcePods] = resource.MustParse("110")
		}
	}
	node.Status.Allocatable = alloc
	node.Status.Capacity = nc.Status.Capacity
	if len(node.Status.Capacity) == 0 {
		node.Status.Capacity = alloc
	}
	return node
}

// PoolNodeCost is what each of the pool's nodes costs besides its instance: the
// cloud's share (cloud, when set: volumes, addresses) and the pool's own per-node
// cost (annotation tailor.sh/per-node-cost). An unreadable annotation is an error
// naming it: the pool launches nothing until it is fixed, rather than plan with a
// cost the operator did not mean.
func PoolNodeCost(np *v1.NodePool, cloud func(*v1.NodePool) (scheduling.NodeCost, error)) (scheduling.NodeCost, error) {
	var cost scheduling.NodeCost
	if cloud != nil {
		var err error
		if cost, err = cloud(np); err != nil {
			return scheduling.NodeCost{}, fmt.Errorf("its per-node costs cannot be read: %w", err)
		}
	}
	if s, ok := np.Annotations[v1alpha1.PerNodeCostAnnotationKey]; ok {
		v, err := v1alpha1.ParsePerNodeCost(s)
		if err != nil {
			return scheduling.NodeCost{}, fmt.Errorf("annotation %s: %w", v1alpha1.PerNodeCostAnnotationKey, err)
		}
		cost.PerNode += v
	}
	return cost, nil
}
