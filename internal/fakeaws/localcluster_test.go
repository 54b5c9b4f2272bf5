package fakeaws

import (
	"encoding/base64"
	"slices"
	"testing"
)

func TestLocalClusterOptions(t *testing.T) {
	s, err := New(LocalClusterOptions("sandbox", "1.34", "https://127.0.0.1:6443", []byte("-----BEGIN CERTIFICATE-----\n")))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cluster()
	if c.Name != "sandbox" || c.Endpoint != "https://127.0.0.1:6443" || c.CertificateAuthority != base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n")) {
		t.Errorf("cluster %+v does not name the local API server", c)
	}
	if s.InterruptionQueue() != "sandbox" {
		t.Errorf("interruption queue %q, want the cluster's name", s.InterruptionQueue())
	}
	inv := s.InventorySnapshot()
	var discovered []string
	for _, sn := range inv.Subnets {
		if sn.Tags["karpenter.sh/discovery"] == "sandbox" {
			discovered = append(discovered, sn.Zone)
		}
	}
	if want := []string{"us-east-1a", "us-east-1b", "us-east-1c"}; !slices.Equal(discovered, want) {
		t.Errorf("discovery-tagged subnets in %v, want one in each of %v", discovered, want)
	}
	if len(inv.Subnets) != 2*LocalClusterZones {
		t.Errorf("%d subnets, want a private and a public one in each of %d zones", len(inv.Subnets), LocalClusterZones)
	}
	if !slices.ContainsFunc(inv.SecurityGroups, func(g SecurityGroup) bool { return g.Tags["karpenter.sh/discovery"] == "sandbox" }) {
		t.Error("no discovery-tagged security group")
	}
	if !slices.ContainsFunc(inv.InstanceProfiles, func(p InstanceProfile) bool { return slices.Contains(p.Roles, "KarpenterNodeRole-sandbox") }) {
		t.Error("no instance profile holding KarpenterNodeRole-sandbox")
	}
}
