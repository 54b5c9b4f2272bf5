package convert

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// kubeletRequest is a NodePool's kubelet settings, to move into its EC2NodeClass.
type kubeletRequest struct {
	src     *source
	field   string
	pool    *v1.NodePool
	kubelet *awsv1.KubeletConfiguration
}

// convertPool converts Provisioners and v1beta1 NodePools and NodeClaims.
func (c *converter) convertPool(s *source) error {
	switch s.apiVersion + "/" + s.kind {
	case v1alpha5 + "/Provisioner":
		var p provisioner
		if err := c.decode(s, &p, provisionerHint); err != nil {
			return err
		}
		return c.fromProvisioner(s, &p)
	case coreV1beta1 + "/NodePool":
		var np nodePoolV1beta1
		if err := c.decode(s, &np, noHint); err != nil {
			return err
		}
		return c.fromNodePoolV1beta1(s, &np)
	case coreV1beta1 + "/NodeClaim":
		var nc nodeClaimV1beta1
		if err := c.decode(s, &nc, noHint); err != nil {
			return err
		}
		return c.fromNodeClaimV1beta1(s, &nc)
	}
	return nil
}

// awsProviderFields are the fields of an inline provider block, which some
// Provisioners carry at the top of their spec by mistake.
var awsProviderFields = []string{"subnetSelector", "securityGroupSelector", "amiSelector", "amiFamily", "instanceProfile",
	"launchTemplate", "userData", "tags", "blockDeviceMappings", "metadataOptions", "detailedMonitoring", "context"}

func provisionerHint(field string) string {
	name, ok := strings.CutPrefix(field, "spec.")
	if !ok || strings.Contains(name, ".") {
		return ""
	}
	switch {
	case slices.Contains(awsProviderFields, name):
		return "it belongs to the AWS provider: under spec.provider, or in an AWSNodeTemplate named by spec.providerRef"
	case name == "instanceTypes":
		return "a requirement on node.kubernetes.io/instance-type says this"
	case name == "role":
		return "an EC2NodeClass field: set spec.role of the EC2NodeClass"
	}
	return ""
}

