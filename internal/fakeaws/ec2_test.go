package fakeaws

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
)

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestDescribeAvailabilityZones(t *testing.T) {
	s := start(t, Options{})
	c := ec2Client(s)
	out := must(c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{})).ok(t)
	var names, ids []string
	for _, z := range out.AvailabilityZones {
		names = append(names, aws.ToString(z.ZoneName))
		ids = append(ids, aws.ToString(z.ZoneId))
		if aws.ToString(z.RegionName) != "us-east-1" || z.State != ec2types.AvailabilityZoneStateAvailable {
			t.Errorf("zone %s: region %q state %q", aws.ToString(z.ZoneName), aws.ToString(z.RegionName), z.State)
		}
	}
	if len(names) < 3 || names[0] != "us-east-1a" || ids[0] != "use1-az1" {
		t.Fatalf("zones %v ids %v", names, ids)
	}
	one := must(c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{flt("zone-name", "us-east-1b")}})).ok(t)
	if len(one.AvailabilityZones) != 1 || aws.ToString(one.AvailabilityZones[0].ZoneName) != "us-east-1b" {
		t.Fatalf("filtered: %+v", one.AvailabilityZones)
	}
	_, err := c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{flt("bogus", "x")}})
	if apiCode(err) != "InvalidParameterValue" {
		t.Fatalf("unknown filter: %v", err)
	}
}

func TestDescribeInstanceTypesPaginates(t *testing.T) {
	s := start(t, Options{})
	c := ec2Client(s)
	var names []string
	pages := 0
	p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{
		Filters: []ec2types.Filter{flt("processor-info.supported-architecture", "x86_64", "arm64")},
	})
	for p.HasMorePages() {
		out := must(p.NextPage(ctx(t))).ok(t)
		pages++
		for _, it := range out.InstanceTypes {
			names = append(names, string(it.InstanceType))
		}
	}
	if pages < 2 {
		t.Errorf("%d pages, want the catalog split into pages of 100", pages)
	}
	if len(names) != len(s.inv.typeNames) || !slices.IsSorted(names) {
		t.Fatalf("%d types over %d pages, want %d", len(names), pages, len(s.inv.typeNames))
	}

	out := must(c.DescribeInstanceTypes(ctx(t), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "c7g.xlarge", "g5.xlarge"}})).ok(t)
	got := map[string]ec2types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		got[string(it.InstanceType)] = it
	}
	m5 := got["m5.large"]
	if aws.ToInt32(m5.VCpuInfo.DefaultVCpus) != 2 || aws.ToInt64(m5.MemoryInfo.SizeInMiB) != 8192 ||
		aws.ToInt32(m5.NetworkInfo.MaximumNetworkInterfaces) != 3 || aws.ToInt32(m5.NetworkInfo.Ipv4AddressesPerInterface) != 10 ||
		m5.ProcessorInfo.SupportedArchitectures[0] != ec2types.ArchitectureTypeX8664 || aws.ToString(m5.ProcessorInfo.Manufacturer) != "Intel" ||
		m5.Hypervisor != ec2types.InstanceTypeHypervisorNitro {
		t.Errorf("m5.large: %+v", m5)
	}
	if c7g := got["c7g.xlarge"]; c7g.ProcessorInfo.SupportedArchitectures[0] != ec2types.ArchitectureTypeArm64 || aws.ToString(c7g.ProcessorInfo.Manufacturer) != "AWS" {
		t.Errorf("c7g.xlarge: %+v", c7g.ProcessorInfo)
	}
	if g5 := got["g5.xlarge"]; g5.GpuInfo == nil || len(g5.GpuInfo.Gpus) != 1 || aws.ToString(g5.GpuInfo.Gpus[0].Name) != "A10G" ||
		aws.ToInt32(g5.GpuInfo.Gpus[0].Count) != 1 || g5.InstanceStorageInfo == nil {
		t.Errorf("g5.xlarge: gpu %+v storage %+v", g5.GpuInfo, g5.InstanceStorageInfo)
	}
	_, err := c.DescribeInstanceTypes(ctx(t), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.gigantic"}})
	if apiCode(err) != "InvalidInstanceType" {
		t.Errorf("unknown type: %v", err)
	}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	s := start(t, Options{})
	c := ec2Client(s)
	var offerings []ec2types.InstanceTypeOffering
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(500),
	})
	for p.HasMorePages() {
		offerings = append(offerings, must(p.NextPage(ctx(t))).ok(t).InstanceTypeOfferings...)
	}
	want := 0
	for _, n := range s.inv.typeNames {
		want += len(s.inv.types[n].Zones)
	}
	if len(offerings) != want {
		t.Fatalf("%d offerings, want %d", len(offerings), want)
	}
	out := must(c.DescribeInstanceTypeOfferings(ctx(t), &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{flt("instance-type", "m5.large"), flt("location", "us-east-1a", "us-east-1b")},
	})).ok(t)
	var locs []string
	for _, o := range out.InstanceTypeOfferings {
		if o.LocationType != ec2types.LocationTypeAvailabilityZone || o.InstanceType != "m5.large" {
			t.Errorf("offering %+v", o)
		}
		locs = append(locs, aws.ToString(o.Location))
	}
	if diff := cmp.Diff([]string{"us-east-1a", "us-east-1b"}, locs); diff != "" {
		t.Errorf("m5.large locations (-want +got):\n%s", diff)
	}
}

