package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

var (
	tailorChart = filepath.Join(Charts, "tailor")
	crdChart    = filepath.Join(Charts, "tailor-crd")
)

// customValues set every value the docs promise, with something other than the
// default.
const customValues = `
cloudProvider: sim
replicas: 3
logLevel: debug
imagePullPolicy: Always
additionalLabels: {team: platform}
additionalAnnotations: {owner: platform@example.com}
serviceAccount:
  name: autoscaler
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/TailorController
settings:
  clusterName: prod-eu
  clusterEndpoint: https://ABC.gr7.eu-west-1.eks.amazonaws.com
  interruptionQueue: prod-eu-interruptions
  batchIdleDuration: 2s
  batchMaxDuration: 20s
  preferencePolicy: Ignore
  minValuesPolicy: BestEffort
  kubeClientQPS: 50
  featureGates:
    spotToSpotConsolidation: true
    nodeRepair: true
    capacityBuffer: false
controller:
  image:
    repository: registry.example.com/tailor
    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  resources:
    requests: {cpu: "1", memory: 2Gi}
    limits: {memory: 2Gi}
  env:
    - name: AWS_REGION
      value: eu-west-1
nodeSelector: {node-role: system}
tolerations:
  - {key: dedicated, value: system, effect: NoSchedule}
priorityClassName: platform-critical
podDisruptionBudget: {name: tailor-budget, maxUnavailable: 2}
serviceMonitor:
  enabled: true
  additionalLabels: {release: prometheus}
  relabelings: [{targetLabel: job, replacement: karpenter}]
  metricRelabelings: [{sourceLabels: [__name__], regex: go_.*, action: drop}]
  sampleLimit: 10000
dnsConfig: {options: [{name: ndots, value: "2"}]}
schedulerName: platform-scheduler
`

