package aws

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// These tests check instanceStorePolicy, networkInterfaces, connectionTracking,
// cpuOptions and dedicated tenancy against the fake's EC2, which refuses what EC2
// refuses of them.

// typesOf are the NodeClass's instance types by name.
func (e *testEnv) typesOf(t *testing.T, nc *awsv1.EC2NodeClass, tenancy string) map[string]*scheduling.InstanceType {
	t.Helper()
	types, err := e.cloud.instanceTypes(t.Context(), nc, tenancy)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*scheduling.InstanceType{}
	for _, it := range types {
		out[it.Name] = it
	}
	return out
}

// describeType is EC2's answer for one type.
func (e *testEnv) describeType(t *testing.T, name string) ec2types.InstanceTypeInfo {
	t.Helper()
	out, err := e.clients.EC2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(name)}})
	if err != nil || len(out.InstanceTypes) != 1 {
		t.Fatalf("describing %s: %v", name, err)
	}
	return out.InstanceTypes[0]
}

// templateOf is the fake's launch template the instance launched from.
func (e *testEnv) templateOf(t *testing.T, inst fakeaws.Instance) fakeaws.LaunchTemplate {
	t.Helper()
	id := inst.Tags["aws:ec2launchtemplate:id"]
	for _, lt := range e.fake.LaunchTemplates() {
		if lt.ID == id {
			return lt
		}
	}
	t.Fatalf("no launch template %s", id)
	return fakeaws.LaunchTemplate{}
}

// rawLaunch asks the fake's EC2 for one instance of the type from a template with
// data, as any client would: nil when it launched, else EC2's error code.
func (e *testEnv) rawLaunch(t *testing.T, name, typ string, data *ec2types.RequestLaunchTemplateData) error {
	t.Helper()
	nc := e.nodeClass(t, nil)
	ami, ok := AMIFor(nc.Status.AMIs, map[string]string{v1.LabelArch: "amd64", v1.LabelInstanceType: typ})
	if !ok {
		t.Fatal("no amd64 AMI")
	}
	data.ImageId = aws.String(ami.ID)
	lt, err := e.clients.EC2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("raw/" + name), LaunchTemplateData: data})
	if err != nil {
		return err
	}
	subnet := nc.Status.Subnets[0]
	out, err := e.clients.EC2.CreateFleet(t.Context(), &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceType(typ), SubnetId: aws.String(subnet.ID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
	if err != nil {
		return err
	}
	if len(out.Instances) > 0 {
		return nil
	}
	if len(out.Errors) == 0 {
		t.Fatal("the fleet launched nothing and said nothing")
	}
	return &fleetError{code: deref(out.Errors[0].ErrorCode), msg: deref(out.Errors[0].ErrorMessage)}
}

type fleetError struct{ code, msg string }

func (f *fleetError) Error() string { return f.code + ": " + f.msg }

func TestInstanceStoreRAID0(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	raid := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = ptrTo(awsv1.InstanceStorePolicyRAID0) })
	plain := e.nodeClass(t, nil)

	// Ephemeral storage is the instance store EC2 describes, in GB, as Karpenter
	// counts it; a type without one keeps its root volume.
	info := e.describeType(t, "m5d.large")
	if info.InstanceStorageInfo == nil || deref(info.InstanceStorageInfo.TotalSizeInGB) == 0 {
		t.Fatal("EC2 describes no instance storage for m5d.large")
	}
	want := resource.NewQuantity(*info.InstanceStorageInfo.TotalSizeInGB*1000*1000*1000, resource.DecimalSI)
	raided, plainTypes := e.typesOf(t, raid, TenancyDefault), e.typesOf(t, plain, TenancyDefault)
	if got := raided["m5d.large"].Capacity[corev1.ResourceEphemeralStorage]; got.Cmp(*want) != 0 {
		t.Errorf("m5d.large with RAID0: ephemeral-storage %s, want the instance store's %s", got.String(), want.String())
	}
	if got := plainTypes["m5d.large"].Capacity[corev1.ResourceEphemeralStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("m5d.large without a policy: ephemeral-storage %s, want the 20Gi root volume", got.String())
	}
	if got := raided["m5.large"].Capacity[corev1.ResourceEphemeralStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("m5.large (no instance store) with RAID0: ephemeral-storage %s, want the 20Gi root volume", got.String())
	}
	alloc, plainAlloc := raided["m5d.large"].Allocatable()[corev1.ResourceEphemeralStorage], plainTypes["m5d.large"].Allocatable()[corev1.ResourceEphemeralStorage]
	if alloc.Cmp(plainAlloc) <= 0 {
		t.Errorf("allocatable ephemeral-storage with RAID0 %s is not above the root volume's %s", alloc.String(), plainAlloc.String())
	}

	// The AL2023 NodeConfig asks nodeadm for the array.
	_, inst := e.launchOne(t, raid, "raid0", "m5d.large")
	if ud := inst.UserData; !strings.Contains(ud, "localStorage:") || !strings.Contains(ud, "strategy: RAID0") {
		t.Errorf("AL2023 user data without spec.instance.localStorage.strategy RAID0:\n%s", ud)
	}

	// AL2 passes --local-disks raid0 to bootstrap.sh; Bottlerocket runs
	// apiclient's ephemeral-storage commands before the kubelet starts.
	cluster := Cluster{Name: "c", Endpoint: "https://k", CABundle: "Q0E=", ServiceCIDR: "10.100.0.0/16"}
	al2, err := UserData(Bootstrap{Cluster: cluster, Family: awsv1.AMIFamilyAL2, RAID0: true})
	if err != nil || !strings.Contains(al2, "/etc/eks/bootstrap.sh 'c'") || !strings.Contains(al2, " --local-disks raid0") {
		t.Errorf("AL2 user data (%v):\n%s", err, al2)
	}
	br, err := UserData(Bootstrap{Cluster: cluster, Family: awsv1.AMIFamilyBottlerocket, RAID0: true,
		UserData: aws.String("[settings.bootstrap-commands.mine]\ncommands = [[\"echo\"]]\nmode = \"once\"\n")})
	for _, want := range []string{`[settings.bootstrap-commands.000-mount-instance-storage]`, `["apiclient", "ephemeral-storage", "init"]`,
		`["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]`,
		`mode = "always"`, `essential = true`, `[settings.bootstrap-commands.mine]`} {
		if err != nil || !strings.Contains(br, want) {
			t.Errorf("Bottlerocket user data (%v) lacks %s:\n%s", err, want, br)
		}
	}
	if none, _ := UserData(Bootstrap{Cluster: cluster, Family: awsv1.AMIFamilyAL2}); strings.Contains(none, "local-disks") {
		t.Errorf("AL2 user data without RAID0 sets up local disks:\n%s", none)
	}
}

