package fakeaws

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"hash/fnv"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Inventory is what the account holds before any call: the network, the images
// and their SSM aliases, IAM roles and instance profiles, capacity reservations.
// Options.Inventory edits the default one (see DefaultInventory).
type Inventory struct {
	VPCID                string
	Subnets              []Subnet
	SecurityGroups       []SecurityGroup
	Images               []Image
	SSMParameters        map[string]string
	Roles                []Role
	InstanceProfiles     []InstanceProfile
	CapacityReservations []CapacityReservation
	PlacementGroups      []PlacementGroup
}

// Subnet is a VPC subnet. AvailableIPAddressCount is computed from the CIDR less
// AWS's five reserved addresses and the instances running in it.
type Subnet struct {
	ID          string
	VPCID       string
	Zone        string
	CIDR        string
	MapPublicIP bool
	// IPv6CIDR is the subnet's IPv6 block (a /64 of the VPC's /56), which makes it
	// dual-stack; empty: IPv4 only. AssignIPv6OnCreation gives every instance
	// launched into it an IPv6 address on its primary interface, also when the
	// launch does not ask for one.
	IPv6CIDR             string
	AssignIPv6OnCreation bool
	Tags                 map[string]string
}

// SecurityGroup is a VPC security group.
type SecurityGroup struct {
	ID          string
	Name        string
	Description string
	VPCID       string
	Tags        map[string]string
}

// Image is an AMI.
type Image struct {
	ID          string
	Name        string
	Description string
	// Architecture is EC2's: x86_64 or arm64.
	Architecture string
	// Platform is "windows" for Windows images, as EC2 has it, and empty for Linux.
	Platform        string
	OwnerID         string
	OwnerAlias      string
	CreationDate    time.Time
	DeprecationTime time.Time // zero: never
	RootDeviceName  string
	BlockDevices    []ImageBlockDevice
	Tags            map[string]string
}

// ImageBlockDevice is one EBS volume of an image.
type ImageBlockDevice struct {
	DeviceName string
	SnapshotID string
	VolumeSize int32 // GiB
	VolumeType string
}

// Role is an IAM role instance profiles can hold.
type Role struct {
	Name string
	Path string
}

// InstanceProfile is an IAM instance profile; Roles holds role names (at most one).
type InstanceProfile struct {
	Name  string
	Path  string
	Roles []string
	Tags  map[string]string
}

// CapacityReservation is an on-demand capacity reservation. Launches that target
// it through their launch template take from Available.
type CapacityReservation struct {
	ID            string
	InstanceType  string
	Zone          string
	Total         int
	Available     int
	MatchCriteria string // open or targeted
	// Type is "default" or "capacity-block".
	Type string
	// Interruptible reservations are lent out of another reservation, whose
	// owner may take the capacity back (see Server.ReclaimCapacityReservation):
	// their instances are launched by a fleet of target capacity type
	// reserved-capacity and get two minutes' warning.
	Interruptible bool
	// Source is the reservation an interruptible one was created from.
	Source  string
	EndDate time.Time // zero: unlimited
	Tags    map[string]string
	// Cancelled reservations launch nothing and hold no instances (see
	// Server.CancelCapacityReservation).
	Cancelled bool
}

// Cluster is the EKS cluster DescribeCluster describes.
type Cluster struct {
	Name    string
	Version string
	// Endpoint and CertificateAuthority (base64 PEM, as EKS returns it) default to
	// a made-up endpoint and a fresh self-signed CA; set them to a real API
	// server's to bootstrap nodes against it.
	Endpoint             string
	CertificateAuthority string
	ServiceIPv4CIDR      string
	// ServiceIPv6CIDR makes it an IPv6 cluster (ipFamily ipv6): services, and so
	// the cluster DNS, have addresses of this range.
	ServiceIPv6CIDR string
	PlatformVersion string
	CreatedAt       time.Time
}