func (c *converter) fromProvisioner(s *source, p *provisioner) error {
	spec := &p.Spec
	np := &v1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: outputMeta(p.Metadata),
	}
	out := &np.Spec
	for field, from := range map[string]string{"template.metadata.labels": "labels", "template.metadata.annotations": "annotations",
		"template.spec.requirements": "requirements", "template.spec.taints": "taints", "template.spec.startupTaints": "startupTaints",
		"limits": "limits.resources", "weight": "weight"} {
		s.from("NodePool", "spec."+field, "spec."+from)
	}
	out.Template.Labels = c.labels(s, "spec.labels", spec.Labels)
	out.Template.Annotations = spec.Annotations
	reqs, err := c.requirements(s, "spec.requirements", spec.Requirements)
	if err != nil {
		return err
	}
	out.Template.Spec.Requirements = withV1alpha5Defaults(reqs, spec.Labels)
	out.Template.Spec.Taints = spec.Taints
	out.Template.Spec.StartupTaints = spec.StartupTaints

	switch {
	case spec.Provider != nil && spec.ProviderRef != nil:
		return fmt.Errorf("spec.provider and spec.providerRef are both set; v1alpha5 takes one")
	case spec.ProviderRef != nil:
		ref := spec.ProviderRef
		if ref.Name == "" {
			return fmt.Errorf("spec.providerRef.name: required")
		}
		if ref.Kind != "" && ref.Kind != "AWSNodeTemplate" {
			return fmt.Errorf("spec.providerRef.kind: %q; only AWSNodeTemplate converts", ref.Kind)
		}
		out.Template.Spec.NodeClassRef = ec2NodeClassRef(ref.Name)
	case spec.Provider != nil:
		if spec.Provider.Kind != "" && spec.Provider.Kind != "AWS" {
			return fmt.Errorf("spec.provider.kind: %q; only the AWS provider converts", spec.Provider.Kind)
		}
		out.Template.Spec.NodeClassRef = ec2NodeClassRef(p.Metadata.Name)
	default:
		out.Template.Spec.NodeClassRef = ec2NodeClassRef(p.Metadata.Name)
		c.warn(s, "spec.providerRef", "neither spec.provider nor spec.providerRef is set; nodeClassRef names EC2NodeClass %s, which you need to create", p.Metadata.Name)
	}

	if spec.TTLSecondsUntilExpired != nil {
		d, err := seconds("spec.ttlSecondsUntilExpired", *spec.TTLSecondsUntilExpired)
		if err != nil {
			return err
		}
		out.Template.Spec.ExpireAfter = d
	} else {
		// Unset meant never; v1's default is 720h.
		out.Template.Spec.ExpireAfter = v1.NillableDuration{Never: true}
	}
	consolidation := spec.Consolidation != nil && spec.Consolidation.Enabled != nil && *spec.Consolidation.Enabled
	switch {
	case consolidation && spec.TTLSecondsAfterEmpty != nil:
		return fmt.Errorf("spec.ttlSecondsAfterEmpty and spec.consolidation.enabled are both set; v1alpha5 takes one (consolidation removes empty nodes too)")
	case consolidation:
		out.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
		out.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	case spec.TTLSecondsAfterEmpty != nil:
		d, err := seconds("spec.ttlSecondsAfterEmpty", *spec.TTLSecondsAfterEmpty)
		if err != nil {
			return err
		}
		out.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		out.Disruption.ConsolidateAfter = d
	default:
		// Nodes were never removed for being empty or underused.
		out.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		out.Disruption.ConsolidateAfter = v1.NillableDuration{Never: true}
	}
	if spec.Limits != nil {
		out.Limits = v1.Limits(spec.Limits.Resources)
	}
	out.Weight = spec.Weight
	if spec.KubeletConfiguration != nil {
		c.requestKubelet(s, "spec.kubeletConfiguration", np, spec.KubeletConfiguration)
	}
	s.pool = np
	// The NodePool goes before the EC2NodeClass made from the provider block.
	s.out = append([]object{np}, s.out...)
	return nil
}

func (c *converter) fromNodePoolV1beta1(s *source, old *nodePoolV1beta1) error {
	np := &v1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: outputMeta(old.Metadata),
	}
	out := &np.Spec
	tmpl := &old.Spec.Template
	out.Template.Labels = c.labels(s, "spec.template.metadata.labels", tmpl.Metadata.Labels)
	out.Template.Annotations = tmpl.Metadata.Annotations
	reqs, err := c.requirements(s, "spec.template.spec.requirements", tmpl.Spec.Requirements)
	if err != nil {
		return err
	}
	out.Template.Spec.Requirements = reqs
	out.Template.Spec.Taints = tmpl.Spec.Taints
	out.Template.Spec.StartupTaints = tmpl.Spec.StartupTaints
	ref, err := nodeClassRef("spec.template.spec.nodeClassRef", tmpl.Spec.NodeClassRef)
	if err != nil {
		return err
	}
	out.Template.Spec.NodeClassRef = ref
	if len(tmpl.Spec.Resources.Requests) > 0 {
		c.warn(s, "spec.template.spec.resources", "not carried over: a NodePool's template has no resources in v1")
	}
	if d := old.Spec.Disruption; d != nil {
		out.Template.Spec.ExpireAfter = d.ExpireAfter
		out.Disruption.ConsolidateAfter = d.ConsolidateAfter
		out.Disruption.Budgets = d.Budgets
		switch d.ConsolidationPolicy {
		case "":
		case "WhenUnderutilized":
			out.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
			if d.ConsolidateAfter.IsZero() {
				// v1beta1 took no consolidateAfter with this policy and acted at once.
				out.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
			}
		case "WhenEmpty":
			out.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		default:
			return fmt.Errorf("spec.disruption.consolidationPolicy: %q; want WhenEmpty or WhenUnderutilized", d.ConsolidationPolicy)
		}
	}
	out.Limits = v1.Limits(old.Spec.Limits)
	out.Weight = old.Spec.Weight
	if tmpl.Spec.Kubelet != nil {
		c.requestKubelet(s, "spec.template.spec.kubelet", np, tmpl.Spec.Kubelet)
	}
	s.pool = np
	s.out = append(s.out, np)
	return nil
}