func TestDescribeSubnetsAndSecurityGroups(t *testing.T) {
	s := start(t, Options{})
	c := ec2Client(s)
	subnets := must(c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{flt("tag:karpenter.sh/discovery", "tailor")}})).ok(t)
	if len(subnets.Subnets) != len(s.inv.zones) {
		t.Fatalf("%d discovery subnets, want one per zone (%d)", len(subnets.Subnets), len(s.inv.zones))
	}
	for _, sn := range subnets.Subnets {
		if aws.ToInt32(sn.AvailableIpAddressCount) != 8192-5 || aws.ToString(sn.AvailabilityZoneId) == "" || aws.ToBool(sn.MapPublicIpOnLaunch) {
			t.Errorf("subnet %+v", sn)
		}
	}
	byID := must(c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{SubnetIds: []string{aws.ToString(subnets.Subnets[1].SubnetId)}})).ok(t)
	if len(byID.Subnets) != 1 || aws.ToString(byID.Subnets[0].AvailabilityZone) != "us-east-1b" {
		t.Errorf("by id: %+v", byID.Subnets)
	}
	tagKey := must(c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{flt("tag-key", "kubernetes.io/role/elb")}})).ok(t)
	for _, sn := range tagKey.Subnets {
		if !aws.ToBool(sn.MapPublicIpOnLaunch) {
			t.Errorf("tag-key kubernetes.io/role/elb matched private subnet %s", aws.ToString(sn.SubnetId))
		}
	}
	wild := must(c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{flt("tag:Name", "*-public-us-east-1?")}})).ok(t)
	if len(wild.Subnets) != len(tagKey.Subnets) || len(wild.Subnets) == 0 {
		t.Errorf("wildcard matched %d, tag-key %d", len(wild.Subnets), len(tagKey.Subnets))
	}
	_, err := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0000"}})
	if apiCode(err) != "InvalidSubnetID.NotFound" {
		t.Errorf("unknown subnet: %v", err)
	}

	groups := must(c.DescribeSecurityGroups(ctx(t), &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{flt("tag:karpenter.sh/discovery", "tailor")}})).ok(t)
	if len(groups.SecurityGroups) != 1 || aws.ToString(groups.SecurityGroups[0].GroupName) != "eks-cluster-sg-tailor" {
		t.Fatalf("discovery groups %+v", groups.SecurityGroups)
	}
	named := must(c.DescribeSecurityGroups(ctx(t), &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{flt("group-name", "default")}})).ok(t)
	if len(named.SecurityGroups) != 1 {
		t.Errorf("group-name default: %+v", named.SecurityGroups)
	}
}

func TestDescribeImages(t *testing.T) {
	s := start(t, Options{Inventory: func(inv *Inventory) {
		inv.Images = append(inv.Images, Image{ID: "ami-0custom", Name: "my-node-image", Architecture: "x86_64", OwnerID: "123456789012",
			Tags: map[string]string{"team": "platform"}})
	}})
	c := ec2Client(s)
	byTag := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{flt("tag:team", "platform")}})).ok(t)
	if len(byTag.Images) != 1 || aws.ToString(byTag.Images[0].ImageId) != "ami-0custom" {
		t.Fatalf("by tag: %+v", byTag.Images)
	}
	self := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Owners: []string{"self"}})).ok(t)
	if len(self.Images) != 1 || aws.ToString(self.Images[0].OwnerId) != "123456789012" {
		t.Errorf("owner self: %d images", len(self.Images))
	}
	al := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{
		Owners:  []string{"amazon"},
		Filters: []ec2types.Filter{flt("name", "amazon-eks-node-al2023-x86_64-standard-1.34-*")},
	})).ok(t)
	if len(al.Images) != 2 {
		t.Fatalf("AL2023 x86_64 standard images: %d, want two releases", len(al.Images))
	}
	for _, im := range al.Images {
		if im.Architecture != ec2types.ArchitectureValuesX8664 || aws.ToString(im.CreationDate) == "" || len(im.BlockDeviceMappings) != 1 ||
			aws.ToInt32(im.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 {
			t.Errorf("image %+v", im)
		}
	}
	byOwnerID := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{flt("owner-id", bottlerocketOwner)}})).ok(t)
	if len(byOwnerID.Images) != 6 {
		t.Errorf("bottlerocket images: %d", len(byOwnerID.Images))
	}
	id := aws.ToString(al.Images[0].ImageId)
	byID := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{ImageIds: []string{id}})).ok(t)
	if len(byID.Images) != 1 || aws.ToString(byID.Images[0].ImageId) != id {
		t.Errorf("by id %s: %+v", id, byID.Images)
	}
	filterID := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{flt("image-id", id)}})).ok(t)
	if len(filterID.Images) != 1 {
		t.Errorf("image-id filter: %d", len(filterID.Images))
	}
	_, err := c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{ImageIds: []string{"ami-0000000000000dead"}})
	if apiCode(err) != "InvalidAMIID.NotFound" {
		t.Errorf("unknown image: %v", err)
	}
}