// zone is an availability zone of the region.
type zone struct {
	Name string
	ID   string
}

type inventory struct {
	zones        []zone
	types        map[string]*instanceType
	typeNames    []string // sorted
	vpcID        string
	subnets      []*Subnet
	sgs          []*SecurityGroup
	images       []*Image
	ssm          map[string]string
	roles        map[string]*iamRole
	profiles     map[string]*iamProfile
	reservations []*CapacityReservation
	// placementGroups are the account's groups and those shared with it.
	placementGroups []*PlacementGroup
	cluster         Cluster
	spotHistory     map[Offering][]pricePoint // CapacityType is empty
	createdAt       time.Time
	ssmModifiedAt   time.Time
}

type pricePoint struct {
	at    time.Time
	price float64
}

type iamRole struct {
	Role
	id        string
	createdAt time.Time
}

type iamProfile struct {
	InstanceProfile
	id        string
	createdAt time.Time
}

func (s *Server) buildInventory() error {
	now := s.now()
	inv := &s.inv
	inv.createdAt = now
	inv.ssmModifiedAt = now.Add(-24 * time.Hour)
	inv.types = map[string]*instanceType{}
	zoneSet := map[string]bool{}
	for _, it := range s.opts.InstanceTypes {
		t, err := newInstanceType(it, s.opts.Region)
		if err != nil {
			return fmt.Errorf("instance type %s: %w", it.Name, err)
		}
		inv.types[t.Name] = t
		inv.typeNames = append(inv.typeNames, t.Name)
		for _, z := range t.Zones {
			zoneSet[z] = true
		}
	}
	slices.Sort(inv.typeNames)
	for i, name := range slices.Sorted(maps.Keys(zoneSet)) {
		inv.zones = append(inv.zones, zone{Name: name, ID: fmt.Sprintf("%s-az%d", regionShort(s.opts.Region), i+1)})
	}
	if len(inv.zones) == 0 {
		return fmt.Errorf("the instance types offer no zone")
	}

	inv.cluster = s.opts.Cluster
	c := &inv.cluster
	if c.Name == "" {
		c.Name = "tailor"
	}
	if c.Version == "" {
		c.Version = defaultKubernetesVersion
	}
	if c.Endpoint == "" {
		c.Endpoint = fmt.Sprintf("https://%016X%016X.gr7.%s.eks.amazonaws.com", fnvHash(c.Name), fnvHash(s.opts.Region+"/"+c.Name), s.opts.Region)
	}
	if c.CertificateAuthority == "" {
		ca, err := selfSignedCA(c.Name, now)
		if err != nil {
			return err
		}
		c.CertificateAuthority = ca
	}
	if c.ServiceIPv4CIDR == "" && c.ServiceIPv6CIDR == "" {
		c.ServiceIPv4CIDR = "10.100.0.0/16"
	}
	if c.PlatformVersion == "" {
		c.PlatformVersion = "eks.8"
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now.Add(-30 * 24 * time.Hour)
	}

	d := DefaultInventory(s.opts.Region, c.Name, c.Version, zoneNames(inv.zones), now)
	if c.ServiceIPv6CIDR != "" {
		// EKS creates an IPv6 cluster in dual-stack subnets only.
		DualStack(d)
	}
	if s.opts.Inventory != nil {
		s.opts.Inventory(d)
	}
	inv.vpcID = d.VPCID
	for _, sn := range d.Subnets {
		if _, err := netip.ParsePrefix(sn.CIDR); err != nil {
			return fmt.Errorf("subnet %s: %w", sn.ID, err)
		}
		if sn.IPv6CIDR != "" {
			if p, err := netip.ParsePrefix(sn.IPv6CIDR); err != nil || !p.Addr().Is6() || p.Bits() > 64 {
				return fmt.Errorf("subnet %s: IPv6 CIDR %q is not an IPv6 block of /64 or larger", sn.ID, sn.IPv6CIDR)
			}
		}
		if sn.AssignIPv6OnCreation && sn.IPv6CIDR == "" {
			// EC2 refuses the setting on such a subnet.
			return fmt.Errorf("subnet %s: AssignIPv6OnCreation needs an IPv6 CIDR block", sn.ID)
		}
		if inv.zoneID(sn.Zone) == "" {
			return fmt.Errorf("subnet %s: zone %q is not one of the region's", sn.ID, sn.Zone)
		}
		sn.Tags = cloneTags(sn.Tags)
		inv.subnets = append(inv.subnets, &sn)
	}
	for _, sg := range d.SecurityGroups {
		sg.Tags = cloneTags(sg.Tags)
		inv.sgs = append(inv.sgs, &sg)
	}
	for _, im := range d.Images {
		im.Tags = cloneTags(im.Tags)
		inv.images = append(inv.images, &im)
	}
	inv.ssm = maps.Clone(d.SSMParameters)
	if inv.ssm == nil {
		inv.ssm = map[string]string{}
	}
	inv.roles = map[string]*iamRole{}
	for _, r := range d.Roles {
		inv.roles[r.Name] = &iamRole{Role: r, id: stableID("AROA", r.Name), createdAt: now.Add(-30 * 24 * time.Hour)}
	}
	inv.profiles = map[string]*iamProfile{}
	for _, p := range d.InstanceProfiles {
		for _, r := range p.Roles {
			if inv.roles[r] == nil {
				return fmt.Errorf("instance profile %s: no role %s", p.Name, r)
			}
		}
		p.Tags = cloneTags(p.Tags)
		inv.profiles[p.Name] = &iamProfile{InstanceProfile: p, id: stableID("AIPA", p.Name), createdAt: now.Add(-30 * 24 * time.Hour)}
	}
	for _, cr := range d.CapacityReservations {
		cr.Tags = cloneTags(cr.Tags)
		if cr.MatchCriteria == "" {
			cr.MatchCriteria = "open"
		}
		if cr.Type == "" {
			cr.Type = "default"
		}
		inv.reservations = append(inv.reservations, &cr)
	}
	for _, g := range d.PlacementGroups {
		g.Tags = cloneTags(g.Tags)
		g.State = cmp.Or(g.State, "available")
		switch g.Strategy {
		case "partition":
			if g.PartitionCount < 1 || g.PartitionCount > 7 {
				return fmt.Errorf("placement group %s: a partition group has 1 to 7 partitions, not %d", g.Name, g.PartitionCount)
			}
		case "spread":
			g.SpreadLevel = cmp.Or(g.SpreadLevel, "rack")
		case "cluster":
		default:
			return fmt.Errorf("placement group %s: strategy %q is not cluster, partition or spread", g.Name, g.Strategy)
		}
		inv.placementGroups = append(inv.placementGroups, &g)
	}
	inv.spotHistory = map[Offering][]pricePoint{}
	for _, t := range inv.types {
		for z, p := range t.SpotPrice {
			inv.spotHistory[Offering{InstanceType: t.Name, Zone: z}] = []pricePoint{{at: now.Add(-time.Hour), price: p}}
		}
	}
	return nil
}