func TestLint(t *testing.T) {
	custom, err := Values(customValues)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		dir    string
		values map[string]any
	}{
		{"tailor defaults", tailorChart, nil},
		{"tailor custom", tailorChart, custom},
		{"tailor-crd", crdChart, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			linter := lint.All(tc.dir, tc.values, "tailor-system", true)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("%s", m)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	rel, err := Render(tailorChart, "tailor", "tailor-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	dep := only[*appsv1.Deployment](t, rel)
	if got := *dep.Spec.Replicas; got != 2 {
		t.Errorf("replicas %d, want 2", got)
	}
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != "tailor" || pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("serviceAccountName %q, priorityClassName %q", pod.ServiceAccountName, pod.PriorityClassName)
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/nodetailor/tailor:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q, pull policy %q", c.Image, c.ImagePullPolicy)
	}
	// Non-root, no privilege, nothing writable but /tmp.
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || sc == nil:
		t.Fatal("no security context")
	case !deref(psc.RunAsNonRoot) || deref(psc.RunAsUser) != 65532 || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("pod security context %+v", psc)
	case !deref(sc.RunAsNonRoot) || !deref(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("container security context %+v", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Requests.Cpu().String() != "500m" || c.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("resources %v", c.Resources)
	}
	wantArgs := []string{"controller", "--cloud-provider=aws", "--leader-elect=true", "--leader-election-namespace=$(SYSTEM_NAMESPACE)",
		"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	env := envOf(c)
	for name, want := range map[string]string{
		"LOG_LEVEL":                  "info",
		"BATCH_IDLE_DURATION":        "1s",
		"BATCH_MAX_DURATION":         "10s",
		"VM_MEMORY_OVERHEAD_PERCENT": "0.075",
		"PREFERENCE_POLICY":          "Respect",
		"MIN_VALUES_POLICY":          "Strict",
		"FEATURE_GATES":              "CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,StaticCapacity=false",
	} {
		if env[name] != want {
			t.Errorf("env %s=%q, want %q", name, env[name], want)
		}
	}
	for _, name := range []string{"CLUSTER_NAME", "INTERRUPTION_QUEUE", "KUBE_CLIENT_QPS"} {
		if _, ok := env[name]; ok {
			t.Errorf("env %s is set though its value is empty", name)
		}
	}
	if ns := fieldEnv(c, "SYSTEM_NAMESPACE"); ns == nil || ns.FieldRef == nil || ns.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("SYSTEM_NAMESPACE %+v", ns)
	}
	if m := fieldEnv(c, "MEMORY_LIMIT"); m == nil || m.ResourceFieldRef == nil || m.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("MEMORY_LIMIT %+v", m)
	}
	// Replicas spread over zones and hosts, off the nodes Tailor manages.
	selector := dep.Spec.Selector.MatchLabels
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != corev1.LabelTopologyZone ||
		!cmp.Equal(pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels, selector) {
		t.Errorf("topology spread %+v", pod.TopologySpreadConstraints)
	}
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		!cmp.Equal(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels, selector) ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "karpenter.sh/nodepool" {
		t.Errorf("affinity %+v", pod.Affinity)
	}
	if !cmp.Equal(dep.Spec.Template.Labels, selector) {
		t.Errorf("pod labels %v, selector %v", dep.Spec.Template.Labels, selector)
	}

	pdb := only[*policyv1.PodDisruptionBudget](t, rel)
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || !cmp.Equal(pdb.Spec.Selector.MatchLabels, selector) {
		t.Errorf("PDB %+v", pdb.Spec)
	}
	svc := only[*corev1.Service](t, rel)
	if !cmp.Equal(svc.Spec.Selector, selector) || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.StrVal != "http-metrics" {
		t.Errorf("service %+v", svc.Spec)
	}
	if sa := only[*corev1.ServiceAccount](t, rel); sa.Name != "tailor" || sa.Namespace != "tailor-system" {
		t.Errorf("service account %s/%s", sa.Namespace, sa.Name)
	}
	if n := len(all[*unstructured.Unstructured](rel)); n != 0 {
		t.Errorf("%d ServiceMonitors (or other unknown kinds), want none by default", n)
	}

	// The ClusterRole is the generated rules: core and the aws provider's.
	cr := only[*rbacv1.ClusterRole](t, rel)
	want := append(generated(t, "core", "ClusterRole"), generated(t, "aws", "ClusterRole")...)
	if diff := cmp.Diff(want, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-generated +chart):\n%s", diff)
	}
	role := only[*rbacv1.Role](t, rel)
	if diff := cmp.Diff(generated(t, "core", "Role"), role.Rules); diff != "" || role.Namespace != "tailor-system" {
		t.Errorf("Role in %q, rules (-generated +chart):\n%s", role.Namespace, diff)
	}
	for _, b := range all[*rbacv1.ClusterRoleBinding](rel) {
		checkBinding(t, b.RoleRef, b.Subjects, "ClusterRole", cr.Name)
	}
	for _, b := range all[*rbacv1.RoleBinding](rel) {
		checkBinding(t, b.RoleRef, b.Subjects, "Role", role.Name)
	}
	// Least privilege, read from the rules themselves: no Secrets or ConfigMaps, no
	// wildcards, nothing that grants RBAC.
	for _, r := range append(cr.Rules, role.Rules...) {
		for _, v := range slices.Concat(r.APIGroups, r.Resources, r.Verbs) {
			if v == "*" {
				t.Errorf("wildcard in rule %+v", r)
			}
		}
		for _, res := range r.Resources {
			if res == "secrets" || res == "configmaps" || strings.HasPrefix(res, "clusterrole") || strings.HasPrefix(res, "role") {
				t.Errorf("rule %+v grants %s", r, res)
			}
		}
		if slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "impersonate") {
			t.Errorf("rule %+v", r)
		}
	}
	if rel.Notes == "" {
		t.Error("no NOTES")
	}
}

