{{/* Names, labels and shared fragments of the Operon chart. */}}
{{- define "operon.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "operon.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "operon.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "operon.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "operon.apiName" -}}{{ include "operon.fullname" . }}-api{{- end -}}
{{- define "operon.operatorName" -}}{{ include "operon.fullname" . }}-operator{{- end -}}
{{- define "operon.configName" -}}{{ include "operon.fullname" . }}-config{{- end -}}
{{- define "operon.stepsConfigName" -}}{{ include "operon.fullname" . }}-steps{{- end -}}

{{- define "operon.s3SecretName" -}}
{{- if .Values.s3.existingSecret -}}{{ .Values.s3.existingSecret }}{{- else if .Values.s3.accessKeyId -}}{{ include "operon.fullname" . }}-s3{{- end -}}
{{- end -}}

{{- define "operon.signingSecretName" -}}
{{- .Values.signing.existingSecret | default (printf "%s-signing" (include "operon.fullname" .)) -}}
{{- end -}}

{{/* Restricted pod security: non-root, read-only root, no escalation, no capabilities. */}}
{{- define "operon.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "operon.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment shared by the api-server and the operator: the ConfigMap and the Secrets. */}}
{{- define "operon.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "operon.configName" . }}
{{- if include "operon.s3SecretName" . }}
  - secretRef:
      name: {{ include "operon.s3SecretName" . }}
{{- end }}
env:
  - name: OPERON_SIGNING_SECRET
    valueFrom:
      secretKeyRef:
        name: {{ include "operon.signingSecretName" . }}
        key: OPERON_SIGNING_SECRET
  - name: OPERON_POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  - name: OPERON_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  - name: OPERON_STEP_POD_CONFIG
    value: /etc/operon/steps.json
{{- end -}}

{{/*
The step-pod configuration (ConfigMap <fullname>-steps, key steps.json) as a read-only file at
/etc/operon/steps.json, for the api-server and the operator: volume and mount.
*/}}
{{- define "operon.stepsVolume" -}}
- name: steps
  configMap:
    name: {{ include "operon.stepsConfigName" . }}
    items:
      - { key: steps.json, path: steps.json }
{{- end -}}
{{- define "operon.stepsMount" -}}
- { name: steps, mountPath: /etc/operon, readOnly: true }
{{- end -}}

{{/*
Object-store ports of the step NetworkPolicy when stepNetworkPolicy.objectStore.ports is empty,
comma-separated: 443 and 9000, plus the port of the endpoint step pods use (written in the URL,
else 80 or 443 from its scheme).
*/}}
{{- define "operon.stepStorePorts" -}}
{{- $ports := list "443" "9000" -}}
{{- with (.Values.s3.stepEndpoint | default .Values.s3.endpoint) -}}
{{- $url := urlParse . -}}
{{- $port := regexFind ":[0-9]+$" $url.host | trimPrefix ":" -}}
{{- if not $port -}}{{- $port = ternary "443" "80" (eq $url.scheme "https") -}}{{- end -}}
{{- $ports = append $ports $port -}}
{{- end -}}
{{- $ports | uniq | join "," -}}
{{- end -}}