func (inv *inventory) zoneID(name string) string {
	for _, z := range inv.zones {
		if z.Name == name {
			return z.ID
		}
	}
	return ""
}

func zoneNames(zs []zone) []string {
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = z.Name
	}
	return out
}

// defaultKubernetesVersion is the EKS cluster's version when Options name none.
const defaultKubernetesVersion = "1.34"

// Owners of the public EKS images.
const (
	eksImageOwner         = "602401143452"
	bottlerocketOwner     = "092701018921"
	al2023ReleaseOld      = "v20250715"
	al2023Release         = "v20250801"
	bottlerocketRelease   = "1.44.0"
	bottlerocketCommitOld = "1.43.0"
)

// DefaultInventory is the inventory a server starts with: one VPC with a private
// subnet per zone (tagged karpenter.sh/discovery=cluster and
// kubernetes.io/role/internal-elb) and a public one; the cluster security group
// (discovery-tagged) and the VPC default group; EKS-optimized AL2023 images
// (standard for amd64 and arm64 in two releases, nvidia) and Bottlerocket images
// (standard and nvidia, amd64 and arm64) with the SSM parameters that name them;
// the node role KarpenterNodeRole-<cluster> and the instance profile
// KarpenterNodeInstanceProfile-<cluster> holding it; no capacity reservations.
func DefaultInventory(region, cluster, kubernetesVersion string, zones []string, now time.Time) *Inventory {
	inv := &Inventory{VPCID: stableID("vpc", region+"/"+cluster), SSMParameters: map[string]string{}}
	discovery := map[string]string{"karpenter.sh/discovery": cluster}
	for i, z := range zones {
		inv.Subnets = append(inv.Subnets, Subnet{
			ID: stableID("subnet", "private/"+z), VPCID: inv.VPCID, Zone: z,
			CIDR: fmt.Sprintf("10.0.%d.0/19", 32*i),
			Tags: withTags(discovery, "Name", cluster+"-private-"+z, "kubernetes.io/role/internal-elb", "1"),
		})
	}
	for i, z := range zones {
		inv.Subnets = append(inv.Subnets, Subnet{
			ID: stableID("subnet", "public/"+z), VPCID: inv.VPCID, Zone: z, MapPublicIP: true,
			CIDR: fmt.Sprintf("10.0.%d.0/20", 192+16*i),
			Tags: map[string]string{"Name": cluster + "-public-" + z, "kubernetes.io/role/elb": "1"},
		})
	}
	inv.SecurityGroups = []SecurityGroup{
		{
			ID: stableID("sg", "cluster/"+cluster), Name: "eks-cluster-sg-" + cluster, VPCID: inv.VPCID,
			Description: "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.",
			Tags:        withTags(discovery, "Name", "eks-cluster-sg-"+cluster, "kubernetes.io/cluster/"+cluster, "owned", "aws:eks:cluster-name", cluster),
		},
		{ID: stableID("sg", "default/"+inv.VPCID), Name: "default", VPCID: inv.VPCID, Description: "default VPC security group", Tags: map[string]string{}},
	}

	v := kubernetesVersion
	al2023 := func(arch, variant, release string, age time.Duration) {
		name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, v, release)
		im := Image{
			ID: stableID("ami", name), Name: name, Architecture: arch, OwnerID: eksImageOwner, OwnerAlias: "amazon",
			Description:  fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, containerd: 2.0.*, variant: %s)", v, variant),
			CreationDate: now.Add(-age), RootDeviceName: "/dev/xvda",
			BlockDevices: []ImageBlockDevice{{DeviceName: "/dev/xvda", SnapshotID: stableID("snap", name), VolumeSize: 20, VolumeType: "gp3"}},
		}
		inv.Images = append(inv.Images, im)
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", v, arch, variant)
		inv.SSMParameters[base+name+"/image_id"] = im.ID
		if release == al2023Release {
			inv.SSMParameters[base+"recommended/image_id"] = im.ID
		}
	}
	bottlerocket := func(arch, flavor, release string, age time.Duration) {
		variant := "aws-k8s-" + v + flavor
		name := fmt.Sprintf("bottlerocket-%s-%s-v%s-%08x", variant, arch, release, uint32(fnvHash(variant+arch+release)))
		im := Image{
			ID: stableID("ami", name), Name: name, Architecture: arch, OwnerID: bottlerocketOwner, OwnerAlias: "amazon",
			Description: "bottlerocket", CreationDate: now.Add(-age), RootDeviceName: "/dev/xvda",
			BlockDevices: []ImageBlockDevice{
				{DeviceName: "/dev/xvda", SnapshotID: stableID("snap", name+"/root"), VolumeSize: 2, VolumeType: "gp2"},
				{DeviceName: "/dev/xvdb", SnapshotID: stableID("snap", name+"/data"), VolumeSize: 20, VolumeType: "gp2"},
			},
		}
		inv.Images = append(inv.Images, im)
		base := fmt.Sprintf("/aws/service/bottlerocket/%s/%s/", variant, arch)
		inv.SSMParameters[base+release+"/image_id"] = im.ID
		if release == bottlerocketRelease {
			inv.SSMParameters[base+"latest/image_id"] = im.ID
		}
	}
	for _, arch := range []string{"x86_64", "arm64"} {
		al2023(arch, "standard", al2023ReleaseOld, 20*24*time.Hour)
		al2023(arch, "standard", al2023Release, 4*24*time.Hour)
		al2023(arch, "nvidia", al2023Release, 4*24*time.Hour)
		bottlerocket(arch, "", bottlerocketCommitOld, 30*24*time.Hour)
		bottlerocket(arch, "", bottlerocketRelease, 6*24*time.Hour)
		bottlerocket(arch, "-nvidia", bottlerocketRelease, 6*24*time.Hour)
	}

	role := "KarpenterNodeRole-" + cluster
	inv.Roles = []Role{{Name: role, Path: "/"}}
	inv.InstanceProfiles = []InstanceProfile{{Name: "KarpenterNodeInstanceProfile-" + cluster, Path: "/", Roles: []string{role}}}
	return inv
}