func TestCustomValues(t *testing.T) {
	values, err := Values(customValues)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Render(tailorChart, "autoscaler", "platform", values)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range rel.Objects {
		if obj.GetLabels()["team"] != "platform" || obj.GetAnnotations()["owner"] != "platform@example.com" {
			t.Errorf("%T %s: labels %v, annotations %v", obj, obj.GetName(), obj.GetLabels(), obj.GetAnnotations())
		}
		if obj.GetName() != "autoscaler-tailor" && obj.GetName() != "autoscaler" && obj.GetName() != "tailor-budget" {
			t.Errorf("%T named %s", obj, obj.GetName())
		}
	}
	dep := only[*appsv1.Deployment](t, rel)
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if *dep.Spec.Replicas != 3 || pod.ServiceAccountName != "autoscaler" || pod.PriorityClassName != "platform-critical" ||
		// Helm merges maps over the defaults: the default kubernetes.io/os stays.
		!cmp.Equal(pod.NodeSelector, map[string]string{"node-role": "system", corev1.LabelOSStable: "linux"}) || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" {
		t.Errorf("deployment %+v", dep.Spec)
	}
	if c.Image != "registry.example.com/tailor@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" ||
		c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q, pull policy %q", c.Image, c.ImagePullPolicy)
	}
	if c.Resources.Requests.Cpu().String() != "1" || c.Resources.Limits.Memory().String() != "2Gi" {
		t.Errorf("resources %v", c.Resources)
	}
	if !slices.Contains(c.Args, "--cloud-provider=sim") {
		t.Errorf("args %v", c.Args)
	}
	env := envOf(c)
	for name, want := range map[string]string{
		"LOG_LEVEL":           "debug",
		"CLUSTER_NAME":        "prod-eu",
		"CLUSTER_ENDPOINT":    "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
		"INTERRUPTION_QUEUE":  "prod-eu-interruptions",
		"BATCH_IDLE_DURATION": "2s",
		"BATCH_MAX_DURATION":  "20s",
		"KUBE_CLIENT_QPS":     "50",
		"PREFERENCE_POLICY":   "Ignore",
		"MIN_VALUES_POLICY":   "BestEffort",
		"AWS_REGION":          "eu-west-1",
		"FEATURE_GATES":       "CapacityBuffer=false,NodeOverlay=false,NodeRepair=true,ReservedCapacity=true,SpotToSpotConsolidation=true,StaticCapacity=false",
	} {
		if env[name] != want {
			t.Errorf("env %s=%q, want %q", name, env[name], want)
		}
	}
	sa := only[*corev1.ServiceAccount](t, rel)
	if sa.Name != "autoscaler" || sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/TailorController" {
		t.Errorf("service account %s %v", sa.Name, sa.Annotations)
	}
	if pdb := only[*policyv1.PodDisruptionBudget](t, rel); pdb.Name != "tailor-budget" || pdb.Spec.MaxUnavailable.IntValue() != 2 {
		t.Errorf("PDB %s %+v", pdb.Name, pdb.Spec)
	}
	sm := only[*unstructured.Unstructured](t, rel)
	if sm.GetKind() != "ServiceMonitor" || sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor %v", sm.Object)
	}
	// The sim provider's RBAC instead of the aws provider's.
	cr := only[*rbacv1.ClusterRole](t, rel)
	want := append(generated(t, "core", "ClusterRole"), generated(t, "sim", "ClusterRole")...)
	if diff := cmp.Diff(want, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-generated +chart):\n%s", diff)
	}
	for _, b := range all[*rbacv1.ClusterRoleBinding](rel) {
		if b.Subjects[0].Name != "autoscaler" || b.Subjects[0].Namespace != "platform" {
			t.Errorf("binding subjects %+v", b.Subjects)
		}
	}
}

