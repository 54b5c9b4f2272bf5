package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/inspect"
)

// UsageEvery is how often pods' usage is read from metrics.k8s.io, which serves
// no watch (metrics-server itself scrapes every 15 to 60 seconds).
const UsageEvery = 30 * time.Second

// errReadOnly is what any write through the console's client gets.
var errReadOnly = errors.New("the console is read-only")

// watched are the kinds the console keeps informers for: what inspect.Read lists
// (the controller's snapshot, owners for cost by workload, NodeClasses for
// per-node costs) and events. The first five change the page; the rest are
// read when it is rebuilt.
func watched() []client.ObjectList {
	return []client.ObjectList{
		&corev1.NodeList{}, &corev1.PodList{}, &v1.NodeClaimList{}, &v1.NodePoolList{}, &corev1.EventList{},
		&appsv1.DaemonSetList{}, &corev1.PersistentVolumeClaimList{}, &corev1.PersistentVolumeList{},
		&storagev1.StorageClassList{}, &storagev1.CSINodeList{}, &corev1.NamespaceList{}, &policyv1.PodDisruptionBudgetList{},
		&appsv1.ReplicaSetList{}, &batchv1.JobList{}, &v1alpha1.SimNodeClassList{}, &awsv1.EC2NodeClassList{},
	}
}

// Source keeps the cluster in shared informers (controller-runtime's cache, one
// client-go SharedIndexInformer per kind) and hands out a client whose reads are
// served from them. Kinds the user may not list, or the API server does not serve,
// get no informer: reading them returns the error the API server gave, so
// inspect.Read leaves them out with a note as tailor cost does.
type Source struct {
	cache  cache.Cache
	direct client.Client
	// unreadable maps a list kind to why it cannot be read.
	unreadable map[schema.GroupVersionKind]error
	changed    chan struct{}

	// pricing prices nodes on every read: the embedded catalog and the simulated
	// cloud's catalogs are made once for the console's life.
	pricingOnce sync.Once
	pricing     *inspect.Pricing
	pricingErr  error

	mu        sync.Mutex
	usage     *unstructured.UnstructuredList
	usageErr  error
	usageRead time.Time
}

// NewSource checks which kinds the user may list (one List of one item each) and
// sets up informers for those; Start runs them.
func NewSource(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (*Source, error) {
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("reaching the cluster: %w", err)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, Mapper: direct.RESTMapper(), ReaderFailOnMissingInformer: true})
	if err != nil {
		return nil, err
	}
	s := &Source{cache: c, direct: direct, unreadable: map[schema.GroupVersionKind]error{}, changed: make(chan struct{}, 1)}
	for i, list := range watched() {
		gvk, err := direct.GroupVersionKindFor(list)
		if err != nil {
			return nil, err
		}
		if err := direct.List(ctx, list, client.Limit(1)); err != nil {
			if i < 2 {
				return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
			}
			s.unreadable[gvk] = err
			continue
		}
		obj, err := objectOf(scheme, gvk)
		if err != nil {
			return nil, err
		}
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", gvk.Kind, err)
		}
		if i < 5 {
			notify := func(any) { s.touch() }
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: notify, DeleteFunc: notify,
				UpdateFunc: func(any, any) { s.touch() }}); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// objectOf is the single object of a list kind (NodeList → Node).
func objectOf(scheme *runtime.Scheme, list schema.GroupVersionKind) (client.Object, error) {
	gvk := list.GroupVersion().WithKind(list.Kind[:len(list.Kind)-len("List")])
	o, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	return o.(client.Object), nil
}

func (s *Source) touch() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Changed receives when a Node, Pod, NodeClaim, NodePool or Event changed.
func (s *Source) Changed() <-chan struct{} { return s.changed }

// Start runs the informers until ctx ends and waits for their first lists.
func (s *Source) Start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.cache.Start(ctx) }()
	if !s.cache.WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("watching the cluster: %w", err)
		default:
			return fmt.Errorf("watching the cluster: %w", ctx.Err())
		}
	}
	return nil
}

