package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// clusterCollector reports the cluster as Tailor sees it at each scrape, read from
// the informer cache: pending pods, NodePool usage and limits (Karpenter's names),
// and the hourly price of the nodes Tailor launched.
//
// A scrape must stay cheap with tens of thousands of pods: the pending count is
// kept by the pod informer's events (see pendingPods), never by listing pods.
type clusterCollector struct {
	kube  client.Reader
	types func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)

	pending       *pendingPods
	pendingSynced func() bool

	pendingDesc, usage, limit, price *prometheus.Desc
}

// podEvents is the part of the pod informer the collector uses.
type podEvents interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

func newClusterCollector(kube client.Reader, pods podEvents, types func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)) (*clusterCollector, error) {
	pending := &pendingPods{keys: map[string]struct{}{}}
	reg, err := pods.AddEventHandler(pending)
	if err != nil {
		return nil, fmt.Errorf("following pods for the tailor_pods_pending metric: %w", err)
	}
	return &clusterCollector{kube: kube, types: types, pending: pending, pendingSynced: reg.HasSynced,
		pendingDesc: prometheus.NewDesc("tailor_pods_pending", "Pods the kube-scheduler could not place and Tailor provisions for.", nil, nil),
		usage:       prometheus.NewDesc("karpenter_nodepools_usage", "Resources of a NodePool's nodes.", []string{"nodepool", "resource_type"}, nil),
		limit:       prometheus.NewDesc("karpenter_nodepools_limit", "A NodePool's limits.", []string{"nodepool", "resource_type"}, nil),
		price:       prometheus.NewDesc("tailor_cluster_price_per_hour", "Hourly price of the nodes Tailor launched, at their offerings' prices.", nil, nil),
	}, nil
}

// pendingPods is the set of provisionable pods (state.Provisionable), by
// namespace/name, as the pod informer's events say; a relist replays events, so
// each one sets a pod's membership rather than counting up or down.
type pendingPods struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func (p *pendingPods) OnAdd(obj any, _ bool) { p.observe(obj) }
func (p *pendingPods) OnUpdate(_, obj any)   { p.observe(obj) }

func (p *pendingPods) OnDelete(obj any) {
	// A tombstone (a delete the watch missed) carries the key too.
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	p.mu.Lock()
	delete(p.keys, key)
	p.mu.Unlock()
}

func (p *pendingPods) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	pending := state.Provisionable(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pending {
		p.keys[key] = struct{}{}
	} else {
		delete(p.keys, key)
	}
}

func (p *pendingPods) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pendingDesc
	ch <- c.usage
	ch <- c.limit
	ch <- c.price
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Until the informer's first list is in, the count would be short: say nothing.
	if c.pendingSynced() {
		ch <- prometheus.MustNewConstMetric(c.pendingDesc, prometheus.GaugeValue, float64(c.pending.count()))
	}
	pools := &v1.NodePoolList{}
	claims := &v1.NodeClaimList{}
	if c.kube.List(ctx, pools) != nil || c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy) != nil {
		return
	}
	total := 0.0
	for i := range pools.Items {
		np := &pools.Items[i]
		for name, q := range np.Status.Resources {
			ch <- prometheus.MustNewConstMetric(c.usage, prometheus.GaugeValue, q.AsApproximateFloat64(), np.Name, string(name))
		}
		for name, q := range np.Spec.Limits {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, q.AsApproximateFloat64(), np.Name, string(name))
		}
		types, err := c.types(ctx, np)
		if err != nil {
			continue
		}
		for _, nc := range claims.Items {
			if nc.Labels[v1.NodePoolLabelKey] == np.Name {
				p, _ := scheduling.OfferingPrice(types, nc.Labels)
				total += p
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.price, prometheus.GaugeValue, total)
}
