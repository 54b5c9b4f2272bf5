package v1_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A SimNodeClass's latency model: the profile defaults to None, takes only None
// or Realistic, and its insufficient-capacity share is a percentage.
func TestSimNodeClassLatency(t *testing.T) {
	simNodeClasses := schema.GroupVersionResource{Group: "tailor.sh", Version: "v1alpha1", Resource: "simnodeclasses"}
	for i, c := range []struct {
		spec, profile string
	}{
		{"{latency: {}}", "None"},
		{"{latency: {profile: Realistic, seed: 42, insufficientCapacityPercent: 5}}", "Realistic"},
	} {
		u := object(t, "apiVersion: tailor.sh/v1alpha1\nkind: SimNodeClass\nspec: "+c.spec+"\n")
		u.SetName(fmt.Sprintf("%s-%d", u.GetName(), i))
		got, err := dyn.Resource(simNodeClasses).Create(t.Context(), u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		t.Cleanup(func() {
			_ = dyn.Resource(simNodeClasses).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
		})
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "latency", "profile"); v != c.profile {
			t.Errorf("%s: spec.latency.profile %q, want %q", c.spec, v, c.profile)
		}
	}
	for _, c := range []struct{ spec, field, message string }{
		{"{latency: {profile: Sluggish}}", "spec.latency.profile", `Unsupported value: "Sluggish"`},
		{"{latency: {profile: Realistic, insufficientCapacityPercent: 101}}", "spec.latency.insufficientCapacityPercent", "should be less than or equal to 100"},
		{"{latency: {profile: Realistic, insufficientCapacityPercent: -1}}", "spec.latency.insufficientCapacityPercent", "should be greater than or equal to 0"},
	} {
		bad := object(t, "apiVersion: tailor.sh/v1alpha1\nkind: SimNodeClass\nspec: "+c.spec+"\n")
		bad.SetName("bad-" + bad.GetName())
		_, err := dyn.Resource(simNodeClasses).Create(t.Context(), bad, metav1.CreateOptions{})
		assertRejected(t, err, c.field, c.message)
	}
}