// karpenterValues are a Karpenter v1 chart's values, every key one Tailor's chart has
// under the same name (with Karpenter's defaults, or what installs commonly set):
// they validate against the chart's schema and take effect.
const karpenterValues = `
nameOverride: ""
fullnameOverride: ""
additionalLabels: {}
additionalAnnotations: {}
imagePullPolicy: IfNotPresent
imagePullSecrets: []
serviceAccount:
  create: true
  name: ""
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/KarpenterController
serviceMonitor:
  enabled: false
  additionalLabels: {}
  endpointConfig: {}
service:
  annotations: {}
replicas: 2
revisionHistoryLimit: 10
strategy:
  rollingUpdate:
    maxUnavailable: 1
podLabels: {}
podAnnotations: {}
podDisruptionBudget:
  name: karpenter
  maxUnavailable: 1
podSecurityContext:
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
priorityClassName: system-cluster-critical
terminationGracePeriodSeconds:
dnsPolicy: ClusterFirst
nodeSelector:
  kubernetes.io/os: linux
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: karpenter.sh/nodepool
              operator: DoesNotExist
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
tolerations:
  - key: CriticalAddonsOnly
    operator: Exists
extraVolumes: []
controller:
  image:
    repository: registry.example.com/tailor
    tag: v0.1.0
    digest: ""
  env:
    - name: AWS_REGION
      value: eu-west-1
  envFrom: []
  resources:
    requests: {cpu: "1", memory: 1Gi}
    limits: {cpu: "1", memory: 1Gi}
  extraVolumeMounts: []
  metrics:
    port: 8080
  healthProbe:
    port: 8081
logLevel: info
settings:
  batchMaxDuration: 10s
  batchIdleDuration: 1s
  preferencePolicy: Respect
  minValuesPolicy: BestEffort
  clusterCABundle: ""
  clusterName: prod-eu
  clusterEndpoint: ""
  vmMemoryOverheadPercent: 0.075
  interruptionQueue: prod-eu
  featureGates:
    nodeRepair: false
    nodeOverlay: false
    reservedCapacity: true
    spotToSpotConsolidation: true
    staticCapacity: false
    capacityBuffer: false
`

