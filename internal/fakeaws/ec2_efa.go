package fakeaws

import (
	"fmt"
)

// efaCards are EC2's published network cards and EFA interfaces of the types that
// support EFA (DescribeInstanceTypes' networkInfo.maximumNetworkCards and
// efaInfo.maximumEfaInterfaces; EC2 User Guide, "Supported instance types" for
// EFA): {cards, EFA interfaces}, for a type neither EC2's facts (ec2facts.json)
// nor AWS's VPC limits list. Each card holds as many interfaces as the default
// card's (the ENIs the type's max pods come from).
var efaCards = map[string][2]int32{
	"c5n.18xlarge": {1, 1}, "c5n.9xlarge": {1, 1}, "c5n.metal": {1, 1},
	"c6gn.16xlarge": {1, 1}, "c7gn.16xlarge": {1, 1}, "c7gn.metal": {1, 1},
	"c6i.32xlarge": {1, 1}, "c6i.metal": {1, 1}, "m6i.32xlarge": {1, 1}, "m6i.metal": {1, 1},
	"r6i.32xlarge": {1, 1}, "r6i.metal": {1, 1}, "c6id.32xlarge": {1, 1}, "m6id.32xlarge": {1, 1},
	"r6id.32xlarge": {1, 1}, "c6a.48xlarge": {1, 1}, "m6a.48xlarge": {1, 1}, "r6a.48xlarge": {1, 1},
	"c6in.32xlarge": {2, 2}, "c6in.metal": {2, 2}, "m6in.32xlarge": {2, 2}, "m6idn.32xlarge": {2, 2},
	"r6in.32xlarge": {2, 2}, "r6idn.32xlarge": {2, 2},
	"c7i.48xlarge": {1, 1}, "m7i.48xlarge": {1, 1}, "r7i.48xlarge": {1, 1},
	"c7a.48xlarge": {1, 1}, "m7a.48xlarge": {1, 1}, "r7a.48xlarge": {1, 1},
	"c7g.16xlarge": {1, 1}, "m7g.16xlarge": {1, 1}, "r7g.16xlarge": {1, 1}, "c7gd.16xlarge": {1, 1},
	"m5n.24xlarge": {1, 1}, "m5dn.24xlarge": {1, 1}, "r5n.24xlarge": {1, 1}, "r5dn.24xlarge": {1, 1},
	"i3en.24xlarge": {1, 1}, "i4i.32xlarge": {1, 1},
	"g4dn.8xlarge": {1, 1}, "g4dn.12xlarge": {1, 1}, "g4dn.16xlarge": {1, 1}, "g4dn.metal": {1, 1},
	"g5.8xlarge": {1, 1}, "g5.12xlarge": {1, 1}, "g5.16xlarge": {1, 1}, "g5.24xlarge": {1, 1}, "g5.48xlarge": {1, 1},
	"g6.8xlarge": {1, 1}, "g6.12xlarge": {1, 1}, "g6.16xlarge": {1, 1}, "g6.24xlarge": {1, 1}, "g6.48xlarge": {1, 1},
	"p3dn.24xlarge": {1, 1}, "p4d.24xlarge": {4, 4}, "p4de.24xlarge": {4, 4},
	"p5.48xlarge": {32, 32}, "p5e.48xlarge": {32, 32}, "p5en.48xlarge": {16, 16},
	"trn1.32xlarge": {8, 8}, "trn1n.32xlarge": {16, 16}, "dl1.24xlarge": {4, 4},
}

// nestedVirtualizationFamilies are the families whose virtual (not bare-metal)
// sizes report "nested-virtualization" among their processor's supported
// features: EC2 offers nested virtualization on the 8th-generation Intel C, M
// and R families.
var nestedVirtualizationFamilies = map[string]bool{"c8i": true, "m8i": true, "r8i": true}

// networkCards is how many network cards the type has.
func (t *instanceType) networkCards() int32 {
	if len(t.Cards) > 0 {
		return int32(len(t.Cards))
	}
	if f, ok := efaCards[t.Name]; ok {
		return f[0]
	}
	return 1
}

// efaInterfaces is how many EFA interfaces the type takes; 0 without EFA.
func (t *instanceType) efaInterfaces() int32 { return t.EFA }

// nestedVirtualization reports the nested-virtualization processor feature.
func (t *instanceType) nestedVirtualization() bool {
	return nestedVirtualizationFamilies[t.Family] && !t.metal()
}

// dedicatedPrice is the type's Linux on-demand price on dedicated hardware, as
// the Price List has it under tenancy Dedicated; 0 when the type is not sold as a
// Dedicated Instance (burstable types, in the fake). Nominal: a tenth above the
// shared price, about where EC2's dedicated prices sit.
func (t *instanceType) dedicatedPrice() float64 {
	if t.Burstable || t.OnDemandPrice == 0 {
		return 0
	}
	return t.OnDemandPrice * 1.1
}

