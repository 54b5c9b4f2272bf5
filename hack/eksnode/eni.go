package main

import (
	"fmt"

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
