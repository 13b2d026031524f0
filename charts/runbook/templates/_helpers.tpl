{{/* Name of the chart, overridable with nameOverride. */}}
{{- define "runbook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, prefixed unless it holds the chart name. */}}
{{- define "runbook.fullname" -}}
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
A name made of the fullname and a fixed suffix, at most 63 characters (a
Service name is a DNS label): the fullname is cut, the suffix kept.
Call with (dict "context" $ "suffix" "-controller-manager").
*/}}
{{- define "runbook.suffixedName" -}}
{{- $prefix := include "runbook.fullname" .context | trunc (int (sub 63 (len .suffix))) | trimSuffix "-" }}
{{- printf "%s%s" $prefix .suffix }}
{{- end }}

{{/*
The leader-election Lease (--leader-election-id): one per release, so two
releases in one namespace do not elect one leader between them. The
release named like the chart keeps config/default's runbook.runbook.dev.
*/}}
{{- define "runbook.leaseName" -}}
{{- include "runbook.suffixedName" (dict "context" . "suffix" ".runbook.dev") }}
{{- end }}

{{- define "runbook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "runbook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "runbook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runbook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end }}

{{- define "runbook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "runbook.suffixedName" (dict "context" . "suffix" "-controller-manager")) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The --controllers list: the enabled ones, in a fixed order. */}}
{{- define "runbook.controllers" -}}
{{- $enabled := list }}
{{- range $name := list "rebootpolicy" "memcached" "nsscaler" }}
{{- $c := index $.Values.controllers $name }}
{{- if and $c $c.enabled }}
{{- $enabled = append $enabled $name }}
{{- end }}
{{- end }}
{{- if not $enabled }}
{{- fail "enable at least one of controllers.rebootpolicy, controllers.memcached, controllers.nsscaler" }}
{{- end }}
{{- join "," $enabled }}
{{- end }}

{{- define "runbook.execProbesConfigMap" -}}
{{- default (include "runbook.suffixedName" (dict "context" . "suffix" "-exec-probes")) .Values.execProbes.existingConfigMap }}
{{- end }}