func TestNetworkInterfacesEFA(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	efaOnly := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		}
	})
	// Only types with EFA take an efa-only interface; the node's EFA devices are
	// the interfaces it launches with, and the one on the default card takes an
	// ENI from pods.
	types := e.typesOf(t, efaOnly, TenancyDefault)
	if _, ok := types["m5.large"]; ok {
		t.Error("m5.large (no EFA) is offered for a NodeClass with an efa-only interface")
	}
	c5n, ok := types["c5n.18xlarge"]
	if !ok {
		t.Fatal("c5n.18xlarge (one EFA interface) is not offered")
	}
	if got := c5n.Capacity[ResourceEFA]; got.Value() != 1 {
		t.Errorf("c5n.18xlarge %s = %s, want the one efa-only interface", ResourceEFA, got.String())
	}
	plainC5n := e.typesOf(t, e.nodeClass(t, nil), TenancyDefault)["c5n.18xlarge"]
	if pods, plainPods := c5n.Capacity[corev1.ResourcePods], plainC5n.Capacity[corev1.ResourcePods]; pods.Value() >= plainPods.Value() {
		t.Errorf("c5n.18xlarge max pods %d with an efa-only interface on card 0, want fewer than %d", pods.Value(), plainPods.Value())
	}
	_, inst := e.launchOne(t, efaOnly, "efa-only", "c5n.18xlarge")
	d := e.templateOf(t, inst).Data
	for k, want := range map[string]string{"NetworkInterface.1.InterfaceType": "interface", "NetworkInterface.1.DeviceIndex": "0",
		"NetworkInterface.2.InterfaceType": "efa-only", "NetworkInterface.2.DeviceIndex": "1", "NetworkInterface.2.NetworkCardIndex": "0"} {
		if d[k] != want {
			t.Errorf("launch template %s = %q, want %q", k, d[k], want)
		}
	}
	if _, ok := d["NetworkInterface.2.SecurityGroupId.1"]; ok {
		t.Error("the efa-only interface carries security groups")
	}

	// A claim asking for EFA devices, with no interfaces listed, gets one EFA
	// interface per card the type has EFA on (p4d.24xlarge: 4).
	claim := e.claim(e.nodeClass(t, nil), "efa-pods", req(v1.LabelInstanceType, "p4d.24xlarge"), req(v1.CapacityTypeLabelKey, "on-demand"))
	claim.Spec.Resources.Requests = corev1.ResourceList{ResourceEFA: resource.MustParse("4")}
	got, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ParseProviderID(got.Status.ProviderID)
	p4d, _ := e.fake.Instance(id)
	d = e.templateOf(t, p4d).Data
	for i, card := range []string{"0", "1", "2", "3"} {
		n := "NetworkInterface." + string(rune('1'+i)) + "."
		if d[n+"InterfaceType"] != "efa" || d[n+"NetworkCardIndex"] != card {
			t.Errorf("p4d.24xlarge interface %d: type %q card %q, want efa on card %s", i+1, d[n+"InterfaceType"], d[n+"NetworkCardIndex"], card)
		}
	}
	if _, ok := d["NetworkInterface.5.InterfaceType"]; ok {
		t.Error("more EFA interfaces than p4d.24xlarge's 4")
	}

	// The fake refuses as EC2 does: EFA on a type without it, a network card the
	// type does not have.
	efa := func(card int32, typ string) *ec2types.RequestLaunchTemplateData {
		return &ec2types.RequestLaunchTemplateData{NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			{DeviceIndex: aws.Int32(0), NetworkCardIndex: aws.Int32(0)},
			{DeviceIndex: aws.Int32(1), NetworkCardIndex: aws.Int32(card), InterfaceType: aws.String(typ)}}}
	}
	if err := e.rawLaunch(t, "efa-on-m5", "m5.large", efa(0, "efa-only")); err == nil || !strings.Contains(err.Error(), "Elastic Fabric Adapter") {
		t.Errorf("an efa-only interface on m5.large: %v, want EC2's refusal", err)
	}
	if err := e.rawLaunch(t, "card-9", "c5n.18xlarge", efa(9, "efa-only")); err == nil || !strings.Contains(err.Error(), "Network card index 9") {
		t.Errorf("network card 9 on c5n.18xlarge: %v, want EC2's refusal", err)
	}
	if err := e.rawLaunch(t, "efa-ok", "c5n.18xlarge", efa(0, "efa-only")); err != nil {
		t.Errorf("an efa-only interface on c5n.18xlarge: %v", err)
	}
}