func (c *converter) fromNodeClaimV1beta1(s *source, old *nodeClaimV1beta1) error {
	nc := &v1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: outputMeta(old.Metadata),
	}
	reqs, err := c.requirements(s, "spec.requirements", old.Spec.Requirements)
	if err != nil {
		return err
	}
	nc.Spec.Requirements = reqs
	if nc.Spec.Requirements == nil {
		nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{}
	}
	nc.Spec.Taints = old.Spec.Taints
	nc.Spec.StartupTaints = old.Spec.StartupTaints
	nc.Spec.Resources = old.Spec.Resources
	ref, err := nodeClassRef("spec.nodeClassRef", old.Spec.NodeClassRef)
	if err != nil {
		return err
	}
	nc.Spec.NodeClassRef = ref
	if old.Spec.Kubelet != nil {
		c.warn(s, "spec.kubelet", "not carried over: in v1 kubelet settings live in the EC2NodeClass; the NodePool's conversion moves them there")
	}
	if len(old.Status) > 0 {
		c.warn(s, "status", "not carried over: the controller writes a NodeClaim's status")
	}
	s.out = append(s.out, nc)
	return nil
}

// nodeClassRef converts v1beta1's {apiVersion, kind, name} to v1's {group, kind, name}.
func nodeClassRef(path string, ref *objectReference) (*v1.NodeClassReference, error) {
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("%s.name: required", path)
	}
	out := ec2NodeClassRef(ref.Name)
	if ref.APIVersion != "" {
		out.Group, _, _ = strings.Cut(ref.APIVersion, "/")
	}
	if ref.Kind != "" {
		out.Kind = ref.Kind
	}
	return out, nil
}

func ec2NodeClassRef(name string) *v1.NodeClassReference {
	return &v1.NodeClassReference{Group: awsv1.Group, Kind: kindEC2NodeClass, Name: name}
}

// seconds converts a v1alpha5 TTL in seconds.
func seconds(field string, n int64) (v1.NillableDuration, error) {
	if n < 0 || n > int64(1<<63-1)/int64(time.Second) {
		return v1.NillableDuration{}, fmt.Errorf("%s: %d is not a number of seconds a duration holds", field, n)
	}
	d := time.Duration(n) * time.Second
	return v1.NillableDuration{Duration: &d}, nil
}

// outputMeta keeps what a manifest sets: the name, labels and annotations, less
// what the API server or kubectl wrote and the old controller's hashes.
func outputMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Labels: m.Labels}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		switch k {
		case corev1.LastAppliedConfigAnnotation, "karpenter.sh/provisioner-hash", "karpenter.sh/nodepool-hash",
			"karpenter.sh/nodepool-hash-version", "karpenter.k8s.aws/nodetemplate-hash", "karpenter.k8s.aws/ec2nodeclass-hash",
			"karpenter.k8s.aws/ec2nodeclass-hash-version":
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = m.Annotations[k]
	}
	return out
}

// requestKubelet converts a pool's kubelet settings and queues them for its class.
func (c *converter) requestKubelet(s *source, field string, np *v1.NodePool, k *kubelet) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref.Group != awsv1.Group || ref.Kind != kindEC2NodeClass {
		c.warn(s, field, "not carried over: in v1 kubelet settings live in the node class, and %s/%s is not an EC2NodeClass", ref.Group, ref.Kind)
		return
	}
	kc := c.kubelet(s, field, k)
	if _, ok := c.classes[ref.Name]; !ok {
		c.warn(s, field, "not carried over: in v1 kubelet settings live in the EC2NodeClass, and EC2NodeClass %s is not in the input; convert it together with this object", ref.Name)
		return
	}
	c.kubelets = append(c.kubelets, kubeletRequest{src: s, field: field, pool: np, kubelet: kc})
}

