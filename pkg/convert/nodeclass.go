package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// maxTerms is the most terms a v1 selector takes.
const maxTerms = 30

// convertClass converts AWSNodeTemplates, v1beta1 EC2NodeClasses and the inline
// providers of Provisioners into EC2NodeClasses.
func (c *converter) convertClass(s *source) error {
	switch s.apiVersion + "/" + s.kind {
	case awsV1alpha1 + "/AWSNodeTemplate":
		var nt nodeTemplate
		if err := c.decode(s, &nt, noHint); err != nil {
			return err
		}
		nc, err := c.fromTemplate(s, "spec", &nt.Spec)
		if err != nil {
			return err
		}
		nc.ObjectMeta = outputMeta(nt.Metadata)
		return c.addClass(s, nc)
	case awsV1beta1 + "/EC2NodeClass":
		var old nodeClassV1beta1
		if err := c.decode(s, &old, noHint); err != nil {
			return err
		}
		nc, err := c.fromV1beta1(s, &old.Spec)
		if err != nil {
			return err
		}
		nc.ObjectMeta = outputMeta(old.Metadata)
		return c.addClass(s, nc)
	case v1alpha5 + "/Provisioner":
		var p provisioner
		// Decoded again, with warnings, by convertPool; here only the provider.
		if err := decodeQuiet(s, &p); err != nil || p.Spec.Provider == nil || p.Spec.ProviderRef != nil {
			return nil
		}
		nc, err := c.fromTemplate(s, "spec.provider", &p.Spec.Provider.nodeTemplateSpec)
		if err != nil {
			return err
		}
		nc.ObjectMeta = metav1.ObjectMeta{Name: p.Metadata.Name}
		return c.addClass(s, nc)
	}
	return nil
}

func (c *converter) addClass(s *source, nc *awsv1.EC2NodeClass) error {
	nc.TypeMeta = metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: kindEC2NodeClass}
	if other, ok := c.classes[nc.Name]; ok {
		return fmt.Errorf("makes EC2NodeClass %s, as %s does; rename one of them", nc.Name, other.src.what)
	}
	c.classes[nc.Name] = &class{obj: nc, src: s}
	s.out = append(s.out, nc)
	return nil
}

// fromTemplate converts an AWSNodeTemplate spec (or a Provisioner's provider
// block, at path) into an EC2NodeClass.
func (c *converter) fromTemplate(s *source, path string, t *nodeTemplateSpec) (*awsv1.EC2NodeClass, error) {
	nc := &awsv1.EC2NodeClass{}
	spec := &nc.Spec
	for field, from := range map[string]string{"subnetSelectorTerms": "subnetSelector", "securityGroupSelectorTerms": "securityGroupSelector",
		"amiSelectorTerms": "amiSelector", "amiFamily": "amiFamily", "userData": "userData", "tags": "tags",
		"blockDeviceMappings": "blockDeviceMappings", "metadataOptions": "metadataOptions", "context": "context"} {
		s.from(kindEC2NodeClass, "spec."+field, path+"."+from)
	}
	if len(t.SubnetSelector) == 0 {
		return nil, fmt.Errorf("%s.subnetSelector: required: the tags (or aws-ids) of the subnets nodes launch into", path)
	}
	ids, terms, err := c.selector(s, path+".subnetSelector", t.SubnetSelector, nil)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		spec.SubnetSelectorTerms = append(spec.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{ID: id})
	}
	for _, term := range terms {
		spec.SubnetSelectorTerms = append(spec.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{Tags: term.tags})
	}
	if t.LaunchTemplateName != nil {
		c.warn(s, path+".launchTemplate", "not carried over: v1 has no unmanaged launch templates; put its security groups, user data, block devices and metadata options into the EC2NodeClass")
	}
	if len(t.SecurityGroupSelector) == 0 {
		return nil, fmt.Errorf("%s.securityGroupSelector: required in v1: the tags (or aws-ids) of the security groups nodes get", path)
	}
	ids, terms, err = c.selector(s, path+".securityGroupSelector", t.SecurityGroupSelector, nil)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		spec.SecurityGroupSelectorTerms = append(spec.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{ID: id})
	}
	for _, term := range terms {
		spec.SecurityGroupSelectorTerms = append(spec.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{Tags: term.tags})
	}

	var amiTerms []awsv1.AMISelectorTerm
	if len(t.AMISelector) > 0 {
		ids, terms, err := c.selector(s, path+".amiSelector", t.AMISelector, []string{"aws::name", "aws::owners"})
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			amiTerms = append(amiTerms, awsv1.AMISelectorTerm{ID: id})
		}
		for _, term := range terms {
			amiTerms = append(amiTerms, awsv1.AMISelectorTerm{Tags: term.tags, Name: term.special["aws::name"], Owner: term.special["aws::owners"]})
		}
	}
	family := awsv1.AMIFamilyAL2 // v1alpha1's default
	if t.AMIFamily != nil {
		family = *t.AMIFamily
	}
	if err := c.amis(s, path, family, amiTerms, t.BlockDeviceMappings == nil, nc); err != nil {
		return nil, err
	}

	switch {
	case t.InstanceProfile != nil:
		spec.InstanceProfile = ptr.To(*t.InstanceProfile)
		c.warn(s, path+".instanceProfile", "carried over as spec.instanceProfile; the role inside it cannot be inferred, so spec.role (which lets Tailor manage the instance profile) is left to you")
	default:
		if err := c.identity(nc, path+".instanceProfile: unset, so the install's default instance profile was used, which v1 does not have"); err != nil {
			return nil, err
		}
	}
	spec.UserData = t.UserData
	spec.Tags = c.tags(s, path+".tags", t.Tags)
	spec.BlockDeviceMappings = t.BlockDeviceMappings
	spec.MetadataOptions = c.metadataOptions(s, path+".metadataOptions", t.MetadataOptions)
	spec.DetailedMonitoring = t.DetailedMonitoring
	spec.Context = t.Context
	spec.InstanceStorePolicy = t.InstanceStorePolicy
	spec.AssociatePublicIPAddress = t.AssociatePublicIP
	return nc, nil
}

