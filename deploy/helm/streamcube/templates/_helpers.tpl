{{- define "streamcube.labels" -}}
app.kubernetes.io/name: streamcube
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- /* The operator pods' selector: the Deployment, its PDB, Service, monitors and the receivers' NetworkPolicy. */}}
{{- define "streamcube.operatorSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- /* [<registry>/]<repository>:<tag or appVersion>[@<digest>] */}}
{{- define "streamcube.image" -}}
{{- with .Values.image -}}
{{ with .registry }}{{ . }}/{{ end }}{{ .repository }}:{{ .tag | default $.Chart.AppVersion }}{{ with .digest }}@{{ . }}{{ end }}
{{- end }}
{{- end }}

{{- define "streamcube.tokenSecret" -}}
{{ .Values.adminToken.existingSecret | default (printf "%s-admin-token" .Release.Name) }}
{{- end }}

{{- /*
How the monitors scrape: a target's own labels never override job, instance or pod
(honorLabels: false); only its `namespace` (the cube's, where the series has one) is taken back
from exported_namespace, so that series without one (controller-runtime's, Node's) keep the pod's.
*/}}
{{- define "streamcube.scrapeLabels" -}}
honorLabels: false
metricRelabelings:
  - { sourceLabels: [exported_namespace], regex: '(.+)', targetLabel: namespace, replacement: '$1', action: replace }
  - { regex: exported_namespace, action: labeldrop }
{{- end }}

{{- define "streamcube.receiverTlsSecret" -}}
{{ .Values.receivers.tls.existingSecret | default (printf "%s-receiver-tls" .Release.Name) }}
{{- end }}

{{- /* The flags and volume of a caller of the receivers over HTTPS: their CA, their name. */}}
{{- define "streamcube.receiverCaArgs" -}}
{{- if .Values.receivers.tls.enabled }}
- --receiver-ca-file=/var/run/streamcube-receiver-ca/ca.crt
- --receiver-server-name=streamcube-receiver
{{- else }}
- --receiver-plain-http
{{- end }}
{{- end }}

{{- define "streamcube.receiverCaMount" -}}
{{- if .Values.receivers.tls.enabled }}
- { name: receiver-ca, mountPath: /var/run/streamcube-receiver-ca, readOnly: true }
{{- end }}
{{- end }}

{{- define "streamcube.receiverCaVolume" -}}
{{- if .Values.receivers.tls.enabled }}
- name: receiver-ca
  secret:
    secretName: {{ include "streamcube.receiverTlsSecret" . }}
    items:
      - { key: ca.crt, path: ca.crt }
{{- end }}
{{- end }}

{{- define "streamcube.readTokenSecret" -}}
{{ .Values.readToken.existingSecret | default (printf "%s-read-token" .Release.Name) }}
{{- end }}

{{- define "streamcube.deepStorageClaim" -}}
{{ .Values.deepStorage.existingClaim | default (printf "%s-deep-storage" .Release.Name) }}
{{- end }}

{{- define "streamcube.operatorServiceAccount" -}}
{{ .Values.operator.serviceAccount.name | default (printf "%s-operator" .Release.Name) }}
{{- end }}

{{- /* The admin-token volume: the Secret's key becomes the file `token`, whatever the key is called. */}}
{{- define "streamcube.tokenVolume" -}}
- name: token
  secret:
    secretName: {{ include "streamcube.tokenSecret" . }}
    items:
      - key: {{ if .Values.adminToken.existingSecret }}{{ .Values.adminToken.existingSecretKey }}{{ else }}token{{ end }}
        path: token
{{- end }}

{{- /* The read-token volume (status and query only): its key becomes the file `token`. */}}
{{- define "streamcube.readTokenVolume" -}}
- name: read-token
  secret:
    secretName: {{ include "streamcube.readTokenSecret" . }}
    items:
      - key: {{ if .Values.readToken.existingSecret }}{{ .Values.readToken.existingSecretKey }}{{ else }}token{{ end }}
        path: token
{{- end }}

{{- /*
Pod-spec scheduling fields of one component. Called with (dict "values" <component values>
"selector" <its pods' matchLabels>); a topologySpreadConstraint without a labelSelector gets the selector.
*/}}
{{- define "streamcube.scheduling" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- $constraints := list }}
{{- range .values.topologySpreadConstraints }}
{{- $constraint := deepCopy . }}
{{- if not $constraint.labelSelector }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" $.selector) }}
{{- end }}
{{- $constraints = append $constraints $constraint }}
{{- end }}
{{- with $constraints }}
topologySpreadConstraints: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "streamcube.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- /* The query servers' selector: their Deployment, PDB, Service, monitors and the receivers' NetworkPolicy. */}}
{{- define "streamcube.querySelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: query-server
{{- end }}

{{- /* Flags naming deep storage, for every process that reads or writes it (receivers, query servers). */}}
{{- define "streamcube.deepStorageArgs" -}}
{{- if eq .Values.deepStorage.type "s3" }}
{{- with .Values.deepStorage.s3 }}
- --deep-storage=s3://{{ required "deepStorage.s3.bucket is required when deepStorage.type is s3" .bucket }}{{ with .prefix }}/{{ . }}{{ end }}
{{- with .endpoint }}
- --s3-endpoint={{ . }}
{{- end }}
{{- with .region }}
- --s3-region={{ . }}
{{- end }}
{{- if .forcePathStyle }}
- --s3-force-path-style
{{- end }}
{{- end }}
{{- else }}
- --deep-storage-dir=/var/lib/streamcube/deep-storage
{{- end }}
{{- end }}

{{- /* S3 credentials from deepStorage.s3.credentialsSecret, as environment variables; none otherwise. */}}
{{- define "streamcube.deepStorageEnv" -}}
{{- if and (eq .Values.deepStorage.type "s3") .Values.deepStorage.s3.credentialsSecret }}
{{- range list "AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY" }}
- name: {{ . }}
  valueFrom: { secretKeyRef: { name: {{ $.Values.deepStorage.s3.credentialsSecret }}, key: {{ . }} } }
{{- end }}
{{- end }}
{{- end }}

{{- define "streamcube.queryServiceAccount" -}}
{{ .Values.queryServer.serviceAccount.name | default (printf "%s-query" .Release.Name) }}
{{- end }}

{{- /*
A pod template's labels and annotations: the chart's own (`labels`, `annotations`: YAML), podLabels and
podAnnotations of every pod, then those of the component (`values`), a later one winning; the
chart's labels win over both, so selectors keep selecting.
*/}}
{{- define "streamcube.podMetadata" -}}
{{- $root := .root }}
{{- $own := .labels | fromYaml }}
{{- $labels := mustMergeOverwrite (dict) ($root.Values.podLabels | default dict) (.values.podLabels | default dict) $own }}
{{- $annotations := mustMergeOverwrite (dict) (.annotations | default "" | fromYaml) ($root.Values.podAnnotations | default dict) (.values.podAnnotations | default dict) }}
labels: {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- /* A NetworkPolicy's policyTypes: Egress too with networkPolicy.egress.enabled. */}}
{{- define "streamcube.policyTypes" -}}
policyTypes: [Ingress{{ if .Values.networkPolicy.egress.enabled }}, Egress{{ end }}]
{{- end }}

{{- /*
A NetworkPolicy's egress rules, with networkPolicy.egress.enabled (nothing otherwise): DNS and the
API server for every component, then those `to` names: "kafka", "deepStorage" (with
deepStorage.type s3; a claim is mounted by the node) and "receivers" (their admin port). Called
with (dict "root" . "to" (list …)).
*/}}
{{- define "streamcube.egress" -}}
{{- $root := .root }}
{{- $to := .to }}
{{- with $root.Values.networkPolicy.egress }}
{{- if .enabled }}
egress:
  - ports:
      - { protocol: UDP, port: 53 }
      - { protocol: TCP, port: 53 }
    {{- with .dns.to }}
    to: {{- toYaml . | nindent 6 }}
    {{- end }}
  {{- include "streamcube.egressRule" .apiServer | nindent 2 }}
  {{- if has "kafka" $to }}
  {{- include "streamcube.egressRule" .kafka | nindent 2 }}
  {{- end }}
  {{- if and (has "deepStorage" $to) (eq $root.Values.deepStorage.type "s3") }}
  {{- include "streamcube.egressRule" .deepStorage | nindent 2 }}
  {{- end }}
  {{- if has "receivers" $to }}
  - to:
      - podSelector:
          matchLabels:
            app.kubernetes.io/instance: {{ $root.Release.Name }}
            app.kubernetes.io/component: receiver
    ports:
      - { protocol: TCP, port: {{ $root.Values.receivers.port }} }
  {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- /* One egress rule of networkPolicy.egress: TCP to `ports`, at `cidrs` (any address when empty). */}}
{{- define "streamcube.egressRule" -}}
- ports:
    {{- range .ports }}
    - { protocol: TCP, port: {{ . }} }
    {{- end }}
  {{- with .cidrs }}
  to:
    {{- range . }}
    - ipBlock: { cidr: {{ . | quote }} }
    {{- end }}
  {{- end }}
{{- end }}

{{- /*
The chart's ReceiverPool as YAML (name, sets, replicas, setNames): named after the release. Its
first sets keep the names of an older chart's StatefulSets (<release>-<name>, pods labelled
streamcube.io/replica-set=<name>), taken from, first to last: receivers.replicaSets (old values,
one replicas for every set), the pool this release installed before (its spec.setNames), the
StatefulSets an older chart of this release made (an upgrade). Sets past them are <release>-<index>.
*/}}
{{- define "streamcube.pool" -}}
{{- $name := .Release.Name }}
{{- if gt (len $name) 49 }}
{{- fail (printf "the release name %s is the ReceiverPool's name, whose sets are <name>-<index>: at most 49 characters" $name) }}
{{- end }}
{{- $sets := int .Values.receivers.sets }}
{{- $replicas := int .Values.receivers.replicas }}
{{- $setNames := list }}
{{- with .Values.receivers.replicaSets }}
{{- $replicas = int ((first .).replicas | default 2) }}
{{- range . }}
{{- if ne (int (.replicas | default 2)) $replicas }}
{{- fail (printf "receivers.replicaSets: the chart installs them as one ReceiverPool, whose sets all have the same replicas; %s has %d, %s has %d. Give every entry the same replicas (or use receivers.sets and receivers.replicas)" (first $.Values.receivers.replicaSets).name $replicas .name (int (.replicas | default 2))) }}
{{- end }}
{{- $setNames = append $setNames .name }}
{{- end }}
{{- $sets = len $setNames }}
{{- else }}
{{- $pool := dict }}
{{- if .Capabilities.APIVersions.Has "streamcube.io/v1alpha1/ReceiverPool" }}
{{- $pool = lookup "streamcube.io/v1alpha1" "ReceiverPool" .Release.Namespace $name }}
{{- end }}
{{- if and $pool $pool.spec $pool.spec.setNames }}
{{- $setNames = $pool.spec.setNames }}
{{- else }}
{{- $older := lookup "apps/v1" "StatefulSet" .Release.Namespace "" }}
{{- range ($older.items | default list) }}
{{- $labels := .metadata.labels | default dict }}
{{- if and (eq (index $labels "app.kubernetes.io/instance" | default "") $name) (eq (index $labels "app.kubernetes.io/managed-by" | default "") "Helm") (eq (index $labels "app.kubernetes.io/component" | default "") "receiver") (index $labels "streamcube.io/replica-set") }}
{{- $setNames = append $setNames (index $labels "streamcube.io/replica-set") }}
{{- end }}
{{- end }}
{{- end }}
{{- if gt (len $setNames) $sets }}
{{- $sets = len $setNames }}
{{- end }}
{{- end }}
name: {{ $name }}
sets: {{ $sets }}
replicas: {{ $replicas }}
setNames: {{ toJson $setNames }}
{{- end }}

{{- /* The pods of the chart's pool: <pool>-<set>-<n>, its first set's object name. */}}
{{- define "streamcube.firstSetObject" -}}
{{- $pool := include "streamcube.pool" . | fromYaml }}
{{- $pool.name }}-{{ if $pool.setNames }}{{ first $pool.setNames }}{{ else }}0{{ end }}
{{- end }}

{{/* The ConfigMap holding the chart's ReceiverPool, which the operator applies (--pool-configmap). */}}
{{- define "streamcube.poolConfigMap" -}}
{{ .Release.Name }}-receiver-pool
{{- end }}
