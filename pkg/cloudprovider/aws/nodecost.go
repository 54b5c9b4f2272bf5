package aws

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// What an EC2 node costs besides its instance: its EBS volumes and its public
// IPv4 address. The scheduling engine adds it to every new node's price.

// PublicIPv4PerHour is what AWS charges for a public IPv4 address, in use or not,
// since February 2024 (aws.amazon.com/vpc/pricing).
const PublicIPv4PerHour = 0.005

// hoursPerMonth is how AWS turns a monthly price into an hourly one.
const hoursPerMonth = 730

// EBSPrices are a region's EBS volume prices, in USD per month.
type EBSPrices struct {
	// PerGB by volume type: gp3, gp2, io1, io2, st1, sc1, standard.
	PerGB map[string]float64
	// GP3IOPS is per provisioned IOPS above gp3's free 3,000; GP3Throughput per
	// provisioned MiB/s above its free 125.
	GP3IOPS, GP3Throughput float64
	// IO1IOPS is per provisioned IOPS of io1; IO2IOPS per IOPS of io2 in its
	// tiers: up to 32,000, 32,001 to 64,000, and above.
	IO1IOPS float64
	IO2IOPS [3]float64
}

// ebsPrices are AWS's published EBS prices (aws.amazon.com/ebs/pricing, on-demand
// volume prices as listed in 2025) for a few regions. Magnetic (standard) volumes
// also bill per million I/O requests, which depends on use and is not counted.
var ebsPrices = map[string]EBSPrices{
	"us-east-1": usEBS,
	"us-east-2": usEBS,
	"us-west-2": usEBS,
	"eu-west-1": {
		PerGB:   map[string]float64{"gp3": 0.088, "gp2": 0.11, "io1": 0.138, "io2": 0.138, "st1": 0.05, "sc1": 0.0168, "standard": 0.055},
		GP3IOPS: 0.0055, GP3Throughput: 0.044, IO1IOPS: 0.072, IO2IOPS: [3]float64{0.072, 0.0504, 0.0353},
	},
	"eu-central-1": {
		PerGB:   map[string]float64{"gp3": 0.0952, "gp2": 0.119, "io1": 0.149, "io2": 0.149, "st1": 0.054, "sc1": 0.018, "standard": 0.059},
		GP3IOPS: 0.006, GP3Throughput: 0.048, IO1IOPS: 0.078, IO2IOPS: [3]float64{0.078, 0.0546, 0.0382},
	},
}

var usEBS = EBSPrices{
	PerGB:   map[string]float64{"gp3": 0.08, "gp2": 0.10, "io1": 0.125, "io2": 0.125, "st1": 0.045, "sc1": 0.015, "standard": 0.05},
	GP3IOPS: 0.005, GP3Throughput: 0.04, IO1IOPS: 0.065, IO2IOPS: [3]float64{0.065, 0.0455, 0.032},
}

// EBSPricesFor are the region's EBS prices; a region not in the table gets
// us-east-1's, the lowest, and false.
func EBSPricesFor(region string) (EBSPrices, bool) {
	p, ok := ebsPrices[region]
	if !ok {
		return usEBS, false
	}
	return p, true
}

// VolumesPerHour is what the volumes cost per hour at the prices. A volume made
// from a snapshot without a volumeSize has the snapshot's size, unknown here: its
// storage is not counted (its IOPS and throughput are).
func VolumesPerHour(mappings []*awsv1.BlockDeviceMapping, p EBSPrices) float64 {
	monthly := 0.0
	for _, m := range mappings {
		if m == nil || m.EBS == nil {
			continue
		}
		ebs := m.EBS
		kind := "gp3" // EC2's default volume type
		if ebs.VolumeType != nil {
			kind = *ebs.VolumeType
		}
		if ebs.VolumeSize != nil {
			// EBS bills by the GiB it calls GB.
			gib := float64(ebs.VolumeSize.Value()) / (1 << 30)
			monthly += gib * p.PerGB[kind]
		}
		iops := int64(0)
		if ebs.IOPS != nil {
			iops = *ebs.IOPS
		}
		switch kind {
		case "gp3":
			monthly += float64(max(iops-3000, 0)) * p.GP3IOPS
			if ebs.Throughput != nil {
				monthly += float64(max(*ebs.Throughput-125, 0)) * p.GP3Throughput
			}
		case "io1":
			monthly += float64(iops) * p.IO1IOPS
		case "io2":
			tier1, tier2 := min(iops, 32000), min(max(iops-32000, 0), 32000)
			monthly += float64(tier1)*p.IO2IOPS[0] + float64(tier2)*p.IO2IOPS[1] + float64(max(iops-64000, 0))*p.IO2IOPS[2]
		}
	}
	return monthly / hoursPerMonth
}

