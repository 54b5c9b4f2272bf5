package aws

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// NodeClass hash annotations, on the EC2NodeClass and on the NodeClaims launched
// from it, as Karpenter names them.
const (
	AnnotationNodeClassHash        = awsv1.Group + "/ec2nodeclass-hash"
	AnnotationNodeClassHashVersion = awsv1.Group + "/ec2nodeclass-hash-version"
	// NodeClassHashVersion changes when what the hash covers does, so that a new
	// version of Tailor does not see every node as drifted.
	NodeClassHashVersion = "v1"
)

// NodeClassHash hashes the parts of an EC2NodeClass's spec that shape its
// instances but are not resolved from the cloud: a change to any of them drifts
// every node. The selector terms are left out: what they select (subnets, security
// groups, AMIs) drifts through the resolved status instead.
func NodeClassHash(nc *awsv1.EC2NodeClass) string {
	s := nc.Spec
	hashed := struct {
		AMIFamily                *string
		UserData                 *string
		Role                     string
		InstanceProfile          *string
		Tags                     map[string]string
		Kubelet                  *awsv1.KubeletConfiguration
		BlockDeviceMappings      []*awsv1.BlockDeviceMapping
		InstanceStorePolicy      *awsv1.InstanceStorePolicy
		DetailedMonitoring       *bool
		MetadataOptions          *awsv1.MetadataOptions
		AssociatePublicIPAddress *bool
		Context                  *string
	}{s.AMIFamily, s.UserData, s.Role, s.InstanceProfile, s.Tags, s.Kubelet, s.BlockDeviceMappings,
		s.InstanceStorePolicy, s.DetailedMonitoring, s.MetadataOptions, s.AssociatePublicIPAddress, s.Context}
	// encoding/json sorts map keys, so equal specs hash equal.
	data, _ := json.Marshal(hashed)
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 10)
}

// SubnetFilters are the DescribeSubnets filters of one selector term.
func SubnetFilters(t awsv1.SubnetSelectorTerm) []ec2types.Filter {
	if t.ID != "" {
		return []ec2types.Filter{filter("subnet-id", t.ID)}
	}
	return tagFilters(t.Tags)
}

// SecurityGroupFilters are the DescribeSecurityGroups filters of one selector term.
func SecurityGroupFilters(t awsv1.SecurityGroupSelectorTerm) []ec2types.Filter {
	switch {
	case t.ID != "":
		return []ec2types.Filter{filter("group-id", t.ID)}
	case t.Name != "":
		return append([]ec2types.Filter{filter("group-name", t.Name)}, tagFilters(t.Tags)...)
	}
	return tagFilters(t.Tags)
}

// tagFilters match every tag; a value of "*" only asks that the tag exists.
func tagFilters(tags map[string]string) []ec2types.Filter {
	var out []ec2types.Filter
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if tags[k] == "*" {
			out = append(out, filter("tag-key", k))
			continue
		}
		out = append(out, filter("tag:"+k, tags[k]))
	}
	return out
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// CapacityReservationQuery is the DescribeCapacityReservations request of one
// selector term: by ID, or by tags and owner; only active reservations count.
func CapacityReservationQuery(t awsv1.CapacityReservationSelectorTerm) ([]string, []ec2types.Filter) {
	filters := []ec2types.Filter{filter("state", "active")}
	if t.ID != "" {
		return []string{t.ID}, filters
	}
	filters = append(filters, tagFilters(t.Tags)...)
	if t.OwnerID != "" {
		filters = append(filters, filter("owner-id", t.OwnerID))
	}
	if t.InstanceMatchCriteria != "" {
		filters = append(filters, filter("instance-match-criteria", t.InstanceMatchCriteria))
	}
	return nil, filters
}

