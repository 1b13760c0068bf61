{{/*
The chart's name, nameOverride if set.
*/}}
{{- define "mcp-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The resources' name: fullnameOverride, or <release>-<name> (the release name
alone when it already contains the name), cut to the 63 characters of a DNS
label.
*/}}
{{- define "mcp-gateway.fullname" -}}
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
chart: name-version, as the helm.sh/chart label.
*/}}
{{- define "mcp-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every resource.
*/}}
{{- define "mcp-gateway.labels" -}}
helm.sh/chart: {{ include "mcp-gateway.chart" . }}
{{ include "mcp-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels that select the pods: they must not change between releases.
*/}}
{{- define "mcp-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount's name.
*/}}
{{- define "mcp-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcp-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Whether more than one pod may run: "true" or "".
*/}}
{{- define "mcp-gateway.multiReplica" -}}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{/*
gateway.yaml: .Values.config, with allowed_hosts filled in unless config
sets it: allowedHosts, the Service's cluster names and the loopback names.
*/}}
{{- define "mcp-gateway.gatewayConfig" -}}
{{- $cfg := deepCopy .Values.config }}
{{- if not (hasKey $cfg "allowed_hosts") }}
{{- $svc := include "mcp-gateway.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := concat .Values.allowedHosts (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) "localhost" "127.0.0.1" "::1") }}
{{- $_ := set $cfg "allowed_hosts" $hosts }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
