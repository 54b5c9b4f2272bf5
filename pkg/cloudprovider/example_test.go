package cloudprovider_test

import (
	"fmt"

	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// A provider's Create reports why a launch failed with the package's error types,
// wrapped as it likes; the lifecycle controller reads them through the chain:
// insufficient capacity marks the offerings tried unavailable for a while and
// deletes the claim so that it is planned again, a NodeClass not ready waits.
func ExampleIsInsufficientCapacity() {
	err := fmt.Errorf("launching claim default-x: %w", &cloudprovider.InsufficientCapacityError{
		Offerings: []cloudprovider.UnavailableOffering{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}}})
	fmt.Println(cloudprovider.IsInsufficientCapacity(err), cloudprovider.IsNodeClassNotReady(err))
	fmt.Println(err)
	// Output:
	// true false
	// launching claim default-x: insufficient capacity for 1 offerings
}
