// Package sim is the simulated cloud, Tailor's default provider: it sells the
// instance types of an embedded catalog, keeps its inventory as SimInstance objects
// in the cluster, and turns each instance into a Node (played by kwok) after the
// NodeClass's registration delay. Insufficient capacity, launch delays and spot
// interruptions can be injected through the SimNodeClass and the SimInstances, and
// a NodeClass's latency model (see LatencyModel) times launches, registrations and
// API calls as a real cloud's, failing some launches for insufficient capacity.
package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// ProviderIDPrefix starts every provider ID of the simulated cloud.
const ProviderIDPrefix = "sim://"

// InstanceLabel names, on a Node, the SimInstance behind it.
const InstanceLabel = v1alpha1.Group + "/instance"

// NodeClaimLabel names, on a SimInstance, the claim it was launched for.
const NodeClaimLabel = v1alpha1.Group + "/nodeclaim"

// CloudProvider is the simulated cloud.
type CloudProvider struct {
	kube client.Client
	// reader reads past kube's cache, where a launch must see what the API
	// server has (see Create).
	reader client.Reader
	clock  clock.Clock

	mu sync.Mutex
	// catalogs holds instance types by catalog and kubelet settings.
	catalogs map[string][]*scheduling.InstanceType
	// draws numbers each NodeClass's launches and API calls for its latency
	// model, and holds the offerings that model ran out of capacity.
	draws *draws
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=tailor.sh,resources=siminstances,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=tailor.sh,resources=simnodeclasses,verbs=get;list;watch

// New returns the simulated cloud, keeping its inventory through kube.
func New(kube client.Client, clk clock.Clock) *CloudProvider {
	return &CloudProvider{kube: kube, reader: kube, clock: clk, catalogs: map[string][]*scheduling.InstanceType{}, draws: newDraws()}
}

// WithAPIReader has the cloud read an instance that the API server says exists
// through reader (a manager's API reader) when kube's cache does not show it yet.
func (c *CloudProvider) WithAPIReader(reader client.Reader) *CloudProvider {
	c.reader = reader
	return c
}

// NodeClassKinds is tailor.sh/SimNodeClass.
func (c *CloudProvider) NodeClassKinds() []schema.GroupKind {
	return []schema.GroupKind{{Group: v1alpha1.Group, Kind: "SimNodeClass"}}
}

// Name is "sim".
func (c *CloudProvider) Name() string { return "sim" }

// ProviderIDScheme is "sim", ProviderIDPrefix's.
func (c *CloudProvider) ProviderIDScheme() string { return strings.TrimSuffix(ProviderIDPrefix, "://") }

// instanceTypes are the types of a NodeClass's catalog as its nodes have them: EKS
// nodes under its kubelet settings. They are kept per catalog and settings.
func (c *CloudProvider) instanceTypes(nc *v1alpha1.SimNodeClass) ([]*scheduling.InstanceType, error) {
	name := nc.Spec.Catalog
	if name != "aws-us-east-1" && name != "" {
		return nil, fmt.Errorf("unknown catalog %q", name)
	}
	settings, err := json.Marshal(nc.Spec.Kubelet)
	if err != nil {
		return nil, err
	}
	key := "aws-us-east-1/" + string(settings)
	c.mu.Lock()
	defer c.mu.Unlock()
	if types, ok := c.catalogs[key]; ok {
		return types, nil
	}
	listed, err := catalog.EmbeddedAWSUSEast1()
	if err != nil {
		return nil, err
	}
	types, err := listed.InstanceTypes(NodeModel(nc))
	if err != nil {
		return nil, fmt.Errorf("SimNodeClass %s: %w", nc.Name, err)
	}
	c.catalogs[key] = types
	return types, nil
}

// NodeModel is how the nodes of a NodeClass keep back room: as EKS nodes, with its
// kubelet settings.
func NodeModel(nc *v1alpha1.SimNodeClass) allocatable.EKS {
	m := allocatable.DefaultEKS()
	if k := nc.Spec.Kubelet; k != nil {
		m.Kubelet = allocatable.Kubelet{MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore, SystemReserved: k.SystemReserved,
			KubeReserved: k.KubeReserved, EvictionHard: thresholds(k.EvictionHard), EvictionSoft: thresholds(k.EvictionSoft)}
	}
	return m
}

func thresholds(in map[string]v1alpha1.EvictionThreshold) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = string(v)
	}
	return out
}

