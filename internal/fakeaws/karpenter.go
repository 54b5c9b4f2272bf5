package fakeaws

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// KarpenterLaunch describes an instance as Karpenter (v1) launches one for a
// NodeClaim, for tests of a cut-over from Karpenter: what Tailor finds in the
// account when it starts.
type KarpenterLaunch struct {
	Cluster   string
	NodeClaim string
	NodePool  string
	NodeClass string
	// NodeClassTags are the EC2NodeClass's spec.tags, which the instance carries.
	NodeClassTags map[string]string
	InstanceType  string
	// CapacityType is "on-demand" (the default) or "spot".
	CapacityType     string
	SubnetID         string
	ImageID          string
	SecurityGroupIDs []string
	// InstanceProfile is the name of the instance profile the instance runs with.
	InstanceProfile string
	// Registered adds the tags Karpenter's tagging controller puts on once the
	// instance's Node has registered: Name (the Node's name) and
	// karpenter.sh/nodeclaim.
	Registered bool
}

// LaunchAsKarpenter launches an instance through the EC2 API as Karpenter does,
// and returns it: a launch template of Karpenter's (named
// karpenter.k8s.aws/<hash>), an instant fleet of one instance without a client
// token, tagged with the NodeClass's tags and Karpenter's own
// (kubernetes.io/cluster/<cluster>=owned, karpenter.sh/nodepool,
// karpenter.k8s.aws/ec2nodeclass, eks:eks-cluster-name), and none of Tailor's (no
// karpenter.k8s.aws/ec2nodeclass-hash).
func (s *Server) LaunchAsKarpenter(ctx context.Context, l KarpenterLaunch) (Instance, error) {
	client := ec2.NewFromConfig(s.AWSConfig())
	h := fnv.New64a()
	_, _ = h.Write([]byte(l.Cluster + "/" + l.NodeClass + "/" + l.ImageID + "/" + l.InstanceProfile))
	name := fmt.Sprintf("karpenter.k8s.aws/%d", h.Sum64())
	templateID, err := karpenterTemplate(ctx, client, name, l)
	if err != nil {
		return Instance{}, err
	}
	tags := maps.Clone(l.NodeClassTags)
	if tags == nil {
		tags = map[string]string{}
	}
	maps.Copy(tags, map[string]string{
		"kubernetes.io/cluster/" + l.Cluster: "owned",
		"karpenter.sh/nodepool":              l.NodePool,
		"karpenter.k8s.aws/ec2nodeclass":     l.NodeClass,
		"eks:eks-cluster-name":               l.Cluster,
	})
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateId: aws.String(templateID), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{
				InstanceType: ec2types.InstanceType(l.InstanceType), SubnetId: aws.String(l.SubnetID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2Tags(tags)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: ec2Tags(tags)},
		},
	}
	if l.CapacityType == "spot" {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeSpot
		in.OnDemandOptions = nil
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	}
	out, err := client.CreateFleet(ctx, in)
	if err != nil {
		return Instance{}, fmt.Errorf("launching as Karpenter: %w", err)
	}
	if len(out.Instances) == 0 || len(out.Instances[0].InstanceIds) == 0 {
		return Instance{}, fmt.Errorf("launching as Karpenter: no instance (fleet errors %+v)", out.Errors)
	}
	id := out.Instances[0].InstanceIds[0]
	if l.Registered {
		inst, _ := s.Instance(id)
		if _, err := client.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(map[string]string{
			"Name": inst.PrivateDNSName, "karpenter.sh/nodeclaim": l.NodeClaim, "eks:eks-cluster-name": l.Cluster,
		})}); err != nil {
			return Instance{}, fmt.Errorf("tagging %s as Karpenter's tagging controller does: %w", id, err)
		}
	}
	inst, ok := s.Instance(id)
	if !ok {
		return Instance{}, fmt.Errorf("launched instance %s is not there", id)
	}
	return inst, nil
}

// karpenterTemplate returns the ID of Karpenter's launch template named name,
// made on its first launch and reused by the next ones.
func karpenterTemplate(ctx context.Context, client *ec2.Client, name string, l KarpenterLaunch) (string, error) {
	found, err := client.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err == nil && len(found.LaunchTemplates) > 0 {
		return aws.ToString(found.LaunchTemplates[0].LaunchTemplateId), nil
	}
	var ae smithy.APIError
	if err != nil && (!errors.As(err, &ae) || ae.ErrorCode() != "InvalidLaunchTemplateName.NotFoundException") {
		return "", fmt.Errorf("looking up Karpenter's launch template: %w", err)
	}
	made, err := client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:            aws.String(l.ImageID),
			SecurityGroupIds:   l.SecurityGroupIDs,
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(l.InstanceProfile)},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
				HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1)},
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: ec2Tags(map[string]string{"karpenter.k8s.aws/cluster": l.Cluster, "karpenter.k8s.aws/ec2nodeclass": l.NodeClass})}},
	})
	if err != nil {
		return "", fmt.Errorf("creating Karpenter's launch template: %w", err)
	}
	return aws.ToString(made.LaunchTemplate.LaunchTemplateId), nil
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}
