package sandbox

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// On AWS the sandbox applies Karpenter's examples/v1 default EC2NodeClass for its
// fake cluster, a NodePool over it, and the same DaemonSets as on sim.
func TestAWSManifests(t *testing.T) {
	objs, err := documents(awsManifests())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind())
		switch obj.GetKind() {
		case "EC2NodeClass":
			nc := &awsv1.EC2NodeClass{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, nc); err != nil {
				t.Fatal(err)
			}
			discovery := map[string]string{"karpenter.sh/discovery": AWSCluster}
			s := nc.Spec
			if nc.Name != "default" || s.Role != "KarpenterNodeRole-"+AWSCluster || len(s.AMISelectorTerms) != 1 || s.AMISelectorTerms[0].Alias != "al2023@latest" ||
				len(s.SubnetSelectorTerms) != 1 || !maps.Equal(s.SubnetSelectorTerms[0].Tags, discovery) ||
				len(s.SecurityGroupSelectorTerms) != 1 || !maps.Equal(s.SecurityGroupSelectorTerms[0].Tags, discovery) {
				t.Errorf("EC2NodeClass %s: %+v, want al2023@latest, discovery by %v, role KarpenterNodeRole-%s", nc.Name, s, discovery, AWSCluster)
			}
		case "NodePool":
			np := &v1.NodePool{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, np); err != nil {
				t.Fatal(err)
			}
			if ref := np.Spec.Template.Spec.NodeClassRef; ref == nil || *ref != (v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}) {
				t.Errorf("NodePool %s refers to %+v, want the default EC2NodeClass", np.Name, ref)
			}
		}
	}
	if !slices.Equal(kinds, []string{"EC2NodeClass", "NodePool"}) {
		t.Errorf("aws manifests hold %v", kinds)
	}
	if strings.Contains(string(awsManifests()), "${") {
		t.Error("aws manifests keep a ${...} placeholder")
	}
	ds, err := documents(daemonSets())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, obj := range ds {
		if obj.GetKind() != "DaemonSet" {
			t.Errorf("daemonSets holds a %s", obj.GetKind())
		}
		names = append(names, obj.GetName())
	}
	if !slices.Equal(names, []string{"kube-proxy", "cni-agent", "log-agent"}) {
		t.Errorf("daemonSets are %v, want kube-proxy, cni-agent, log-agent", names)
	}
}

// The controller on the fake sees only the fake: the user's own AWS settings are
// dropped, and the shared files are empty.
func TestAWSControllerEnvReachesOnlyTheFake(t *testing.T) {
	t.Setenv("AWS_PROFILE", "production")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
	t.Setenv("AWS_ENDPOINT_URL_EC2", "https://ec2.us-east-1.amazonaws.com")
	env := awsControllerEnv("http://127.0.0.1:1234")
	var aws []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "AWS_") {
			aws = append(aws, kv)
		}
	}
	slices.Sort(aws)
	want := []string{"AWS_ACCESS_KEY_ID=AKIAFAKEAWSSANDBOX", "AWS_CONFIG_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL=http://127.0.0.1:1234", "AWS_REGION=us-east-1", "AWS_SECRET_ACCESS_KEY=fakeaws-sandbox", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
	if !slices.Equal(aws, want) {
		t.Errorf("AWS variables %v, want %v", aws, want)
	}
}
