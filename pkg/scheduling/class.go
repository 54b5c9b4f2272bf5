package scheduling

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// podClass holds what the solver derives from a pod spec. Pods with identical
// scheduling-relevant specs (replicas of one workload) share one class, so the work
// is done once per workload rather than once per pod.
type podClass struct {
	key    string
	ns     string
	labels labels.Set
	req    Resources
	// invalid is set when no node can ever take the pod (e.g. an unbound volume).
	invalid string

	// terms are the alternatives of the pod's required node affinity (OR-ed), each
	// joined with its nodeSelector and volume zones.
	terms []Requirements
	// nodeTerms are terms without the volumes: what a topology spread's
	// nodeAffinityPolicy honors. The kube-scheduler leaves volumes to VolumeBinding,
	// so a volume's zone narrows where the pod goes, not which domains it counts.
	nodeTerms   []Requirements
	preferred   []Requirements // preferred node affinity terms, heaviest first
	tolerations []corev1.Toleration
	ports       []hostPort
	volumes     []attachment // CSI volumes, for attach limits

	spreads      []*group // DoNotSchedule
	softSpreads  []*group // ScheduleAnyway
	affinity     []*group
	anti         []*group
	prefAffinity []*group
	prefAnti     []*group
	// matched are the groups whose selector matches pods of this class.
	matched []*group

	levels []*variant
	// monotone: a node that refuses the class refuses it for good (see
	// setMonotone).
	monotone bool
}

// variant is a class at one level of relaxation: preferences are first enforced as
// requirements, then dropped one kind at a time when the pod fits nowhere.
type variant struct {
	class     *podClass
	terms     []Requirements
	spreads   []*group
	affinity  []*group
	anti      []*group
	softTaint bool // PreferNoSchedule taints must be tolerated too
	pools     map[*poolState]*poolFit
	fresh     *float64 // see freshPrice
	keys      []string // see topologyKeys
	queue     nodeQueue
}

// poolFit caches whether a variant can go to a pool at all, and the price of the
// cheapest type there that holds one of its pods.
type poolFit struct {
	reason string
	price  float64
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func (p hostPort) conflicts(o hostPort) bool {
	if p.port != o.port || p.protocol != o.protocol {
		return false
	}
	return p.ip == o.ip || p.ip == "0.0.0.0" || o.ip == "0.0.0.0" || p.ip == "" || o.ip == ""
}

// podHostPorts lists the host ports of the pod's containers and sidecars. Plain
// init containers have exited before the others start, so the kube-scheduler
// leaves their ports out, and so do we.
func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{protocol: proto, ip: p.HostIP, port: p.HostPort})
			}
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

// appendClassKey serialises the scheduling-relevant parts of a pod spec onto b by
// hand: much cheaper than reflection, and it runs for every pod. Affinity and
// spread constraints go in as their protobuf encoding, which covers every field
// and, unlike their String, allocates nothing.
func appendClassKey(b []byte, pod *corev1.Pod, req *Resources, n int) []byte {
	b = append(b, pod.Namespace...)
	b = append(b, '|')
	for i := range min(n, fastResources) {
		b = strconv.AppendInt(b, req.fast[i], 36)
		b = append(b, ',')
	}
	for _, v := range req.more {
		b = strconv.AppendInt(b, v, 36)
		b = append(b, ',')
	}
	b = appendMap(b, pod.Labels)
	b = appendMap(b, pod.Spec.NodeSelector)
	if a := pod.Spec.Affinity; a != nil {
		b = appendProto(b, 'A', a)
	}
	for _, t := range pod.Spec.Tolerations {
		b = append(b, 'T')
		b = append(b, t.Key...)
		b = append(b, '/')
		b = append(b, t.Operator...)
		b = append(b, '/')
		b = append(b, t.Value...)
		b = append(b, '/')
		b = append(b, t.Effect...)
		b = append(b, ';')
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		b = appendProto(b, 'S', &pod.Spec.TopologySpreadConstraints[i])
	}
	for _, p := range podHostPorts(pod) {
		b = append(b, 'P')
		b = append(b, p.protocol...)
		b = append(b, '/')
		b = append(b, p.ip...)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.port), 10)
		b = append(b, ';')
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			b = append(b, 'V')
			b = append(b, v.PersistentVolumeClaim.ClaimName...)
			b = append(b, ';')
		}
		if v.Ephemeral != nil {
			// Its claim is the pod's own, named after it.
			b = append(b, 'E')
			b = append(b, pod.Name+"-"+v.Name+"/"+string(pod.UID)+";"...)
			if t := v.Ephemeral.VolumeClaimTemplate; t != nil && t.Spec.StorageClassName != nil {
				b = append(b, *t.Spec.StorageClassName+";"...)
			}
		}
	}
	return b
}

