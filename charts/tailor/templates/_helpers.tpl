{{/* The chart's name. */}}
{{- define "tailor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's, unless it lacks the chart's. */}}
{{- define "tailor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tailor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tailor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tailor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tailor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Every object's metadata below its name: namespace (when namespaced), labels, annotations. */}}
{{- define "tailor.metadata" -}}
labels:
  {{- include "tailor.labels" . | nindent 2 }}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "tailor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tailor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller's image. Karpenter's own (its repository's path has a segment named
karpenter, or its name has karpenter in it, as public.ecr.aws/karpenter/controller
or a copy of it has) is refused: a Karpenter values file brings it along, and it
would run with Tailor's arguments. The registry's host is not looked at.
*/}}
{{- define "tailor.image" -}}
{{- $img := .Values.controller.image }}
{{- $parts := splitList "/" $img.repository }}
{{- if and (gt (len $parts) 1) (regexMatch "[.:]|^localhost$" (first $parts)) }}
{{- $parts = rest $parts }}
{{- end }}
{{- if or (has "karpenter" $parts) (contains "karpenter" (last $parts)) }}
{{- fail (printf "controller.image.repository %q is Karpenter's controller image, which cannot run Tailor's arguments: remove controller.image (repository, tag and digest) from the values to run Tailor's image, %s, or set all three to Tailor's image or your copy of it" $img.repository "ghcr.io/nodetailor/tailor") }}
{{- end }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/*
FEATURE_GATES: Name=bool, comma-separated, from settings.featureGates (nodeRepair →
NodeRepair). A capitalised key is Karpenter v1.8.0's StaticCapacity, which its
chart never read: left out.
*/}}
{{- define "tailor.featureGates" -}}
{{- $gates := list }}
{{- range $name, $on := .Values.settings.featureGates }}
{{- if regexMatch "^[a-z]" $name }}
{{- $gates = append $gates (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 -1 $name) $on) }}
{{- end }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/*
The rules of the generated RBAC (rbac/<dir>/role.yaml, from the +kubebuilder:rbac
markers: `make generate`) of one kind, ClusterRole or Role: (list $ dir kind).
*/}}
{{- define "tailor.generatedRules" -}}
{{- $root := index . 0 }}
{{- $file := printf "rbac/%s/role.yaml" (index . 1) }}
{{- $kind := index . 2 }}
{{- $content := $root.Files.Get $file }}
{{- if not $content }}
{{- fail (printf "%s is missing from the chart" $file) }}
{{- end }}
{{- $rules := list }}
{{- range $doc := regexSplit "(?m)^---\\s*$" $content -1 }}
{{- if trim $doc }}
{{- $obj := fromYaml $doc }}
{{- if eq $obj.kind $kind }}
{{- $rules = concat $rules $obj.rules }}
{{- end }}
{{- end }}
{{- end }}
{{- if $rules }}
{{- toYaml $rules }}
{{- end }}
{{- end }}

{{- define "tailor.cloudProvider" -}}
{{- if not (has .Values.cloudProvider (list "aws" "sim")) }}
{{- fail (printf "cloudProvider %q: want aws or sim" .Values.cloudProvider) }}
{{- end }}
{{- .Values.cloudProvider }}
{{- end }}

{{/*
A security context without its empty profiles: Karpenter's values set
appArmorProfile: {}, which the API server refuses ("type is required").
*/}}
{{- define "tailor.securityContext" -}}
{{- $sc := deepCopy (. | default dict) -}}
{{- range $k := list "appArmorProfile" "seccompProfile" -}}
{{- if not (get $sc $k) -}}{{- $_ := unset $sc $k -}}{{- end -}}
{{- end -}}
{{- if $sc }}{{ toYaml $sc }}{{ end -}}
{{- end }}

{{/* The controller container's name. */}}
{{- define "tailor.containerName" -}}
{{- .Values.controller.containerName | default "controller" }}
{{- end }}

{{/*
The PodDisruptionBudget's name: podDisruptionBudget.name, unless empty or
Karpenter's default (karpenter), then the full name.
*/}}
{{- define "tailor.pdbName" -}}
{{- $name := .Values.podDisruptionBudget.name }}
{{- if or (not $name) (eq $name "karpenter") }}
{{- include "tailor.fullname" . }}
{{- else }}
{{- $name }}
{{- end }}
{{- end }}

{{/*
The values of Karpenter's chart given to this release that Tailor accepts and
ignores (values.schema.json allows each only where ignoring it asks for nothing
else), comma-separated, for NOTES.txt. Tailor's own values.yaml has none of them,
so each one present came from the user.
*/}}
{{- define "tailor.ignoredKarpenterValues" -}}
{{- $given := list }}
{{- range $path := list "webhook" "postInstallHook" "logOutputPaths" "logErrorOutputPaths"
    "settings.isolatedVPC" "settings.eksControlPlane" "settings.reservedENIs" "settings.ignoreDRARequests"
    "settings.disableClusterStateObservability" "settings.disableDryRun" "settings.enableZonalShift"
    "settings.amiRefreshInterval" "settings.subnetRefreshInterval" "settings.awsFeatureGates"
    "settings.featureGates.StaticCapacity" }}
{{- $v := $.Values }}
{{- $found := true }}
{{- range $key := splitList "." $path }}
{{- if and $found (kindIs "map" $v) (hasKey $v $key) }}
{{- $v = index $v $key }}
{{- else }}
{{- $found = false }}
{{- end }}
{{- end }}
{{- if $found }}
{{- $given = append $given $path }}
{{- end }}
{{- end }}
{{- join ", " $given }}
{{- end }}
