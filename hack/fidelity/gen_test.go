package fidelity

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// The generator draws small clusters where the constraints collide often: few
// zones, few apps, small nodes, a handful of taints. Every object it makes is what
// the API server would store (see TestGeneratorIsValid): requests set where
// defaulting would set them, matchLabelKeys merged into selectors where the API
// server merges them.
//
// Deliberately left out, because Feasibility does not model them or they are not
// the filters' business:
//   - volumes, DRA claims and images: their plugins are not among those compared
//     (the solver handles zonal volumes on its own);
//   - nominated pods and preemption: Feasibility judges the cluster as it is;
//   - resizes in flight (InPlacePodVerticalScaling): the scheduler counts a bound
//     pod at the larger of its spec and its status's resources; the bound pods
//     here carry no container statuses, and pkg/scheduling reads the spec only;
//   - pod-level limits without requests: the API server defaults the requests
//     from them (and from the containers), and pkg/scheduling reads requests;
//   - launching nodes (NodeClaims not yet registered), which the scheduler never
//     sees.

const (
	labelHostname = "kubernetes.io/hostname"
	labelZone     = "topology.kubernetes.io/zone"
	labelArch     = "kubernetes.io/arch"
	labelGen      = "example.com/generation" // integer values, for Gt and Lt
	labelDisk     = "example.com/disk"
	labelNSName   = "kubernetes.io/metadata.name"
)

var (
	zones          = []string{"zone-a", "zone-b", "zone-c"}
	archs          = []string{"amd64", "arm64"}
	disks          = []string{"ssd", "hdd"}
	apps           = []string{"web", "db", "cache"}
	tiers          = []string{"fe", "be"}
	namespaceNames = []string{"default", "team-a", "team-b"}
	gpu            = corev1.ResourceName("nvidia.com/gpu")

	// taintPool holds taints with distinct key and effect, as validation wants.
	taintPool = []corev1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute},
		{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/flaky", Value: "yes", Effect: corev1.TaintEffectNoExecute},
	}
)

// testCase is one cluster and one pending pod.
type testCase struct {
	namespaces []*corev1.Namespace
	nodes      []*scheduling.Node
	pod        *corev1.Pod
}

func (c *testCase) clone() *testCase {
	out := &testCase{namespaces: c.namespaces, pod: c.pod.DeepCopy()}
	for _, n := range c.nodes {
		nn := &scheduling.Node{Node: n.Node.DeepCopy()}
		for _, p := range n.Pods {
			nn.Pods = append(nn.Pods, p.DeepCopy())
		}
		out.nodes = append(out.nodes, nn)
	}
	return out
}

type generator struct {
	r   *rand.Rand
	uid int
	// missing is how often a node lacks its zone or arch label, drawn per case:
	// some clusters are tidy, some are not.
	missing float64
	// roomy clusters have big nodes and few taints, so that more verdicts come
	// down to topology constraints (the filters stop at the first failure).
	roomy bool
}

// generate draws case index of the run seeded with seed; each case has its own
// stream, so one can be replayed alone.
func generate(seed uint64, index int) *testCase {
	g := &generator{r: rand.New(rand.NewPCG(seed, uint64(index)))}
	g.missing = pick(g, []float64{0.05, 0.15, 0.4})
	g.roomy = g.chance(0.5)
	c := &testCase{}
	for _, name := range namespaceNames {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: g.newUID(),
			Labels: map[string]string{labelNSName: name}}}
		if g.chance(0.7) {
			ns.Labels["team"] = pick(g, []string{"a", "b"})
		}
		if g.chance(0.5) {
			ns.Labels["env"] = pick(g, []string{"prod", "dev"})
		}
		c.namespaces = append(c.namespaces, ns)
	}
	nodes := 3 + g.r.IntN(4)
	for i := range nodes {
		c.nodes = append(c.nodes, g.node(i))
	}
	c.pod = g.incomingPod(nodes)
	return c
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *generator, xs []T) T { return xs[g.r.IntN(len(xs))] }

func (g *generator) newUID() types.UID {
	g.uid++
	return types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", g.uid))
}

