package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/aws/amazon-vpc-resource-controller-k8s/pkg/aws/vpc"
)

// eniMaxPods is the max pods the EKS boot agents give a type with the VPC CNI in
// its default mode: the network interfaces of the default network card times their
// IPv4 addresses less the primary one, plus 2 for host-network pods (the EKS AMI's
// max-pods calculator). The limits are AWS's own table, as its VPC resource
// controller ships it.
func eniMaxPods(instanceType string) (int32, error) {
	l, ok := vpc.Limits[instanceType]
	if !ok {
		return 0, fmt.Errorf("instance type %s is not in AWS's VPC limits table", instanceType)
	}
	enis := l.Interface
	for _, card := range l.NetworkCards {
		if card.NetworkCardIndex == int64(l.DefaultNetworkCardIndex) {
			enis = int(card.MaximumNetworkInterfaces)
		}
	}
	return int32(enis*(l.IPv4PerInterface-1) + 2), nil
}

// windowsMaxPods is the max pods of an EKS Windows node: only the primary interface
// carries pod addresses there, one of them the node's own (the Windows bootstrap
// script and the VPC resource controller's vpc.amazonaws.com/PrivateIPv4Address).
func windowsMaxPods(instanceType string) (int32, error) {
	l, ok := vpc.Limits[instanceType]
	if !ok {
		return 0, fmt.Errorf("instance type %s is not in AWS's VPC limits table", instanceType)
	}
	return int32(l.IPv4PerInterface - 1), nil
}

// networkLimits is one type's row of AWS's table, as the fake AWS serves it.
type networkLimits struct {
	Interfaces       int    `json:"interfaces"`
	IPv4PerInterface int    `json:"ipv4PerInterface"`
	DefaultCard      int    `json:"defaultCard"`
	Cards            []int  `json:"cards"` // maximum interfaces, by card index
	BranchInterfaces int    `json:"branchInterfaces,omitempty"`
	Hypervisor       string `json:"hypervisor,omitempty"`
	BareMetal        bool   `json:"bareMetal,omitempty"`
}

// printVPCLimits writes AWS's table as JSON, one type a line, sorted by name.
func printVPCLimits(w io.Writer) error {
	names := make([]string, 0, len(vpc.Limits))
	for name := range vpc.Limits {
		names = append(names, name)
	}
	sort.Strings(names)
	if _, err := io.WriteString(w, "{\n"); err != nil {
		return err
	}
	for i, name := range names {
		l := vpc.Limits[name]
		row := networkLimits{Interfaces: l.Interface, IPv4PerInterface: l.IPv4PerInterface, DefaultCard: l.DefaultNetworkCardIndex,
			BranchInterfaces: l.BranchInterface, Hypervisor: l.Hypervisor, BareMetal: l.IsBareMetal}
		cards := append([]vpc.NetworkCard(nil), l.NetworkCards...)
		sort.Slice(cards, func(a, b int) bool { return cards[a].NetworkCardIndex < cards[b].NetworkCardIndex })
		for _, c := range cards {
			row.Cards = append(row.Cards, int(c.MaximumNetworkInterfaces))
		}
		data, err := json.Marshal(row)
		if err != nil {
			return err
		}
		sep := ",\n"
		if i == len(names)-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprintf(w, "%q: %s%s", name, data, sep); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "}\n")
	return err
}
