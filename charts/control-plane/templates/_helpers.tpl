{{/* Names and labels. */}}
{{- define "control-plane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "control-plane.fullname" -}}
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

{{/*
The StatefulSet's name: the full name cut to 52 characters. Its pods carry the label
controller-revision-hash = "<name>-<hash of up to 10 characters>", and a label value (like the
pod's hostname "<name>-<ordinal>") has at most 63 characters.
*/}}
{{- define "control-plane.statefulsetName" -}}
{{- include "control-plane.fullname" . | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/*
The headless Service: the full name cut to 54 characters plus "-headless" (at most 63, and never
the regular Service's name, even when the full name has 63 characters).
*/}}
{{- define "control-plane.headlessName" -}}
{{- $full := include "control-plane.fullname" . }}
{{- $name := printf "%s-headless" ($full | trunc 54 | trimSuffix "-") }}
{{- if eq $name $full }}
{{- /* a 63-character full name ending in "-headless" */}}
{{- $name = printf "%s-headless" ($full | trunc 53 | trimSuffix "-") }}
{{- end }}
{{- $name }}
{{- end }}

{{/*
Name of the cluster-scoped objects (ClusterRole, ClusterRoleBinding): "<namespace>-<full name>",
so the same release name in two namespaces does not collide. Longer than 63 characters: the
first 54 plus "-" and 8 hex digits of its SHA-256, which keeps different long names apart.
*/}}
{{/*
The name of the mutations' ClusterRole and its binding (config.mutations.enabled), at most 63
characters like every other name.
*/}}
{{- define "control-plane.mutationsClusterName" -}}
{{- $name := printf "%s-%s-mutations" .Release.Namespace (include "control-plane.fullname" .) }}
{{- if le (len $name) 63 }}
{{- $name }}
{{- else }}
{{- printf "%s-%s" ($name | trunc 54 | trimSuffix "-") ($name | sha256sum | trunc 8) }}
{{- end }}
{{- end }}

{{- define "control-plane.clusterName" -}}
{{- $name := printf "%s-%s" .Release.Namespace (include "control-plane.fullname" .) }}
{{- if le (len $name) 63 }}
{{- $name }}
{{- else }}
{{- printf "%s-%s" ($name | trunc 54 | trimSuffix "-") ($name | sha256sum | trunc 8) }}
{{- end }}
{{- end }}

{{- define "control-plane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "control-plane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "control-plane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "control-plane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "control-plane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "control-plane.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The config file (/etc/control-plane/config.yaml): the settings of .Values.config with empty
strings, empty lists and nulls left out (an unset key means the built-in default), and the two the
chart sets itself merged into their sections last, so they always win: server.address from
containerPort and storage.dataDir from persistence.mountPath (values.schema.json does not allow
them under config).
*/}}
{{- define "control-plane.config" -}}
{{- $cfg := dict -}}
{{- range $section, $settings := .Values.config }}
{{- $out := dict }}
{{- range $k, $v := $settings }}
{{- if not (or (kindIs "invalid" $v) (and (kindIs "string" $v) (eq $v "")) (and (kindIs "slice" $v) (eq (len $v) 0))) }}
{{- $_ := set $out $k $v }}
{{- end }}
{{- end }}
{{- if $out }}
{{- $_ := set $cfg $section $out }}
{{- end }}
{{- end }}
{{- $server := (hasKey $cfg "server") | ternary (get $cfg "server") dict }}
{{- $_ := set $server "address" (printf "0.0.0.0:%v" .Values.containerPort) }}
{{- $_ = set $cfg "server" $server }}
{{- $storage := (hasKey $cfg "storage") | ternary (get $cfg "storage") dict }}
{{- $_ = set $storage "dataDir" .Values.persistence.mountPath }}
{{- $_ = set $cfg "storage" $storage }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The custom resources the process lists and watches, per API group: the registered kinds
(schema::registry) minus the families switched off by .Values.features. The lines between the
rbac-rules markers are generated from the table of kinds by tests/chart.rs (UPDATE_EXPECT=1
rewrites them), which also compares the rendered ClusterRole with the registry.
*/}}
{{- define "control-plane.rbacRules" -}}
{{- $groups := list }}
{{- /* rbac-rules:begin */}}
{{- $groups = append $groups (list "admin.cp.ei.telekom.de" (list "zones")) }}
{{- if .Values.features.aiGateway }}
{{- $groups = append $groups (list "agentic.cp.ei.telekom.de" (list "agentcards" "agenticexposures" "agenticsubscriptions" "mcpservers")) }}
{{- end }}
{{- $groups = append $groups (list "api.cp.ei.telekom.de" (list "apiexposures" "apis" "apisubscriptions")) }}
{{- $groups = append $groups (list "application.cp.ei.telekom.de" (list "applications")) }}
{{- $groups = append $groups (list "approval.cp.ei.telekom.de" (list "approvalrequests" "approvals")) }}
{{- if .Values.features.pubsub }}
{{- $groups = append $groups (list "event.cp.ei.telekom.de" (list "eventexposures" "eventsubscriptions" "eventtypes")) }}
{{- end }}
{{- if .Values.features.fileManager }}
{{- $groups = append $groups (list "file.cp.ei.telekom.de" (list "fileexposures" "filesubscriptions")) }}
{{- end }}
{{- $groups = append $groups (list "organization.cp.ei.telekom.de" (list "groups" "teams")) }}
{{- if .Values.features.permission }}
{{- $groups = append $groups (list "permission.cp.ei.telekom.de" (list "permissionsets")) }}
{{- end }}
{{- /* rbac-rules:end */}}
{{- range $groups }}
- apiGroups: [{{ index . 0 | quote }}]
  resources: {{ index . 1 | toJson }}
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end }}