// NodeClassCost is what each node of the NodeClass costs per hour besides its
// instance in the region: the volumes of its blockDeviceMappings (or its AMI
// family's defaults) and, when public, its IPv4 address.
func NodeClassCost(nc *awsv1.EC2NodeClass, region string, public bool) scheduling.NodeCost {
	prices, _ := EBSPricesFor(region)
	cost := scheduling.NodeCost{Volumes: VolumesPerHour(BlockDeviceMappings(nc), prices)}
	if public {
		cost.Addresses = PublicIPv4PerHour
	}
	return cost
}

// PublicAddress says whether the NodeClass's nodes get a public IPv4 address:
// associatePublicIPAddress when set, else whether a subnet they launch into maps
// public addresses on launch (anyMapsPublic; EC2 then assigns one).
func PublicAddress(nc *awsv1.EC2NodeClass, anyMapsPublic bool) bool {
	if nc.Spec.AssociatePublicIPAddress != nil {
		return *nc.Spec.AssociatePublicIPAddress
	}
	return anyMapsPublic
}

var _ cloudprovider.NodeCoster = (*CloudProvider)(nil)

// NodeCost is what each node of the pool's EC2NodeClass costs besides its
// instance: its volumes at the region's EBS prices, and its public IPv4 address
// when it gets one.
func (c *CloudProvider) NodeCost(ctx context.Context, pool *v1.NodePool) (scheduling.NodeCost, error) {
	nc, err := c.nodeClass(ctx, pool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return scheduling.NodeCost{}, err
	}
	public := nc.Spec.AssociatePublicIPAddress != nil && *nc.Spec.AssociatePublicIPAddress
	if nc.Spec.AssociatePublicIPAddress == nil {
		public = c.publicSubnets.anyMapsPublic(ctx, c.aws.EC2, nc.Status.Subnets, c.clock.Now())
	}
	return NodeClassCost(nc, c.opts.Region, public), nil
}

// publicSubnets remembers, by set of subnets, whether any maps public IPv4
// addresses on launch: asked of EC2 at most every publicSubnetsTTL, since the
// engine asks for every plan.
type publicSubnets struct {
	mu    sync.Mutex
	known map[string]publicAnswer
}

type publicAnswer struct {
	public bool
	at     time.Time
}

const publicSubnetsTTL = 5 * time.Minute

// anyMapsPublic says whether any of the subnets maps public addresses on launch.
// When EC2 cannot be asked, the last answer stands (none at first: no address
// counted), so a slow API never holds a plan up.
func (p *publicSubnets) anyMapsPublic(ctx context.Context, api *ec2.Client, subnets []awsv1.Subnet, now time.Time) bool {
	if len(subnets) == 0 || api == nil {
		return false
	}
	ids := make([]string, len(subnets))
	for i, s := range subnets {
		ids[i] = s.ID
	}
	slices.Sort(ids)
	key := strings.Join(ids, ",")
	p.mu.Lock()
	last, ok := p.known[key]
	p.mu.Unlock()
	if ok && now.Sub(last.at) < publicSubnetsTTL {
		return last.public
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
	if err != nil {
		return last.public
	}
	public := slices.ContainsFunc(out.Subnets, func(s ec2types.Subnet) bool { return deref(s.MapPublicIpOnLaunch) })
	p.mu.Lock()
	if p.known == nil {
		p.known = map[string]publicAnswer{}
	}
	p.known[key] = publicAnswer{public, now}
	p.mu.Unlock()
	return public
}
