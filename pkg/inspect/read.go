// Package inspect answers a platform engineer's questions about a live cluster
// from Tailor's point of view: what each node costs and who it is for (Cost), why
// a pod is pending or where it runs (ExplainPod), why a node exists and why it is
// not consolidated (ExplainNode). It reads the cluster once (Read), builds the
// scheduling engine's input the way the controller does (state.Build), prices
// nodes with the model the engine uses (offering price plus the NodePool's
// per-node costs) and asks the pure deciders (scheduling.Solve,
// disruption.Decide) what they would do. It never writes to the cluster.
package inspect

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/aws"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/cloudprovider/sim"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/simulate"
	"github.com/nodetailor/tailor/pkg/state"
)

// Options say where prices come from.
type Options struct {
	// Catalog, when set, prices every NodePool's nodes (tailor's --instance-types);
	// otherwise a SimNodeClass's nodes are priced from its own catalog, as the
	// simulated cloud sells them, and every other node from the embedded AWS
	// us-east-1 catalog.
	Catalog []*scheduling.InstanceType
	// Now is when the answers are for (consolidateAfter, do-not-disrupt until).
	Now time.Time
	// Pricing, when set, is what nodes are priced with, built on the client Read
	// is given: where the cluster is read again and again (tailor console), the
	// catalogs are then made once rather than on every read.
	Pricing *Pricing
}

// Pricing is what Read prices nodes with besides Options.Catalog: the embedded
// AWS us-east-1 catalog's instance types and the simulated cloud, which keeps a
// SimNodeClass's catalog once made. It is only read once made.
type Pricing struct {
	embedded []*scheduling.InstanceType
	cloud    *sim.CloudProvider
}

// NewPricing makes the embedded catalog's instance types and the simulated cloud
// (reading its SimNodeClasses through kube; it never writes).
func NewPricing(kube client.Client) (*Pricing, error) {
	embedded, err := catalog.EmbeddedAWSUSEast1()
	if err != nil {
		return nil, err
	}
	types, err := embedded.InstanceTypes(allocatable.DefaultEKS())
	if err != nil {
		return nil, err
	}
	return &Pricing{embedded: types, cloud: sim.New(kube, clock.RealClock{})}, nil
}

// Cluster is the cluster as read once: the objects, the engine's input built from
// them, and what the pods use where metrics.k8s.io says.
type Cluster struct {
	Objects  *state.Objects
	Snapshot *state.Snapshot
	// Usage is each pod's measured use by namespace/name; nil when
	// metrics.k8s.io is not served (UsageNote says why).
	Usage     map[string]corev1.ResourceList
	UsageNote string
	// Owners maps a ReplicaSet or Job (namespace/name) to the workload that owns
	// it ("Deployment/web"), for cost by workload.
	Owners map[string]string
	Now    time.Time
	// Notes say what could not be read or priced.
	Notes []string

	kube  client.Reader
	pools map[string]*scheduling.NodePool
	// claims indexes the NodeClaims by node name and provider ID (see claimOf).
	claims     claimIndex
	claimsOnce sync.Once
	// fallback prices nodes of no NodePool Tailor knows (the default catalog).
	fallback []*scheduling.InstanceType
}