func (g *generator) node(i int) *scheduling.Node {
	name := fmt.Sprintf("node-%d", i)
	labels := map[string]string{labelHostname: name}
	if g.chance(0.1) {
		// The hostname label need not be the node's name (cloud nodes): topology
		// keys use the label, matchFields the name.
		labels[labelHostname] = fmt.Sprintf("ip-10-0-0-%d", i)
	}
	// Labels are sometimes missing: spread and affinity treat a node without the
	// topology key specially.
	if !g.chance(g.missing) {
		labels[labelZone] = pick(g, zones)
	}
	if !g.chance(g.missing) {
		labels[labelArch] = pick(g, archs)
	}
	switch {
	case g.chance(0.75):
		labels[labelGen] = strconv.Itoa(1 + g.r.IntN(5))
	case g.chance(0.2):
		labels[labelGen] = "x" // not an integer: Gt and Lt never match it
	}
	if g.chance(0.4) {
		labels[labelDisk] = pick(g, disks)
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(pick(g, []string{"500m", "1500m", "2", "4", "8"})),
		corev1.ResourceMemory: resource.MustParse(pick(g, []string{"1Gi", "4Gi", "8Gi", "16Gi"})),
		corev1.ResourcePods:   resource.MustParse(pick(g, []string{"2", "4", "110", "110"})),
	}
	hasGPU := g.chance(0.25)
	if hasGPU {
		alloc[gpu] = resource.MustParse(pick(g, []string{"1", "2", "4"}))
	}
	if g.chance(0.2) {
		alloc[corev1.ResourceEphemeralStorage] = resource.MustParse(pick(g, []string{"1Gi", "10Gi"}))
	}
	if g.roomy {
		alloc[corev1.ResourceCPU] = resource.MustParse("32")
		alloc[corev1.ResourceMemory] = resource.MustParse("128Gi")
		alloc[corev1.ResourcePods] = resource.MustParse("110")
		alloc[corev1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
		alloc[gpu] = resource.MustParse("8")
		hasGPU = true
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: g.newUID(), Labels: labels},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc.DeepCopy()},
	}
	taints := g.weighted(65, 25, 8, 2)
	if g.roomy {
		taints = g.weighted(85, 15)
	}
	for _, j := range g.r.Perm(len(taintPool))[:taints] {
		node.Spec.Taints = append(node.Spec.Taints, taintPool[j])
	}
	if g.chance(0.07) {
		node.Spec.Unschedulable = true
		// The node lifecycle controller taints cordoned nodes; not always yet.
		if g.chance(0.5) {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	out := &scheduling.Node{Node: node}
	for j := range g.r.IntN(5) {
		out.Pods = append(out.Pods, g.existingPod(name, j, hasGPU))
	}
	return out
}

// weighted returns i with probability proportional to w[i].
func (g *generator) weighted(w ...int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	n := g.r.IntN(total)
	for i, x := range w {
		if n < x {
			return i
		}
		n -= x
	}
	return len(w) - 1
}

func (g *generator) podLabels() map[string]string {
	labels := map[string]string{}
	if g.chance(0.9) {
		labels["app"] = pick(g, apps)
	}
	if g.chance(0.5) {
		labels["tier"] = pick(g, tiers)
	}
	return labels
}

func (g *generator) existingPod(node string, j int, hasGPU bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%d", node, j), Namespace: pick(g, namespaceNames),
			UID: g.newUID(), Labels: g.podLabels()},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{g.container("app")}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if hasGPU && g.chance(0.3) {
		setExtended(&pod.Spec.Containers[0], gpu, "1")
	}
	if g.chance(0.2) {
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{g.hostPort()}
	}
	if g.chance(0.25) {
		pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.affinityTerm(pod.Labels)}}}
	}
	if g.chance(0.1) {
		if pod.Spec.Affinity == nil {
			pod.Spec.Affinity = &corev1.Affinity{}
		}
		pod.Spec.Affinity.PodAffinity = &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.affinityTerm(pod.Labels)}}
	}
	switch {
	case g.chance(0.04):
		// Finished pods are not in the scheduler's cache (its informer leaves them
		// out), nor do they take room.
		pod.Status.Phase = corev1.PodSucceeded
	case g.chance(0.04):
		// A terminating pod is still on its node.
		pod.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
		pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
	}
	return pod
}