// Notes say what the informers leave out.
func (s *Source) Notes() []string {
	var out []string
	for gvk, err := range s.unreadable {
		if meta.IsNoMatchError(err) {
			continue // a kind the cluster does not serve (EC2NodeClass on the sim cloud)
		}
		out = append(out, fmt.Sprintf("%s is not watched: %v", gvk.Kind, err))
	}
	return out
}

// Read is inspect.Read over the informers' caches. The objects are the caches'
// own, not copies (inspect.Read lists with client.UnsafeDisableDeepCopy): they
// are only read.
func (s *Source) Read(ctx context.Context, opts inspect.Options) (*inspect.Cluster, []*corev1.Event, error) {
	kube := &cachedClient{s: s}
	if opts.Pricing == nil {
		s.pricingOnce.Do(func() { s.pricing, s.pricingErr = inspect.NewPricing(kube) })
		if s.pricingErr != nil {
			return nil, nil, s.pricingErr
		}
		opts.Pricing = s.pricing
	}
	c, err := inspect.Read(ctx, kube, opts)
	if err != nil {
		return nil, nil, err
	}
	var events corev1.EventList
	if err := kube.List(ctx, &events, client.UnsafeDisableDeepCopy); err != nil {
		c.Notes = append(c.Notes, fmt.Sprintf("events could not be read: %v", err))
	}
	out := make([]*corev1.Event, len(events.Items))
	for i := range events.Items {
		out[i] = &events.Items[i]
	}
	return c, out, nil
}

// usageList serves metrics.k8s.io's pod usage, read at most every UsageEvery.
func (s *Source) usageList(ctx context.Context, list *unstructured.UnstructuredList, opts ...client.ListOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usageRead.IsZero() || time.Since(s.usageRead) > UsageEvery {
		fresh := &unstructured.UnstructuredList{}
		fresh.SetGroupVersionKind(list.GroupVersionKind())
		s.usageErr = s.direct.List(ctx, fresh, opts...)
		s.usage, s.usageRead = fresh, time.Now()
	}
	if s.usageErr != nil {
		return s.usageErr
	}
	s.usage.DeepCopyInto(list)
	return nil
}

// cachedClient reads from the Source's informers and refuses every write.
type cachedClient struct{ s *Source }

var _ client.Client = &cachedClient{}

func (k *cachedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := k.s.direct.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	if err, ok := k.s.unreadable[gvk.GroupVersion().WithKind(gvk.Kind+"List")]; ok {
		return err
	}
	return k.s.cache.Get(ctx, key, obj, opts...)
}

func (k *cachedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if u, ok := list.(*unstructured.UnstructuredList); ok && u.GroupVersionKind() == inspect.PodMetricsGVK {
		return k.s.usageList(ctx, u, opts...)
	}
	gvk, err := k.s.direct.GroupVersionKindFor(list)
	if err != nil {
		return err
	}
	if err, ok := k.s.unreadable[gvk]; ok {
		return err
	}
	return k.s.cache.List(ctx, list, opts...)
}

func (k *cachedClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errReadOnly
}
func (k *cachedClient) Create(context.Context, client.Object, ...client.CreateOption) error {
	return errReadOnly
}
func (k *cachedClient) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return errReadOnly
}
func (k *cachedClient) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errReadOnly
}
func (k *cachedClient) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errReadOnly
}
func (k *cachedClient) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errReadOnly
}
func (k *cachedClient) Status() client.SubResourceWriter { return readOnlySubResource{} }
func (k *cachedClient) SubResource(string) client.SubResourceClient {
	return readOnlySubResource{}
}
func (k *cachedClient) Scheme() *runtime.Scheme     { return k.s.direct.Scheme() }
func (k *cachedClient) RESTMapper() meta.RESTMapper { return k.s.direct.RESTMapper() }
func (k *cachedClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return k.s.direct.GroupVersionKindFor(obj)
}
func (k *cachedClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return k.s.direct.IsObjectNamespaced(obj)
}

type readOnlySubResource struct{}

func (readOnlySubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return errReadOnly
}
func (readOnlySubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errReadOnly
}
func (readOnlySubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errReadOnly
}
func (readOnlySubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errReadOnly
}
