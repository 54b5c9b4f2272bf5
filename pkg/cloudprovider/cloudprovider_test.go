package cloudprovider

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/nodetailor/tailor/api/v1"
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

// simLike is a provider that only declares what it serves.
type simLike struct{ CloudProvider }

func (simLike) NodeClassKinds() []schema.GroupKind {
	return []schema.GroupKind{{Group: "tailor.sh", Kind: "SimNodeClass"}}
}
func (simLike) ProviderIDScheme() string { return "sim" }

func TestOwnsProviderID(t *testing.T) {
	for id, want := range map[string]bool{
		"sim:///us-east-1a/i-0123": true,
		"aws:///us-east-1a/i-0123": false,
		"simulate:///node-1":       false,
		"sim":                      false,
		"://sim":                   false,
		"":                         false,
	} {
		if got := OwnsProviderID(simLike{}, id); got != want {
			t.Errorf("OwnsProviderID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestManagesPool(t *testing.T) {
	for _, tc := range []struct {
		ref  *v1.NodeClassReference
		want bool
	}{
		{&v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}, true},
		{&v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}, false},
		{&v1.NodeClassReference{Group: "example.com", Kind: "SimNodeClass", Name: "default"}, false},
		{nil, false},
	} {
		pool := &v1.NodePool{}
		pool.Spec.Template.Spec.NodeClassRef = tc.ref
		if got := ManagesPool(simLike{}, pool); got != tc.want {
			t.Errorf("ManagesPool(%+v) = %v, want %v", tc.ref, got, tc.want)
		}
	}
}