func (g *generator) container(name string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10"}
	if g.chance(0.1) {
		return c // BestEffort
	}
	c.Resources.Requests = corev1.ResourceList{}
	if g.chance(0.9) {
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(pick(g, []string{"100m", "250m", "500m", "1", "1500m"}))
	}
	if g.chance(0.9) {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(pick(g, []string{"128Mi", "256Mi", "512Mi", "1Gi", "3Gi"}))
	}
	if g.chance(0.05) {
		c.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse(pick(g, []string{"1Gi", "5Gi"}))
	}
	if g.chance(0.2) {
		// Guaranteed: limits equal to requests.
		c.Resources.Limits = c.Resources.Requests.DeepCopy()
	}
	return c
}

// setExtended requests an extended resource: validation wants its request and
// limit equal.
func setExtended(c *corev1.Container, name corev1.ResourceName, q string) {
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(q)
	c.Resources.Limits[name] = resource.MustParse(q)
}

func (g *generator) hostPort() corev1.ContainerPort {
	port := int32(pick(g, []int{8080, 9090}))
	return corev1.ContainerPort{
		ContainerPort: port,
		HostPort:      port,
		Protocol:      pick(g, []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP}),
		HostIP:        pick(g, []string{"", "", "0.0.0.0", "10.0.0.1", "10.0.0.2"}),
	}
}

// selector draws a label selector over app and tier, sometimes {} (every pod) or,
// unless avoid is set, nil (no pod); avoid is a key it must not use
// (matchLabelKeys may neither repeat a selector's key nor go without a selector).
func (g *generator) selector(avoid string) *metav1.LabelSelector {
	for {
		var s *metav1.LabelSelector
		switch g.r.IntN(10) {
		case 0:
			s = &metav1.LabelSelector{}
		case 9:
			if avoid != "" {
				continue
			}
			return nil
		case 1, 2, 3:
			s = &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(g, apps)}}
		case 4:
			s = &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(g, apps), "tier": pick(g, tiers)}}
		case 5:
			s = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: sample(g, apps, 1+g.r.IntN(2))}}}
		case 6:
			s = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: sample(g, apps, 1)}}}
		case 7:
			op := pick(g, []metav1.LabelSelectorOperator{metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist})
			s = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: op}}}
		case 8:
			s = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": pick(g, tiers)},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: sample(g, apps, 2)}}}
		}
		if avoid == "" || !selectorUses(s, avoid) {
			return s
		}
	}
}

func selectorUses(s *metav1.LabelSelector, key string) bool {
	if _, ok := s.MatchLabels[key]; ok {
		return true
	}
	for _, e := range s.MatchExpressions {
		if e.Key == key {
			return true
		}
	}
	return false
}

// sample draws n distinct elements, in their original order.
func sample[T any](g *generator, xs []T, n int) []T {
	idx := g.r.Perm(len(xs))[:n]
	slices.Sort(idx)
	out := make([]T, n)
	for i, j := range idx {
		out[i] = xs[j]
	}
	return out
}

// affinityTerm draws a pod (anti-)affinity term of a pod with labels podLabels,
// with matchLabelKeys or mismatchLabelKeys merged as the API server does.
func (g *generator) affinityTerm(podLabels map[string]string) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: pick(g, []string{labelZone, labelZone, labelHostname, labelHostname, labelArch})}
	if g.chance(0.15) {
		key := pick(g, []string{"app", "tier"})
		t.LabelSelector = g.selector(key)
		if g.chance(0.5) {
			t.MatchLabelKeys = []string{key}
		} else {
			t.MismatchLabelKeys = []string{key}
		}
		mergeLabelKeys(t.LabelSelector, t.MatchLabelKeys, metav1.LabelSelectorOpIn, podLabels)
		mergeLabelKeys(t.LabelSelector, t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn, podLabels)
	} else {
		t.LabelSelector = g.selector("")
	}
	switch g.weighted(60, 15, 15, 10) {
	case 1:
		t.Namespaces = sample(g, namespaceNames, 1+g.r.IntN(2))
	case 2:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": pick(g, []string{"a", "b"})}}
		if g.chance(0.3) {
			t.Namespaces = sample(g, namespaceNames, 1)
		}
	case 3:
		t.NamespaceSelector = &metav1.LabelSelector{} // every namespace
	}
	return t
}

// mergeLabelKeys is what the API server does to matchLabelKeys (In) and
// mismatchLabelKeys (NotIn) when it stores a pod.
func mergeLabelKeys(s *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator, podLabels map[string]string) {
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
		}
	}
}

