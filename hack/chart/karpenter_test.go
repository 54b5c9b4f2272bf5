package charttest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// karpenterIgnoredPaths are the values of Karpenter's chart that Tailor's accepts
// and ignores (docs/install.md, "Karpenter values files"); NOTES name each one
// given. podDisruptionBudget.name is Tailor's, but Karpenter's default for it,
// karpenter, is taken as unset.
var karpenterIgnoredPaths = []string{
	"webhook", "postInstallHook", "logOutputPaths", "logErrorOutputPaths",
	"settings.isolatedVPC", "settings.eksControlPlane", "settings.reservedENIs", "settings.ignoreDRARequests",
	"settings.disableClusterStateObservability", "settings.disableDryRun", "settings.enableZonalShift",
	"settings.amiRefreshInterval", "settings.subnetRefreshInterval", "settings.awsFeatureGates",
	"settings.featureGates.StaticCapacity",
}

// TestKarpenterValuesFiles renders the chart with each values file Karpenter's chart
// was released with (testdata/karpenter, see its README): as it is, it is refused
// for its controller.image alone, Karpenter's, which would run with Tailor's
// arguments; with the image set to Tailor's (repository, and tag and digest set to
// null, as docs/install.md says) it renders Tailor's image, every object is named
// after the release, the values Tailor ignores change nothing, and NOTES name them.
func TestKarpenterValuesFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/karpenter/*.values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// v1.0.0 to v1.14.1 hold 22 different files, and main one more.
	if len(files) < 23 {
		t.Fatalf("%d values files in testdata/karpenter, want Karpenter's 23", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".values.yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			read := func() map[string]any {
				values, err := Values(string(data))
				if err != nil {
					t.Fatal(err)
				}
				return values
			}
			values := read()
			_, err = Render(tailorChart, "tailor", "kube-system", values)
			if want := `controller.image.repository "public.ecr.aws/karpenter/controller" is Karpenter's controller image`; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("as released: error %v, want one saying %q", err, want)
			}

			withTailorImage := func(values map[string]any) map[string]any {
				values["controller"].(map[string]any)["image"] = map[string]any{"repository": "ghcr.io/nodetailor/tailor", "tag": nil, "digest": nil}
				return values
			}
			values = withTailorImage(read())
			rel, err := Render(tailorChart, "tailor", "kube-system", values)
			if err != nil {
				t.Fatalf("with Tailor's image: %v", err)
			}
			c := only[*appsv1.Deployment](t, rel).Spec.Template.Spec.Containers[0]
			if c.Image != "ghcr.io/nodetailor/tailor:0.1.0" || len(c.Args) == 0 || c.Args[0] != "controller" {
				t.Errorf("container runs %s %v, want Tailor's image with Tailor's arguments", c.Image, c.Args)
			}
			for _, obj := range rel.Objects {
				if obj.GetName() != "tailor" {
					t.Errorf("%T named %s, want the release's full name, tailor", obj, obj.GetName())
				}
			}
			var given []string
			for _, path := range karpenterIgnoredPaths {
				if hasPath(values, path) {
					given = append(given, path)
				}
			}
			if len(given) == 0 {
				t.Fatal("the file has none of the values Tailor ignores")
			}
			if want := "ignored, as Tailor has no such setting: " + strings.Join(given, ", "); !strings.Contains(rel.Notes, want) {
				t.Errorf("NOTES do not say %q:\n%s", want, rel.Notes)
			}

			stripped := withTailorImage(read())
			for _, path := range append(slices.Clone(given), "podDisruptionBudget.name") {
				deletePath(stripped, path)
			}
			without, err := Render(tailorChart, "tailor", "kube-system", stripped)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(manifests(t, without), manifests(t, rel)); diff != "" {
				t.Errorf("the values Tailor ignores changed the release (-without them +with them):\n%s", diff)
			}
		})
	}
}

// TestKarpenterImageRefused: Karpenter's controller image, or a copy of it, is
// refused with a message naming the value and the image; Tailor's image, or a copy
// of it, is not, wherever the registry.
func TestKarpenterImageRefused(t *testing.T) {
	for repo, refused := range map[string]bool{
		"public.ecr.aws/karpenter/controller":                               true,
		"111122223333.dkr.ecr.eu-west-1.amazonaws.com/karpenter/controller": true,
		"localhost:5000/karpenter/controller":                               true,
		"karpenter/controller":                                              true,
		"registry.example.com/mirror/karpenter-controller":                  true,
		"karpenter":                                       true,
		"ghcr.io/nodetailor/tailor":                       false,
		"registry.example.com/tailor":                     false,
		"karpenter.example.com/tailor":                    false,
		"registry.example.com/karpenter-migration/tailor": false,
	} {
		values := map[string]any{"controller": map[string]any{"image": map[string]any{"repository": repo, "tag": "v1.14.1"}}}
		rel, err := Render(tailorChart, "tailor", "tailor-system", values)
		switch {
		case refused && (err == nil || !strings.Contains(err.Error(), `controller.image.repository "`+repo+`" is Karpenter's controller image`)):
			t.Errorf("%s: error %v, want one naming controller.image.repository and the image", repo, err)
		case !refused && err != nil:
			t.Errorf("%s: %v", repo, err)
		case !refused:
			if c := only[*appsv1.Deployment](t, rel).Spec.Template.Spec.Containers[0]; c.Image != repo+":v1.14.1" {
				t.Errorf("%s: image %s", repo, c.Image)
			}
		}
	}
}

// TestServiceMonitor: Karpenter's relabelings, metricRelabelings and sampleLimit are
// the ServiceMonitor's, beside endpointConfig's settings.
func TestServiceMonitor(t *testing.T) {
	relabelings := []any{map[string]any{"targetLabel": "job", "replacement": "karpenter"}}
	metricRelabelings := []any{map[string]any{"sourceLabels": []any{"__name__"}, "regex": "go_.*", "action": "drop"}}
	for _, tc := range []struct {
		name     string
		values   string
		endpoint map[string]any
		limit    any // nil: none
	}{
		{name: "defaults", values: "serviceMonitor: {enabled: true}",
			endpoint: map[string]any{"port": "http-metrics", "path": "/metrics"}},
		{name: "Karpenter's values", values: `
serviceMonitor:
  enabled: true
  relabelings: [{targetLabel: job, replacement: karpenter}]
  metricRelabelings: [{sourceLabels: [__name__], regex: go_.*, action: drop}]
  sampleLimit: 5000
  endpointConfig: {interval: 30s}
`, endpoint: map[string]any{"port": "http-metrics", "path": "/metrics", "interval": "30s",
			"relabelings": relabelings, "metricRelabelings": metricRelabelings}, limit: float64(5000)},
		{name: "relabelings through endpointConfig", values: `
serviceMonitor:
  enabled: true
  sampleLimit: 0
  endpointConfig: {relabelings: [{targetLabel: job, replacement: karpenter}]}
`, endpoint: map[string]any{"port": "http-metrics", "path": "/metrics", "relabelings": relabelings}, limit: float64(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values, err := Values(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := Render(tailorChart, "tailor", "tailor-system", values)
			if err != nil {
				t.Fatal(err)
			}
			sm := only[*unstructured.Unstructured](t, rel)
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if diff := cmp.Diff([]any{tc.endpoint}, endpoints); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			limit, found, _ := unstructured.NestedFieldNoCopy(sm.Object, "spec", "sampleLimit")
			if (tc.limit == nil) == found || (found && limit != tc.limit) {
				t.Errorf("sampleLimit %v (set: %t), want %v", limit, found, tc.limit)
			}
		})
	}
}

// TestKarpenterPodValues: Karpenter's values for the pods that Tailor's chart can
// render as they are (they ask for nothing the controller does) are rendered.
func TestKarpenterPodValues(t *testing.T) {
	values, err := Values(`
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
dnsConfig: {options: [{name: ndots, value: "1"}]}
schedulerName: platform-scheduler
initContainers: [{name: wait, image: busybox:1.37, command: [sh, -c, "true"]}]
additionalClusterRoleRules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
extraVolumes:
  - {name: aws-iam-token, projected: {sources: [{serviceAccountToken: {audience: sts.amazonaws.com, path: token}}]}}
  - {name: proxy-config, emptyDir: {}}
  - {name: certs, emptyDir: {}}
controller:
  containerName: autoscaler
  extraVolumeMounts: [{name: aws-iam-token, mountPath: /var/run/secrets/eks.amazonaws.com/serviceaccount, readOnly: true}]
  sidecarContainer: [{name: proxy, image: envoyproxy/envoy:v1.31.0, volumeMounts: [{name: proxy-config, mountPath: /etc/envoy}]}]
  sidecarVolumeMounts: [{name: certs, mountPath: /certs}]
`)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Render(tailorChart, "tailor", "tailor-system", values)
	if err != nil {
		t.Fatal(err)
	}
	pod := only[*appsv1.Deployment](t, rel).Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet || pod.SchedulerName != "platform-scheduler" ||
		pod.DNSConfig == nil || len(pod.DNSConfig.Options) != 1 || pod.DNSConfig.Options[0].Name != "ndots" {
		t.Errorf("pod: hostNetwork %t, dnsPolicy %s, dnsConfig %+v, schedulerName %q", pod.HostNetwork, pod.DNSPolicy, pod.DNSConfig, pod.SchedulerName)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "wait" {
		t.Errorf("init containers %+v", pod.InitContainers)
	}
	var names []string
	for _, c := range pod.Containers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"autoscaler", "proxy"}) {
		t.Fatalf("containers %v, want the controller (autoscaler) and the sidecar", names)
	}
	if m := fieldEnv(pod.Containers[0], "MEMORY_LIMIT"); m == nil || m.ResourceFieldRef == nil || m.ResourceFieldRef.ContainerName != "autoscaler" {
		t.Errorf("MEMORY_LIMIT %+v, want the limit of container autoscaler", m)
	}
	mounts := func(c corev1.Container) []string {
		var out []string
		for _, m := range c.VolumeMounts {
			out = append(out, m.Name)
		}
		return out
	}
	if got := mounts(pod.Containers[0]); !slices.Equal(got, []string{"tmp", "aws-iam-token"}) {
		t.Errorf("controller mounts %v", got)
	}
	if got := mounts(pod.Containers[1]); !slices.Equal(got, []string{"proxy-config", "aws-iam-token", "certs"}) {
		t.Errorf("sidecar mounts %v, want its own, then extraVolumeMounts, then sidecarVolumeMounts", got)
	}
	want := append(generated(t, "core", "ClusterRole"), generated(t, "aws", "ClusterRole")...)
	want = append(want, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	if diff := cmp.Diff(want, only[*rbacv1.ClusterRole](t, rel).Rules); diff != "" {
		t.Errorf("ClusterRole rules, want additionalClusterRoleRules after the generated ones (-want +got):\n%s", diff)
	}
}

// deletePath removes the value at a dotted path, if there is one.
func deletePath(values map[string]any, path string) {
	keys := strings.Split(path, ".")
	m := values
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, keys[len(keys)-1])
}

// hasPath reports whether a dotted path names a value.
func hasPath(values map[string]any, path string) bool {
	keys := strings.Split(path, ".")
	m := values
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	_, ok := m[keys[len(keys)-1]]
	return ok
}
