{{/*
Names. With the release named `sexton` (as deploy/ is rendered) every object is named
sexton-<component>, the names the binaries default to (sexton-controller Lease,
sexton-webhook Service, configuration and sexton-webhook-tls Secret).
*/}}
{{- define "sexton.fullname" -}}
{{- if contains "sexton" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-sexton" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sexton.controller.name" -}}{{ include "sexton.fullname" . }}-controller{{- end -}}
{{- define "sexton.webhook.name" -}}{{ include "sexton.fullname" . }}-webhook{{- end -}}
{{- /* the controller's safety net: on where the webhook is installed, unless turned off */ -}}
{{- define "sexton.safetyNet" -}}{{ and .Values.controller.safetyNet.enabled .Values.webhook.enabled }}{{- end -}}
{{- define "sexton.webhook.tlsSecret" -}}
{{- if eq .Values.webhook.certificate "secret" -}}
{{- required "webhook.tls.secretName is required with webhook.certificate=secret" .Values.webhook.tls.secretName -}}
{{- else -}}
{{- include "sexton.webhook.name" . }}-tls
{{- end -}}
{{- end -}}

{{/* Labels every object carries; `kubectl sexton version` reads name and version. */}}
{{- define "sexton.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: sexton
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sexton.labels" -}}
{{ include "sexton.commonLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of one component: `include "sexton.selector" (list . "controller")` */}}
{{- define "sexton.selector" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
app.kubernetes.io/name: sexton-{{ $component }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end -}}

{{- define "sexton.componentLabels" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{ include "sexton.commonLabels" $root }}
{{ include "sexton.selector" . }}
app.kubernetes.io/component: {{ $component }}
{{- end -}}

{{/*
An image reference from {registry, repository, tag, digest}; the tag defaults to the
chart's appVersion. `include "sexton.image" (list . .Values.image)`
*/}}
{{- define "sexton.image" -}}
{{- $root := index . 0 -}}
{{- $img := index . 1 -}}
{{- $repo := required "image repository is required" $img.repository -}}
{{- $name := ternary $repo (printf "%s/%s" $img.registry $repo) (empty $img.registry) -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $name $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $name (default $root.Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* The namespaces no webhook of sexton's ever reviews: the listed ones and its own. */}}
{{- define "sexton.webhook.excluded" -}}
{{- $excluded := concat .Values.webhook.excludedNamespaces (list .Release.Namespace) | uniq -}}
{{- toJson $excluded -}}
{{- end -}}