// PodMetricsGVK is the kind metrics-server serves pods' usage as.
var PodMetricsGVK = schema.GroupVersionKind{Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetricsList"}

// Read lists what the answers need. kube must know Tailor's kinds; writes are never
// made (sim's provider is built on it only to read its NodeClasses). Lists ask for
// no deep copies (client.UnsafeDisableDeepCopy, which only a cache honours): the
// objects may be the cache's own, and nothing here or in what the Cluster
// answers writes to them.
func Read(ctx context.Context, kube client.Client, opts Options) (*Cluster, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	objs := &state.Objects{}
	var notes []string
	var pods corev1.PodList
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
	for _, list := range []client.ObjectList{&pods, &nodes, &claims, &pools, &daemonSets, &pvcs, &pvs, &classes, &csiNodes, &namespaces, &pdbs} {
		if err := kube.List(ctx, list, shared); err != nil {
			if meta.IsNoMatchError(err) && (list == client.ObjectList(&claims) || list == client.ObjectList(&pools)) {
				continue // no Karpenter API installed: every node is unmanaged
			}
			if apierrors.IsForbidden(err) && list != client.ObjectList(&pods) && list != client.ObjectList(&nodes) {
				// The user's RBAC hides it: answer without it, and say so.
				notes = append(notes, fmt.Sprintf("%s could not be listed (forbidden): the answers leave them out", kindOf(list)))
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", kindOf(list), err)
		}
	}
	objs.Pods, objs.Nodes, objs.NodeClaims, objs.NodePools = pointers(pods.Items), pointers(nodes.Items), pointers(claims.Items), pointers(pools.Items)
	objs.DaemonSets, objs.PersistentVolumeClaims, objs.PersistentVolumes = pointers(daemonSets.Items), pointers(pvcs.Items), pointers(pvs.Items)
	objs.StorageClasses, objs.CSINodes, objs.Namespaces, objs.PodDisruptionBudgets = pointers(classes.Items), pointers(csiNodes.Items), pointers(namespaces.Items), pointers(pdbs.Items)

	c := &Cluster{Objects: objs, Now: opts.Now, Notes: notes, kube: kube, pools: map[string]*scheduling.NodePool{}}
	pricing := opts.Pricing
	if pricing == nil {
		var err error
		if pricing, err = NewPricing(kube); err != nil {
			return nil, err
		}
	}
	c.fallback = pricing.embedded
	if opts.Catalog != nil {
		c.fallback = opts.Catalog
	}
	cloud := pricing.cloud
	types := func(np *v1.NodePool) ([]*scheduling.InstanceType, error) {
		if opts.Catalog != nil {
			return opts.Catalog, nil
		}
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Group == v1alpha1.Group && ref.Kind == "SimNodeClass" {
			return cloud.InstanceTypes(ctx, np)
		}
		return c.fallback, nil
	}
	costs := func(np *v1.NodePool) (scheduling.NodeCost, error) {
		ref := np.Spec.Template.Spec.NodeClassRef
		switch {
		case ref == nil:
			return scheduling.NodeCost{}, nil
		case ref.Group == v1alpha1.Group && ref.Kind == "SimNodeClass":
			return cloud.NodeCost(ctx, np)
		case ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass":
			nc := &awsv1.EC2NodeClass{}
			if err := kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
				return scheduling.NodeCost{}, fmt.Errorf("EC2NodeClass %s: %w", ref.Name, err)
			}
			// Whether the subnets map public addresses is EC2's to say; unasked,
			// an address is priced only when the class asks for one.
			return aws.NodeClassCost(nc, region(objs.Nodes, c.fallback), aws.PublicAddress(nc, false)), nil
		}
		return scheduling.NodeCost{}, nil
	}
	c.Snapshot = state.Build(objs, types, state.BuildOptions{NodeCost: costs})
	for _, p := range c.Snapshot.Input.NodePools {
		c.pools[p.NodePool.Name] = p
		if p.Unavailable != "" && p.InstanceTypes == nil {
			c.Notes = append(c.Notes, fmt.Sprintf("NodePool %s: %s; its nodes are not priced", p.NodePool.Name, p.Unavailable))
		}
	}
	c.Usage, c.UsageNote = readUsage(ctx, kube)
	c.Owners = readOwners(ctx, kube)
	return c, nil
}

// shared lists without deep copies where the client is a cache: the objects are
// only read.
var shared = client.UnsafeDisableDeepCopy

// region is the cluster's region, from its nodes' labels or else the catalog's zones.
func region(nodes []*corev1.Node, types []*scheduling.InstanceType) string {
	for _, n := range nodes {
		if r := n.Labels[v1.LabelRegion]; r != "" {
			return r
		}
	}
	return simulate.Region(types)
}

// readUsage sums each pod's containers' usage from metrics.k8s.io, when served.
func readUsage(ctx context.Context, kube client.Reader) (map[string]corev1.ResourceList, string) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(PodMetricsGVK)
	if err := kube.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, "metrics.k8s.io is not served (no metrics-server): pods are counted by their requests"
		}
		return nil, fmt.Sprintf("metrics.k8s.io could not be read (%v): pods are counted by their requests", err)
	}
	usage := map[string]corev1.ResourceList{}
	for _, item := range list.Items {
		containers, _, _ := unstructured.NestedSlice(item.Object, "containers")
		sum := corev1.ResourceList{}
		for _, ct := range containers {
			m, _ := ct.(map[string]any)
			u, _, _ := unstructured.NestedStringMap(m, "usage")
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				q, err := resource.ParseQuantity(u[string(r)])
				if err != nil {
					continue
				}
				cur := sum[r]
				cur.Add(q)
				sum[r] = cur
			}
		}
		usage[item.GetNamespace()+"/"+item.GetName()] = sum
	}
	return usage, ""
}

// readOwners maps ReplicaSets to their Deployments and Jobs to their CronJobs; a
// list that fails (no permission) leaves those pods under their direct owner.
func readOwners(ctx context.Context, kube client.Reader) map[string]string {
	owners := map[string]string{}
	var rss appsv1.ReplicaSetList
	if kube.List(ctx, &rss, shared) == nil {
		for _, rs := range rss.Items {
			if o := controllerOf(rs.OwnerReferences); o != nil {
				owners["ReplicaSet/"+rs.Namespace+"/"+rs.Name] = o.Kind + "/" + o.Name
			}
		}
	}
	var jobs batchv1.JobList
	if kube.List(ctx, &jobs, shared) == nil {
		for _, j := range jobs.Items {
			if o := controllerOf(j.OwnerReferences); o != nil {
				owners["Job/"+j.Namespace+"/"+j.Name] = o.Kind + "/" + o.Name
			}
		}
	}
	return owners
}

func controllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

func kindOf(list client.ObjectList) string {
	return fmt.Sprintf("%T", list)[len("*v1."):]
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