// checkNetworkCards refuses what EC2 refuses of a template's interfaces on the
// type: a card or device index the type does not have, an efa-only primary
// interface, EFA interfaces on a type without EFA or more than it takes (one per
// card), and connection tracking off Nitro or outside EC2's bounds.
func checkNetworkCards(lt *launchTemplate, t *instanceType) (code, msg string) {
	efa := 0
	perCard := map[int]int{}
	for _, ni := range lt.Interfaces {
		if ni.NetworkCardIndex >= int(t.networkCards()) {
			return "InvalidParameterValue", fmt.Sprintf("Network card index %d is out of range: %s has %d network cards", ni.NetworkCardIndex, t.Name, t.networkCards())
		}
		if ni.DeviceIndex >= int(t.ENIs) {
			return "InvalidParameterValue", fmt.Sprintf("Device index %d is out of range: network card %d of %s takes %d network interfaces", ni.DeviceIndex, ni.NetworkCardIndex, t.Name, t.ENIs)
		}
		if ni.InterfaceType == "efa" || ni.InterfaceType == "efa-only" {
			if ni.InterfaceType == "efa-only" && ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 {
				return "InvalidParameterCombination", "An EFA-only network interface cannot be the primary network interface (network card 0, device index 0)"
			}
			if t.efaInterfaces() == 0 {
				return "InvalidParameterCombination", fmt.Sprintf("The instance type %s does not support Elastic Fabric Adapter (EFA) interfaces", t.Name)
			}
			efa++
			perCard[ni.NetworkCardIndex]++
			if perCard[ni.NetworkCardIndex] > 1 {
				return "InvalidParameterCombination", fmt.Sprintf("Network card %d of %s takes one EFA interface", ni.NetworkCardIndex, t.Name)
			}
		}
		if len(ni.ConnTrack) > 0 {
			if !t.nitro() {
				return "InvalidParameterCombination", fmt.Sprintf("Connection tracking timeouts are supported only on instances built on the Nitro System; %s is not", t.Name)
			}
			for k, bounds := range map[string][2]int{"TcpEstablishedTimeout": {60, 432000}, "UdpStreamTimeout": {60, 180}, "UdpTimeout": {30, 60}} {
				if v, ok := ni.ConnTrack[k]; ok && (v < bounds[0] || v > bounds[1]) {
					return "InvalidParameterValue", fmt.Sprintf("Value (%d) for parameter %s is invalid: it must be between %d and %d seconds", v, k, bounds[0], bounds[1])
				}
			}
		}
	}
	if efa > int(t.efaInterfaces()) {
		return "InvalidParameterCombination", fmt.Sprintf("%s takes %d EFA interfaces, not %d", t.Name, t.efaInterfaces(), efa)
	}
	return "", ""
}

// checkCPUOptions refuses CPU options the type does not have: nested
// virtualization where the processor lacks it, a core count above the type's
// cores, threads per core other than 1 or the type's own.
func checkCPUOptions(lt *launchTemplate, t *instanceType) (code, msg string) {
	switch lt.NestedVirtualization {
	case "", "disabled":
	case "enabled":
		if !t.nestedVirtualization() {
			return "Unsupported", fmt.Sprintf("Nested virtualization is not supported for instance type %s", t.Name)
		}
	default:
		return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter CpuOptions.NestedVirtualization is invalid. Valid values are enabled, disabled.", lt.NestedVirtualization)
	}
	cores := max(1, t.VCPUs/t.ThreadsPerCore)
	if lt.CoreCount != 0 && (lt.CoreCount < 1 || lt.CoreCount > int(cores)) {
		return "InvalidCpuOptions", fmt.Sprintf("The specified CPU core count %d is not valid for %s, which has %d cores", lt.CoreCount, t.Name, cores)
	}
	if lt.ThreadsPerCore != 0 && lt.ThreadsPerCore != 1 && lt.ThreadsPerCore != int(t.ThreadsPerCore) {
		return "InvalidCpuOptions", fmt.Sprintf("The specified threads per core %d is not valid for %s: 1 or %d", lt.ThreadsPerCore, t.Name, t.ThreadsPerCore)
	}
	return "", ""
}

// checkTenancy refuses a tenancy the launch cannot have: host without a host to
// place on, dedicated on a type not sold as a Dedicated Instance, or a value EC2
// does not know.
func checkTenancy(lt *launchTemplate, t *instanceType) (code, msg string) {
	switch lt.Tenancy {
	case "", "default":
	case "dedicated":
		if t.dedicatedPrice() == 0 {
			return "Unsupported", fmt.Sprintf("The requested tenancy (dedicated) is not supported for instance type %s", t.Name)
		}
	case "host":
		return "InsufficientHostCapacity", "There is no Dedicated Host to place the instance on with tenancy host"
	default:
		return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter Tenancy is invalid. Valid values are default, dedicated, host.", lt.Tenancy)
	}
	return "", ""
}

// supportedFeatures are the type's processorInfo.supportedFeatures that the
// fake models.
func (t *instanceType) supportedFeatures() []string {
	if t.nestedVirtualization() {
		return []string{"nested-virtualization"}
	}
	return nil
}