func (c *CloudProvider) nodeClass(ctx context.Context, ref *v1.NodeClassReference) (*v1alpha1.SimNodeClass, error) {
	if ref == nil || ref.Group != v1alpha1.Group || ref.Kind != "SimNodeClass" {
		return nil, &cloudprovider.NodeClassNotReadyError{Kind: refKind(ref), Name: refName(ref), Reason: "the sim provider serves only tailor.sh SimNodeClasses"}
	}
	nc := &v1alpha1.SimNodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &cloudprovider.NodeClassNotReadyError{Kind: ref.Kind, Name: ref.Name, Reason: "not found"}
		}
		return nil, err
	}
	return nc, nil
}

func refKind(ref *v1.NodeClassReference) string {
	if ref == nil {
		return "NodeClass"
	}
	return ref.Group + "/" + ref.Kind
}

func refName(ref *v1.NodeClassReference) string {
	if ref == nil {
		return "(none)"
	}
	return ref.Name
}

// InstanceTypes returns the NodeClass's catalog. Like a real cloud's price list it
// does not know which offerings are out of capacity: launches find out, and fail
// with InsufficientCapacityError (see UnavailableOfferings in the NodeClass).
func (c *CloudProvider) InstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error) {
	nc, err := c.nodeClass(ctx, pool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	return c.instanceTypes(nc)
}

func unavailable(nc *v1alpha1.SimNodeClass, typeName string, o scheduling.Offering) bool {
	for _, u := range nc.Spec.UnavailableOfferings {
		if (u.InstanceType == "" || u.InstanceType == typeName) && (u.Zone == "" || u.Zone == o.Zone) &&
			(u.CapacityType == "" || u.CapacityType == o.CapacityType) {
			return true
		}
	}
	return false
}

// Create launches the cheapest available offering the claim's requirements allow,
// as a SimInstance that registers its Node after the NodeClass's delay.
//
// Launching is idempotent per claim, as a cloud API's client token makes it: the
// instance is named after the claim's UID, so a launch retried (after a crash, a
// timeout, a lost answer or a failed write) gets the first instance back, from the
// API server if the cache does not show it yet, and never makes a second.
func (c *CloudProvider) Create(ctx context.Context, claim *v1.NodeClaim) (*v1.NodeClaim, error) {
	if claim.UID == "" {
		return nil, fmt.Errorf("nodeclaim %s has no metadata.uid, which names its instance: create the NodeClaim before launching it", claim.Name)
	}
	name := instanceName(claim.UID)
	// Most retries find the instance in the cache, before waiting out a launch delay.
	if inst := (&v1alpha1.SimInstance{}); c.kube.Get(ctx, client.ObjectKey{Name: name}, inst) == nil {
		return c.existing(ctx, inst, claim)
	}
	nc, err := c.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	types, err := c.instanceTypes(nc)
	if err != nil {
		return nil, err
	}
	reqs, err := scheduling.FromNodePool(claim.Spec.Requirements, nil)
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: %w", claim.Name, err)
	}
	model := ModelOf(nc)
	now := c.clock.Now()
	var best *scheduling.InstanceType
	var offer scheduling.Offering
	var tried []cloudprovider.UnavailableOffering
	for _, it := range types {
		if _, ok := reqs.Intersects(it.Requirements); !ok {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !allows(reqs, v1.LabelZone, o.Zone) || !allows(reqs, v1.CapacityTypeLabelKey, o.CapacityType) {
				continue
			}
			if unavailable(nc, it.Name, o) || c.draws.out(outKey{nc.Name, it.Name, o.Zone, o.CapacityType}, now) {
				tried = append(tried, cloudprovider.UnavailableOffering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType})
				continue
			}
			if best == nil || o.Price < offer.Price || (o.Price == offer.Price && it.Name < best.Name) {
				best, offer = it, o
			}
		}
	}
	if best == nil {
		return nil, &cloudprovider.InsufficientCapacityError{Offerings: tried}
	}
	launch := model.Launch(c.draws.nextLaunch(nc.Name))
	if err := c.sleep(ctx, launch.Delay); err != nil {
		return nil, err
	}
	if launch.OutOfCapacity {
		// The offering ran out while the call was made: the launch fails, naming
		// it, and it stays out for a while; no instance is left behind.
		ran := cloudprovider.UnavailableOffering{InstanceType: best.Name, Zone: offer.Zone, CapacityType: offer.CapacityType}
		c.draws.runOut(outKey{nc.Name, ran.InstanceType, ran.Zone, ran.CapacityType}, c.clock.Now().Add(OutOfCapacityFor))
		return nil, &cloudprovider.InsufficientCapacityError{Offerings: append(tried, ran)}
	}
	inst := &v1alpha1.SimInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: claim.Labels[v1.NodePoolLabelKey], NodeClaimLabel: claim.Name}},
		Spec: v1alpha1.SimInstanceSpec{NodeClaim: claim.Name, NodeClass: nc.Name, InstanceType: best.Name, Zone: offer.Zone,
			CapacityType: offer.CapacityType, ImageID: nc.Spec.ImageID, Price: strconv.FormatFloat(offer.Price, 'f', -1, 64),
			RegisterAfter: metav1.NewTime(c.clock.Now().Add(launch.Registration))},
	}
	if err := c.kube.Create(ctx, inst); apierrors.IsAlreadyExists(err) {
		found := &v1alpha1.SimInstance{}
		if err := c.reader.Get(ctx, client.ObjectKey{Name: name}, found); err != nil {
			// A cached reader that lags, or the instance went meanwhile: the retry sees.
			return nil, fmt.Errorf("nodeclaim %s: its instance %s exists but could not be read: %w", claim.Name, name, err)
		}
		return c.existing(ctx, found, claim)
	} else if err != nil {
		return nil, fmt.Errorf("launching %s for nodeclaim %s: %w", best.Name, claim.Name, err)
	}
	return c.describe(inst, best, claim), nil
}

