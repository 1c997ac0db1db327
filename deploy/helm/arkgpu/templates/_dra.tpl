{{/*
Names of the DRA driver's parts (docs/k8s/DRA.md), spelled here once.
*/}}

{{/* The DRA driver's name (arkgpu.k8s.dra.config.DRIVER_NAME): the DeviceClass's and the slices'. */}}
{{- define "arkgpu.draDriver" -}}gpu.arkgpu.io{{- end }}

{{/*
Value of the node label arkgpu.io/gpu that selects the DRA DaemonSet. The device plugin's
DaemonSet selects the value "true": a label has one value, so no node ever runs both.
*/}}
{{- define "arkgpu.draNodeValue" -}}dra{{- end }}

{{/* The init container that copies the interception library onto the host (node DaemonSets). */}}
{{- define "arkgpu.installLibrary" -}}
{{- $root := index . 0 -}}
{{- $n := $root.Values.node -}}
- name: install-library
  image: {{ include "arkgpu.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command:
    - python3
    - -c
    - |
      import os, shutil, sys
      from arkgpu.limiter import native
      for lib in (native.limiter_library(), native.client_library()):
          tmp = os.path.join(sys.argv[1], "." + lib.name + ".tmp")
          shutil.copyfile(lib, tmp)
          os.chmod(tmp, 0o755)
          os.replace(tmp, os.path.join(sys.argv[1], lib.name))
    - {{ $n.libraryDir }}
  # Never privileged: it only writes into the library's host directory.
  securityContext:
    {{- include "arkgpu.nodeContainer" (list (omit $n "privileged") false) | nindent 4 }}
  volumeMounts:
    - name: library
      mountPath: {{ $n.libraryDir }}
{{- end }}

{{/* The node runtime container (`arkgpu node run`), reading node.toml of the ConfigMap "config". */}}
{{- define "arkgpu.nodeRuntime" -}}
{{- $root := index . 0 -}}
{{- $n := $root.Values.node -}}
{{- $backstop := index ($n.runtime.settings | default dict) "backstop" | default "off" -}}
- name: node-runtime
  image: {{ include "arkgpu.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command: [arkgpu, node, run, --config, /etc/arkgpu/node.toml]
  env:
    {{- include "arkgpu.nodeEnv" $root | nindent 4 }}
  {{- if gt (int $n.runtime.metricsPort) 0 }}
  ports:
    - name: node-metrics
      containerPort: {{ $n.runtime.metricsPort }}
      protocol: TCP
  livenessProbe:
    httpGet: {path: /healthz, port: node-metrics}
    periodSeconds: 10
  readinessProbe:
    httpGet: {path: /readyz, port: node-metrics}
    periodSeconds: 5
  {{- end }}
  resources:
    {{- toYaml $n.runtime.resources | nindent 4 }}
  securityContext:
    {{- include "arkgpu.nodeContainer" (list $n (and $n.hostPID (eq $backstop "kill"))) | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/arkgpu/node.toml
      subPath: node.toml
      readOnly: true
    - name: regions
      mountPath: {{ $n.regionsDir }}
{{- end }}