// protoMessage is an API object's generated protobuf encoding.
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// appendProto appends tag, the length of m's encoding, and the encoding: the
// length keeps one field's bytes from running into the next.
func appendProto(b []byte, tag byte, m protoMessage) []byte {
	size := m.Size()
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(size))
	b = slices.Grow(b, size)
	if _, err := m.MarshalToSizedBuffer(b[len(b) : len(b)+size]); err != nil {
		// Not reached: the buffer has the size the encoding asked for.
		return append(b, fmt.Sprint(m)...)
	}
	return b[:len(b)+size]
}

func appendMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	if len(m) == 1 {
		for k, v := range m { // one label needs no sort, nor its slice
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, v...)
			b = append(b, ';')
		}
		return append(b, '}')
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, '=')
		b = append(b, m[k]...)
		b = append(b, ';')
	}
	return append(b, '}')
}

// newClass derives a class from its first pod.
func (s *solver) newClass(key string, pod *corev1.Pod, req Resources) *podClass {
	c := &podClass{key: key, ns: pod.Namespace, labels: labels.Set(pod.Labels), req: req,
		tolerations: pod.Spec.Tolerations, ports: podHostPorts(pod)}
	fail := func(format string, args ...any) *podClass {
		c.invalid = fmt.Sprintf(format, args...)
		return c
	}
	base := Requirements{}
	for k, v := range pod.Spec.NodeSelector {
		base = base.With(Requirement{Key: NormalizeKey(k), values: []string{v}})
	}
	volumeTerms, err := s.volumeTerms(pod)
	if err != nil {
		return fail("%v", err)
	}
	c.volumes = s.attachments(pod)
	c.terms = []Requirements{base}
	aff := pod.Spec.Affinity
	if aff != nil && aff.NodeAffinity != nil {
		if ns := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; ns != nil && len(ns.NodeSelectorTerms) > 0 {
			c.terms = nil
			for i := range ns.NodeSelectorTerms {
				t, err := FromNodeSelectorTerm(&ns.NodeSelectorTerms[i])
				if err != nil {
					return fail("node affinity: %v", err)
				}
				// A term with no expressions matches no node, as in the kube-scheduler.
				if len(ns.NodeSelectorTerms[i].MatchExpressions)+len(ns.NodeSelectorTerms[i].MatchFields) == 0 {
					continue
				}
				c.terms = append(c.terms, base.And(t))
			}
			if len(c.terms) == 0 {
				return fail("node affinity has no term that can match a node")
			}
		}
		prefs := slices.Clone(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		slices.SortStableFunc(prefs, func(a, b corev1.PreferredSchedulingTerm) int { return cmp.Compare(b.Weight, a.Weight) })
		for i := range prefs {
			t, err := FromNodeSelectorTerm(&prefs[i].Preference)
			if err != nil {
				return fail("preferred node affinity: %v", err)
			}
			c.preferred = append(c.preferred, t)
		}
	}
	c.nodeTerms = c.terms
	if volumeTerms != nil {
		c.terms = crossAnd(c.terms, volumeTerms)
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		tsc := &pod.Spec.TopologySpreadConstraints[i]
		g, err := s.spreadGroup(c, tsc, pod)
		if err != nil {
			return fail("topology spread on %s: %v", tsc.TopologyKey, err)
		}
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			c.softSpreads = append(c.softSpreads, g)
		} else {
			c.spreads = append(c.spreads, g)
		}
	}
	if aff != nil && aff.PodAffinity != nil {
		// One pod must meet every required term: for each term's domains the
		// kube-scheduler counts only the pods that match all the terms.
		required := aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		selections := make([]podSelection, len(required))
		for i := range required {
			sel, err := s.termSelection(&required[i], pod)
			if err != nil {
				return fail("pod affinity: %v", err)
			}
			selections[i] = sel
		}
		for i := range required {
			g, err := s.affinityGroup(affinityGroup, &required[i], pod, slices.Concat(selections[:i], selections[i+1:]))
			if err != nil {
				return fail("pod affinity: %v", err)
			}
			c.affinity = append(c.affinity, g)
		}
		for i := range aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			g, err := s.affinityGroup(affinityGroup, &aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm, pod, nil)
			if err != nil {
				return fail("preferred pod affinity: %v", err)
			}
			c.prefAffinity = append(c.prefAffinity, g)
		}
	}
	if aff != nil && aff.PodAntiAffinity != nil {
		for i := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			g, err := s.affinityGroup(antiAffinityGroup, &aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i], pod, nil)
			if err != nil {
				return fail("pod anti-affinity: %v", err)
			}
			c.anti = append(c.anti, g)
		}
		for i := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			g, err := s.affinityGroup(antiAffinityGroup, &aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm, pod, nil)
			if err != nil {
				return fail("preferred pod anti-affinity: %v", err)
			}
			c.prefAnti = append(c.prefAnti, g)
		}
	}
	return c
}