// sleep waits d, or until ctx ends.
func (c *CloudProvider) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.clock.After(d):
		return nil
	}
}

// slowAPI waits as long as the named NodeClass's latency model has its next call
// take; a NodeClass that cannot be read answers at once.
func (c *CloudProvider) slowAPI(ctx context.Context, nodeClass string) error {
	nc := &v1alpha1.SimNodeClass{}
	if nodeClass == "" || c.kube.Get(ctx, client.ObjectKey{Name: nodeClass}, nc) != nil {
		return nil
	}
	model := ModelOf(nc)
	if !model.Realistic {
		return nil
	}
	return c.sleep(ctx, model.API(c.draws.nextCall(nc.Name)))
}

// existing returns the instance already launched for the claim.
func (c *CloudProvider) existing(ctx context.Context, inst *v1alpha1.SimInstance, claim *v1.NodeClaim) (*v1.NodeClaim, error) {
	if inst.Spec.NodeClaim != claim.Name {
		return nil, fmt.Errorf("nodeclaim %s: instance %s, the name its UID gives, was launched for nodeclaim %s", claim.Name, inst.Name, inst.Spec.NodeClaim)
	}
	if inst.DeletionTimestamp != nil {
		return nil, fmt.Errorf("nodeclaim %s: its instance %s is terminating", claim.Name, inst.Name)
	}
	return c.describe(inst, c.typeOf(ctx, inst), claim), nil
}

func allows(reqs scheduling.Requirements, key, value string) bool {
	r, ok := reqs.Get(key)
	return !ok || r.Has(value)
}

// instanceName is the name of the instance launched for the claim with uid:
// 17 hex digits, as an EC2 instance ID has.
func instanceName(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return "i-" + hex.EncodeToString(sum[:])[:17]
}

// ProviderID is the provider ID of a SimInstance.
func ProviderID(inst *v1alpha1.SimInstance) string {
	return fmt.Sprintf("%s/%s/%s", ProviderIDPrefix, inst.Spec.Zone, inst.Name)
}

func instanceOf(providerID string) (string, bool) {
	if !strings.HasPrefix(providerID, ProviderIDPrefix+"/") {
		return "", false
	}
	i := strings.LastIndex(providerID, "/")
	return providerID[i+1:], true
}

