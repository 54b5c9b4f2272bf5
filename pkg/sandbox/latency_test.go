package sandbox

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// --latency realistic gives the default SimNodeClass the Realistic profile and
// changes nothing else; an unknown value, or a cloud without the model, is refused
// before anything starts.
func TestRealisticLatencyDefaults(t *testing.T) {
	objs, err := documents(realisticDefaults())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := documents(defaults)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(plain) {
		t.Fatalf("%d objects with realistic latency, %d without", len(objs), len(plain))
	}
	found := false
	for i, o := range objs {
		if o.GetKind() != "SimNodeClass" {
			continue
		}
		found = true
		if p, _, _ := unstructured.NestedString(o.Object, "spec", "latency", "profile"); p != "Realistic" {
			t.Errorf("SimNodeClass %s: spec.latency.profile %q, want Realistic", o.GetName(), p)
		}
		if c, _, _ := unstructured.NestedString(o.Object, "spec", "catalog"); c != "aws-us-east-1" {
			t.Errorf("SimNodeClass %s lost its catalog: %q", o.GetName(), c)
		}
		unstructured.RemoveNestedField(o.Object, "spec", "latency")
		if !equalObjects(o, plain[i]) {
			t.Errorf("SimNodeClass %s differs from the default beyond its latency: %v", o.GetName(), o.Object)
		}
	}
	if !found {
		t.Fatal("no SimNodeClass in the defaults")
	}
	for _, c := range []struct{ cloud, latency, want string }{
		{CloudSim, "slow", `latency "slow": want none or realistic`},
		{CloudAWS, LatencyRealistic, "only the sim cloud has a latency model"},
	} {
		var out bytes.Buffer
		err := Up(t.Context(), Options{Dir: t.TempDir() + "/sandbox", Cloud: c.cloud, Latency: c.latency}, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("up --cloud %s --latency %s: %v, want an error saying %q", c.cloud, c.latency, err, c.want)
		}
	}
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	ja, errA := a.MarshalJSON()
	jb, errB := b.MarshalJSON()
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
