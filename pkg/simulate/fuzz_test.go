package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func nodePoolValidator(t testing.TB) *crd.Validator {
	t.Helper()
	v, err := crd.NewValidator("NodePool")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fuzzTypes is a few instance types of the AWS catalog, enough for plans to differ.
func fuzzTypes(t testing.TB) []*scheduling.InstanceType {
	t.Helper()
	all, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	var types []*scheduling.InstanceType
	for _, it := range all {
		if strings.HasPrefix(it.Name, "m5.") || strings.HasPrefix(it.Name, "g4dn.") {
			types = append(types, it)
		}
	}
	return types
}

// FuzzLoad feeds arbitrary bytes to the loader as a manifest file, and what it
// accepts to the scheduling engine. Neither may panic or hang; what the loader
// accepts keeps within its bounds and holds no negative request; and the plan
// accounts for every pod.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata", "../../examples/seed", "../../examples/aws"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	if mixed, err := os.ReadFile("testdata/mixed.yaml"); err == nil {
		f.Add(gzipped(f, mixed))
	}
	f.Add(nestedList(3))
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -5, template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1e100}}}]}}}\n"))
	f.Add([]byte("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 3, completions: 2, template: {spec: {containers: [{name: c, resources: {requests: {memory: -1}}}]}}}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: PodList, items: [{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}]}}]}]\n"))
	f.Add([]byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: big}\nspec: {limits: {cpu: 1e16}, template: {spec: {nodeClassRef: {group: g, kind: K, name: n}, requirements: [{key: k, operator: Gt, values: ['1']}]}}}\n"))
	nodePools := nodePoolValidator(f)
	types := fuzzTypes(f)
	limits := Limits{MaxBytes: 1 << 20, MaxPods: 200}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "in.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		w, err := load(t.Context(), []string{path}, Options{Limits: limits}, nodePools)
		if err != nil {
			return
		}
		made := len(w.Pods)
		for _, pods := range w.Bound {
			made += len(pods)
		}
		if made > limits.MaxPods {
			t.Fatalf("%d pods made, past the bound of %d", made, limits.MaxPods)
		}
		for _, p := range w.Pods {
			if err := validatePodSpec(&p.Spec, field.NewPath("spec")); err != nil {
				t.Fatalf("pod %s accepted with %v", p.Name, err)
			}
		}
		for _, np := range w.NodePools {
			if np.Name == "" || np.Spec.Template.Spec.NodeClassRef == nil {
				t.Fatalf("NodePool accepted without a name or nodeClassRef: %+v", np.ObjectMeta)
			}
		}
		res, err := Run(w, types, scheduling.Options{})
		if err != nil {
			t.Fatalf("solve failed: %v", err)
		}
		placed := map[*corev1.Pod]bool{}
		for _, b := range res.Plan.Bindings {
			placed[b.Pod] = true
		}
		for _, n := range res.Plan.NewNodes {
			for _, p := range n.Pods {
				placed[p] = true
			}
		}
		for _, u := range res.Plan.Unschedulable {
			if u.Reason == "" {
				t.Errorf("pod %s unschedulable without a reason", u.Pod.Name)
			}
			placed[u.Pod] = true
		}
		for _, p := range w.Pods {
			if !placed[p] {
				t.Errorf("pod %s/%s is missing from the plan", p.Namespace, p.Name)
			}
		}
	})
}
