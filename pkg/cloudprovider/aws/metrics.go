package aws

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// The EC2 call failures Karpenter's AWS provider counts, under its names and labels.
var (
	// launchFailures counts the offerings a CreateFleet answer names in its
	// errors, one per error (a fleet that launched may still fail other
	// offerings); a CreateFleet call that fails as a whole is not counted.
	launchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_cloudprovider_instance_launch_failures_total",
		Help: "Number of instance launch (CreateFleet offering) failures, by zone, zone ID, capacity type and launch failure reason.",
	}, []string{"zone", "zone_id", "capacity_type", "reason"})
	terminationFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_cloudprovider_instance_termination_failures_total",
		Help: "Number of instance termination (TerminateInstances) failures, by zone and zone ID.",
	}, []string{"zone", "zone_id"})
)

// CloudProviderCollectors are the AWS provider's EC2 failure counters, for
// registration.
func CloudProviderCollectors() []prometheus.Collector {
	return []prometheus.Collector{launchFailures, terminationFailures}
}

// launchFailureReasons name a launch error by a fragment of its code or message,
// in the order they are tried, with the reason values Karpenter's AWS provider
// gives them; an error that matches none is LaunchFailed.
var launchFailureReasons = []struct{ fragment, reason string }{
	{"AuthFailure.ServiceLinkedRoleCreationNotPermitted", "SpotSLRCreationFailed"},
	{"Not authorized for images", "AMIAuthorizationFailure"},
	{"UnauthorizedOperation", "Unauthorized"},
	{"AccessDenied", "Unauthorized"},
	{"AuthFailure", "Unauthorized"},
	{"belong to different networks", "SecurityGroupSubnetVPCMismatch"},
	{"iamInstanceProfile.name is invalid", "InstanceProfileNameInvalid"},
	{"InvalidLaunchTemplateId.NotFound", "LaunchTemplateNotFound"},
	{"User data is limited to", "UserDataSizeLimitExceeded"},
	{"InvalidAMIID.Malformed", "InvalidAMIID"},
	{"InvalidAMIID.NotFound", "AMINotFound"},
	{"RequestLimitExceeded", "RequestLimitExceeded"},
	{"InternalError", "InternalError"},
	{"not eligible for Free Tier", "FreeTierIneligible"},
	{"MaxFleetCountExceeded", "FleetQuotaExceeded"},
	{"PendingVerification", "AccountPendingVerification"},
	{"MaxSpotInstanceCountExceeded", "SpotQuotaExceeded"},
	{"VcpuLimitExceeded", "VCPULimitExceeded"},
	{"InsufficientFreeAddressesInSubnet", "InsufficientFreeAddressesInSubnet"},
}

// launchFailureReason is the reason label of a CreateFleet error.
func launchFailureReason(code, message string) string {
	text := code + ": " + message
	for _, r := range launchFailureReasons {
		// "Not authorized for images" refines an authorization failure only.
		if r.reason == "AMIAuthorizationFailure" && !strings.Contains(text, "AuthFailure") &&
			!strings.Contains(text, "UnauthorizedOperation") && !strings.Contains(text, "AccessDenied") {
			continue
		}
		if strings.Contains(text, r.fragment) {
			return r.reason
		}
	}
	return "LaunchFailed"
}

// countLaunchFailures counts each offering a fleet answer failed, in the zone of
// its override (from its subnet when the error names none).
func countLaunchFailures(out *ec2.CreateFleetOutput, plan FleetPlan, nc *awsv1.EC2NodeClass) {
	zoneOfSubnet := map[string]string{}
	for _, g := range plan.Groups {
		for _, o := range g.Overrides {
			zoneOfSubnet[o.SubnetID] = o.Zone
		}
	}
	for _, e := range out.Errors {
		var zone string
		if e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			o := e.LaunchTemplateAndOverrides.Overrides
			zone = deref(o.AvailabilityZone)
			if zone == "" {
				zone = zoneOfSubnet[deref(o.SubnetId)]
			}
		}
		launchFailures.WithLabelValues(zone, zoneIDOf(nc, zone), plan.CapacityType, launchFailureReason(deref(e.ErrorCode), deref(e.ErrorMessage))).Inc()
	}
}
