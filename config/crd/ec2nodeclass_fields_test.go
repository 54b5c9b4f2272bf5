package crd_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// networkInterfaces, connectionTracking and cpuOptions are Karpenter v1.14's
// fields: accepted as it accepts them, kept (not dropped as unknown fields), and
// refused with its messages.
func TestEC2NodeClassNetworkFields(t *testing.T) {
	for name, tc := range map[string]struct {
		patch string
		want  awsv1.EC2NodeClassSpec
	}{
		"efa-only beside the primary interface": {
			patch: `networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}]`,
			want: awsv1.EC2NodeClassSpec{NetworkInterfaces: []*awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
				{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
			}},
		},
		"connection tracking bounds": {
			patch: "connectionTracking: {tcpEstablishedTimeout: 432000, udpStreamTimeout: 60, udpTimeout: 30}",
			want:  awsv1.EC2NodeClassSpec{ConnectionTracking: &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr.To[int32](432000), UDPStreamTimeout: ptr.To[int32](60), UDPTimeout: ptr.To[int32](30)}},
		},
		"one timeout": {
			patch: "connectionTracking: {udpTimeout: 60}",
			want:  awsv1.EC2NodeClassSpec{ConnectionTracking: &awsv1.ConnectionTracking{UDPTimeout: ptr.To[int32](60)}},
		},
		"nested virtualization": {
			patch: "cpuOptions: {nestedVirtualization: enabled}",
			want:  awsv1.EC2NodeClassSpec{CPUOptions: &awsv1.CPUOptions{NestedVirtualization: ptr.To("enabled")}},
		},
		"RAID0 with a Custom family on a Windows alias": {
			patch: "{instanceStorePolicy: RAID0, amiFamily: Custom, amiSelectorTerms: [{alias: windows2022@latest}]}",
			want:  awsv1.EC2NodeClassSpec{InstanceStorePolicy: ptr.To(awsv1.InstanceStorePolicyRAID0)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			obj := nodeClass(t, tc.patch)
			if err := admitOffline(t, "EC2NodeClass", obj); err != nil {
				t.Fatalf("refused offline: %v", err)
			}
			stored, err := create(t, obj)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			got := typed[awsv1.EC2NodeClass](t, stored.Object).Spec
			if diff := cmp.Diff(tc.want.NetworkInterfaces, got.NetworkInterfaces); diff != "" {
				t.Errorf("networkInterfaces stored (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.ConnectionTracking, got.ConnectionTracking); diff != "" {
				t.Errorf("connectionTracking stored (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.CPUOptions, got.CPUOptions); diff != "" {
				t.Errorf("cpuOptions stored (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.InstanceStorePolicy, got.InstanceStorePolicy); diff != "" {
				t.Errorf("instanceStorePolicy stored (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvalidEC2NodeClassNetworkFields(t *testing.T) {
	const (
		noPrimary  = "networkInterfaces must include a primary interface with interfaceType='interface'"
		duplicates = "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"
	)
	for name, tc := range map[string]struct{ patch, field, message string }{
		"no primary interface": {patch: "networkInterfaces: [{networkCardIndex: 0, deviceIndex: 1, interfaceType: interface}]",
			field: "spec.networkInterfaces", message: noPrimary},
		"efa-only primary": {patch: "networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}]",
			field: "spec.networkInterfaces", message: noPrimary},
		"duplicate device": {patch: "networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}]",
			field: "spec.networkInterfaces", message: duplicates},
		"two efa on one card": {patch: "networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 1, interfaceType: efa-only}]",
			field: "spec.networkInterfaces", message: duplicates},
		"interface type efa": {patch: "networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa}]",
			field: "spec.networkInterfaces[0].interfaceType", message: `Unsupported value: "efa"`},
		"negative card": {patch: "networkInterfaces: [{networkCardIndex: -1, deviceIndex: 0, interfaceType: interface}]",
			field: "spec.networkInterfaces[0].networkCardIndex", message: "should be greater than or equal to 0"},
		"no device index": {patch: "networkInterfaces: [{networkCardIndex: 0, interfaceType: interface}]",
			field: "spec.networkInterfaces[0].deviceIndex", message: "Required value"},
		"empty connectionTracking": {patch: "connectionTracking: {}",
			field: "spec.connectionTracking", message: "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
		"tcp timeout too short": {patch: "connectionTracking: {tcpEstablishedTimeout: 59}",
			field: "spec.connectionTracking.tcpEstablishedTimeout", message: "should be greater than or equal to 60"},
		"tcp timeout too long": {patch: "connectionTracking: {tcpEstablishedTimeout: 432001}",
			field: "spec.connectionTracking.tcpEstablishedTimeout", message: "should be less than or equal to 432000"},
		"udp stream timeout too long": {patch: "connectionTracking: {udpStreamTimeout: 181}",
			field: "spec.connectionTracking.udpStreamTimeout", message: "should be less than or equal to 180"},
		"udp timeout too short": {patch: "connectionTracking: {udpTimeout: 29}",
			field: "spec.connectionTracking.udpTimeout", message: "should be greater than or equal to 30"},
		"nested virtualization value": {patch: "cpuOptions: {nestedVirtualization: always}",
			field: "spec.cpuOptions.nestedVirtualization", message: `Unsupported value: "always"`},
		"RAID0 on a Windows family": {patch: "{instanceStorePolicy: RAID0, amiFamily: Windows2022, amiSelectorTerms: [{alias: windows2022@latest}]}",
			field: "spec", message: "instanceStorePolicy RAID0 is not supported on Windows AMI families"},
		"RAID0 on a Windows alias": {patch: "{instanceStorePolicy: RAID0, amiSelectorTerms: [{alias: windows2019@latest}]}",
			field: "spec", message: "instanceStorePolicy RAID0 is not supported on Windows AMI families"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := nodeClass(t, tc.patch)
			_, err := create(t, obj)
			assertRejected(t, err, tc.field, tc.message)
			assertRejected(t, admitOffline(t, "EC2NodeClass", obj), tc.field, tc.message)
		})
	}
}
