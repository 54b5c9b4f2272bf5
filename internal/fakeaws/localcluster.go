package fakeaws

import (
	"encoding/base64"
	"slices"
)

// LocalClusterZones is how many zones the account of a local cluster spans.
const LocalClusterZones = 3

// LocalClusterOptions are the options of an account that serves a local control
// plane (the sandbox, the e2e suite): an EKS cluster named name whose endpoint and
// CA are the API server's, so the user data of its instances names the real
// cluster, and the default inventory cut down to the first three zones (a private
// and a public subnet in each, the discovery-tagged security group, the al2023 and
// Bottlerocket AMIs, the KarpenterNodeRole-<name> role and its instance profile).
func LocalClusterOptions(name, kubernetesVersion, endpoint string, caPEM []byte) Options {
	return Options{
		Cluster: Cluster{Name: name, Version: kubernetesVersion, Endpoint: endpoint,
			CertificateAuthority: base64.StdEncoding.EncodeToString(caPEM)},
		Inventory:         KeepZones(LocalClusterZones),
		InterruptionQueue: name,
	}
}

// KeepZones edits an inventory to the subnets of its first n zones, in name order,
// so that instances launch there only.
func KeepZones(n int) func(*Inventory) {
	return func(inv *Inventory) {
		var zones []string
		for _, s := range inv.Subnets {
			if !slices.Contains(zones, s.Zone) {
				zones = append(zones, s.Zone)
			}
		}
		slices.Sort(zones)
		if len(zones) > n {
			zones = zones[:n]
		}
		inv.Subnets = slices.DeleteFunc(inv.Subnets, func(s Subnet) bool { return !slices.Contains(zones, s.Zone) })
	}
}
