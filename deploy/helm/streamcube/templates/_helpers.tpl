{{- define "streamcube.labels" -}}
app.kubernetes.io/name: streamcube
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "streamcube.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{- define "streamcube.tokenSecret" -}}
{{ .Values.adminToken.existingSecret | default (printf "%s-admin-token" .Release.Name) }}
{{- end }}

{{- define "streamcube.deepStorageClaim" -}}
{{ .Values.deepStorage.existingClaim | default (printf "%s-deep-storage" .Release.Name) }}
{{- end }}

{{- define "streamcube.operatorServiceAccount" -}}
{{ .Values.operator.serviceAccount.name | default (printf "%s-operator" .Release.Name) }}
{{- end }}
