package operator

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// clusterCollector reports the cluster as Tailor sees it at each scrape, read from
// the informer cache: pending pods, NodePool usage and limits (Karpenter's names),
// and the hourly price of the nodes Tailor launched.
type clusterCollector struct {
	kube  client.Reader
	types func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)

	pending, usage, limit, price *prometheus.Desc
}

func newClusterCollector(kube client.Reader, types func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)) *clusterCollector {
	return &clusterCollector{kube: kube, types: types,
		pending: prometheus.NewDesc("tailor_pods_pending", "Pods the kube-scheduler could not place and Tailor provisions for.", nil, nil),
		usage:   prometheus.NewDesc("karpenter_nodepools_usage", "Resources of a NodePool's nodes.", []string{"nodepool", "resource_type"}, nil),
		limit:   prometheus.NewDesc("karpenter_nodepools_limit", "A NodePool's limits.", []string{"nodepool", "resource_type"}, nil),
		price:   prometheus.NewDesc("tailor_cluster_price_per_hour", "Hourly price of the nodes Tailor launched, at their offerings' prices.", nil, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.usage
	ch <- c.limit
	ch <- c.price
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if c.kube.List(ctx, pods, client.UnsafeDisableDeepCopy) == nil {
		n := 0
		for i := range pods.Items {
			if state.Provisionable(&pods.Items[i]) {
				n++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n))
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
