package console

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/nodetailor/tailor/pkg/inspect"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// memCache stands in for the informers' cache: it holds the objects and copies
// them out on every read, as controller-runtime's cache reader does, unless the
// list asks for client.UnsafeDisableDeepCopy. Only Get and List are served.
type memCache struct {
	cache.Cache
	scheme *runtime.Scheme
	// lists holds the objects of each kind by their list's kind.
	lists map[schema.GroupVersionKind][]runtime.Object
}

// cacheOf is a Source whose informers hold what kube holds of every watched kind.
func cacheOf(tb testing.TB, kube client.Client) *Source {
	tb.Helper()
	mc := &memCache{scheme: kube.Scheme(), lists: map[schema.GroupVersionKind][]runtime.Object{}}
	for _, list := range watched() {
		if err := kube.List(tb.Context(), list); err != nil {
			tb.Fatal(err)
		}
		gvk, err := kube.GroupVersionKindFor(list)
		if err != nil {
			tb.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			tb.Fatal(err)
		}
		mc.lists[gvk] = items
	}
	return &Source{cache: mc, direct: kube, unreadable: map[schema.GroupVersionKind]error{}, changed: make(chan struct{}, 1)}
}

func (m *memCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, m.scheme)
	if err != nil {
		return err
	}
	var o client.ListOptions
	o.ApplyOptions(opts)
	shared := o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy
	items := m.lists[gvk]
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		if !shared {
			item = item.DeepCopyObject()
		}
		out = append(out, item)
	}
	return meta.SetList(list, out)
}

func (m *memCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, m.scheme)
	if err != nil {
		return err
	}
	for _, item := range m.lists[gvk.GroupVersion().WithKind(gvk.Kind+"List")] {
		o := item.(client.Object)
		if o.GetNamespace() == key.Namespace && o.GetName() == key.Name {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: gvk.Kind}, key.Name)
}

// Read from the informers' caches shares their objects and keeps one pricing for
// the console's life: the model is the one read through a client that copies,
// read after read, and the cached objects are left as they were.
func TestReadShared(t *testing.T) {
	kube := cluster(t, 30, 10)
	src := cacheOf(t, kube)
	mc := src.cache.(*memCache)
	before := map[schema.GroupVersionKind][]runtime.Object{}
	for gvk, items := range mc.lists {
		for _, o := range items {
			before[gvk] = append(before[gvk], o.DeepCopyObject())
		}
	}
	now := time.Now()
	c, err := inspect.Read(t.Context(), kube, inspect.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Build(c, nil, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c, _, err := src.Read(t.Context(), inspect.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Build(c, nil, scheduling.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("read %d from the cache: the model differs from the one read through the client", i)
		}
	}
	for gvk, items := range mc.lists {
		if len(items) != len(before[gvk]) {
			t.Fatalf("%d %s cached, %d before", len(items), gvk.Kind, len(before[gvk]))
		}
		for i, o := range items {
			if !equality.Semantic.DeepEqual(o, before[gvk][i]) {
				t.Errorf("reading and building changed the cached %s %d: %s", gvk.Kind, i, diff.Diff(before[gvk][i], o))
			}
		}
	}
}
