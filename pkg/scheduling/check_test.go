package scheduling_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
)

// checkPlan verifies a plan independently of the solver, with the kube-scheduler's
// own helpers where they exist: every pod is accounted for once; no node is
// overcommitted under any of its instance-type options; every pod's node selector,
// affinity, tolerations, host ports, spread and anti-affinity hold on the final
// cluster; and no NodePool limit is exceeded whichever option launches.
func checkPlan(t testing.TB, in *Input, plan *Plan) {
	t.Helper()
	type final struct {
		node    *corev1.Node
		pods    []*corev1.Pod // all pods, bound before and placed now
		placed  []*corev1.Pod
		options []*InstanceType
		pool    string
		newNode *NewNode
	}
	var nodes []*final
	byName := map[string]*final{}
	for _, n := range in.Nodes {
		f := &final{node: n.Node, pods: append([]*corev1.Pod(nil), n.Pods...), pool: n.Node.Labels[v1.NodePoolLabelKey]}
		nodes = append(nodes, f)
		byName[n.Node.Name] = f
	}
	seen := map[*corev1.Pod]string{}
	account := func(p *corev1.Pod, where string) {
		if prev, ok := seen[p]; ok {
			t.Errorf("pod %s placed twice: %s and %s", p.Name, prev, where)
		}
		seen[p] = where
	}
	for _, b := range plan.Bindings {
		account(b.Pod, b.Node)
		f := byName[b.Node]
		if f == nil {
			t.Fatalf("pod %s bound to unknown node %s", b.Pod.Name, b.Node)
		}
		f.pods = append(f.pods, b.Pod)
		f.placed = append(f.placed, b.Pod)
	}
	for _, nn := range plan.NewNodes {
		if len(nn.InstanceTypes) == 0 || nn.InstanceType != nn.InstanceTypes[0] {
			t.Fatalf("new node %s: instance type %v is not the first of %d options", nn.Name, nn.InstanceType, len(nn.InstanceTypes))
		}
		lbls := map[string]string{}
		for i := range nn.InstanceType.Requirements {
			r := &nn.InstanceType.Requirements[i]
			if vs := r.Values(); len(vs) == 1 {
				lbls[r.Key] = vs[0]
			}
		}
		for i := range nn.Requirements {
			r := &nn.Requirements[i]
			if vs := r.Values(); len(vs) == 1 {
				lbls[r.Key] = vs[0]
			}
		}
		lbls[v1.LabelZone] = nn.Offering.Zone
		lbls[v1.CapacityTypeLabelKey] = nn.Offering.CapacityType
		lbls[v1.LabelHostname] = nn.Name
		lbls[v1.NodePoolLabelKey] = nn.NodePool
		// The kubelet and cloud controller set the deprecated beta labels too.
		for beta, ga := range map[string]string{"beta.kubernetes.io/instance-type": v1.LabelInstanceType, "beta.kubernetes.io/arch": v1.LabelArch,
			"beta.kubernetes.io/os": v1.LabelOS, "failure-domain.beta.kubernetes.io/zone": v1.LabelZone, "failure-domain.beta.kubernetes.io/region": v1.LabelRegion} {
			if v, ok := lbls[ga]; ok {
				lbls[beta] = v
			}
		}
		for k, v := range lbls {
			if r, ok := nn.Requirements.Get(k); ok && !r.Has(v) && k != v1.LabelHostname {
				t.Errorf("new node %s: label %s=%s breaks its own requirement %s", nn.Name, k, v, r)
			}
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nn.Name, Labels: lbls}, Spec: corev1.NodeSpec{Taints: nn.Taints}}
		node.Status.Allocatable = nn.InstanceType.Allocatable()
		f := &final{node: node, pods: nn.Pods, placed: nn.Pods, options: nn.InstanceTypes, pool: nn.NodePool, newNode: nn}
		nodes = append(nodes, f)
		for _, p := range nn.Pods {
			account(p, nn.Name)
		}
		for _, it := range nn.InstanceTypes {
			if _, ok := it.CheapestOffering(nn.Requirements); !ok {
				t.Errorf("new node %s: option %s has no available offering within %s", nn.Name, it.Name, nn.Requirements)
			}
			if key, ok := nn.Requirements.Intersects(it.Requirements); !ok {
				t.Errorf("new node %s: option %s conflicts with the node's requirements on %s", nn.Name, it.Name, key)
			}
		}
	}
	for _, f := range plan.Unschedulable {
		account(f.Pod, "unschedulable")
		if f.Reason == "" {
			t.Errorf("pod %s unschedulable without a reason", f.Pod.Name)
		}
	}
	for _, p := range in.Pods {
		if _, ok := seen[p]; !ok {
			t.Errorf("pod %s is missing from the plan", p.Name)
		}
	}

	for _, f := range nodes {
		if len(f.placed) == 0 {
			continue // nothing of the plan's here; the input may be overcommitted already
		}
		// Resources: every option must hold the pods and the DaemonSets.
		total := corev1.ResourceList{}
		for _, p := range f.pods {
			sumInto(total, PodRequests(p))
		}
		allocs := []corev1.ResourceList{f.node.Status.Allocatable}
		if f.newNode != nil {
			allocs = nil
			for _, it := range f.options {
				allocs = append(allocs, it.Allocatable())
			}
			for name, q := range total {
				if got := f.newNode.Requests[name]; got.Cmp(q) < 0 {
					t.Errorf("new node %s: requests %s=%s below its pods' %s", f.node.Name, name, got.String(), q.String())
				}
			}
			total = f.newNode.Requests
		}
		for _, alloc := range allocs {
			for name, q := range total {
				if have := alloc[name]; have.Cmp(q) < 0 {
					t.Errorf("node %s overcommitted: %s requests %s, allocatable %s", f.node.Name, name, q.String(), have.String())
				}
			}
		}
		ports := map[string]bool{}
		for _, p := range f.pods {
			for _, c := range p.Spec.Containers {
				for _, port := range c.Ports {
					if port.HostPort == 0 {
						continue
					}
					key := fmt.Sprintf("%s/%d", port.Protocol, port.HostPort)
					if ports[key] {
						t.Errorf("node %s: host port %s used twice", f.node.Name, key)
					}
					ports[key] = true
				}
			}
		}
		for _, p := range f.placed {
			if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(f.node); !ok || err != nil {
				t.Errorf("pod %s on node %s (labels %v): node selector or affinity not met (%v)", p.Name, f.node.Name, f.node.Labels, err)
			}
			if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(f.node.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}); bad {
				t.Errorf("pod %s on node %s: taint %s not tolerated", p.Name, f.node.Name, taint.ToString())
			}
		}
	}

	// Topology, on the final cluster.
	domainOf := func(f *final, key string) (string, bool) { v, ok := f.node.Labels[key]; return v, ok }
	matching := func(sel *metav1.LabelSelector, ns string, key string, owner *corev1.Pod) map[string]int {
		s, _ := metav1.LabelSelectorAsSelector(sel)
		counts := map[string]int{}
		for _, f := range nodes {
			// A spread counts only nodes its pod's node affinity admits
			// (nodeAffinityPolicy Honor, the default).
			if owner != nil {
				if ok, _ := nodeaffinity.GetRequiredNodeAffinity(owner).Match(f.node); !ok {
					continue
				}
			}
			d, ok := domainOf(f, key)
			if !ok {
				continue
			}
			if _, seen := counts[d]; !seen {
				counts[d] = 0
			}
			for _, p := range f.pods {
				if p.Namespace == ns && s.Matches(labels.Set(p.Labels)) {
					counts[d]++
				}
			}
		}
		return counts
	}
	for _, f := range nodes {
		for _, p := range f.placed {
			for _, c := range p.Spec.TopologySpreadConstraints {
				if c.WhenUnsatisfiable != corev1.DoNotSchedule {
					continue
				}
				counts := matching(c.LabelSelector, p.Namespace, c.TopologyKey, p)
				lo, hi := -1, 0
				for _, n := range counts {
					if lo < 0 || n < lo {
						lo = n
					}
					hi = max(hi, n)
				}
				if c.TopologyKey == v1.LabelHostname {
					lo = 0 // a new node is always a fresh domain
				}
				if hi-lo > int(c.MaxSkew) {
					t.Errorf("pod %s: spread on %s skewed %d > %d: %v", p.Name, c.TopologyKey, hi-lo, c.MaxSkew, counts)
				}
			}
			if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
				for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					d, ok := domainOf(f, term.TopologyKey)
					if !ok {
						continue
					}
					counts := matching(term.LabelSelector, p.Namespace, term.TopologyKey, nil)
					self := 0
					if s, _ := metav1.LabelSelectorAsSelector(term.LabelSelector); s.Matches(labels.Set(p.Labels)) {
						self = 1
					}
					if counts[d]-self > 0 {
						t.Errorf("pod %s on %s: anti-affinity on %s broken, %d matching pods in %s", p.Name, f.node.Name, term.TopologyKey, counts[d]-self, d)
					}
				}
			}
			if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					d, ok := domainOf(f, term.TopologyKey)
					counts := matching(term.LabelSelector, p.Namespace, term.TopologyKey, nil)
					if !ok || counts[d] == 0 {
						t.Errorf("pod %s on %s: affinity on %s unmet", p.Name, f.node.Name, term.TopologyKey)
					}
				}
			}
		}
	}

	// Limits hold whichever option each new node launches as.
	for _, np := range in.NodePools {
		if len(np.NodePool.Spec.Limits) == 0 {
			continue
		}
		used := corev1.ResourceList{}
		added := 0
		for _, f := range nodes {
			if f.pool != np.NodePool.Name {
				continue
			}
			if f.newNode != nil {
				added++
			}
			capacity := f.node.Status.Capacity
			if f.newNode != nil {
				capacity = corev1.ResourceList{}
				for _, it := range f.options {
					maxInto(capacity, it.Capacity)
				}
			}
			if capacity == nil {
				capacity = f.node.Status.Allocatable
			}
			sumInto(used, capacity)
			sumInto(used, corev1.ResourceList{"nodes": resource.MustParse("1")})
		}
		for name, lim := range np.NodePool.Spec.Limits {
			if q := used[name]; q.Cmp(lim) > 0 && added > 0 {
				t.Errorf("NodePool %s: %s %s exceeds its limit %s", np.NodePool.Name, name, q.String(), lim.String())
			}
		}
	}
}

func sumInto(into, add corev1.ResourceList) {
	for name, q := range add {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func maxInto(into, other corev1.ResourceList) {
	for name, q := range other {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q
		}
	}
}
