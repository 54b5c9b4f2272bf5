package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// clusterCollector reports the cluster as Tailor sees it at each scrape, read from
// the informer cache: Karpenter's state-derived gauges (nodes, pods, NodePools,
// cluster state, instance-type offerings) and Tailor's own (pending pods, price).
// Collect gathers; clusterMetrics (pure) computes.
//
// A scrape must stay cheap with tens of thousands of pods: what it needs of each
// pod is kept by the pod informer's events (see podTracker), never by listing pods.
type clusterCollector struct {
	kube  client.Reader
	types func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)

	pods       *podTracker
	podsSynced func() bool
	// synced says whether the cluster state (the informers it reads) holds its
	// initial lists; unsyncedSince is when it was last seen not to.
	synced        func() bool
	mu            sync.Mutex
	unsyncedSince time.Time
	now           func() time.Time
	// leading says whether this replica is the leader. A standby's cache holds the
	// same cluster, and the chart's Service scrapes every replica: only the
	// leader reports, so dashboards that sum the series count each node once,
	// as with Karpenter, whose standby replicas report no cluster state.
	leading func() bool
	// nodeCosts reads a NodePool's per-node costs from the cloud; nil reads none.
	nodeCosts func(context.Context, *v1.NodePool) (scheduling.NodeCost, error)
	// ec2NodeClasses says the cluster has EC2NodeClasses (the AWS provider) to
	// report the status conditions of.
	ec2NodeClasses bool
	// capacityBuffers says to report the status conditions of CapacityBuffers
	// (the CapacityBuffer gate is on and the API server serves them).
	capacityBuffers bool
}

// podEvents is the part of the pod informer the collector uses.
type podEvents interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

func newClusterCollector(kube client.Reader, pods podEvents, types func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error), synced func() bool) (*clusterCollector, error) {
	tracker := newPodTracker(time.Now)
	reg, err := pods.AddEventHandler(tracker)
	if err != nil {
		return nil, fmt.Errorf("following pods for the pod metrics: %w", err)
	}
	return &clusterCollector{kube: kube, types: types, pods: tracker, podsSynced: reg.HasSynced, synced: synced, now: time.Now}, nil
}

// Karpenter's per-pod wait gauges, from the pod informer's events (see podTracker):
// one series per pod still waiting, gone once it starts (or binds) or is deleted.
var (
	podUnstartedTime = prometheus.NewDesc("karpenter_pods_unstarted_time_seconds",
		"The time from pod creation until the pod is running (ready), for each pod seen pending that is not yet.", []string{"name", "namespace"}, nil)
	podUnboundTime = prometheus.NewDesc("karpenter_pods_unbound_time_seconds",
		"The time from pod creation until the pod is bound, for each pod not yet bound.", []string{"name", "namespace"}, nil)
)

// Karpenter's provisioning_* per-pod gauges, timed from the provisioner's first
// sight of a pod or its first finding room for it (see metrics.PodTimes).
var (
	podProvisioningUnstartedTime = prometheus.NewDesc("karpenter_pods_provisioning_unstarted_time_seconds",
		"The time from when the provisioner first found room for the pod until the pod is running (ready), for each such pod not yet.", []string{"name", "namespace"}, nil)
	podProvisioningUnboundTime = prometheus.NewDesc("karpenter_pods_provisioning_unbound_time_seconds",
		"The time from when the provisioner first found room for the pod until it binds, for each such pod not yet bound.", []string{"name", "namespace"}, nil)
	podSchedulingUndecidedTime = prometheus.NewDesc("karpenter_pods_provisioning_scheduling_undecided_time_seconds",
		"The time since the provisioner first saw the pod pending, for each unbound pod it has not yet decided on.", []string{"name", "namespace"}, nil)
)

// CostNodesWith has the cost metrics read each NodePool's per-node costs from the
// cloud (see cloudprovider.NodeCosts); without it only the operator's count.
func (c *clusterCollector) CostNodesWith(f func(context.Context, *v1.NodePool) (scheduling.NodeCost, error)) {
	c.nodeCosts = f
}

// ReportEC2NodeClasses has the status-condition gauges report the EC2NodeClasses
// too, as Karpenter's AWS provider does.
func (c *clusterCollector) ReportEC2NodeClasses() { c.ec2NodeClasses = true }

// ReportCapacityBuffers has the status-condition gauges report the
// CapacityBuffers too, as Karpenter does with its CapacityBuffer feature gate.
func (c *clusterCollector) ReportCapacityBuffers() { c.capacityBuffers = true }

