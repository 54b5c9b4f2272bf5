package cloudprovider

import (
	"errors"
	"fmt"
	"testing"
)

func TestTypedErrorsSurviveWrapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		is   func(error) bool
		name string
	}{
		{&NodeClaimNotFoundError{ProviderID: "sim:///i-1"}, IsNodeClaimNotFound, "not found"},
		{&InsufficientCapacityError{Offerings: []UnavailableOffering{{"m5.large", "us-east-1a", "spot"}}}, IsInsufficientCapacity, "insufficient capacity"},
		{&NodeClassNotReadyError{Kind: "SimNodeClass", Name: "default", Reason: "not found"}, IsNodeClassNotReady, "node class"},
	} {
		wrapped := fmt.Errorf("launching nodeclaim default-abc: %w", tc.err)
		if !tc.is(wrapped) {
			t.Errorf("%s: the helper does not see the wrapped error %v", tc.name, wrapped)
		}
		if tc.is(errors.New(tc.err.Error())) {
			t.Errorf("%s: the helper matches a plain error with the same text", tc.name)
		}
	}
}