func (g *generator) incomingPod(nodes int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "incoming", Namespace: pick(g, namespaceNames), UID: g.newUID(), Labels: g.podLabels()},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{g.container("app")}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	spec := &pod.Spec
	if g.chance(0.3) {
		spec.Containers = append(spec.Containers, g.container("helper"))
	}
	if g.chance(0.15) {
		setExtended(&spec.Containers[0], gpu, pick(g, []string{"1", "2"}))
	}
	if g.chance(0.2) {
		spec.InitContainers = append(spec.InitContainers, g.container("init"))
	}
	for i := range g.weighted(75, 20, 5) {
		sidecar := g.container(fmt.Sprintf("sidecar-%d", i))
		sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		at := g.r.IntN(len(spec.InitContainers) + 1) // before, between or after the others
		spec.InitContainers = slices.Insert(spec.InitContainers, at, sidecar)
	}
	if g.chance(0.1) {
		spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	if g.chance(0.08) {
		g.podLevelResources(pod)
	}

	if g.chance(0.3) {
		// Host ports; on init containers too, where only sidecars hold them.
		all := []*corev1.Container{&spec.Containers[0]}
		for i := range spec.InitContainers {
			all = append(all, &spec.InitContainers[i])
		}
		c := pick(g, all)
		c.Ports = append(c.Ports, g.hostPort())
	}

	if g.chance(0.2) {
		spec.NodeSelector = map[string]string{}
		for range 1 + g.r.IntN(2) {
			switch g.r.IntN(4) {
			case 0:
				spec.NodeSelector[labelZone] = pick(g, zones)
			case 1:
				spec.NodeSelector[labelArch] = pick(g, archs)
			case 2:
				spec.NodeSelector[labelDisk] = pick(g, disks)
			case 3:
				spec.NodeSelector[labelGen] = strconv.Itoa(1 + g.r.IntN(5))
			}
		}
	}
	aff := &corev1.Affinity{}
	if g.chance(0.35) {
		aff.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}
		for range 1 + g.r.IntN(3) {
			aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, g.nodeSelectorTerm(nodes))
		}
	}
	if g.chance(0.1) {
		if aff.NodeAffinity == nil {
			aff.NodeAffinity = &corev1.NodeAffinity{}
		}
		aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{
			{Weight: 10, Preference: g.nodeSelectorTerm(nodes)}}
	}

	if g.chance(0.5) {
		for range 1 + g.r.IntN(3) {
			spec.Tolerations = append(spec.Tolerations, g.toleration())
		}
	}

	if g.chance(0.35) {
		g.spreadConstraints(pod)
	}

	if g.chance(0.25) {
		aff.PodAffinity = &corev1.PodAffinity{}
		for range 1 + g.r.IntN(2) {
			aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, g.affinityTerm(pod.Labels))
		}
	}
	if g.chance(0.25) {
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{}
		for range 1 + g.r.IntN(2) {
			aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, g.affinityTerm(pod.Labels))
		}
	}
	if g.chance(0.1) {
		// Preferences: the filters ignore them.
		if aff.PodAffinity == nil {
			aff.PodAffinity = &corev1.PodAffinity{}
		}
		aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: g.affinityTerm(pod.Labels)}}
	}
	if g.chance(0.1) {
		if aff.PodAntiAffinity == nil {
			aff.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: g.affinityTerm(pod.Labels)}}
	}
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		spec.Affinity = aff
	}
	return pod
}

// podLevelResources sets spec.resources.requests (PodLevelResources, beta and on
// in 1.34): validation wants them no smaller than the containers' aggregate.
func (g *generator) podLevelResources(pod *corev1.Pod) {
	agg := scheduling.PodRequests(pod) // with the overhead, taken out below
	reqs := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !g.chance(0.7) {
			continue
		}
		q := agg[name].DeepCopy()
		if o, ok := pod.Spec.Overhead[name]; ok {
			q.Sub(o)
		}
		if name == corev1.ResourceCPU {
			q.Add(resource.MustParse(pick(g, []string{"0", "250m", "1"})))
		} else {
			q.Add(resource.MustParse(pick(g, []string{"0", "256Mi", "1Gi"})))
		}
		reqs[name] = q
	}
	if len(reqs) > 0 {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: reqs}
	}
}

