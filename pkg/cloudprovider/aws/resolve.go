package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// Resolve looks up what the NodeClass's selectors name: subnets, security groups,
// AMIs and the instance profile. Each part's failure is kept in the resolution,
// for the status to name; none stops the others.
//
// Each part has a deadline of its own (Options.CallTimeout): the NodeClass
// controller calls this outside the CloudProvider interface and its deadlines,
// and an AWS API that hangs would otherwise hold its worker, and every
// NodeClass queued behind it, for good. A part's own deadline, rather than one
// for the whole, keeps a hung DescribeSubnets from failing the AMIs too.
func (c *CloudProvider) Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) Resolution {
	var r Resolution
	d := c.opts.CallTimeout
	r.Subnets, r.SubnetsErr = within(ctx, d, nc, c.resolveSubnets)
	r.SecurityGroups, r.SecurityGroupsErr = within(ctx, d, nc, c.resolveSecurityGroups)
	r.AMIs, r.AMIsErr = within(ctx, d, nc, c.resolveAMIs)
	r.InstanceProfile, r.InstanceProfileErr = within(ctx, d, nc, c.resolveInstanceProfile)
	r.CapacityReservations, r.CapacityReservationsErr = within(ctx, d, nc, c.resolveCapacityReservations)
	r.PlacementGroup, r.PlacementGroupErr = within(ctx, d, nc, c.resolvePlacementGroup)
	return r
}

// within runs one part of a NodeClass's resolution with a deadline of d.
func within[T any](ctx context.Context, d time.Duration, nc *awsv1.EC2NodeClass, resolve func(context.Context, *awsv1.EC2NodeClass) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return resolve(ctx, nc)
}

func (c *CloudProvider) resolveCapacityReservations(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.CapacityReservation, error) {
	var found []ec2types.CapacityReservation
	for _, t := range nc.Spec.CapacityReservationSelectorTerms {
		ids, filters := CapacityReservationQuery(t)
		in := &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: ids, Filters: filters}
		for p := ec2.NewDescribeCapacityReservationsPaginator(c.aws.EC2, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing capacity reservations: %w", err)
			}
			found = append(found, page.CapacityReservations...)
		}
	}
	c.mu.Lock()
	for _, r := range found {
		c.reservationRoom[deref(r.CapacityReservationId)] = int(deref(r.AvailableInstanceCount))
	}
	c.mu.Unlock()
	return SortCapacityReservations(found), nil
}

func (c *CloudProvider) resolveSubnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, error) {
	var found []ec2types.Subnet
	for _, t := range nc.Spec.SubnetSelectorTerms {
		in := &ec2.DescribeSubnetsInput{Filters: SubnetFilters(t)}
		for p := ec2.NewDescribeSubnetsPaginator(c.aws.EC2, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing subnets: %w", err)
			}
			found = append(found, page.Subnets...)
		}
	}
	return SortSubnets(found), nil
}

func (c *CloudProvider) resolveSecurityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, error) {
	var found []ec2types.SecurityGroup
	for _, t := range nc.Spec.SecurityGroupSelectorTerms {
		in := &ec2.DescribeSecurityGroupsInput{Filters: SecurityGroupFilters(t)}
		for p := ec2.NewDescribeSecurityGroupsPaginator(c.aws.EC2, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing security groups: %w", err)
			}
			found = append(found, page.SecurityGroups...)
		}
	}
	return SortSecurityGroups(found), nil
}

func (c *CloudProvider) resolveAMIs(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.AMI, error) {
	var candidates []CandidateImage
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			found, err := c.aliasImages(ctx, t.Alias)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, found...)
			continue
		}
		if t.SSMParameter != "" {
			found, err := c.parameterImages(ctx, t.SSMParameter)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, found...)
			continue
		}
		q := ImageQueryOf(t)
		images, err := c.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: q.ImageIDs, Owners: q.Owners, Filters: q.Filters})
		if err != nil {
			return nil, err
		}
		for _, im := range images {
			candidates = append(candidates, CandidateImage{Image: im})
		}
	}
	return SelectAMIs(candidates, c.clock.Now()), nil
}

// parameterImages reads an SSM parameter holding an image id and describes that
// image. Only that image: an unfiltered DescribeImages would have the newest
// public image in the region win.
func (c *CloudProvider) parameterImages(ctx context.Context, name string) ([]CandidateImage, error) {
	out, err := c.aws.SSM.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{name}})
	if err != nil {
		return nil, fmt.Errorf("reading SSM parameter %s of amiSelectorTerms: %w", name, err)
	}
	id := ""
	for _, p := range out.Parameters {
		id = deref(p.Value)
	}
	if !strings.HasPrefix(id, "ami-") {
		return nil, fmt.Errorf("SSM parameter %s of amiSelectorTerms: %s", name, parameterProblem(id, out.InvalidParameters))
	}
	images, err := c.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		return nil, err
	}
	found := make([]CandidateImage, 0, len(images))
	for _, im := range images {
		found = append(found, CandidateImage{Image: im})
	}
	return found, nil
}

