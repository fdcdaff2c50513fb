{{/* Names and labels. */}}
{{- define "topogate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "topogate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "topogate.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "topogate.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "topogate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "topogate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "topogate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "topogate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: topogate
{{- end -}}

{{- define "topogate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "topogate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "topogate.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" -}}
{{- required "tls.existingSecret is required when tls.mode=secret" .Values.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-serving" (include "topogate.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "topogate.storeNamespace" -}}
{{- default .Release.Namespace .Values.store.namespace -}}
{{- end -}}

{{/* "true" when any inventory watches Nodes through the API. */}}
{{- define "topogate.nodeWatch" -}}
{{- range .Values.inventories -}}{{- if .nodesFromAPI -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/* "true" when an inventory answers dry runs with the Workload answer (workloadImpact). */}}
{{- define "topogate.workloadImpact" -}}
{{- range .Values.inventories -}}{{- if .workloadImpact -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/* "true" when topogate talks to the Kubernetes API at all. */}}
{{- define "topogate.usesAPI" -}}
{{- if or (eq .Values.store.type "kubernetes") (include "topogate.nodeWatch" .) (eq .Values.metrics.auth "kubernetes") .Values.audit.enabled .Values.ownershipCheck.enabled -}}true{{- end -}}
{{- end -}}

{{/* The DNS names the apiserver and in-cluster clients use for the Service. */}}
{{- define "topogate.dnsNames" -}}
{{- $svc := include "topogate.fullname" . -}}
{{- $ns := .Release.Namespace -}}
- {{ printf "%s.%s.svc" $svc $ns }}
- {{ printf "%s.%s.svc.cluster.local" $svc $ns }}
- {{ printf "%s.%s" $svc $ns }}
- {{ $svc }}
{{- range .Values.tls.extraDnsNames }}
- {{ . }}
{{- end }}
{{- end -}}

{{/* Mount paths of an inventory's credential files. */}}
{{- define "topogate.credDir" -}}
{{- printf "/var/run/topogate/inventories/%s/%s" .inv.name .role -}}
{{- end -}}

{{/* Name of the Secret the chart makes for an inventory role (readers/writers). */}}
{{- define "topogate.credSecretName" -}}
{{- printf "%s-%s-%s" (include "topogate.fullname" .root) .inv.name .role | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* true when the chart must create a Secret for this inventory role. */}}
{{- define "topogate.credNeedsSecret" -}}
{{- $a := get .inv .role | default dict -}}
{{- $b := $a.bearer | default dict -}}
{{- $m := $a.mtls | default dict -}}
{{- if or $b.tokens $m.clientCA -}}true{{- end -}}
{{- end -}}

{{/* The readers:/writers: block of one inventory in topogate's configuration. */}}
{{- define "topogate.credConfig" -}}
{{- $a := get .inv .role | default dict -}}
{{- $b := $a.bearer | default dict -}}
{{- $m := $a.mtls | default dict -}}
{{- $dir := include "topogate.credDir" . -}}
{{- $out := dict -}}
{{- if $b.existingSecret -}}
{{- $files := list -}}
{{- range ($b.keys | default (list "token")) -}}{{- $files = append $files (printf "%s/bearer/%s" $dir .) -}}{{- end -}}
{{- $_ := set $out "bearerTokenFiles" $files -}}
{{- else if $b.tokens -}}
{{- $files := list -}}
{{- range $i, $t := $b.tokens -}}{{- $files = append $files (printf "%s/generated/token-%d" $dir $i) -}}{{- end -}}
{{- $_ := set $out "bearerTokenFiles" $files -}}
{{- end -}}
{{- if $m.existingSecret -}}
{{- $_ := set $out "clientCAFile" (printf "%s/mtls/ca.crt" $dir) -}}
{{- else if $m.clientCA -}}
{{- $_ := set $out "clientCAFile" (printf "%s/generated/ca.crt" $dir) -}}
{{- end -}}
{{- with $m.allowedSubjects -}}{{- $_ := set $out "allowedSubjects" . -}}{{- end -}}
{{- with $m.allowedSANs -}}{{- $_ := set $out "allowedSANs" . -}}{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The TopologySource an inventory feeds, as the file its source: key names. */}}
{{- define "topogate.sourceObject" -}}
apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: {{ .name }}
spec:
  {{- toYaml .source | nindent 2 }}
{{- end -}}

{{/* topogate's configuration file (docs/configuration.md). */}}
{{- define "topogate.config" -}}
{{- $root := . -}}
{{- $cfg := dict
  "listen" (dict "address" "0.0.0.0" "port" .Values.listen.port "healthPort" .Values.listen.healthPort)
  "tls" (dict "certFile" "/var/run/topogate/tls/tls.crt" "keyFile" "/var/run/topogate/tls/tls.key")
  "admission" (dict "workerNamespace" .Values.workerNamespace)
  "logging" (dict "level" .Values.logLevel)
-}}
{{- with .Values.limits -}}{{- $_ := set $cfg "limits" . -}}{{- end -}}
{{- if eq .Values.store.type "kubernetes" -}}
{{- $_ := set $cfg "store" (dict "type" "kubernetes" "namespace" (include "topogate.storeNamespace" .) "timeout" .Values.store.timeout) -}}
{{- else -}}
{{- $_ := set $cfg "store" (dict "type" "file" "directory" .Values.store.directory "timeout" .Values.store.timeout) -}}
{{- end -}}
{{- $invs := list -}}
{{- range $v := .Values.inventories -}}
{{- $inv := dict "name" $v.name "source" (printf "/etc/topogate/source-%s.yaml" $v.name) -}}
{{- with .snapshotConfigMap -}}
{{- $_ := set $inv "snapshot" (printf "/var/run/topogate/inventories/%s/snapshot/%s" $v.name (.key | default "snapshot.yaml")) -}}
{{- end -}}
{{- if .nodesFromAPI -}}{{- $_ := set $inv "nodesFromAPI" true -}}{{- end -}}
{{- if .workloadImpact -}}{{- $_ := set $inv "workloadImpact" true -}}{{- end -}}
{{- with .unknownNodes -}}{{- $_ := set $inv "unknownNodes" . -}}{{- end -}}
{{- with .maxAge -}}{{- $_ := set $inv "maxAge" . -}}{{- end -}}
{{- if .allowEmptyStart -}}{{- $_ := set $inv "allowEmptyStart" true -}}{{- end -}}
{{- /* Numbers where 0 means something (maxStrandedWorkloads: 0 strands none): passed when set. */ -}}
{{- range $key := list "historySize" "maxProfileChanges" "maxStrandedWorkloads" -}}
{{- if hasKey $v $key -}}{{- $_ := set $inv $key (index $v $key) -}}{{- end -}}
{{- end -}}
{{- with .driftGracePeriod -}}{{- $_ := set $inv "driftGracePeriod" . -}}{{- end -}}
{{- range $role := list "readers" "writers" -}}
{{- $c := include "topogate.credConfig" (dict "root" $root "inv" $v "role" $role) | fromYaml -}}
{{- if $c -}}{{- $_ := set $inv $role $c -}}{{- end -}}
{{- end -}}
{{- $invs = append $invs $inv -}}
{{- end -}}
{{- $_ := set $cfg "inventories" $invs -}}
{{- if .Values.ownershipCheck.enabled -}}
{{- $_ := set (index $cfg "admission") "ownershipCheck" (dict "enabled" true "interval" .Values.ownershipCheck.interval) -}}
{{- end -}}
{{- if .Values.audit.enabled -}}
{{- $_ := set $cfg "audit" (dict "enabled" true "interval" .Values.audit.interval) -}}
{{- end -}}
{{- with .Values.metrics -}}
{{- $m := dict -}}
{{- if ne .auth "none" -}}{{- $_ := set $m "auth" .auth -}}{{- end -}}
{{- if eq .auth "tokenfile" -}}{{- $_ := set $m "tokenFile" (printf "/var/run/topogate/metrics/%s" .tokenSecret.key) -}}{{- end -}}
{{- if eq .auth "kubernetes" -}}
{{- $_ := set $m "reviewTimeout" .reviewTimeout -}}
{{- $_ := set $m "cacheTTL" .cacheTTL -}}
{{- with .audiences -}}{{- $_ := set $m "audiences" . -}}{{- end -}}
{{- end -}}
{{- if kindIs "bool" .healthPort -}}{{- $_ := set $m "healthPort" .healthPort -}}{{- end -}}
{{- if $m -}}{{- $_ := set $cfg "metrics" $m -}}{{- end -}}
{{- end -}}
{{- toYaml (mergeOverwrite $cfg .Values.extraConfig) -}}
{{- end -}}