func TestConnectionTracking(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(300), UDPTimeout: aws.Int32(45)}
	})
	types := e.typesOf(t, nc, TenancyDefault)
	if _, ok := types["m4.large"]; ok {
		t.Error("m4.large (Xen) is offered with connection tracking, which needs Nitro")
	}
	if _, ok := types["m5.large"]; !ok {
		t.Fatal("m5.large (Nitro) is not offered")
	}
	_, inst := e.launchOne(t, nc, "conntrack")
	d := e.templateOf(t, inst).Data
	for k, want := range map[string]string{"NetworkInterface.1.ConnectionTrackingSpecification.TcpEstablishedTimeout": "300",
		"NetworkInterface.1.ConnectionTrackingSpecification.UdpTimeout": "45", "NetworkInterface.1.DeviceIndex": "0",
		"NetworkInterface.1.SecurityGroupId.1": d["NetworkInterface.1.SecurityGroupId.1"]} {
		if d[k] != want || want == "" {
			t.Errorf("launch template %s = %q, want %q", k, d[k], want)
		}
	}
	if _, ok := d["NetworkInterface.1.ConnectionTrackingSpecification.UdpStreamTimeout"]; ok {
		t.Error("an unset timeout was sent")
	}
	ct := func(tcp int32) *ec2types.RequestLaunchTemplateData {
		return &ec2types.RequestLaunchTemplateData{NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), ConnectionTrackingSpecification: &ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(tcp)}}}}
	}
	if err := e.rawLaunch(t, "xen", "m4.large", ct(300)); err == nil || !strings.Contains(err.Error(), "Nitro") {
		t.Errorf("connection tracking on m4.large: %v, want EC2's refusal", err)
	}
	if err := e.rawLaunch(t, "short", "m5.large", ct(30)); err == nil || !strings.Contains(err.Error(), "TcpEstablishedTimeout") {
		t.Errorf("a 30 s TCP timeout: %v, want EC2's refusal", err)
	}
}