// buildLevels lays out the relaxation ladder: everything enforced; then without
// preferred pod affinity; with each lighter preferred node affinity term in turn,
// then none; without ScheduleAnyway spreads; and last with PreferNoSchedule taints
// tolerated. Levels that would not differ from the one before are skipped.
func (c *podClass) buildLevels(ignorePreferences bool) {
	if ignorePreferences {
		// PreferencePolicyIgnore: only what the pod requires; PreferNoSchedule
		// taints are still avoided where possible.
		hard := &variant{class: c, terms: c.terms, spreads: c.spreads, affinity: c.affinity, anti: c.anti, softTaint: true}
		tolerant := *hard
		tolerant.softTaint = false
		c.levels = []*variant{hard, &tolerant}
		for _, v := range c.levels {
			v.pools = map[*poolState]*poolFit{}
		}
		return
	}
	strict := &variant{class: c, terms: c.terms, spreads: append(slices.Clone(c.spreads), c.softSpreads...),
		affinity: append(slices.Clone(c.affinity), c.prefAffinity...), anti: append(slices.Clone(c.anti), c.prefAnti...),
		softTaint: true}
	if len(c.preferred) > 0 {
		strict.terms = andEach(c.terms, c.preferred[0])
	}
	c.levels = []*variant{strict}
	next := func(change func(v *variant) bool) {
		v := *c.levels[len(c.levels)-1]
		if change(&v) {
			c.levels = append(c.levels, &v)
		}
	}
	next(func(v *variant) bool {
		v.affinity, v.anti = c.affinity, c.anti
		return len(c.prefAffinity)+len(c.prefAnti) > 0
	})
	// Preferred node affinity terms are tried one at a time, heaviest first, as
	// Karpenter relaxes them, before none is.
	for _, pref := range c.preferred[min(1, len(c.preferred)):] {
		next(func(v *variant) bool { v.terms = andEach(c.terms, pref); return true })
	}
	next(func(v *variant) bool { v.terms = c.terms; return len(c.preferred) > 0 })
	next(func(v *variant) bool { v.spreads = c.spreads; return len(c.softSpreads) > 0 })
	next(func(v *variant) bool { v.softTaint = false; return true })
	for _, v := range c.levels {
		v.pools = map[*poolState]*poolFit{}
	}
}

// andEach joins pref to each of the alternatives in terms.
func andEach(terms []Requirements, pref Requirements) []Requirements {
	out := make([]Requirements, len(terms))
	for i, t := range terms {
		out[i] = t.And(pref)
	}
	return out
}

// setMonotone decides whether a node that refused the class refuses it for good,
// so first-fit can skip it next time. True for resource, requirement, taint and
// anti-affinity constraints, which only lose ground as nodes fill; and for hostname
// spreads where a new node can always open an empty domain (the minimum stays
// zero, so a node's own count only grows). Zonal spreads and affinity can turn a
// refusal into a fit as other domains fill.
func (c *podClass) setMonotone() {
	c.monotone = len(c.affinity)+len(c.prefAffinity) == 0
	for _, g := range append(slices.Clone(c.spreads), c.softSpreads...) {
		if g.key != v1.LabelHostname || !g.fresh {
			c.monotone = false
		}
	}
}

// volumeTerms turns the pod's volumes into placement alternatives (OR-ed), as the
// kube-scheduler's VolumeBinding plugin reads them: a volume's node-affinity terms
// and a StorageClass's allowed topologies are each alternatives, and every volume
// narrows every alternative. Nil means no volume constrains the pod.
func (s *solver) volumeTerms(pod *corev1.Pod) ([]Requirements, error) {
	var out []Requirements
	for i := range pod.Spec.Volumes {
		alts, err := s.volumeAlternatives(pod, &pod.Spec.Volumes[i])
		if err != nil {
			return nil, err
		}
		if len(alts) > 0 {
			out = crossAnd(out, alts)
		}
	}
	return out, nil
}

