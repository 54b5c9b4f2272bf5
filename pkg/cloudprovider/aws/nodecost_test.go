package aws

import (
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// A node's volumes are priced per GiB-month by region and type, with gp3's IOPS
// and throughput above the free baseline and io1/io2's provisioned IOPS; the
// family's default volumes when the NodeClass has no mappings; a public IPv4
// address when the node gets one.
func TestNodeClassCost(t *testing.T) {
	volume := func(size, kind string, iops, throughput int64) *awsv1.BlockDeviceMapping {
		q := resource.MustParse(size)
		ebs := &awsv1.BlockDevice{VolumeSize: &q, VolumeType: aws.String(kind)}
		if iops > 0 {
			ebs.IOPS = aws.Int64(iops)
		}
		if throughput > 0 {
			ebs.Throughput = aws.Int64(throughput)
		}
		return &awsv1.BlockDeviceMapping{DeviceName: aws.String("/dev/xvda"), EBS: ebs}
	}
	class := func(family string, public *bool, mappings ...*awsv1.BlockDeviceMapping) *awsv1.EC2NodeClass {
		nc := &awsv1.EC2NodeClass{}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: family + "@latest"}}
		nc.Spec.AssociatePublicIPAddress = public
		nc.Spec.BlockDeviceMappings = mappings
		return nc
	}
	perMonth := func(usd float64) float64 { return usd / 730 }
	cases := []struct {
		name          string
		nc            *awsv1.EC2NodeClass
		region        string
		public        bool
		volumes, addr float64
	}{
		{"AL2023 default: 20Gi gp3", class("al2023", nil), "us-east-1", false, perMonth(20 * 0.08), 0},
		{"Bottlerocket default: 4Gi and 20Gi gp3", class("bottlerocket", nil), "us-east-1", false, perMonth(24 * 0.08), 0},
		{"Windows default: 50Gi gp3", class("windows2022", nil), "us-east-1", false, perMonth(50 * 0.08), 0},
		{"public address", class("al2023", aws.Bool(true)), "us-east-1", true, perMonth(20 * 0.08), 0.005},
		{"gp3 at its baseline", class("al2023", nil, volume("100Gi", "gp3", 3000, 125)), "us-east-1", false, perMonth(100 * 0.08), 0},
		{"gp3 above its baseline", class("al2023", nil, volume("100Gi", "gp3", 6000, 250)), "us-east-1", false,
			perMonth(100*0.08 + 3000*0.005 + 125*0.04), 0},
		{"gp2", class("al2023", nil, volume("50Gi", "gp2", 0, 0)), "us-east-1", false, perMonth(50 * 0.10), 0},
		{"io1", class("al2023", nil, volume("100Gi", "io1", 5000, 0)), "us-east-1", false, perMonth(100*0.125 + 5000*0.065), 0},
		{"io2 over two tiers", class("al2023", nil, volume("100Gi", "io2", 40000, 0)), "us-east-1", false,
			perMonth(100*0.125 + 32000*0.065 + 8000*0.0455), 0},
		{"st1 and sc1", class("al2023", nil, volume("500Gi", "st1", 0, 0), volume("1Ti", "sc1", 0, 0)), "us-east-1", false,
			perMonth(500*0.045 + 1024*0.015), 0},
		{"standard", class("al2023", nil, volume("10Gi", "standard", 0, 0)), "us-east-1", false, perMonth(10 * 0.05), 0},
		{"eu-central-1", class("al2023", nil), "eu-central-1", false, perMonth(20 * 0.0952), 0},
		{"a region not in the table: us-east-1's", class("al2023", nil), "ap-southeast-7", false, perMonth(20 * 0.08), 0},
		{"custom AMIs have no default volumes", class("", nil), "us-east-1", false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "custom AMIs have no default volumes" {
				tc.nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-123"}}
				tc.nc.Spec.AMIFamily = aws.String(awsv1.AMIFamilyCustom)
			}
			got := NodeClassCost(tc.nc, tc.region, tc.public)
			if math.Abs(got.Volumes-tc.volumes) > 1e-12 || got.Addresses != tc.addr || got.PerNode != 0 {
				t.Errorf("%+v, want volumes %.6f, addresses %.3f", got, tc.volumes, tc.addr)
			}
		})
	}
}

// A node gets a public IPv4 address when the NodeClass asks for one, or, unset,
// when a subnet it launches into maps one on launch; false keeps it private.
func TestPublicAddress(t *testing.T) {
	for _, tc := range []struct {
		associate *bool
		subnets   bool
		want      bool
	}{{nil, false, false}, {nil, true, true}, {aws.Bool(true), false, true}, {aws.Bool(false), true, false}} {
		nc := &awsv1.EC2NodeClass{}
		nc.Spec.AssociatePublicIPAddress = tc.associate
		if got := PublicAddress(nc, tc.subnets); got != tc.want {
			t.Errorf("associatePublicIPAddress %v, a subnet maps public %v: %v, want %v", tc.associate, tc.subnets, got, tc.want)
		}
	}
}