// SortCapacityReservations dedupes reservations and orders them by ID, in the
// status's form.
func SortCapacityReservations(found []ec2types.CapacityReservation) []awsv1.CapacityReservation {
	var out []awsv1.CapacityReservation
	seen := map[string]bool{}
	for _, r := range found {
		id := deref(r.CapacityReservationId)
		if seen[id] {
			continue
		}
		seen[id] = true
		cr := awsv1.CapacityReservation{ID: id, AvailabilityZone: deref(r.AvailabilityZone), InstanceType: deref(r.InstanceType),
			InstanceMatchCriteria: string(r.InstanceMatchCriteria), OwnerID: deref(r.OwnerId),
			ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive,
			Interruptible: deref(r.Interruptible)}
		if r.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
			cr.ReservationType = awsv1.CapacityReservationTypeCapacityBlock
		}
		if r.EndDate != nil {
			end := metav1.NewTime(*r.EndDate)
			cr.EndTime = &end
		}
		out = append(out, cr)
	}
	slices.SortFunc(out, func(a, b awsv1.CapacityReservation) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// SortSubnets orders subnets the way launches prefer them: most free addresses
// first, then by ID.
func SortSubnets(subnets []ec2types.Subnet) []awsv1.Subnet {
	sorted := slices.Clone(subnets)
	slices.SortFunc(sorted, func(a, b ec2types.Subnet) int {
		if d := int(deref(b.AvailableIpAddressCount)) - int(deref(a.AvailableIpAddressCount)); d != 0 {
			return d
		}
		return strings.Compare(deref(a.SubnetId), deref(b.SubnetId))
	})
	var out []awsv1.Subnet
	seen := map[string]bool{}
	for _, s := range sorted {
		id := deref(s.SubnetId)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, awsv1.Subnet{ID: id, Zone: deref(s.AvailabilityZone), ZoneID: deref(s.AvailabilityZoneId)})
	}
	return out
}