func TestKarpenterValues(t *testing.T) {
	values, err := Values(karpenterValues)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Render(tailorChart, "karpenter", "kube-system", values)
	if err != nil {
		t.Fatal(err)
	}
	dep := only[*appsv1.Deployment](t, rel)
	c := dep.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	for name, want := range map[string]string{
		"CLUSTER_NAME":       "prod-eu",
		"INTERRUPTION_QUEUE": "prod-eu",
		"PREFERENCE_POLICY":  "Respect",
		"MIN_VALUES_POLICY":  "BestEffort",
		"AWS_REGION":         "eu-west-1",
		"FEATURE_GATES":      "CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=true,StaticCapacity=false",
	} {
		if env[name] != want {
			t.Errorf("env %s=%q, want %q", name, env[name], want)
		}
	}
	if c.Image != "registry.example.com/tailor:v0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q, pull policy %q", c.Image, c.ImagePullPolicy)
	}
	// Karpenter's podDisruptionBudget.name, karpenter, counts as unset: the PDB is
	// named as the release's other objects are, and NOTES say so.
	if pdb := only[*policyv1.PodDisruptionBudget](t, rel); pdb.Name != "karpenter-tailor" {
		t.Errorf("PDB named %s, want the full name karpenter-tailor", pdb.Name)
	}
	if !strings.Contains(rel.Notes, `podDisruptionBudget.name "karpenter" is Karpenter's default: the PodDisruptionBudget is named karpenter-tailor`) {
		t.Errorf("NOTES do not say the PDB's name was not Karpenter's:\n%s", rel.Notes)
	}
	// Karpenter's empty terminationGracePeriodSeconds leaves the field to Kubernetes.
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		t.Errorf("terminationGracePeriodSeconds %d, want it unset", *g)
	}
	if tsc := dep.Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("topology spread %+v", tsc)
	}

	// Karpenter's keys, at Karpenter's defaults (or another value that asks for
	// nothing), are accepted and change nothing: the release is the one the chart's
	// defaults make.
	defaults, err := Render(tailorChart, "karpenter", "kube-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := manifests(t, defaults)
	for _, doc := range []string{karpenterIgnoredValues, karpenterIgnoredAlternatives} {
		values, err := Values(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := Render(tailorChart, "karpenter", "kube-system", values)
		if err != nil {
			t.Errorf("%s\nrefused: %v", doc, err)
			continue
		}
		if diff := cmp.Diff(want, manifests(t, rel)); diff != "" {
			t.Errorf("%s\nchanged the release (-defaults +with them):\n%s", doc, diff)
		}
	}
}

// karpenterIgnoredValues are the keys of Karpenter's chart (v1.0 to v1.14, and main)
// that Tailor's chart does not have, or has with a default that renders nothing,
// each at Karpenter's default (schedulerName's, default-scheduler, is rendered: see
// karpenterIgnoredAlternatives). webhook (true in v1.0, for its conversion
// webhooks) and postInstallHook (v1.0.0) are ignored whatever their values.
const karpenterIgnoredValues = `
hostNetwork: false
dnsConfig: {}
initContainers: {}
additionalClusterRoleRules: []
logOutputPaths:
  - stdout
logErrorOutputPaths:
  - stderr
webhook:
  enabled: true
  port: 8443
  metrics:
    port: 8001
postInstallHook:
  image:
    repository: public.ecr.aws/bitnami/kubectl
    tag: "1.30"
    digest: sha256:13a2ad1bd37ce42ee2a6f1ab0d30595f42eb7fe4a90d6ec848550524104a1ed6
podDisruptionBudget:
  name: karpenter
serviceMonitor:
  relabelings: []
  metricRelabelings: []
  sampleLimit: null
controller:
  containerName: controller
  sidecarContainer: []
  sidecarVolumeMounts: []
settings:
  isolatedVPC: false
  eksControlPlane: false
  reservedENIs: "0"
  ignoreDRARequests: true
  disableClusterStateObservability: false
  disableDryRun: false
  enableZonalShift: false
  amiRefreshInterval: 1m
  subnetRefreshInterval: 1m
  awsFeatureGates:
    nodeClassCEL: false
  featureGates:
    StaticCapacity: false
`

// karpenterIgnoredAlternatives are the other values of those keys that ask for
// nothing Tailor would do differently.
const karpenterIgnoredAlternatives = `
schedulerName: ""
initContainers: []
webhook:
  enabled: false
settings:
  reservedENIs: 0
  disableDryRun: true
  amiRefreshInterval: ""
  subnetRefreshInterval: ""
`

// manifests are a release's objects as YAML, keyed by kind and name.
func manifests(t *testing.T, rel *Release) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, obj := range rel.Objects {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%T %s", obj, obj.GetName())] = string(data)
	}
	return out
}

