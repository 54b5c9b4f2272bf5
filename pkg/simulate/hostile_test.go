package simulate

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func gzipped(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: %s
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: %q, memory: 1Gi}}}]
`

// Input that would hang, panic or exhaust memory ends in an error naming the file,
// the object and the field or bound at fault; an object the API server would
// refuse (refused) is left out, with that message, and the rest read.
func TestHostileInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   func(t *testing.T, dir string) []string
		limits  Limits
		want    []string
		refused bool
	}{{
		name: "a gzip bomb stops at the input bound",
		files: func(t *testing.T, dir string) []string {
			// 65 MiB of blank lines, a few dozen KiB compressed.
			return []string{writeFile(t, dir, "bomb.yaml.gz", gzipped(t, bytes.Repeat([]byte("\n"), DefaultMaxBytes+1<<20)))}
		},
		want: []string{"bomb.yaml.gz: the input exceeds 64Mi (counted after decompression, over all files); raise --max-input-size"},
	}, {
		name: "the input bound counts all files together",
		files: func(t *testing.T, dir string) []string {
			page := []byte("# " + strings.Repeat("x", 600) + "\n")
			return []string{writeFile(t, dir, "a.yaml", page), writeFile(t, dir, "b.yaml", page)}
		},
		limits: Limits{MaxBytes: 1000},
		want:   []string{"b.yaml: the input exceeds 1000 bytes"},
	}, {
		name: "a symbolic link to /dev/zero",
		files: func(t *testing.T, dir string) []string {
			if runtime.GOOS == "windows" {
				t.Skip("no /dev/zero")
			}
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
				t.Fatal(err)
			}
			return []string{dir}
		},
		want: []string{"zero.yaml: a device; only regular files are read"},
	}, {
		name: "negative replicas",
		files: func(t *testing.T, dir string) []string {
			return []string{writeFile(t, dir, "web.yaml", fmt.Appendf(nil, deployment, "-5", "1"))}
		},
		want:    []string{"web.yaml: document 1: Deployment web: spec.replicas: Invalid value: -5: must be greater than or equal to 0"},
		refused: true,
	}, {
		name: "replicas past the pod bound",
		files: func(t *testing.T, dir string) []string {
			return []string{writeFile(t, dir, "web.yaml", fmt.Appendf(nil, deployment, "2147483647", "1"))}
		},
		want: []string{"Deployment web: spec.replicas 2147483647 would make the input hold more than 100000 pods and volume claims (0 so far); raise --max-pods"},
	}, {
		name: "the pod bound counts every workload and the StatefulSet claims",
		files: func(t *testing.T, dir string) []string {
			sts := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: x}]}}
  volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce]}}]
`
			return []string{writeFile(t, dir, "web.yaml", fmt.Appendf(nil, deployment, "5", "1")), writeFile(t, dir, "db.yaml", []byte(sts))}
		},
		limits: Limits{MaxPods: 10},
		want:   []string{"db.yaml: document 1: StatefulSet db: spec.replicas 3 would make the input hold more than 10 pods and volume claims (5 so far)"},
	}, {
		name: "a negative Job parallelism",
		files: func(t *testing.T, dir string) []string {
			job := `apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 2
  completions: -1
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}
`
			return []string{writeFile(t, dir, "job.yaml", []byte(job))}
		},
		want:    []string{"Job batch: spec.completions: Invalid value: -1: must be greater than or equal to 0"},
		refused: true,
	}, {
		name: "a negative request in a workload",
		files: func(t *testing.T, dir string) []string {
			return []string{writeFile(t, dir, "web.yaml", fmt.Appendf(nil, deployment, "2", "-1"))}
		},
		want:    []string{`Deployment web: spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`},
		refused: true,
	}, {
		name: "a negative request in a bare pod's init container",
		files: func(t *testing.T, dir string) []string {
			pod := `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team}
spec:
  initContainers: [{name: init, image: x, resources: {limits: {memory: -1Gi}}}]
  containers: [{name: c, image: x}]
`
			return []string{writeFile(t, dir, "pod.yaml", []byte(pod))}
		},
		want:    []string{`Pod team/p: spec.initContainers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`},
		refused: true,
	}, {
		name: "a negative request in a DaemonSet",
		files: func(t *testing.T, dir string) []string {
			ds := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: c, image: x, resources: {requests: {cpu: -100m}}}]}}