// describe renders an instance as the NodeClaim a provider returns.
func (c *CloudProvider) describe(inst *v1alpha1.SimInstance, it *scheduling.InstanceType, claim *v1.NodeClaim) *v1.NodeClaim {
	out := &v1.NodeClaim{}
	if claim != nil {
		out = claim.DeepCopy()
	} else {
		out.Name = inst.Spec.NodeClaim
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range NodeLabels(inst, it) {
		out.Labels[k] = v
	}
	out.Status.ProviderID = ProviderID(inst)
	out.Status.ImageID = inst.Spec.ImageID
	if it != nil {
		out.Status.Capacity = it.Capacity.DeepCopy()
		out.Status.Allocatable = nodeAllocatable(it)
	}
	return out
}

// NodeLabels are the labels of the instance's Node: its type's, and where and how
// it was bought.
func NodeLabels(inst *v1alpha1.SimInstance, it *scheduling.InstanceType) map[string]string {
	labels := map[string]string{}
	if it != nil {
		for k, v := range it.Requirements.Labels() {
			labels[k] = v
		}
	}
	labels[v1.LabelInstanceType] = inst.Spec.InstanceType
	labels[v1.LabelZone] = inst.Spec.Zone
	labels[v1.CapacityTypeLabelKey] = inst.Spec.CapacityType
	labels[v1.LabelRegion] = strings.TrimRight(inst.Spec.Zone, "abcdefghijklmnopqrstuvwxyz")
	labels[InstanceLabel] = inst.Name
	return labels
}

// typeOf is the instance's type as its NodeClass has its nodes; an instance whose
// NodeClass is gone is taken for a default EKS node of the default catalog.
func (c *CloudProvider) typeOf(ctx context.Context, inst *v1alpha1.SimInstance) *scheduling.InstanceType {
	nc := &v1alpha1.SimNodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: inst.Spec.NodeClass}, nc); err != nil {
		nc = &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: inst.Spec.NodeClass}}
	}
	types, err := c.instanceTypes(nc)
	if err != nil {
		return nil
	}
	for _, it := range types {
		if it.Name == inst.Spec.InstanceType {
			return it
		}
	}
	return nil
}

// nodeAllocatable is what a node of the type reports allocatable: capacity less
// overhead, never below zero, as a kubelet reports it.
func nodeAllocatable(it *scheduling.InstanceType) corev1.ResourceList {
	return allocatable.Node{Capacity: it.Capacity, Overhead: it.Overhead}.Allocatable()
}

// Delete terminates the claim's instance.
func (c *CloudProvider) Delete(ctx context.Context, claim *v1.NodeClaim) error {
	name, ok := instanceOf(claim.Status.ProviderID)
	if !ok {
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: claim.Status.ProviderID}
	}
	if ref := claim.Spec.NodeClassRef; ref != nil {
		if err := c.slowAPI(ctx, ref.Name); err != nil {
			return err
		}
	}
	inst := &v1alpha1.SimInstance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.kube.Delete(ctx, inst); err != nil {
		if apierrors.IsNotFound(err) {
			return &cloudprovider.NodeClaimNotFoundError{ProviderID: claim.Status.ProviderID}
		}
		return fmt.Errorf("terminating %s: %w", name, err)
	}
	return nil
}

// Get describes one instance.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	name, ok := instanceOf(providerID)
	if !ok {
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	inst := &v1alpha1.SimInstance{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, inst); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
		}
		return nil, err
	}
	if err := c.slowAPI(ctx, inst.Spec.NodeClass); err != nil {
		return nil, err
	}
	return c.describe(inst, c.typeOf(ctx, inst), nil), nil
}

// List describes every instance.
func (c *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	list := &v1alpha1.SimInstanceList{}
	if err := c.kube.List(ctx, list); err != nil {
		return nil, err
	}
	out := make([]*v1.NodeClaim, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, c.describe(&list.Items[i], c.typeOf(ctx, &list.Items[i]), nil))
	}
	slices.SortFunc(out, func(a, b *v1.NodeClaim) int { return strings.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// IsDrifted reports an instance booted from an image its NodeClass no longer uses.
func (c *CloudProvider) IsDrifted(ctx context.Context, claim *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	nc, err := c.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return "", err
	}
	if claim.Status.ImageID != "" && claim.Status.ImageID != nc.Spec.ImageID {
		return "ImageDrift", nil
	}
	return "", nil
}