func TestCPUOptionsNestedVirtualization(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: aws.String("enabled")}
	})
	types := e.typesOf(t, nc, TenancyDefault)
	if _, ok := types["m5.large"]; ok {
		t.Error("m5.large (no nested-virtualization feature) is offered")
	}
	if len(types) == 0 {
		t.Fatal("no type offered for nested virtualization")
	}
	for name := range types {
		info := e.describeType(t, name)
		if info.ProcessorInfo == nil || !strings.Contains(strings.Join(supportedFeatures(info), ","), "nested-virtualization") {
			t.Errorf("%s is offered, but EC2 does not report nested-virtualization for it", name)
		}
	}
	_, inst := e.launchOne(t, nc, "nested", "m8i.large")
	if got := e.templateOf(t, inst).Data["CpuOptions.NestedVirtualization"]; got != "enabled" {
		t.Errorf("launch template CpuOptions.NestedVirtualization = %q, want enabled", got)
	}
	nested := &ec2types.RequestLaunchTemplateData{CpuOptions: &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecificationEnabled}}
	if err := e.rawLaunch(t, "nested-m5", "m5.large", nested); err == nil || !strings.Contains(err.Error(), "Nested virtualization") {
		t.Errorf("nested virtualization on m5.large: %v, want EC2's refusal", err)
	}
	cores := &ec2types.RequestLaunchTemplateData{CpuOptions: &ec2types.LaunchTemplateCpuOptionsRequest{CoreCount: aws.Int32(4), ThreadsPerCore: aws.Int32(2)}}
	if err := e.rawLaunch(t, "cores", "m5.large", cores); err == nil || !strings.Contains(err.Error(), "core count") {
		t.Errorf("4 cores on m5.large (1 core): %v, want EC2's refusal", err)
	}
}

func supportedFeatures(info ec2types.InstanceTypeInfo) []string {
	var out []string
	for _, f := range info.ProcessorInfo.SupportedFeatures {
		out = append(out, string(f))
	}
	return out
}

func TestDedicatedTenancy(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	// Until the Pricing API's dedicated prices are read, dedicated nodes cannot be
	// ranked: refused, saying why.
	if _, err := e.cloud.instanceTypes(t.Context(), nc, TenancyDedicated); err == nil || !strings.Contains(err.Error(), "dedicated-tenancy prices") {
		t.Fatalf("dedicated types without dedicated prices: %v, want a refusal naming the missing prices", err)
	}
	if err := e.prices.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	dedicated := e.typesOf(t, nc, TenancyDedicated)
	shared := e.typesOf(t, nc, TenancyDefault)
	m5, ok := dedicated["m5.large"]
	if !ok {
		t.Fatal("m5.large is not offered with dedicated tenancy")
	}
	for _, o := range m5.Offerings {
		sharedPrice := shared["m5.large"].Offerings[0].Price
		if o.CapacityType != CapacityTypeOnDemand || o.Price <= sharedPrice {
			t.Errorf("dedicated m5.large offering %+v: want on-demand above the shared price %v", o, sharedPrice)
		}
	}
	if got := m5.Requirements.Labels()[LabelInstanceTenancy]; got != TenancyDedicated {
		t.Errorf("dedicated m5.large is labelled %s=%q", LabelInstanceTenancy, got)
	}
	if got := shared["m5.large"].Requirements.Labels()[LabelInstanceTenancy]; got != TenancyDefault {
		t.Errorf("shared m5.large is labelled %s=%q", LabelInstanceTenancy, got)
	}
	if _, ok := dedicated["t3.large"]; ok {
		t.Error("t3.large, which the Price List has no dedicated price for, is offered with dedicated tenancy")
	}

	claim := e.claim(nc, "dedicated", req(v1.LabelInstanceType, "m5.large"), req(LabelInstanceTenancy, TenancyDedicated))
	got, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[LabelInstanceTenancy] != TenancyDedicated || got.Labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand {
		t.Errorf("launched claim labels %v", got.Labels)
	}
	id, _ := ParseProviderID(got.Status.ProviderID)
	inst, _ := e.fake.Instance(id)
	if got := e.templateOf(t, inst).Data["Placement.Tenancy"]; got != "dedicated" {
		t.Errorf("launch template Placement.Tenancy = %q, want dedicated", got)
	}
	read, err := e.restart().Get(t.Context(), got.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if read.Labels[LabelInstanceTenancy] != TenancyDedicated {
		t.Errorf("the instance as EC2 describes it is labelled %s=%q", LabelInstanceTenancy, read.Labels[LabelInstanceTenancy])
	}
	if _, inst := e.launchOne(t, nc, "shared"); e.templateOf(t, inst).Data["Placement.Tenancy"] != "" {
		t.Error("a claim that allows default tenancy launched with a tenancy")
	}
	if TenancyFor([]v1.NodeSelectorRequirementWithMinValues{req(LabelInstanceTenancy, TenancyDefault, TenancyDedicated)}) != TenancyDefault {
		t.Error("a claim allowing both tenancies is not launched on shared hardware, as Karpenter prefers")
	}
	burst := &ec2types.RequestLaunchTemplateData{Placement: &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.TenancyDedicated}}
	if err := e.rawLaunch(t, "dedicated-t3", "t3.large", burst); err == nil || !strings.Contains(err.Error(), "tenancy") {
		t.Errorf("a dedicated t3.large: %v, want EC2's refusal", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