// SortSecurityGroups dedupes and orders security groups by ID.
func SortSecurityGroups(groups []ec2types.SecurityGroup) []awsv1.SecurityGroup {
	var out []awsv1.SecurityGroup
	seen := map[string]bool{}
	for _, g := range groups {
		id := deref(g.GroupId)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, awsv1.SecurityGroup{ID: id, Name: deref(g.GroupName)})
	}
	slices.SortFunc(out, func(a, b awsv1.SecurityGroup) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// AliasParameter is an SSM parameter naming an AMI of an alias, and the
// requirements of the instance types that AMI is for.
type AliasParameter struct {
	Name         string
	Requirements []corev1.NodeSelectorRequirement
}

// AliasParameters are the SSM parameters of an AMI alias (al2023@latest,
// bottlerocket@v1.44.0, …) for a Kubernetes version (1.34): a standard image per
// architecture for types without accelerators, and the NVIDIA variant for types
// with NVIDIA GPUs. Parameters a region lacks are skipped by the caller.
func AliasParameters(alias awsv1.Alias, kubernetesVersion string) ([]AliasParameter, error) {
	arches := []struct{ ec2, kube string }{{"x86_64", "amd64"}, {"arm64", "arm64"}}
	standard := func(kube string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{
			{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{kube}},
			{Key: LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		}
	}
	nvidia := func(kube string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{
			{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{kube}},
			{Key: LabelInstanceGPUManufacturer, Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia"}},
		}
	}
	v := kubernetesVersion
	var out []AliasParameter
	switch alias.Family {
	case awsv1.AMIFamilyAL2023:
		for _, a := range arches {
			for _, variant := range []string{"standard", "nvidia"} {
				base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", v, a.ec2, variant)
				name := base + "recommended/image_id"
				if alias.Version != awsv1.AliasVersionLatest {
					name = fmt.Sprintf("%samazon-eks-node-al2023-%s-%s-%s-%s/image_id", base, a.ec2, variant, v, alias.Version)
				}
				reqs := standard(a.kube)
				if variant == "nvidia" {
					reqs = nvidia(a.kube)
				}
				out = append(out, AliasParameter{Name: name, Requirements: reqs})
			}
		}
	case awsv1.AMIFamilyBottlerocket:
		version := strings.TrimPrefix(alias.Version, "v")
		flavors := []string{"", "-nvidia"}
		if alias.FIPS {
			flavors = []string{"-fips", "-nvidia-fips"}
		}
		for _, a := range arches {
			for _, flavor := range flavors {
				reqs := standard(a.kube)
				if strings.Contains(flavor, "nvidia") {
					reqs = nvidia(a.kube)
				}
				out = append(out, AliasParameter{
					Name:         fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", v, flavor, a.ec2, version),
					Requirements: reqs,
				})
			}
		}
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		// EKS publishes Windows images for amd64 only, and only the latest; one
		// image serves every type, as Karpenter has it.
		year := strings.TrimPrefix(alias.Family, "Windows")
		reqs := []corev1.NodeSelectorRequirement{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
		for k, v := range OSLabels(alias.Family) {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
		}
		slices.SortFunc(reqs, func(a, b corev1.NodeSelectorRequirement) int { return strings.Compare(a.Key, b.Key) })
		out = append(out, AliasParameter{
			Name:         fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, v),
			Requirements: reqs,
		})
	default:
		return nil, fmt.Errorf("AMI family %s is not supported by Tailor's AWS provider", alias.Family)
	}
	return out, nil
}

// LabelWindowsBuild is the label the kubelet of a Windows node sets to its
// Windows build.
const LabelWindowsBuild = "node.kubernetes.io/windows-build"

// windowsBuilds are the builds of the Windows Server releases EKS has images of.
var windowsBuilds = map[string]string{
	awsv1.AMIFamilyWindows2019: "10.0.17763",
	awsv1.AMIFamilyWindows2022: "10.0.20348",
	awsv1.AMIFamilyWindows2025: "10.0.26100",
}

// OSLabels are the labels of the operating system a family's nodes run: Windows
// for the Windows families, with their build, and Linux for the others.
func OSLabels(family string) map[string]string {
	if build, ok := windowsBuilds[family]; ok {
		return map[string]string{v1.LabelOS: "windows", LabelWindowsBuild: build}
	}
	return map[string]string{v1.LabelOS: "linux"}
}

// ImageQuery is a DescribeImages request for a non-alias AMI selector term.
type ImageQuery struct {
	ImageIDs []string
	Owners   []string
	Filters  []ec2types.Filter
}

// ImageQueryOf turns an AMI selector term into a DescribeImages query. A name
// without an owner looks among the account's own and Amazon's images, as Karpenter
// does, so that a public image of the same name elsewhere is never picked.
func ImageQueryOf(t awsv1.AMISelectorTerm) ImageQuery {
	if t.ID != "" {
		return ImageQuery{ImageIDs: []string{t.ID}}
	}
	q := ImageQuery{Filters: tagFilters(t.Tags)}
	if t.Name != "" {
		q.Filters = append(q.Filters, filter("name", t.Name))
	}
	switch {
	case t.Owner != "":
		q.Owners = []string{t.Owner}
	case t.Name != "":
		q.Owners = []string{"self", "amazon"}
	}
	return q
}

// CandidateImage is an image found for a NodeClass, with the requirements of the
// instance types it is for.
type CandidateImage struct {
	Image        ec2types.Image
	Requirements []corev1.NodeSelectorRequirement
}

// SelectAMIs keeps, for each set of requirements, the newest image (deprecated
// ones only when nothing else is there), and orders the result newest first, as
// the status lists them.
func SelectAMIs(candidates []CandidateImage, now time.Time) []awsv1.AMI {
	type pick struct {
		c       CandidateImage
		created time.Time
		old     bool
	}
	best := map[string]pick{}
	for _, c := range candidates {
		if c.Requirements == nil {
			c.Requirements = []corev1.NodeSelectorRequirement{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{imageArch(c.Image)}}}
		}
		key := requirementsKey(c.Requirements)
		p := pick{c: c, created: imageTime(deref(c.Image.CreationDate)), old: imageDeprecated(c.Image, now)}
		have, ok := best[key]
		if !ok || (have.old && !p.old) || (have.old == p.old && (p.created.After(have.created) ||
			p.created.Equal(have.created) && deref(p.c.Image.ImageId) < deref(have.c.Image.ImageId))) {
			best[key] = p
		}
	}
	picks := make([]pick, 0, len(best))
	for _, p := range best {
		picks = append(picks, p)
	}
	slices.SortFunc(picks, func(a, b pick) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		if c := strings.Compare(deref(a.c.Image.ImageId), deref(b.c.Image.ImageId)); c != 0 {
			return c
		}
		return strings.Compare(requirementsKey(a.c.Requirements), requirementsKey(b.c.Requirements))
	})
	out := make([]awsv1.AMI, 0, len(picks))
	for _, p := range picks {
		out = append(out, awsv1.AMI{ID: deref(p.c.Image.ImageId), Name: deref(p.c.Image.Name), Deprecated: p.old, Requirements: p.c.Requirements})
	}
	return out
}

func imageArch(im ec2types.Image) string {
	if im.Architecture == ec2types.ArchitectureValuesArm64 {
		return "arm64"
	}
	return "amd64"
}

func imageTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

func imageDeprecated(im ec2types.Image, now time.Time) bool {
	t := imageTime(deref(im.DeprecationTime))
	return !t.IsZero() && !t.After(now)
}

func requirementsKey(reqs []corev1.NodeSelectorRequirement) string {
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		parts = append(parts, r.Key+" "+string(r.Operator)+" "+strings.Join(r.Values, ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// AMIFor is the newest of the NodeClass's AMIs whose requirements a node with
// labels meets, or false.
func AMIFor(amis []awsv1.AMI, labels map[string]string) (awsv1.AMI, bool) {
	for _, a := range amis {
		if Matches(a.Requirements, labels) {
			return a, true
		}
	}
	return awsv1.AMI{}, false
}

// Matches reports whether labels meet every requirement (In, NotIn, Exists,
// DoesNotExist, Gt, Lt).
func Matches(reqs []corev1.NodeSelectorRequirement, labels map[string]string) bool {
	for _, r := range reqs {
		v, ok := labels[r.Key]
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpExists:
			if !ok {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			if ok {
				return false
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			have, err1 := strconv.ParseInt(v, 10, 64)
			if !ok || len(r.Values) != 1 || err1 != nil {
				return false
			}
			want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
			if err2 != nil || (r.Operator == corev1.NodeSelectorOpGt && have <= want) || (r.Operator == corev1.NodeSelectorOpLt && have >= want) {
				return false
			}
		}
	}
	return true
}

// Resolution is what a NodeClass's selectors resolved to in the cloud. A part that
// could not be resolved has its Err set, which the status names.
type Resolution struct {
	Subnets            []awsv1.Subnet
	SubnetsErr         error
	SecurityGroups     []awsv1.SecurityGroup
	SecurityGroupsErr  error
	AMIs               []awsv1.AMI
	AMIsErr            error
	InstanceProfile    string
	InstanceProfileErr error
	// CapacityReservations are only resolved when the NodeClass selects some;
	// none matching is not an error (on-demand and spot still launch).
	CapacityReservations    []awsv1.CapacityReservation
	CapacityReservationsErr error
	// PlacementGroup is resolved only when the NodeClass selects one (see
	// CloudProvider.resolvePlacementGroup for its hold-over on passing failures).
	PlacementGroup    PlacementGroup
	PlacementGroupErr error
}

// Err joins the errors of the parts whose read failed.
func (r Resolution) Err() error {
	return errors.Join(r.SubnetsErr, r.SecurityGroupsErr, r.AMIsErr, r.InstanceProfileErr, r.CapacityReservationsErr, r.PlacementGroupErr)
}

// ApplyResolution writes a resolution into the NodeClass's status, sets each
// dependency's condition (Ready derives from them, naming the first one missing)
// and the hash annotations. It reports whether anything changed.
//
// A part whose read failed (throttled, timed out) keeps what it resolved to before
// when that was for the NodeClass's generation (the same selectors) and found
// something: one failed describe must not take a working NodeClass, and every
// NodePool on it, out of service until the next resolve.
func ApplyResolution(nc *awsv1.EC2NodeClass, r Resolution) bool {
	before := nc.DeepCopy()
	held := func(condType string, err error) bool {
		c := meta.FindStatusCondition(before.Status.Conditions, condType)
		return transient(err) && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == nc.Generation
	}
	if held(awsv1.ConditionTypeSubnetsReady, r.SubnetsErr) {
		r.Subnets, r.SubnetsErr = before.Status.Subnets, nil
	}
	if held(awsv1.ConditionTypeSecurityGroupsReady, r.SecurityGroupsErr) {
		r.SecurityGroups, r.SecurityGroupsErr = before.Status.SecurityGroups, nil
	}
	if held(awsv1.ConditionTypeAMIsReady, r.AMIsErr) {
		r.AMIs, r.AMIsErr = before.Status.AMIs, nil
	}
	if held(awsv1.ConditionTypeInstanceProfileReady, r.InstanceProfileErr) {
		r.InstanceProfile, r.InstanceProfileErr = before.Status.InstanceProfile, nil
	}
	if held(awsv1.ConditionTypeCapacityReservationsReady, r.CapacityReservationsErr) {
		r.CapacityReservations, r.CapacityReservationsErr = before.Status.CapacityReservations, nil
	}
	nc.Status.Subnets = r.Subnets
	nc.Status.SecurityGroups = r.SecurityGroups
	nc.Status.AMIs = r.AMIs
	nc.Status.InstanceProfile = r.InstanceProfile
	nc.Status.CapacityReservations = r.CapacityReservations
	set := func(condType, reason string, err error, empty bool, what string) {
		c := metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: condType}
		switch {
		case err != nil:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, err.Error()
		case empty:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, what
		}
		nc.SetCondition(c)
	}
	set(awsv1.ConditionTypeSubnetsReady, "SubnetsNotFound", r.SubnetsErr, len(r.Subnets) == 0, "SubnetSelector did not match any Subnets")
	set(awsv1.ConditionTypeSecurityGroupsReady, "SecurityGroupsNotFound", r.SecurityGroupsErr, len(r.SecurityGroups) == 0, "SecurityGroupSelector did not match any SecurityGroups")
	set(awsv1.ConditionTypeAMIsReady, "AMINotFound", r.AMIsErr, len(r.AMIs) == 0, "AMISelector did not match any AMIs")
	set(awsv1.ConditionTypeInstanceProfileReady, "InstanceProfileNotFound", r.InstanceProfileErr, r.InstanceProfile == "", "no instance profile: set spec.role or spec.instanceProfile")
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		set(awsv1.ConditionTypeCapacityReservationsReady, "CapacityReservationsNotFound", r.CapacityReservationsErr, false, "")
	}
	if nc.Spec.PlacementGroupSelector != nil {
		// Like Karpenter, the group is not in the status; its condition names it.
		c := metav1.Condition{Type: awsv1.ConditionTypePlacementGroupReady, Status: metav1.ConditionTrue,
			Reason: awsv1.ConditionTypePlacementGroupReady, Message: r.PlacementGroup.String()}
		if r.PlacementGroupErr != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, "PlacementGroupNotFound", r.PlacementGroupErr.Error()
		}
		nc.SetCondition(c)
	} else {
		meta.RemoveStatusCondition(&nc.Status.Conditions, awsv1.ConditionTypePlacementGroupReady)
	}
	nc.SetCondition(metav1.Condition{Type: awsv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: awsv1.ConditionTypeValidationSucceeded})
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[AnnotationNodeClassHash] = NodeClassHash(nc)
	nc.Annotations[AnnotationNodeClassHashVersion] = NodeClassHashVersion
	return !equalJSON(before.Status, nc.Status) || !equalJSON(before.Annotations, nc.Annotations)
}

// transient reports a failed read worth holding the last resolution over: a
// timeout, a network error, throttling, or a fault on AWS's side. A refusal of the
// request itself (AccessDenied, a malformed filter) is a verdict, and is shown.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return true
	}
	switch ae.ErrorCode() {
	case "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled", "TooManyRequestsException":
		return true
	}
	return ae.ErrorFault() != smithy.FaultClient
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// InstanceProfileName is the name of the instance profile Tailor makes for a
// NodeClass's role: one per cluster, region and NodeClass, within IAM's 128
// characters.
func InstanceProfileName(cluster, region, nodeClass string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "/" + nodeClass))
	name := fmt.Sprintf("%s_%d", cluster, h.Sum64())
	if len(name) > 128 {
		name = name[len(name)-128:]
	}
	return name
}