func TestRefusedValues(t *testing.T) {
	for doc, want := range map[string]string{
		"cloudProvider: gcp":              `cloudProvider "gcp": want aws or sim`,
		"serviceAccount: {create: false}": "serviceAccount.name must name an existing ServiceAccount",
		// Karpenter's values for what Tailor does not have are refused by the
		// values schema, named, rather than dropped.
		"settings: {featureGates: {drift: true}}":                     "at '/settings/featureGates': additional properties 'drift' not allowed",
		"settings: {assumeRoleARN: arn:aws:iam::111122223333:role/x}": "at '/settings': additional properties 'assumeRoleARN' not allowed",
		"logConfig: {enabled: true}":                                  "at '': additional properties 'logConfig' not allowed",
		"settings: {featureGates: {nodeOverlay: true}}":               "at '/settings/featureGates/nodeOverlay': value must be false",
		"settings: {preferencePolicy: respect}":                       "at '/settings/preferencePolicy': value must be one of '', 'Respect', 'Ignore'",
		"settings: {minValuesPolicy: Relaxed}":                        "at '/settings/minValuesPolicy'",
		"settings: {batchIdleDuration: 1 second}":                     "at '/settings/batchIdleDuration'",
		// Karpenter's keys for what Tailor does not have are accepted only at the
		// value that asks for nothing (TestKarpenterValues); any other is refused,
		// named.
		"logOutputPaths: [stdout, /var/log/karpenter.log]":   "at '/logOutputPaths'",
		"logErrorOutputPaths: [stdout]":                      "at '/logErrorOutputPaths'",
		"settings: {isolatedVPC: true}":                      "at '/settings/isolatedVPC': value must be false",
		"settings: {eksControlPlane: true}":                  "at '/settings/eksControlPlane': value must be false",
		`settings: {reservedENIs: "1"}`:                      "at '/settings/reservedENIs'",
		"settings: {reservedENIs: 2}":                        "at '/settings/reservedENIs'",
		"settings: {ignoreDRARequests: false}":               "at '/settings/ignoreDRARequests': value must be true",
		"settings: {disableClusterStateObservability: true}": "at '/settings/disableClusterStateObservability': value must be false",
		"settings: {disableDryRun: yes please}":              "at '/settings/disableDryRun': got string, want boolean",
		"controller: {image: {tag: 1.0}}":                    "at '/controller/image/tag': got number, want string",
		"settings: {enableZonalShift: true}":                 "at '/settings/enableZonalShift': value must be false",
		"settings: {amiRefreshInterval: 5m}":                 "at '/settings/amiRefreshInterval': value must be one of '', '1m'",
		"settings: {subnetRefreshInterval: 10m}":             "at '/settings/subnetRefreshInterval': value must be one of '', '1m'",
		"settings: {awsFeatureGates: {nodeClassCEL: true}}":  "at '/settings/awsFeatureGates/nodeClassCEL': value must be false",
		"settings: {awsFeatureGates: {nodeClassCel: false}}": "at '/settings/awsFeatureGates': additional properties 'nodeClassCel' not allowed",
		"settings: {featureGates: {StaticCapacity: true}}":   "at '/settings/featureGates/StaticCapacity': value must be false",
		"webhook: {enabled: yes please}":                     "at '/webhook/enabled': got string, want boolean",
		"webhook: {certificate: x}":                          "at '/webhook': additional properties 'certificate' not allowed",
		"postInstallHook: {command: [kubectl]}":              "at '/postInstallHook': additional properties 'command' not allowed",
		// Karpenter's keys the chart honours are checked for their kind.
		"initContainers: {wait: {image: busybox}}":      "at '/initContainers'",
		"controller: {containerName: Controller_1}":     "at '/controller/containerName'",
		"hostNetwork: yes please":                       "at '/hostNetwork': got string, want boolean",
		"serviceMonitor: {sampleLimit: -1}":             "at '/serviceMonitor/sampleLimit'",
		"serviceMonitor: {sampleLimit: lots}":           "at '/serviceMonitor/sampleLimit'",
		"serviceMonitor: {relabelings: {action: drop}}": "at '/serviceMonitor/relabelings'",
		"serviceMonitor: {enabled: true, relabelings: [{action: drop}], endpointConfig: {relabelings: []}}": "serviceMonitor.relabelings and serviceMonitor.endpointConfig.relabelings are both set",
		"serviceMonitor: {enabled: true, endpointConfig: {port: metrics}}":                                  "serviceMonitor.endpointConfig.port: the chart sets the endpoint's port itself",
		// Karpenter's image, which a Karpenter values file brings along, would run
		// Tailor's arguments (TestKarpenterImageRefused).
		"controller: {image: {repository: public.ecr.aws/karpenter/controller}}": `controller.image.repository "public.ecr.aws/karpenter/controller" is Karpenter's controller image`,
		"logLevel: warn": "at '/logLevel'",
		`replicas: "2"`:  "at '/replicas': got string, want integer",
	} {
		values, err := Values(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Render(tailorChart, "tailor", "tailor-system", values); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", doc, err, want)
		}
	}
}

