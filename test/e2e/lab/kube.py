"""The lab's way to the Kubernetes API: the Kubernetes project's Python client
(Debian's python3-kubernetes). Its kubeconfig loading, TLS, bearer token, connection pool
and retries, and its dynamic client's discovery for the paths of the lab's kinds, built-in
and custom alike; this module only names the kinds and the few verbs the lab uses."""
import json
import os

import urllib3
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

# The kinds the lab reads and writes, by the name kubectl gives them -> (apiVersion, kind).
KINDS = {
    "workloads.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "Workload"),
    "localqueues.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    "clusterqueues.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    "resourceflavors.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    "topologies.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "Topology"),
    "admissionchecks.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"),
    "cohorts.kueue.x-k8s.io": ("kueue.x-k8s.io/v1beta2", "Cohort"),
    "modeldeployments.worker.gpustack.ai": ("worker.gpustack.ai/v1", "ModelDeployment"),
    "topologysources.worker.gpustack.ai": ("worker.gpustack.ai/v1", "TopologySource"),
    "nodefeatures.nfd.k8s-sigs.io": ("nfd.k8s-sigs.io/v1alpha1", "NodeFeature"),
    "mutatingwebhookconfigurations.admissionregistration.k8s.io":
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    "validatingwebhookconfigurations.admissionregistration.k8s.io":
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    "runtimeclasses.node.k8s.io": ("node.k8s.io/v1", "RuntimeClass"),
    "limitranges": ("v1", "LimitRange"),
    "namespaces": ("v1", "Namespace"),
    "pods": ("v1", "Pod"),
    "nodes": ("v1", "Node"),
}
KIND_NAME = {kind: name for name, (_, kind) in KINDS.items()}

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
FIELD_MANAGER = "tas-lab"


class Error(Exception):
    """An answer the lab cannot go on from: the request and the API's status and message."""


class Api:
    """One connection pool to the lab's apiserver, from its kubeconfig (the control plane's
    admin context). Throttling (429) and a server still starting (5xx: a webhook not yet
    serving, a CRD's storage initialising) are retried for about a minute with backoff and
    Retry-After, as client-go retries them; a call waits at most 60 s for its answer."""

    def __init__(self, kubeconfig, cache_dir):
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        cfg.retries = urllib3.Retry(total=7, backoff_factor=0.5, status_forcelist=(429, 500, 502, 503, 504),
                                    allowed_methods=None, respect_retry_after_header=True, raise_on_status=False)
        self.client = client.ApiClient(cfg)
        # The discovery cache lives with the lab's state, one per lab.
        self.dyn = dynamic.DynamicClient(self.client, cache_file=os.path.join(cache_dir, "discovery.json"))
        self._resources = {}

    def resource(self, name, sub=None):
        if name not in self._resources:
            api_version, kind = KINDS[name]
            try:
                self._resources[name] = self.dyn.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                raise Error(f"{api_version} {kind}: not served (its CRD is not installed)") from None
        r = self._resources[name]
        return r.subresources[sub] if sub else r

    def request(self, method, path, body=None, content_type="application/json", query=(), missing_ok=False):
        """The decoded answer; None on 404 when missing_ok."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            return self.client.call_api(path, method, query_params=list(query), header_params=headers, body=body,
                                        auth_settings=["BearerToken"], response_type="object",
                                        _return_http_data_only=True, _request_timeout=(10, 60))
        except ApiException as e:
            if e.status == 404 and missing_ok:
                return None
            raise Error(f"{method} {path}: HTTP {e.status}: {(e.body or e.reason or '')[:300]}") from None
        except urllib3.exceptions.HTTPError as e:
            raise Error(f"{method} {path}: {e}") from None

    def path(self, kind, name=None, ns=None, sub=None):
        return self.resource(kind, sub).path(name=name, namespace=ns)

    def get(self, kind, name, ns=None):
        return self.request("GET", self.path(kind, name, ns), missing_ok=True)

    def list(self, kind, selector=None, ns=None):
        query = [("labelSelector", selector)] if selector else []
        return (self.request("GET", self.path(kind, ns=ns), query=query, missing_ok=True) or {}).get("items") or []

    def create(self, kind, obj):
        return self.request("POST", self.path(kind, ns=obj["metadata"].get("namespace")), obj)

    def apply(self, obj):
        """Server-side apply, conflicts forced (kubectl apply --server-side --force-conflicts)."""
        meta = obj["metadata"]
        # The client encodes a dict body only for JSON content types; JSON is YAML.
        return self.request("PATCH", self.path(KIND_NAME[obj["kind"]], meta["name"], meta.get("namespace")),
                            json.dumps(obj), APPLY, query=[("fieldManager", FIELD_MANAGER), ("force", "true")])

    def patch(self, kind, name, patch, ns=None, content_type=MERGE, sub=None, missing_ok=False):
        return self.request("PATCH", self.path(kind, name, ns, sub), patch, content_type, missing_ok=missing_ok)

    def status_patch(self, kind, name, status, ns=None):
        return self.patch(kind, name, {"status": status}, ns, sub="status")

    def delete(self, kind, name, ns=None):
        return self.request("DELETE", self.path(kind, name, ns), missing_ok=True)

    def delete_collection(self, kind, selector, ns=None, grace0=False):
        opts = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if grace0:
            opts["gracePeriodSeconds"] = 0
        return self.request("DELETE", self.path(kind, ns=ns), opts, query=[("labelSelector", selector)],
                            missing_ok=True)

    def namespaced(self, kind):
        return self.resource(kind).namespaced