func (g *generator) nodeSelectorTerm(nodes int) corev1.NodeSelectorTerm {
	var t corev1.NodeSelectorTerm
	if g.chance(0.03) {
		return t // an empty term matches no node
	}
	for range 1 + g.r.IntN(2) {
		t.MatchExpressions = append(t.MatchExpressions, g.nodeSelectorRequirement())
	}
	if g.chance(0.1) {
		// metadata.name In or NotIn, with exactly one value as validation wants.
		op := pick(g, []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn})
		t.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: op,
			Values: []string{fmt.Sprintf("node-%d", g.r.IntN(nodes+1))}}}
		if g.chance(0.2) {
			// Two names ANDed: with In twice, the NodeAffinity PreFilter finds the
			// conflict (or narrows to one node) before any Filter runs.
			op := pick(g, []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn})
			t.MatchFields = append(t.MatchFields, corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: op,
				Values: []string{fmt.Sprintf("node-%d", g.r.IntN(nodes+1))}})
		}
		if g.chance(0.3) {
			t.MatchExpressions = nil
		}
	}
	return t
}

func (g *generator) nodeSelectorRequirement() corev1.NodeSelectorRequirement {
	key := pick(g, []string{labelZone, labelZone, labelArch, labelGen, labelGen, labelDisk})
	values := map[string][]string{labelZone: zones, labelArch: archs, labelDisk: disks, labelGen: {"1", "2", "3", "4", "5"}}[key]
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist}
	if key == labelGen {
		ops = append(ops, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt)
	}
	r := corev1.NodeSelectorRequirement{Key: key, Operator: pick(g, ops)}
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		r.Values = sample(g, values, 1+g.r.IntN(2))
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		r.Values = []string{strconv.Itoa(g.r.IntN(7))}
	}
	return r
}

func (g *generator) toleration() corev1.Toleration {
	switch g.r.IntN(10) {
	case 0:
		return corev1.Toleration{Operator: corev1.TolerationOpExists} // everything
	case 1:
		return corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	case 2:
		return corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: pick(g, []corev1.TaintEffect{
			corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule})}
	}
	t := pick(g, taintPool)
	tol := corev1.Toleration{Key: t.Key}
	if g.chance(0.5) {
		tol.Operator = corev1.TolerationOpExists
	} else {
		tol.Operator = pick(g, []corev1.TolerationOperator{corev1.TolerationOpEqual, ""})
		tol.Value = t.Value
		if g.chance(0.2) {
			tol.Value = "other"
		}
	}
	if g.chance(0.6) {
		tol.Effect = t.Effect
		if g.chance(0.2) {
			tol.Effect = pick(g, []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule})
		}
	}
	return tol
}

func (g *generator) spreadConstraints(pod *corev1.Pod) {
	type slot struct {
		key  string
		when corev1.UnsatisfiableConstraintAction
	}
	// Validation forbids two constraints with the same key and action.
	var used []slot
	for range 1 + g.weighted(55, 45) {
		s := slot{key: pick(g, []string{labelZone, labelZone, labelHostname, labelHostname, labelArch}),
			when: corev1.DoNotSchedule}
		if g.chance(0.15) {
			s.when = corev1.ScheduleAnyway
		}
		if slices.Contains(used, s) {
			continue
		}
		used = append(used, s)
		tsc := corev1.TopologySpreadConstraint{MaxSkew: int32(1 + g.r.IntN(2)), TopologyKey: s.key, WhenUnsatisfiable: s.when}
		if g.chance(0.2) {
			key := pick(g, []string{"app", "tier"})
			tsc.LabelSelector = g.selector(key)
			tsc.MatchLabelKeys = []string{key}
			// The API server merges matchLabelKeys into the selector since 1.34;
			// pods stored before still carry them unmerged.
			if g.chance(0.5) {
				mergeLabelKeys(tsc.LabelSelector, tsc.MatchLabelKeys, metav1.LabelSelectorOpIn, pod.Labels)
			}
		} else {
			tsc.LabelSelector = g.selector("")
		}
		if s.when == corev1.DoNotSchedule && g.chance(0.2) {
			tsc.MinDomains = ptr.To(int32(1 + g.r.IntN(4)))
		}
		policies := []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}
		if g.chance(0.25) {
			tsc.NodeAffinityPolicy = ptr.To(pick(g, policies))
		}
		if g.chance(0.25) {
			tsc.NodeTaintsPolicy = ptr.To(pick(g, policies))
		}
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, tsc)
	}
}
