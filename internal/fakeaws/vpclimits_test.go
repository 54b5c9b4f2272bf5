package fakeaws

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodetailor/tailor/internal/localcluster"
)

// The embedded table is AWS's, as the referee's module has it.
func TestVPCLimitsAreAWSTable(t *testing.T) {
	dir, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, "eks-node-referee"), "vpc-limits").Output()
	if err != nil {
		t.Fatalf("eks-node-referee vpc-limits (make tools TOOLS=eks-node-referee): %v", err)
	}
	if !bytes.Equal(out, vpcLimitsJSON) {
		t.Errorf("internal/fakeaws/vpclimits.json is not what `bin/eks-node-referee vpc-limits` prints: regenerate it")
	}
}

// DescribeInstanceTypes serves EC2's network facts: every network card with its
// interfaces, the default card, addresses per interface (p5.48xlarge: 32 cards of
// 2 interfaces of 50 addresses, which EKS turns into 100 pods).
func TestDescribeInstanceTypesNetworkCards(t *testing.T) {
	s := start(t, Options{})
	out := must(ec2Client(s).DescribeInstanceTypes(ctx(t), &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []ec2types.InstanceType{"p5.48xlarge", "m5.large"}})).ok(t)
	got := map[string]*ec2types.NetworkInfo{}
	for _, it := range out.InstanceTypes {
		got[string(it.InstanceType)] = it.NetworkInfo
	}
	p5 := got["p5.48xlarge"]
	if p5 == nil || len(p5.NetworkCards) != 32 || *p5.MaximumNetworkCards != 32 || *p5.MaximumNetworkInterfaces != 64 ||
		*p5.DefaultNetworkCardIndex != 0 || *p5.NetworkCards[0].MaximumNetworkInterfaces != 2 || *p5.Ipv4AddressesPerInterface != 50 {
		t.Errorf("p5.48xlarge network info %+v", p5)
	}
	m5 := got["m5.large"]
	if m5 == nil || len(m5.NetworkCards) != 1 || *m5.MaximumNetworkInterfaces != 3 || *m5.Ipv4AddressesPerInterface != 10 {
		t.Errorf("m5.large network info %+v", m5)
	}
}