// TestCRDChart: the tailor-crd chart is config/crd's CRDs, nothing else.
func TestCRDChart(t *testing.T) {
	rel, err := Render(crdChart, "tailor-crd", "tailor-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../config/crd/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("config/crd: %v", err)
	}
	if len(rel.Objects) != len(files) {
		t.Errorf("%d objects, want the %d CRDs of config/crd", len(rel.Objects), len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &want); err != nil {
			t.Fatal(err)
		}
		got := find[*apiextensionsv1.CustomResourceDefinition](rel, want.Name)
		if got == nil {
			t.Errorf("CRD %s missing from the chart", want.Name)
			continue
		}
		if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
			t.Errorf("CRD %s (-config/crd +chart):\n%s", want.Name, diff)
		}
	}
}

// generated reads the rules of kind from the chart's generated RBAC.
func generated(t *testing.T, dir, kind string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tailorChart, "rbac", dir, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(doc, "---\n")), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == kind {
			rules = append(rules, obj.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatalf("no %s rules in rbac/%s", kind, dir)
	}
	return rules
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name string) {
	t.Helper()
	if ref.Kind != kind || ref.Name != name || len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" ||
		subjects[0].Name != "tailor" || subjects[0].Namespace != "tailor-system" {
		t.Errorf("binding of %s %s: roleRef %+v, subjects %+v", kind, name, ref, subjects)
	}
}

func all[T client.Object](rel *Release) []T {
	var out []T
	for _, o := range rel.Objects {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func only[T client.Object](t *testing.T, rel *Release) T {
	t.Helper()
	objs := all[T](rel)
	if len(objs) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T, want 1", len(objs), zero)
	}
	return objs[0]
}

func find[T client.Object](rel *Release, name string) T {
	for _, o := range all[T](rel) {
		if o.GetName() == name {
			return o
		}
	}
	var zero T
	return zero
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

func fieldEnv(c corev1.Container, name string) *corev1.EnvVarSource {
	for _, e := range c.Env {
		if e.Name == name {
			return e.ValueFrom
		}
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Karpenter's values set controller.securityContext.appArmorProfile to {}, which the
// API server refuses (a profile needs a type): the chart leaves empty profiles out,
// and keeps the rest of the security context.
func TestEmptySecurityProfilesLeftOut(t *testing.T) {
	values, err := Values(`
podSecurityContext:
  seccompProfile: {}
controller:
  securityContext:
    appArmorProfile: {}
    readOnlyRootFilesystem: true
`)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Render(tailorChart, "tailor", "tailor-system", values)
	if err != nil {
		t.Fatal(err)
	}
	pod := only[*appsv1.Deployment](t, rel).Spec.Template.Spec
	sc := pod.Containers[0].SecurityContext
	if sc == nil || sc.AppArmorProfile != nil || !deref(sc.ReadOnlyRootFilesystem) || !deref(sc.RunAsNonRoot) {
		t.Errorf("container security context %+v, want no AppArmor profile and the rest kept", sc)
	}
	// Helm merges the empty map over the default profile, which stays.
	if psc := pod.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v, want the default RuntimeDefault seccomp profile", psc)
	}
	// A profile with a type stays.
	values["controller"].(map[string]any)["securityContext"].(map[string]any)["appArmorProfile"] = map[string]any{"type": "RuntimeDefault"}
	if rel, err = Render(tailorChart, "tailor", "tailor-system", values); err != nil {
		t.Fatal(err)
	}
	if sc := only[*appsv1.Deployment](t, rel).Spec.Template.Spec.Containers[0].SecurityContext; sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeRuntimeDefault {
		t.Errorf("container security context %+v, want its RuntimeDefault AppArmor profile", sc)
	}
}