// volumeAlternatives are where one volume lets the pod run, or an error saying why
// it can run nowhere yet.
func (s *solver) volumeAlternatives(pod *corev1.Pod, vol *corev1.Volume) ([]Requirements, error) {
	var claimName string
	var template *corev1.PersistentVolumeClaimTemplate
	switch {
	case vol.PersistentVolumeClaim != nil:
		claimName = vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil:
		// A generic ephemeral volume's claim is named after the pod and volume.
		claimName, template = pod.Name+"-"+vol.Name, vol.Ephemeral.VolumeClaimTemplate
	default:
		return nil, nil
	}
	pvc := s.pvcs[pod.Namespace+"/"+claimName]
	switch {
	case pvc == nil && template != nil:
		// The ephemeral volume controller has not made the claim yet: it will be
		// the template's, unbound.
		return s.storageClassAlternatives(claimName, template.Spec.StorageClassName)
	case pvc == nil:
		return nil, fmt.Errorf("persistentvolumeclaim %q not found", claimName)
	case template != nil && pod.UID != "" && !metav1.IsControlledBy(pvc, pod):
		return nil, fmt.Errorf("persistentvolumeclaim %q was not created for the pod's ephemeral volume %q", claimName, vol.Name)
	case pvc.DeletionTimestamp != nil:
		return nil, fmt.Errorf("persistentvolumeclaim %q is being deleted", claimName)
	case pvc.Status.Phase == corev1.ClaimLost:
		return nil, fmt.Errorf("persistentvolumeclaim %q is lost (its volume is gone)", claimName)
	case pvc.Spec.VolumeName == "":
		return s.storageClassAlternatives(claimName, pvc.Spec.StorageClassName)
	case !claimBound(pvc):
		return nil, fmt.Errorf("persistentvolumeclaim %q names volume %q but is not bound to it yet", claimName, pvc.Spec.VolumeName)
	}
	pv := s.pvs[pvc.Spec.VolumeName]
	switch {
	case pv == nil:
		return nil, fmt.Errorf("persistentvolume %q of claim %q not found", pvc.Spec.VolumeName, claimName)
	case pv.DeletionTimestamp != nil:
		return nil, fmt.Errorf("persistentvolume %q of claim %q is being deleted", pv.Name, claimName)
	case pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil:
		return nil, nil
	}
	var alts []Requirements
	for i := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		term := volumeTerm(&pv.Spec.NodeAffinity.Required.NodeSelectorTerms[i])
		t, err := FromNodeSelectorTerm(term)
		if err != nil {
			return nil, fmt.Errorf("persistentvolume %q node affinity: %v", pv.Name, err)
		}
		alts = append(alts, t)
	}
	return alts, nil
}

// LabelEBSCSIZone is the zone label the EBS CSI driver's node plugin puts on a node
// and its volumes' topology names: on EC2 it is the node's zone.
const LabelEBSCSIZone = "topology.ebs.csi.aws.com/zone"

// volumeTopologyKey reads a volume's topology key as a node's label. A NodePool's
// nodes cannot be known to get the EBS CSI driver's zone label before its node
// plugin runs, but their zone is that label's value, so a volume in an EBS zone
// asks for a node in that zone (as Karpenter reads it).
func volumeTopologyKey(key string) string {
	if key == LabelEBSCSIZone {
		return v1.LabelZone
	}
	return key
}

// volumeTerm is a volume's node-affinity term with its keys read as volumeTopologyKey
// does; the term itself is left as it is.
func volumeTerm(t *corev1.NodeSelectorTerm) *corev1.NodeSelectorTerm {
	if !slices.ContainsFunc(t.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool { return r.Key == LabelEBSCSIZone }) {
		return t
	}
	out := t.DeepCopy()
	for i := range out.MatchExpressions {
		out.MatchExpressions[i].Key = volumeTopologyKey(out.MatchExpressions[i].Key)
	}
	return out
}

// claimBound says the PV controller has finished binding the claim to the volume
// it names (the kube-scheduler waits for that annotation; a Bound phase says so too).
func claimBound(pvc *corev1.PersistentVolumeClaim) bool {
	_, done := pvc.Annotations["pv.kubernetes.io/bind-completed"]
	return done || pvc.Status.Phase == corev1.ClaimBound
}

// storageClassAlternatives are the allowed topologies of an unbound claim's
// StorageClass, which must wait for the first consumer (an immediate claim is
// bound by the PV controller before any pod can use it).
func (s *solver) storageClassAlternatives(claimName string, className *string) ([]Requirements, error) {
	name := ""
	if className != nil {
		name = *className
	}
	sc := s.storageClasses[name]
	if sc == nil || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil, fmt.Errorf("persistentvolumeclaim %q is unbound and its storage class %q does not wait for the first consumer", claimName, name)
	}
	var alts []Requirements
	for _, topo := range sc.AllowedTopologies {
		var t Requirements
		for _, e := range topo.MatchLabelExpressions {
			r, err := NewRequirement(volumeTopologyKey(e.Key), v1.NodeSelectorOpIn, e.Values...)
			if err != nil {
				return nil, fmt.Errorf("storage class %q allowed topologies: %v", sc.Name, err)
			}
			t = t.With(r)
		}
		alts = append(alts, t)
	}
	return alts, nil
}

// crossAnd joins every alternative of a with every one of b; nil a stands for no
// constraint.
func crossAnd(a, b []Requirements) []Requirements {
	if a == nil {
		return b
	}
	out := make([]Requirements, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x.And(y))
		}
	}
	return out
}