`
			return []string{writeFile(t, dir, "ds.yaml", []byte(ds))}
		},
		want:    []string{`DaemonSet kube-system/agent: spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "-100m"`},
		refused: true,
	}, {
		name: "a List item that is not an object",
		files: func(t *testing.T, dir string) []string {
			return []string{writeFile(t, dir, "list.yaml", []byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: List, items: [3]}]\n"))}
		},
		want: []string{"list.yaml: document 1: item 0: item 0: not an object"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Load(t.Context(), tc.files(t, t.TempDir()), Options{Limits: tc.limits})
			if tc.refused {
				if err != nil {
					t.Fatalf("%v; want the object refused and the rest read", err)
				}
				if len(w.Refused) != 1 || len(w.Pods) != 0 || len(w.DaemonSets) != 0 {
					t.Fatalf("refused %v, read %d pods and %d DaemonSets; want the one object refused", w.Refused, len(w.Pods), len(w.DaemonSets))
				}
				err = w.Refused[0]
			}
			if err == nil {
				t.Fatalf("loaded; want an error saying %q", tc.want)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// Bounds that are met exactly still load, and pods expanded from one template
// are independent where they must be: each StatefulSet pod has its own claim.
func TestLimitsMetExactly(t *testing.T) {
	dir := t.TempDir()
	sts := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: c, image: x}]}}
  volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce]}}]
`
	web := writeFile(t, dir, "web.yaml", fmt.Appendf(nil, deployment, "5", "1"))
	db := writeFile(t, dir, "db.yaml", []byte(sts))
	size := int64(0)
	for _, f := range []string{web, db} {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		size += info.Size()
	}
	w, err := Load(t.Context(), []string{web, db}, Options{Limits: Limits{MaxBytes: size, MaxPods: 5 + 2*2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Pods) != 7 || len(w.PersistentVolumeClaims) != 2 {
		t.Fatalf("%d pods and %d claims, want 7 and 2", len(w.Pods), len(w.PersistentVolumeClaims))
	}
	claims := map[string]bool{}
	for _, p := range w.Pods {
		if !strings.HasPrefix(p.Name, "db-") {
			continue
		}
		if len(p.Spec.Volumes) != 2 || p.Spec.Volumes[0].Name != "scratch" {
			t.Errorf("pod %s volumes %v, want scratch and its own claim", p.Name, p.Spec.Volumes)
			continue
		}
		claims[p.Spec.Volumes[1].PersistentVolumeClaim.ClaimName] = true
	}
	if !claims["data-db-0"] || !claims["data-db-1"] {
		t.Errorf("claims %v, want data-db-0 and data-db-1", claims)
	}
}

// nestedList is a Pod inside depth Lists.
func nestedList(depth int) []byte {
	doc := `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "deep"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}`
	for range depth {
		doc = `{"apiVersion": "v1", "kind": "List", "items": [` + doc + `]}`
	}
	return []byte(doc)
}

// Nested Lists are read in time and memory linear in the input: each level used to
// be encoded and decoded again, which made deep nesting quadratic. The measure is
// the bytes allocated, which doubling the depth must not quadruple.
func TestNestedListsAreLinear(t *testing.T) {
	nodePools := nodePoolValidator(t)
	allocated := func(depth int) uint64 {
		path := writeFile(t, t.TempDir(), "list.json", nestedList(depth))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w, err := load(t.Context(), []string{path}, Options{}, nodePools)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Pods) != 1 || w.Pods[0].Name != "deep" {
			t.Fatalf("depth %d: read %d pods, want the one at the bottom", depth, len(w.Pods))
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(500), allocated(1000)
	t.Logf("depth 500: %d bytes allocated; depth 1000: %d", small, large)
	if float64(large) > 3*float64(small) {
		t.Errorf("doubling the nesting multiplied the bytes allocated by %.1f; want about 2", float64(large)/float64(small))
	}
}

// What the solve leaves out is shown with the plan: a DaemonSet whose node affinity
// cannot be read is named in every output format.
func TestWarningsAreShown(t *testing.T) {
	ds := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: gen, operator: Gt, values: [new]}]}]}}}
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
`
	dir := t.TempDir()
	w, err := Load(t.Context(), []string{"testdata/mixed.yaml", writeFile(t, dir, "ds.yaml", []byte(ds))}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	types := fuzzTypes(t)
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `DaemonSet kube-system/agent: node affinity term 0 matches no node: requirement gen has operator Gt, which needs a single integer value, not "new"`
	rep := NewReport(res, "test")
	var table, js, yml bytes.Buffer
	for _, write := range []func() error{func() error { return rep.WriteTable(&table) }, func() error { return WriteJSON(&js, rep.Objects()) },
		func() error { return WriteYAML(&yml, rep.Objects()) }} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(table.String(), "WARNINGS\n"+want+"\n") {
		t.Errorf("the table does not warn %q:\n%s", want, table.String())
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(js.String()), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("line %q is not JSON", line)
		}
		found = found || entry["warning"] == want
	}
	if !found {
		t.Errorf("the JSON lines do not warn %q:\n%s", want, js.String())
	}
	var warnings []string
	for _, doc := range strings.Split(yml.String(), "---\n") {
		var entry map[string]any
		if err := yaml.Unmarshal([]byte(doc), &entry); err != nil {
			t.Fatal(err)
		}
		if w, ok := entry["warning"].(string); ok {
			warnings = append(warnings, w)
		}
	}
	if !slices.Equal(warnings, []string{want}) {
		t.Errorf("the YAML documents warn %q, want %q", warnings, want)
	}
}