// TimePods has the pod metrics read the provisioner's times of each pod from t.
// Call it before the pod informer starts.
func (c *clusterCollector) TimePods(t *metrics.PodTimes) { c.pods.times = t }

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range clusterFamilies {
		ch <- f.desc
	}
	ch <- podUnstartedTime
	ch <- podUnboundTime
	ch <- podProvisioningUnstartedTime
	ch <- podProvisioningUnboundTime
	ch <- podSchedulingUndecidedTime
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	if c.leading != nil && !c.leading() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.now()
	in := clusterView{Now: now, Synced: c.synced() && c.podsSynced()}
	c.mu.Lock()
	switch {
	case in.Synced:
		c.unsyncedSince = time.Time{}
	case c.unsyncedSince.IsZero():
		c.unsyncedSince = now
	}
	if !in.Synced {
		in.UnsyncedFor = now.Sub(c.unsyncedSince)
	}
	c.mu.Unlock()
	// Until the informer's first list is in, the pod counts would be short: say
	// nothing of pods.
	if c.podsSynced() {
		in.Pods, in.Pending = c.pods.snapshot()
		in.PodsKnown = true
	}
	pools := &v1.NodePoolList{}
	claims := &v1.NodeClaimList{}
	nodes := &corev1.NodeList{}
	if c.kube.List(ctx, pools, client.UnsafeDisableDeepCopy) == nil &&
		c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy) == nil &&
		c.kube.List(ctx, nodes, client.UnsafeDisableDeepCopy) == nil {
		in.Listed = true
		in.NodePools, in.Claims, in.Nodes = pools.Items, claims.Items, nodes.Items
		in.Types = map[string][]*scheduling.InstanceType{}
		in.NodeCosts = map[string]scheduling.NodeCost{}
		var cloudCost func(*v1.NodePool) (scheduling.NodeCost, error)
		if c.nodeCosts != nil {
			cloudCost = func(np *v1.NodePool) (scheduling.NodeCost, error) { return c.nodeCosts(ctx, np) }
		}
		for i := range pools.Items {
			np := &pools.Items[i]
			if types, err := c.types(ctx, np); err == nil {
				in.Types[np.Name] = types
			}
			if cost, err := state.PoolNodeCost(np, cloudCost); err == nil {
				in.NodeCosts[np.Name] = cost
			}
		}
		classes := &awsv1.EC2NodeClassList{}
		if c.ec2NodeClasses && c.kube.List(ctx, classes, client.UnsafeDisableDeepCopy) == nil {
			in.EC2NodeClasses = classes.Items
		}
		buffers := &cb.CapacityBufferList{}
		if c.capacityBuffers && c.kube.List(ctx, buffers, client.UnsafeDisableDeepCopy) == nil {
			in.CapacityBuffers = buffers.Items
		}
	}
	for _, s := range clusterMetrics(in) {
		ch <- prometheus.MustNewConstMetric(s.family.desc, prometheus.GaugeValue, s.value, s.labels...)
	}
	unstarted, unbound := c.pods.waiting()
	for _, w := range []struct {
		desc, provisioning *prometheus.Desc
		pods               []waitingPod
	}{{podUnstartedTime, podProvisioningUnstartedTime, unstarted}, {podUnboundTime, podProvisioningUnboundTime, unbound}} {
		for _, p := range w.pods {
			ch <- prometheus.MustNewConstMetric(w.desc, prometheus.GaugeValue, now.Sub(p.created).Seconds(), p.name, p.namespace)
			if room := c.pods.times.Get(p.key()).Schedulable; !room.IsZero() {
				ch <- prometheus.MustNewConstMetric(w.provisioning, prometheus.GaugeValue, now.Sub(room).Seconds(), p.name, p.namespace)
			}
		}
	}
	// A pod bound (by the kube-scheduler, to room that came) before the
	// provisioner decided on it is no longer undecided, as Karpenter reports it.
	notBound := make(map[types.NamespacedName]bool, len(unbound))
	for _, p := range unbound {
		notBound[p.key()] = true
	}
	for pod, acked := range c.pods.times.Undecided() {
		if notBound[pod] {
			ch <- prometheus.MustNewConstMetric(podSchedulingUndecidedTime, prometheus.GaugeValue, now.Sub(acked).Seconds(), pod.Name, pod.Namespace)
		}
	}
}