func (c *converter) kubelet(s *source, field string, k *kubelet) *awsv1.KubeletConfiguration {
	if k.ContainerRuntime != nil {
		c.warn(s, field+".containerRuntime", "not carried over: nodes run containerd, the only runtime EKS supports")
	}
	out := &awsv1.KubeletConfiguration{
		ClusterDNS:                  k.ClusterDNS,
		MaxPods:                     k.MaxPods,
		PodsPerCore:                 k.PodsPerCore,
		EvictionSoftGracePeriod:     k.EvictionSoftGracePeriod,
		EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
		ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
		CPUCFSQuota:                 k.CPUCFSQuota,
	}
	for name, q := range k.SystemReserved {
		if out.SystemReserved == nil {
			out.SystemReserved = map[string]awsv1.ReservedQuantity{}
		}
		out.SystemReserved[name] = awsv1.ReservedQuantity(q.String())
	}
	for name, q := range k.KubeReserved {
		if out.KubeReserved == nil {
			out.KubeReserved = map[string]awsv1.ReservedQuantity{}
		}
		out.KubeReserved[name] = awsv1.ReservedQuantity(q.String())
	}
	for signal, v := range k.EvictionHard {
		if out.EvictionHard == nil {
			out.EvictionHard = map[string]awsv1.EvictionThreshold{}
		}
		out.EvictionHard[signal] = awsv1.EvictionThreshold(v)
	}
	for signal, v := range k.EvictionSoft {
		if out.EvictionSoft == nil {
			out.EvictionSoft = map[string]awsv1.EvictionThreshold{}
		}
		out.EvictionSoft[signal] = awsv1.EvictionThreshold(v)
	}
	return out
}

// placeKubelets moves the NodePools' kubelet settings into their EC2NodeClasses.
// NodePools that share a class but not their settings (no settings being one
// choice) cannot share it in v1: the first group keeps the class, preferring the
// NodePools without settings, and each other group gets a copy named after its
// first NodePool.
func (c *converter) placeKubelets() {
	byClass := map[string][]kubeletRequest{}
	var order []string
	for _, r := range c.kubelets {
		name := r.pool.Spec.Template.Spec.NodeClassRef.Name
		if _, ok := byClass[name]; !ok {
			order = append(order, name)
		}
		byClass[name] = append(byClass[name], r)
	}
	for _, name := range order {
		cl := c.classes[name]
		requests := byClass[name]
		// Is there a NodePool on this class with no kubelet settings?
		bare := false
		for _, s := range c.sources {
			if s.pool != nil && refersTo(s.pool, name) && !slices.ContainsFunc(requests, func(r kubeletRequest) bool { return r.pool == s.pool }) {
				bare = true
			}
		}
		var groups [][]kubeletRequest
		for _, r := range requests {
			i := slices.IndexFunc(groups, func(g []kubeletRequest) bool { return reflect.DeepEqual(g[0].kubelet, r.kubelet) })
			if i < 0 {
				groups = append(groups, []kubeletRequest{r})
			} else {
				groups[i] = append(groups[i], r)
			}
		}
		for i, g := range groups {
			if i == 0 && !bare {
				cl.obj.Spec.Kubelet = g[0].kubelet
				continue
			}
			copied := cl.obj.DeepCopy()
			copied.Name = name + "-" + g[0].pool.Name
			copied.Spec.Kubelet = g[0].kubelet
			for _, r := range g {
				r.pool.Spec.Template.Spec.NodeClassRef.Name = copied.Name
				c.warn(r.src, r.field, "EC2NodeClass %s is shared with NodePools whose kubelet settings differ; these settings went into a copy, EC2NodeClass %s, which this NodePool now names", name, copied.Name)
			}
			g[0].src.out = append(g[0].src.out, copied)
		}
	}
}

func refersTo(np *v1.NodePool, class string) bool {
	ref := np.Spec.Template.Spec.NodeClassRef
	return ref != nil && ref.Group == awsv1.Group && ref.Kind == kindEC2NodeClass && ref.Name == class
}

// decodeQuiet decodes without reporting unknown fields.
func decodeQuiet(s *source, into any) error {
	if _, err := kjson.UnmarshalStrict(s.json, into); err != nil {
		return decodeError(err)
	}
	return nil
}