// identity sets the role or instance profile from the options, for a source that
// names neither (it relied on the install's default instance profile). Without
// the options, the class would be one v1 refuses: an error saying why, not a guess.
func (c *converter) identity(nc *awsv1.EC2NodeClass, why string) error {
	switch {
	case c.opts.InstanceProfile != "":
		nc.Spec.InstanceProfile = ptr.To(c.opts.InstanceProfile)
	case c.opts.Role != "":
		nc.Spec.Role = c.opts.Role
	default:
		return fmt.Errorf("%s: pass --role with the nodes' IAM role (or --instance-profile)", why)
	}
	return nil
}

// fromV1beta1 converts a v1beta1 EC2NodeClass spec.
func (c *converter) fromV1beta1(s *source, old *awsv1.EC2NodeClassSpec) (*awsv1.EC2NodeClass, error) {
	nc := &awsv1.EC2NodeClass{Spec: *old}
	spec := &nc.Spec
	if old.AMIFamily == nil {
		return nil, fmt.Errorf("spec.amiFamily: required in v1beta1 (AL2, AL2023, Bottlerocket, Ubuntu, Windows2019, Windows2022 or Custom)")
	}
	spec.AMIFamily = nil
	spec.AMISelectorTerms = nil
	if err := c.amis(s, "spec", *old.AMIFamily, old.AMISelectorTerms, old.BlockDeviceMappings == nil, nc); err != nil {
		return nil, err
	}
	if spec.Role == "" && spec.InstanceProfile == nil {
		if err := c.identity(nc, "spec.role: unset, and so is spec.instanceProfile; v1 needs one of them"); err != nil {
			return nil, err
		}
	}
	spec.Tags = c.tags(s, "spec.tags", old.Tags)
	spec.MetadataOptions = c.metadataOptions(s, "spec.metadataOptions", old.MetadataOptions)
	return nc, nil
}

// amis sets amiFamily and amiSelectorTerms. Without terms, the family's alias at
// "latest" selects what the old API discovered: the newest EKS-optimized image.
func (c *converter) amis(s *source, path, family string, terms []awsv1.AMISelectorTerm, noDevices bool, nc *awsv1.EC2NodeClass) error {
	spec := &nc.Spec
	switch family {
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022:
		if len(terms) == 0 {
			spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: awsv1.Alias{Family: family, Version: awsv1.AliasVersionLatest}.String()}}
			return nil
		}
	case awsv1.AMIFamilyCustom:
		if len(terms) == 0 {
			return fmt.Errorf("%s.amiFamily: Custom needs AMIs named in the selector", path)
		}
		c.warn(s, path+".amiFamily", "Custom: v1 expects the user data to register the node with the taint karpenter.sh/unregistered:NoExecute, which Tailor removes; add it if yours does not")
	case "Ubuntu":
		if len(terms) == 0 {
			return fmt.Errorf("%s.amiFamily: Ubuntu is not an AMI family in v1 and has no alias; name the Ubuntu AMIs in the selector, and they are carried over with AL2's user data", path)
		}
		c.warn(s, path+".amiFamily", "Ubuntu is not an AMI family in v1; written as AL2, whose user data format Ubuntu's images share")
		family = awsv1.AMIFamilyAL2
		if noDevices {
			// Ubuntu's images boot from /dev/sda1, not AL2's /dev/xvda.
			spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{
				DeviceName: ptr.To("/dev/sda1"),
				RootVolume: true,
				EBS: &awsv1.BlockDevice{
					Encrypted:  ptr.To(true),
					VolumeType: ptr.To("gp3"),
					VolumeSize: ptr.To(resource.MustParse("20Gi")),
				},
			}}
		}
	default:
		return fmt.Errorf("%s.amiFamily: %q is not an AMI family (want AL2, AL2023, Bottlerocket, Ubuntu, Windows2019, Windows2022 or Custom)", path, family)
	}
	spec.AMIFamily = ptr.To(family)
	spec.AMISelectorTerms = terms
	return nil
}

