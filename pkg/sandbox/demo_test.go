package sandbox

import "testing"

// The demo applies the seed example's own Deployment, as the README describes it.
func TestSeedDeployment(t *testing.T) {
	d, err := seedDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if got := describeWorkload(d); d.Name != "inflate" || d.Namespace != "default" || got != "10 replicas of 1 cpu and 1Gi" {
		t.Errorf("seed Deployment %s/%s: %s, want default/inflate: 10 replicas of 1 cpu and 1Gi", d.Namespace, d.Name, got)
	}
}
