package v1_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

var t0 = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: t0}
}

// readyNodeClass has every base dependent True at generation 1.
func readyNodeClass(t *testing.T) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{}
	nc.Generation = 1
	for _, typ := range nc.ReadyDependents() {
		nc.SetCondition(cond(typ, metav1.ConditionTrue, "Resolved"))
	}
	return nc
}

func TestReadyDependents(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	base := []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeValidationSucceeded}
	if diff := cmp.Diff(base, nc.ReadyDependents()); diff != "" {
		t.Errorf("dependents without capacity reservations (-want +got):\n%s", diff)
	}
	nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123"}}
	if diff := cmp.Diff(append(base, awsv1.ConditionTypeCapacityReservationsReady), nc.ReadyDependents()); diff != "" {
		t.Errorf("dependents with capacity reservations (-want +got):\n%s", diff)
	}
	nc.Spec.CapacityReservationSelectorTerms = nil
	nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelectorTerm{Name: "analytics"}
	if diff := cmp.Diff(append(base, awsv1.ConditionTypePlacementGroupReady), nc.ReadyDependents()); diff != "" {
		t.Errorf("dependents with a placement group (-want +got):\n%s", diff)
	}
}

func TestSetConditionDerivesReady(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	nc.Generation = 1
	if !nc.SetCondition(cond(awsv1.ConditionTypeSubnetsReady, metav1.ConditionTrue, "Resolved")) {
		t.Error("the first condition reported no change")
	}
	ready := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if ready == nil || ready.Status != metav1.ConditionUnknown || ready.Reason != awsv1.ReasonDependenciesUnknown {
		t.Fatalf("Ready with one of five dependents reported = %+v, want Unknown", ready)
	}
	if want := "waiting for AMIsReady, SecurityGroupsReady, InstanceProfileReady, ValidationSucceeded"; ready.Message != want {
		t.Errorf("Ready message = %q, want %q", ready.Message, want)
	}
	if nc.IsReady() {
		t.Error("IsReady with dependents missing")
	}

	nc = readyNodeClass(t)
	if !nc.IsReady() {
		t.Fatalf("not ready with every dependent True: %+v", nc.Status.Conditions)
	}
	if nc.SetCondition(cond(awsv1.ConditionTypeAMIsReady, metav1.ConditionTrue, "Resolved")) {
		t.Error("setting a condition to what it was reported a change")
	}

	// A False dependent makes Ready False with its reason and message.
	failed := cond(awsv1.ConditionTypeAMIsReady, metav1.ConditionFalse, "AMINotFound")
	failed.Message = "no image matches amiSelectorTerms"
	if !nc.SetCondition(failed) {
		t.Error("a dependent turning False reported no change")
	}
	ready = meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != "AMINotFound" || ready.Message != failed.Message {
		t.Errorf("Ready = %+v, want False with the dependent's reason and message", ready)
	}
	if nc.IsReady() {
		t.Error("IsReady with a dependent False")
	}
}

// A spec change (new generation) makes the old conditions stale: Ready is Unknown
// until every dependent is reported again for the new generation.
func TestStaleConditions(t *testing.T) {
	nc := readyNodeClass(t)
	nc.Generation = 2
	if nc.IsReady() {
		t.Error("IsReady after a spec change, before any condition was reported for it")
	}
	nc.SetCondition(cond(awsv1.ConditionTypeSubnetsReady, metav1.ConditionTrue, "Resolved"))
	ready := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if ready.Status != metav1.ConditionUnknown || ready.ObservedGeneration != 2 {
		t.Errorf("Ready = %+v, want Unknown at generation 2", ready)
	}
	for _, typ := range nc.ReadyDependents() {
		nc.SetCondition(cond(typ, metav1.ConditionTrue, "Resolved"))
	}
	if !nc.IsReady() {
		t.Errorf("not ready once every dependent was reported for generation 2: %+v", nc.Status.Conditions)
	}
}

// Selecting capacity reservations adds a dependent: Ready waits for it.
func TestCapacityReservationsDependent(t *testing.T) {
	nc := readyNodeClass(t)
	nc.Generation = 2
	nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "open"}}
	for _, typ := range []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeValidationSucceeded} {
		nc.SetCondition(cond(typ, metav1.ConditionTrue, "Resolved"))
	}
	if nc.IsReady() {
		t.Error("ready before CapacityReservationsReady was reported")
	}
	nc.SetCondition(cond(awsv1.ConditionTypeCapacityReservationsReady, metav1.ConditionTrue, "Resolved"))
	if !nc.IsReady() {
		t.Errorf("not ready with CapacityReservationsReady True: %+v", nc.Status.Conditions)
	}
}
