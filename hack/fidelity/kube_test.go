package fidelity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// kubeFilters runs the kube-scheduler's filter plugins, in-process, the way a
// scheduling cycle does up to the point where it has the feasible nodes. One
// framework serves every case: the snapshot and the namespaces are swapped in
// before each (the plugins keep no state between cycles).
type kubeFilters struct {
	fw         framework.Framework
	lister     *swapLister
	namespaces cache.Indexer
}

// swapLister is the framework's snapshot, replaced per case.
type swapLister struct{ cur *schedcache.Snapshot }

func (s *swapLister) NodeInfos() framework.NodeInfoLister       { return s.cur.NodeInfos() }
func (s *swapLister) StorageInfos() framework.StorageInfoLister { return s.cur.StorageInfos() }

// The filters we check, in the default profile's order, and which of them have a
// PreFilter part.
var (
	filterPlugins = []string{nodeunschedulable.Name, tainttoleration.Name, nodeaffinity.Name, nodeports.Name,
		noderesources.Name, podtopologyspread.Name, interpodaffinity.Name}
	preFilterPlugins = []string{nodeaffinity.Name, nodeports.Name, noderesources.Name, podtopologyspread.Name, interpodaffinity.Name}
)

func newKubeFilters(ctx context.Context) (*kubeFilters, error) {
	// The framework records into the scheduler's metrics, which must exist (it is
	// idempotent).
	metrics.Register()
	// The feature gates as a 1.34 kube-scheduler has them by default.
	fts := plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate)
	registry := frameworkruntime.Registry{
		nodeunschedulable.Name: frameworkruntime.FactoryAdapter(fts, nodeunschedulable.New),
		tainttoleration.Name:   frameworkruntime.FactoryAdapter(fts, tainttoleration.New),
		nodeaffinity.Name:      frameworkruntime.FactoryAdapter(fts, nodeaffinity.New),
		nodeports.Name:         frameworkruntime.FactoryAdapter(fts, nodeports.New),
		noderesources.Name:     frameworkruntime.FactoryAdapter(fts, noderesources.NewFit),
		podtopologyspread.Name: frameworkruntime.FactoryAdapter(fts, podtopologyspread.New),
		interpodaffinity.Name:  frameworkruntime.FactoryAdapter(fts, interpodaffinity.New),
		// A framework needs exactly one queue sort and a binder; neither filters.
		queuesort.Name:     queuesort.New,
		defaultbinder.Name: defaultbinder.New,
	}
	plugins := &schedconfig.Plugins{
		QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
		Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
	}
	for _, name := range preFilterPlugins {
		plugins.PreFilter.Enabled = append(plugins.PreFilter.Enabled, schedconfig.Plugin{Name: name})
	}
	for _, name := range filterPlugins {
		plugins.Filter.Enabled = append(plugins.Filter.Enabled, schedconfig.Plugin{Name: name})
	}
	profile := &schedconfig.KubeSchedulerProfile{SchedulerName: corev1.DefaultSchedulerName, Plugins: plugins}
	for _, name := range []string{nodeaffinity.Name, noderesources.Name, podtopologyspread.Name, interpodaffinity.Name} {
		args, err := defaultArgs(name)
		if err != nil {
			return nil, err
		}
		if a, ok := args.(*schedconfig.PodTopologySpreadArgs); ok {
			// Only the pod's own constraints: no cluster-level defaults.
			a.DefaultingType = schedconfig.ListDefaulting
			a.DefaultConstraints = nil
		}
		profile.PluginConfig = append(profile.PluginConfig, schedconfig.PluginConfig{Name: name, Args: args})
	}

	// InterPodAffinity resolves namespaceSelectors through a namespace lister. The
	// informer is never started: each case fills its store directly.
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	nsInformer := factory.Core().V1().Namespaces().Informer()

	lister := &swapLister{cur: schedcache.NewEmptySnapshot()}
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(lister),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client),
	)
	if err != nil {
		return nil, err
	}
	return &kubeFilters{fw: fw, lister: lister, namespaces: nsInformer.GetIndexer()}, nil
}

// defaultArgs are a plugin's arguments as the v1 config API defaults them.
func defaultArgs(plugin string) (runtime.Object, error) {
	gvk := configv1.SchemeGroupVersion.WithKind(plugin + "Args")
	args, _, err := scheme.Codecs.UniversalDecoder().Decode(nil, &gvk, nil)
	if err != nil {
		return nil, fmt.Errorf("default args of %s: %w", plugin, err)
	}
	return args, nil
}

// run returns, per node name, "" when the filters pass the pod there, else the
// rejecting plugin and its message.
func (k *kubeFilters) run(ctx context.Context, c *testCase) (map[string]string, error) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for _, n := range c.nodes {
		nodes = append(nodes, n.Node)
		for _, p := range n.Pods {
			// The scheduler's pod informer leaves finished pods out.
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			pods = append(pods, p)
		}
	}
	k.lister.cur = schedcache.NewSnapshot(pods, nodes)
	objs := make([]any, len(c.namespaces))
	for i, ns := range c.namespaces {
		objs[i] = ns
	}
	if err := k.namespaces.Replace(objs, ""); err != nil {
		return nil, err
	}

	out := make(map[string]string, len(nodes))
	state := framework.NewCycleState()
	res, status, _ := k.fw.RunPreFilterPlugins(ctx, state, c.pod)
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return nil, fmt.Errorf("prefilter: %w", status.AsError())
		}
		// Rejected in PreFilter: every node fails with the same status.
		for _, n := range nodes {
			out[n.Name] = statusString("PreFilter", status)
		}
		return out, nil
	}
	for _, n := range nodes {
		if !res.AllNodes() && !res.NodeNames.Has(n.Name) {
			out[n.Name] = "PreFilter: node(s) didn't satisfy the PreFilter result (matchFields metadata.name)"
			continue
		}
		info, err := k.lister.cur.Get(n.Name)
		if err != nil {
			return nil, err
		}
		status := k.fw.RunFilterPlugins(ctx, state, c.pod, info)
		if status.IsSuccess() {
			out[n.Name] = ""
			continue
		}
		if !status.IsRejected() {
			return nil, fmt.Errorf("filter on %s: %w", n.Name, status.AsError())
		}
		out[n.Name] = statusString("Filter", status)
	}
	return out, nil
}

func statusString(stage string, s *fwk.Status) string {
	return fmt.Sprintf("%s %s: %s: %s", stage, s.Plugin(), s.Code(), s.Message())
}