func TestLaunchTemplates(t *testing.T) {
	s := start(t, Options{})
	c := ec2Client(s)
	in := &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("tailor/default/abc"),
		ClientToken:        aws.String("token-1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:            aws.String(s.inv.images[0].ID),
			UserData:           aws.String("I2Jhc2gKZWNobyBoaQo="), // "#bash\necho hi\n"
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("KarpenterNodeInstanceProfile-tailor")},
			SecurityGroupIds:   []string{s.inv.sgs[0].ID},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
				HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
			},
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
				DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3},
			}},
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{
				ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("from-template"), Value: aws.String("yes")}},
			}},
		},
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/cluster"), Value: aws.String("tailor")}},
		}},
	}
	created := must(c.CreateLaunchTemplate(ctx(t), in)).ok(t)
	id := aws.ToString(created.LaunchTemplate.LaunchTemplateId)
	if !strings.HasPrefix(id, "lt-") || aws.ToInt64(created.LaunchTemplate.LatestVersionNumber) != 1 {
		t.Fatalf("created %+v", created.LaunchTemplate)
	}
	again := must(c.CreateLaunchTemplate(ctx(t), in)).ok(t)
	if aws.ToString(again.LaunchTemplate.LaunchTemplateId) != id {
		t.Errorf("same client token: got %s, want %s", aws.ToString(again.LaunchTemplate.LaunchTemplateId), id)
	}
	in.ClientToken = aws.String("token-2")
	if _, err := c.CreateLaunchTemplate(ctx(t), in); apiCode(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		t.Errorf("duplicate name: %v", err)
	}
	lts := s.LaunchTemplates()
	if len(lts) != 1 || lts[0].UserData != "#bash\necho hi\n" || lts[0].Data["MetadataOptions.HttpTokens"] != "required" ||
		lts[0].Data["BlockDeviceMapping.1.Ebs.VolumeSize"] != "20" {
		t.Errorf("LaunchTemplates() = %+v", lts)
	}

	byTag := must(c.DescribeLaunchTemplates(ctx(t), &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{flt("tag:karpenter.sh/cluster", "tailor")}})).ok(t)
	if len(byTag.LaunchTemplates) != 1 || aws.ToString(byTag.LaunchTemplates[0].LaunchTemplateName) != "tailor/default/abc" {
		t.Errorf("by tag: %+v", byTag.LaunchTemplates)
	}
	byName := must(c.DescribeLaunchTemplates(ctx(t), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"tailor/default/abc"}})).ok(t)
	if len(byName.LaunchTemplates) != 1 || aws.ToString(byName.LaunchTemplates[0].LaunchTemplateId) != id {
		t.Errorf("by name: %+v", byName.LaunchTemplates)
	}
	must(c.DeleteLaunchTemplate(ctx(t), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})).ok(t)
	_, err := c.DescribeLaunchTemplates(ctx(t), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"tailor/default/abc"}})
	if apiCode(err) != "InvalidLaunchTemplateName.NotFoundException" {
		t.Errorf("after delete: %v", err)
	}
	if _, err := c.DeleteLaunchTemplate(ctx(t), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)}); apiCode(err) != "InvalidLaunchTemplateId.NotFound" {
		t.Errorf("second delete: %v", err)
	}
}

func TestDescribeSpotPriceHistory(t *testing.T) {
	s, clk := startClocked(t, Options{})
	c := ec2Client(s)
	now := clk.Now()
	out := must(c.DescribeSpotPriceHistory(ctx(t), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(now),
	})).ok(t)
	if len(out.SpotPriceHistory) != len(s.inv.types["m5.large"].Zones) {
		t.Fatalf("%d prices for m5.large, want one per zone", len(out.SpotPriceHistory))
	}
	for _, p := range out.SpotPriceHistory {
		want := s.inv.types["m5.large"].SpotPrice[aws.ToString(p.AvailabilityZone)]
		if aws.ToString(p.SpotPrice) == "" || p.ProductDescription != ec2types.RIProductDescription("Linux/UNIX") || want == 0 {
			t.Errorf("price %+v (want %v)", p, want)
		}
	}
	clk.Step(time.Minute)
	s.SetSpotPrice("m5.large", "us-east-1a", 0.5)
	latest := must(c.DescribeSpotPriceHistory(ctx(t), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, AvailabilityZone: aws.String("us-east-1a"),
		ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(clk.Now()),
	})).ok(t)
	if len(latest.SpotPriceHistory) != 1 || aws.ToString(latest.SpotPriceHistory[0].SpotPrice) != "0.500000" {
		t.Errorf("after SetSpotPrice: %+v", latest.SpotPriceHistory)
	}
}