// podTracker keeps, by namespace/name, what the metrics need of each pod, as the
// pod informer's events say; a relist replays events, so each one sets a pod's
// entry rather than counting up or down. It also observes the startup and bind
// durations of the pods it saw pending.
type podTracker struct {
	now func() time.Time

	// times are the provisioner's times of each pod (see metrics.PodTimes); nil
	// when no provisioner records them.
	times *metrics.PodTimes

	mu   sync.Mutex
	pods map[string]*podInfo
	// unstarted are the pods seen pending and not yet ready (nor finished);
	// unbound, those not yet bound (nor finished).
	unstarted, unbound map[string]waitingPod
}

// waitingPod is a pod waiting to start or to be bound.
type waitingPod struct {
	name, namespace string
	created         time.Time
}

func (w waitingPod) key() types.NamespacedName {
	return types.NamespacedName{Namespace: w.namespace, Name: w.name}
}

func newPodTracker(now func() time.Time) *podTracker {
	return &podTracker{now: now, pods: map[string]*podInfo{}, unstarted: map[string]waitingPod{}, unbound: map[string]waitingPod{}}
}

func (p *podTracker) OnAdd(obj any, _ bool) { p.observe(obj) }
func (p *podTracker) OnUpdate(_, obj any)   { p.observe(obj) }

func (p *podTracker) OnDelete(obj any) {
	// A tombstone (a delete the watch missed) carries the key too.
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, key)
	delete(p.unstarted, key)
	delete(p.unbound, key)
	if ns, name, err := toolscache.SplitMetaNamespaceKey(key); err == nil {
		p.times.Forget(types.NamespacedName{Namespace: ns, Name: name})
	}
}

func (p *podTracker) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	info := newPodInfo(pod)
	nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	room := p.times.Get(nn).Schedulable
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods[key] = info
	w := waitingPod{name: pod.Name, namespace: pod.Namespace, created: pod.CreationTimestamp.Time}
	_, seenPending := p.unstarted[key]
	started, ok := startupDuration(pod, seenPending)
	if ok {
		podStartupDuration.Observe(started.Seconds())
		if !room.IsZero() {
			podProvisioningStartupDuration.Observe(pod.CreationTimestamp.Add(started).Sub(room).Seconds())
		}
	}
	// A pod seen pending stays unstarted until it is ready or finished: running
	// but not yet ready, it is still starting, as Karpenter times it.
	switch {
	case pod.Status.Phase == corev1.PodPending:
		p.unstarted[key] = w
	case ok || info.Terminal:
		delete(p.unstarted, key)
	}
	_, seenUnbound := p.unbound[key]
	if d, ok := boundDuration(pod, seenUnbound); ok {
		podBoundDuration.Observe(d.Seconds())
		if !room.IsZero() {
			podProvisioningBoundDuration.Observe(pod.CreationTimestamp.Add(d).Sub(room).Seconds())
		}
	}
	if info.Node == "" && !info.Terminal {
		p.unbound[key] = w
	} else {
		delete(p.unbound, key)
	}
	// Started or finished, the pod is done with the provisioner's times.
	if ok || info.Terminal {
		p.times.Forget(nn)
	}
}

// waiting returns the pods not yet started and those not yet bound.
func (p *podTracker) waiting() (unstarted, unbound []waitingPod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.unstarted)), slices.Collect(maps.Values(p.unbound))
}

// snapshot returns the pods (entries are never changed, only replaced, so they may
// be read without the lock) and how many are pending.
func (p *podTracker) snapshot() ([]*podInfo, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*podInfo, 0, len(p.pods))
	pending := 0
	for _, info := range p.pods {
		out = append(out, info)
		if info.Pending {
			pending++
		}
	}
	return out, pending
}

// count is the number of pending pods.
func (p *podTracker) count() int {
	_, n := p.snapshot()
	return n
}

// startupDuration is how long a pod seen pending took to become ready: from its
// creation to its Ready condition's last transition, as Karpenter measures it.
func startupDuration(pod *corev1.Pod, seenPending bool) (time.Duration, bool) {
	if !seenPending || pod.Status.Phase == corev1.PodPending {
		return 0, false
	}
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
	if i < 0 {
		return 0, false
	}
	return pod.Status.Conditions[i].LastTransitionTime.Sub(pod.CreationTimestamp.Time), true
}

// boundDuration is how long a pod seen unbound took to be bound: from its creation
// to its PodScheduled condition's last transition.
func boundDuration(pod *corev1.Pod, seenUnbound bool) (time.Duration, bool) {
	if !seenUnbound || pod.Spec.NodeName == "" {
		return 0, false
	}
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue
	})
	if i < 0 {
		return 0, false
	}
	return pod.Status.Conditions[i].LastTransitionTime.Sub(pod.CreationTimestamp.Time), true
}