// selectorTerm is one term made from a v1alpha1 selector map.
type selectorTerm struct {
	tags    map[string]string
	special map[string]string
}

// selector turns a v1alpha1 selector map into v1 terms. "aws-ids" (or "aws::ids")
// lists ids, comma separated; other keys are tags, whose comma-separated values
// each matched, so each combination of values becomes a term. specialKeys (the
// AMI selector's aws::name and aws::owners) are comma-separated lists too, kept
// apart from the tags.
func (c *converter) selector(s *source, path string, sel map[string]string, specialKeys []string) (ids []string, terms []selectorTerm, err error) {
	keys := slices.Sorted(maps.Keys(sel))
	type dim struct {
		key     string
		values  []string
		special bool
	}
	var dims []dim
	var others []string
	for _, k := range keys {
		values := splitList(sel[k])
		switch {
		case k == "aws-ids" || k == "aws::ids":
			ids = append(ids, values...)
		case len(values) == 0:
			return nil, nil, fmt.Errorf("%s.%s: empty value", path, k)
		default:
			dims = append(dims, dim{key: k, values: values, special: slices.Contains(specialKeys, k)})
			others = append(others, k)
		}
	}
	if len(ids) > 0 {
		if len(others) > 0 {
			c.warn(s, path, "v1 selects by id alone, so %s, which narrowed the ids, were not carried over", strings.Join(others, ", "))
		}
		if len(ids) > maxTerms {
			return nil, nil, fmt.Errorf("%s: %d ids, more than the %d terms v1 allows", path, len(ids), maxTerms)
		}
		return ids, nil, nil
	}
	terms = []selectorTerm{{}}
	for _, d := range dims {
		var next []selectorTerm
		for _, t := range terms {
			for _, v := range d.values {
				n := selectorTerm{tags: cloneMap(t.tags), special: cloneMap(t.special)}
				if d.special {
					n.special = setKey(n.special, d.key, v)
				} else {
					n.tags = setKey(n.tags, d.key, v)
				}
				next = append(next, n)
			}
		}
		terms = next
		if len(terms) > maxTerms {
			return nil, nil, fmt.Errorf("%s: the comma-separated values make more than the %d terms v1 allows", path, maxTerms)
		}
	}
	return nil, terms, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// tags drops the tags v1 reserves for itself.
func (c *converter) tags(s *source, path string, tags map[string]string) map[string]string {
	var out map[string]string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if k == "" || k == "eks:eks-cluster-name" || strings.HasPrefix(k, "kubernetes.io/cluster") ||
			k == "karpenter.sh/nodepool" || k == "karpenter.sh/nodeclaim" || k == "karpenter.k8s.aws/ec2nodeclass" ||
			k == "karpenter.sh/provisioner-name" || k == "karpenter.sh/managed-by" {
			c.warn(s, path+"."+k, "not carried over: Tailor sets this tag itself")
			continue
		}
		out = setKey(out, k, tags[k])
	}
	return out
}

// metadataOptions keeps the old default hop limit of 2 where the source left it
// out: v1's default of 1 keeps pods off the instance metadata service.
func (c *converter) metadataOptions(s *source, path string, m *awsv1.MetadataOptions) *awsv1.MetadataOptions {
	if m != nil && m.HTTPPutResponseHopLimit != nil {
		return m
	}
	out := &awsv1.MetadataOptions{
		HTTPEndpoint:     ptr.To("enabled"),
		HTTPProtocolIPv6: ptr.To("disabled"),
		HTTPTokens:       ptr.To("required"),
	}
	if m != nil {
		out = m.DeepCopy()
	}
	out.HTTPPutResponseHopLimit = ptr.To[int64](2)
	c.warn(s, path+".httpPutResponseHopLimit", "written as 2, the old default, so pods keep reaching the instance metadata service; v1's default is 1")
	return out
}

func noHint(string) string { return "" }
