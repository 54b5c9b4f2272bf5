// Package state is Tailor's view of the cluster, read from the informer cache: the
// nodes and the pods bound to them, the NodeClaims still launching, the pods the
// kube-scheduler could not place, NodePools, DaemonSets, volumes and
// PodDisruptionBudgets. Its product is the scheduling engine's input; it gives none
// before its informers hold their initial lists.
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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Cluster reads the cluster through a (cache-backed) reader.
type Cluster struct {
	kube   client.Reader
	pods   PodStore
	synced []Syncer
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
}

// Kinds are the kinds a snapshot reads. Start the cache's informers for them with
// the controller: an informer starts on first read otherwise, and the first batch
// would wait for its initial lists.
func Kinds() []client.Object {
	return []client.Object{&corev1.Pod{}, &corev1.Node{}, &v1.NodeClaim{}, &v1.NodePool{}, &appsv1.DaemonSet{},
		&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &storagev1.StorageClass{}, &corev1.Namespace{},
		&policyv1.PodDisruptionBudget{}}
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
	var namespaces corev1.NamespaceList
	var pdbs policyv1.PodDisruptionBudgetList
	for _, list := range []client.ObjectList{&nodes, &claims, &pools, &daemonSets, &pvcs, &pvs, &classes, &namespaces, &pdbs} {
		if err := c.kube.List(ctx, list, read); err != nil {
			return nil, fmt.Errorf("listing %T: %w", list, err)
		}
	}
	in := &scheduling.Input{}
	snap := &Snapshot{Input: in}
	bound := map[string][]*corev1.Pod{}
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "":
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		case Provisionable(p):
			in.Pods = append(in.Pods, p)
		}
	}
	claimOf := map[string]*v1.NodeClaim{}
	for i := range claims.Items {
		if id := claims.Items[i].Status.ProviderID; id != "" {
			claimOf[id] = &claims.Items[i]
		}
	}
	registered := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		registered[n.Spec.ProviderID] = true
		if nc := claimOf[n.Spec.ProviderID]; n.DeletionTimestamp != nil || nc != nil && nc.DeletionTimestamp != nil {
			// Going away: its pods need a place now, before they are evicted, so
			// that their new node is on its way while the old one drains.
			for _, p := range bound[n.Name] {
				if scheduling.Reschedulable(p) {
					cp := *p
					cp.Spec.NodeName = ""
					in.Pods = append(in.Pods, &cp)
				}
			}
			continue
		}
		if nc := claimOf[n.Spec.ProviderID]; nc != nil && !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			n = withoutStartupTaints(n, nc)
		}
		in.Nodes = append(in.Nodes, &scheduling.Node{Node: n, Pods: bound[n.Name]})
	}
	// Each pool's types by name, for the reservations of its launching claims.
	typesOf := map[string]map[string]*scheduling.InstanceType{}
	for i := range pools.Items {
		np := &pools.Items[i]
		if np.DeletionTimestamp != nil {
			continue
		}
		pool := &scheduling.NodePool{NodePool: np}
		// One broken NodePool (its NodeClass missing, say) must not stop the others.
		if pool.InstanceTypes, err = instanceTypes(np); err != nil {
			pool.Unavailable = err.Error()
		}
		byName := make(map[string]*scheduling.InstanceType, len(pool.InstanceTypes))
		for _, it := range pool.InstanceTypes {
			byName[it.Name] = it
		}
		typesOf[np.Name] = byName
		snap.NodePools = append(snap.NodePools, np)
		in.NodePools = append(in.NodePools, pool)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		snap.Claims = append(snap.Claims, nc)
		if nc.DeletionTimestamp != nil || (nc.Status.ProviderID != "" && registered[nc.Status.ProviderID]) {
			continue
		}
		node := LaunchingNode(nc)
		if len(nc.Status.Capacity) == 0 {
			if reserved := reservedCapacity(nc, typesOf[nc.Labels[v1.NodePoolLabelKey]]); len(reserved) > 0 {
				node.Status.Capacity = reserved
			}
		}
		in.Nodes = append(in.Nodes, &scheduling.Node{Node: node, Launching: true})
	}
	for i := range daemonSets.Items {
		ds := &daemonSets.Items[i]
		p := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = ds.Name, ds.Namespace
		in.DaemonSets = append(in.DaemonSets, p)
	}
	for i := range pvcs.Items {
		in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, &pvcs.Items[i])
	}
	for i := range pvs.Items {
		in.PersistentVolumes = append(in.PersistentVolumes, &pvs.Items[i])
	}
	for i := range classes.Items {
		in.StorageClasses = append(in.StorageClasses, &classes.Items[i])
	}
	for i := range namespaces.Items {
		in.Namespaces = append(in.Namespaces, &namespaces.Items[i])
	}
	for i := range pdbs.Items {
		snap.PDBs = append(snap.PDBs, &pdbs.Items[i])
	}
	slices.SortFunc(in.Pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return snap, nil
}

// withoutStartupTaints describes a node still coming up as it will be once up: the
// taints of registration, readiness and the claim's startup taints are passing, and
// pods provisioned for it would otherwise be provisioned for again meanwhile.
func withoutStartupTaints(n *corev1.Node, nc *v1.NodeClaim) *corev1.Node {
	passing := func(t corev1.Taint) bool {
		if t.Key == v1.UnregisteredNoExecuteTaint.Key || t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
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

// reservedCapacity is what a claim that has not launched yet counts against its
// NodePool's limits: for each resource, the most any of its instance-type options
// has. The plan reserved the capacity of the cheapest option and kept only options
// no larger in a limited resource, so this is that reservation; counting only the
// requests the claim was made for would let the next batch, planning before the
// launch, go past a limit. types are the NodePool's instance types by name.
func reservedCapacity(nc *v1.NodeClaim, types map[string]*scheduling.InstanceType) corev1.ResourceList {
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