// parameterProblem says why a parameter gave no image id.
func parameterProblem(value string, invalid []string) string {
	switch {
	case len(invalid) > 0:
		return "no such parameter"
	case value == "":
		return "it is empty"
	}
	return fmt.Sprintf("its value %q is not an image id (ami-…)", value)
}

// aliasImages reads the SSM parameters of an alias and describes their images.
func (c *CloudProvider) aliasImages(ctx context.Context, aliasName string) ([]CandidateImage, error) {
	alias, err := awsv1.ParseAlias(aliasName)
	if err != nil {
		return nil, err
	}
	version := c.opts.KubernetesVersion
	if version == "" {
		if _, err := c.clusterInfo(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		version = c.version
		c.mu.Unlock()
	}
	if version == "" {
		return nil, fmt.Errorf("alias %s: the cluster's Kubernetes version is unknown", aliasName)
	}
	params, err := AliasParameters(alias, version)
	if err != nil {
		return nil, err
	}
	reqsByImage := map[string][]AliasParameter{}
	var ids []string
	for chunk := range slices.Chunk(params, 10) {
		names := make([]string, 0, len(chunk))
		for _, p := range chunk {
			names = append(names, p.Name)
		}
		out, err := c.aws.SSM.GetParameters(ctx, &ssm.GetParametersInput{Names: names})
		if err != nil {
			return nil, fmt.Errorf("reading the SSM parameters of alias %s: %w", aliasName, err)
		}
		for _, got := range out.Parameters {
			for _, p := range chunk {
				if p.Name == deref(got.Name) {
					id := deref(got.Value)
					if _, ok := reqsByImage[id]; !ok {
						ids = append(ids, id)
					}
					reqsByImage[id] = append(reqsByImage[id], p)
				}
			}
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("alias %s: no AMI is published for Kubernetes %s", aliasName, version)
	}
	images, err := c.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: ids})
	if err != nil {
		return nil, err
	}
	var out []CandidateImage
	for _, im := range images {
		for _, p := range reqsByImage[deref(im.ImageId)] {
			out = append(out, CandidateImage{Image: im, Requirements: p.Requirements})
		}
	}
	return out, nil
}

func (c *CloudProvider) describeImages(ctx context.Context, in *ec2.DescribeImagesInput) ([]ec2types.Image, error) {
	var out []ec2types.Image
	for p := ec2.NewDescribeImagesPaginator(c.aws.EC2, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing images: %w", err)
		}
		out = append(out, page.Images...)
	}
	return out, nil
}

// resolveInstanceProfile checks the NodeClass's instance profile, or makes one
// for its role (and keeps its role in it).
func (c *CloudProvider) resolveInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if name := deref(nc.Spec.InstanceProfile); name != "" {
		if _, err := c.aws.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
			return "", fmt.Errorf("instance profile %s: %w", name, err)
		}
		return name, nil
	}
	if nc.Spec.Role == "" {
		return "", nil
	}
	name := InstanceProfileName(c.opts.ClusterName, c.opts.Region, nc.Name)
	out, err := c.aws.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var noSuch *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &noSuch):
		if _, err := c.aws.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name),
			Tags: []iamtypes.Tag{
				{Key: aws.String(ClusterTag(c.opts.ClusterName)), Value: aws.String("owned")},
				{Key: aws.String(TagNodeClass), Value: aws.String(nc.Name)},
			},
		}); err != nil {
			return "", fmt.Errorf("creating instance profile %s for role %s: %w", name, nc.Spec.Role, err)
		}
	case err != nil:
		return "", fmt.Errorf("instance profile %s: %w", name, err)
	default:
		for _, r := range out.InstanceProfile.Roles {
			if deref(r.RoleName) == nc.Spec.Role {
				return name, nil
			}
			if _, err := c.aws.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
				InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil {
				return "", fmt.Errorf("instance profile %s: removing role %s: %w", name, deref(r.RoleName), err)
			}
		}
	}
	if _, err := c.aws.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: aws.String(name), RoleName: aws.String(nc.Spec.Role)}); err != nil {
		return "", fmt.Errorf("instance profile %s: adding role %s: %w", name, nc.Spec.Role, err)
	}
	return name, nil
}
