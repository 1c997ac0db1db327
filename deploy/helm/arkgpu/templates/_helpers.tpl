{{/*
Names shared by every template. The contract's names (resource names,
the scheduler name, the node label) are spelled here once, as
src/arkgpu/k8s/contract.py spells them; tests/chart checks that they agree.
*/}}

{{/* The scheduler profile's name (contract.SCHEDULER_NAME). */}}
{{- define "arkgpu.schedulerName" -}}arkgpu-scheduler{{- end }}

{{/* The node label that enables the DaemonSet (contract.LABEL_NODE_ENABLED). */}}
{{- define "arkgpu.nodeLabel" -}}arkgpu.io/gpu{{- end }}

{{/* The resources the extender manages (contract.MANAGED_RESOURCES), one per line. */}}
{{- define "arkgpu.managedResources" -}}
nvidia.com/gpu
nvidia.com/gpumem
nvidia.com/gpumem-percentage
nvidia.com/gpucores
{{- end }}

{{/* Release-scoped name prefix, at most 63 characters with the longest suffix added. */}}
{{- define "arkgpu.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/* Name of one component's objects: "<fullname>-<component>". Call with (list $ "extender"). */}}
{{- define "arkgpu.name" -}}
{{- printf "%s-%s" (include "arkgpu.fullname" (index . 0)) (index . 1) -}}
{{- end }}

{{/* Labels of every object; call with (list $ "component"). */}}
{{- define "arkgpu.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: arkgpu
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
{{ include "arkgpu.selectorLabels" . }}
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component; call with (list $ "component"). */}}
{{- define "arkgpu.selectorLabels" -}}
app.kubernetes.io/name: arkgpu
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* The ArkGPU image reference. */}}
{{- define "arkgpu.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end }}

{{/* kube-scheduler's image: the given tag, else the cluster's version without build suffix. */}}
{{- define "arkgpu.schedulerImage" -}}
{{- $tag := .Values.scheduler.image.tag -}}
{{- if not $tag -}}
{{- $v := semver .Capabilities.KubeVersion.Version -}}
{{- $tag = printf "v%d.%d.%d" $v.Major $v.Minor $v.Patch -}}
{{- end -}}
{{- printf "%s:%s" .Values.scheduler.image.repository $tag -}}
{{- end }}

{{/* DNS name of a component's Service; call with (list $ "extender"). */}}
{{- define "arkgpu.serviceHost" -}}
{{- printf "%s.%s.svc" (include "arkgpu.name" .) (index . 0).Release.Namespace -}}
{{- end }}

{{/*
A TOML file from a map: scalars and lists as `key = value` (JSON strings, numbers,
booleans and arrays are TOML too), then each map value as a [table] of scalars.
Keys in sorted order, so the rendering is stable.
*/}}
{{- define "arkgpu.toml" -}}
{{- range $key, $value := . }}
{{- if not (kindIs "map" $value) }}
{{ $key }} = {{ toJson $value }}
{{- end }}
{{- end }}
{{- range $key, $value := . }}
{{- if kindIs "map" $value }}

[{{ $key }}]
{{- range $k, $v := $value }}
{{ $k }} = {{ toJson $v }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A component's TOML: the chart's own fields merged with the user's settings, which
may not repeat them. Call with (list "values path" chartFields settings).
*/}}
{{- define "arkgpu.config" -}}
{{- $where := index . 0 -}}
{{- $own := index . 1 -}}
{{- $settings := index . 2 | default dict -}}
{{- range $key, $_ := $own }}
{{- if hasKey $settings $key }}
{{- fail (printf "%s.%s: the chart sets this field itself (from its values); remove it" $where $key) }}
{{- end }}
{{- end }}
{{- include "arkgpu.toml" (merge (deepCopy $own) $settings) | trim }}
{{- end }}

{{/* The container security context of the stateless daemons (extender, webhook). */}}
{{- define "arkgpu.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Pod-level scheduling fields of a component's values (nodeSelector, tolerations ...). */}}
{{- define "arkgpu.podPlacement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{/*
A CA and a serving certificate for a Service, as a dict with caCert, cert and key
(PEM). Reuses those of the Secret named secretName when the cluster has it (upgrades
keep the certificate); otherwise Helm's genCA/genSignedCert make new ones.
Call with (list $ "component" days).
*/}}
{{- define "arkgpu.servingCertificate" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $name := include "arkgpu.name" (list $root $component) -}}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace (printf "%s-tls" $name) -}}
{{- if and $existing (index ($existing.data | default dict) "ca.crt") -}}
caCert: {{ index $existing.data "ca.crt" | b64dec | quote }}
cert: {{ index $existing.data "tls.crt" | b64dec | quote }}
key: {{ index $existing.data "tls.key" | b64dec | quote }}
{{- else -}}
{{- $host := include "arkgpu.serviceHost" (list $root $component) -}}
{{- $days := int (index . 2) -}}
{{- $ca := genCA (printf "%s-ca" $name) $days -}}
{{- $dns := list $name (printf "%s.%s" $name $root.Release.Namespace) $host (printf "%s.cluster.local" $host) -}}
{{- $cert := genSignedCert $host nil $dns $days $ca -}}
caCert: {{ $ca.Cert | quote }}
cert: {{ $cert.Cert | quote }}
key: {{ $cert.Key | quote }}
{{- end -}}
{{- end }}

{{/* Environment of the node containers: the node's name and NVML through the toolkit. */}}
{{- define "arkgpu.nodeEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: NVIDIA_VISIBLE_DEVICES
  value: all
- name: NVIDIA_DRIVER_CAPABILITIES
  value: utility
{{- end }}

{{/*
Security context of a node container: root (the host directories are root's), no
capabilities, read-only root file system; privileged only with node.privileged.
Call with (list .Values.node addKill): addKill gives the KILL capability (the node
runtime's backstop "kill" of other containers' processes, with hostPID).
*/}}
{{- define "arkgpu.nodeContainer" -}}
{{- $n := index . 0 -}}
runAsUser: 0
readOnlyRootFilesystem: true
{{- if $n.privileged }}
privileged: true
{{- else }}
privileged: false
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
  {{- if index . 1 }}
  add: [KILL]
  {{- end }}
{{- end }}
{{- end }}

{{/*
CEL condition of webhook.gpuPodsOnly: a container or init container names one of the
managed resources in its limits or requests, or the pod carries arkgpu.io/assignment
or arkgpu.io/allocated (which the validating webhook refuses on new pods).
*/}}
{{- define "arkgpu.webhookCondition" -}}
{{- $names := list -}}
{{- range splitList "\n" (include "arkgpu.managedResources" .) }}{{ $names = append $names (printf "'%s'" .) }}{{ end -}}
{{- $hami := "(has(c.resources.limits) && c.resources.limits.exists(k, k.startsWith('nvidia.com/mig-') || k == 'nvidia.com/priority'))" -}}
{{- $uses := printf "([%s].exists(r, has(c.resources) && ((has(c.resources.limits) && r in c.resources.limits) || (has(c.resources.requests) && r in c.resources.requests))) || (has(c.resources) && %s))" (join ", " $names) $hami -}}
object.spec.containers.exists(c, {{ $uses }}) || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, {{ $uses }})) || (has(object.metadata.annotations) && ('arkgpu.io/assignment' in object.metadata.annotations || 'arkgpu.io/allocated' in object.metadata.annotations))
{{- end }}