// DualStack gives the VPC an IPv6 /56 from Amazon's pool (derived from its ID)
// and each subnet that has no IPv6 block the next /64 of it, as the VPC of an
// IPv6 EKS cluster has. The subnets do not assign IPv6 addresses on creation: an
// instance gets one when its launch asks (Ipv6AddressCount on its interface), as
// Karpenter's launch templates in an IPv6 cluster do. A server whose cluster is
// IPv6 applies it to the default inventory before Options.Inventory.
func DualStack(inv *Inventory) {
	h := fnvHash(inv.VPCID)
	for i := range inv.Subnets {
		if inv.Subnets[i].IPv6CIDR == "" {
			inv.Subnets[i].IPv6CIDR = fmt.Sprintf("2600:1f14:%x:%x::/64", h>>48, (h>>40&0xff)<<8|uint64(i&0xff))
		}
	}
}

func withTags(base map[string]string, kv ...string) map[string]string {
	out := maps.Clone(base)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func cloneTags(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

func fnvHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// stableID names default inventory by what it is, so IDs read the same in every
// test regardless of the seed.
func stableID(prefix, label string) string {
	if strings.HasPrefix(prefix, "A") { // IAM unique IDs: 21 upper-case characters
		return fmt.Sprintf("%s%017X", prefix, fnvHash(label)&0xfffffffffffffff)
	}
	return fmt.Sprintf("%s-0%016x", prefix, fnvHash(label))
}

// regionShort is the zone-ID prefix of a region: us-east-1 → use1, ap-southeast-2
// → apse2.
func regionShort(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) != 3 {
		return region
	}
	dirs := map[string]string{
		"east": "e", "west": "w", "north": "n", "south": "s", "central": "c",
		"northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw",
	}
	d, ok := dirs[parts[1]]
	if !ok {
		d = parts[1][:1]
	}
	return parts[0] + d + parts[2]
}

// selfSignedCA is a cluster CA in the form EKS returns it: a base64-encoded PEM
// certificate.
func selfSignedCA(cluster string, now time.Time) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return "", fmt.Errorf("generating the cluster CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(int64(fnvHash(cluster) >> 1)),
		Subject:               pkix.Name{CommonName: "kubernetes"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", fmt.Errorf("signing the cluster CA: %w", err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}
