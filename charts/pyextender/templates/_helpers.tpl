{{/* Names, labels and shared pod fragments. */}}

{{- define "pyextender.fullname" -}}
{{- if contains "pyextender" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-pyextender" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "pyextender.labels" -}}
app.kubernetes.io/part-of: pyextender
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" . "component" "webhook") */}}
{{- define "pyextender.selector" -}}
app.kubernetes.io/name: pyextender
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pyextender.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "pyextender.webhookName" -}}
{{- printf "%s-webhook" (include "pyextender.fullname" .) -}}
{{- end -}}

{{- define "pyextender.tlsSecret" -}}
{{- printf "%s-webhook-tls" (include "pyextender.fullname" .) -}}
{{- end -}}

{{/* Environment every pyextender container gets. */}}
{{- define "pyextender.env" -}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: PYEXTENDER_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
{{- end -}}

{{/* Spread replicas over nodes: (dict "root" . "component" "webhook") */}}
{{- define "pyextender.antiAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "pyextender.selector" . | nindent 10 }}
{{- end -}}

{{/* Checks at render time, with messages that say what to change. */}}
{{- define "pyextender.checks" -}}
{{- if not (has .Values.mode (list "scheduler" "existing")) -}}
{{- fail (printf "mode must be \"scheduler\" or \"existing\", got %q" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.webhook.tls.mode (list "self" "cert-manager")) -}}
{{- fail (printf "webhook.tls.mode must be \"self\" or \"cert-manager\", got %q" .Values.webhook.tls.mode) -}}
{{- end -}}
{{- if not (has .Values.logFormat (list "text" "json")) -}}
{{- fail (printf "logFormat must be \"text\" or \"json\", got %q" .Values.logFormat) -}}
{{- end -}}
{{- if not .Values.gpuResourceNames -}}
{{- fail "gpuResourceNames must list at least one GPU resource name, e.g. nvidia.com/gpu" -}}
{{- end -}}
{{- range .Values.gpuResourceNames -}}
{{- if not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" (toString .)) -}}
{{- fail (printf "gpuResourceNames: %q is not an extended resource name (domain/name, e.g. amd.com/gpu)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.mode "existing") (eq .Values.adoption.clusterSchedulerName .Values.schedulerName) -}}
{{- fail "adoption.clusterSchedulerName must name the cluster's own scheduler in mode=existing, not our schedulerName" -}}
{{- end -}}
{{- if and .Values.scheduler.framework.enabled (eq .Values.mode "existing") -}}
{{- fail "scheduler.framework.enabled needs mode=scheduler: in mode=existing the cluster's own kube-scheduler runs, and it cannot load pyextender's plugin" -}}
{{- end -}}
{{- if and .Values.scheduler.framework.enabled (not (regexMatch "^[0-9]+(\\.[0-9]+)?(ms|s|m)$" (toString .Values.scheduler.framework.callTimeout))) -}}
{{- fail (printf "scheduler.framework.callTimeout must be a duration such as 5s or 500ms, got %q" (toString .Values.scheduler.framework.callTimeout)) -}}
{{- end -}}
{{- if semverCompare "<1.30.0-0" .Capabilities.KubeVersion.Version -}}
{{- fail (printf "pyextender needs Kubernetes 1.30 or newer (pod scheduling gates and webhook matchConditions are GA there); this cluster is %s" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}

{{/* "true" when gang members wait at the framework plugin's barrier (annotation). */}}
{{- define "pyextender.gangBarrier" -}}
{{- if and .Values.scheduler.framework.enabled .Values.scheduler.framework.gangBarrier (eq .Values.mode "scheduler") -}}true{{- end -}}
{{- end -}}
