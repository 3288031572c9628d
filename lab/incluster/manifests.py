"""The in-cluster controller's manifests, rendered from Python data (pure).

By default the lab runs the controller as a local process (``lab.controllerproc``): fast to
restart, easy to debug. The other option (``lab.incluster``) is the way a real cluster runs a cloud
controller manager: an image (``deploy/Dockerfile``), loaded into the kind nodes, and a set of
manifests rendered here from Python data so that the image, namespace, cloud config and AWS
endpoints are parameters rather than hand-edited YAML.

* :func:`render_manifests` (pure) returns the objects: ServiceAccount, least-privilege
  ClusterRole/ClusterRoleBinding (cluster-wide reads and writes the controllers make), a Role
  and RoleBinding for the leader-election Lease only, the cloud-config ConfigMap, a Secret with
  the lab's dummy AWS credentials, and a one-replica Deployment (``--leader-elect``).
* :data:`CLUSTER_RULES` / :data:`LEASE_RULES` are the RBAC rules as data. They were derived
  from ``controller/runtime/kube.py`` (the controller's single seam to the API) and are verified
  by ``tests/incluster/test_rbac.py`` against the requests the lab's API simulator actually served
  to the controller: every request is allowed, and every granted verb is used.
* ``lab.incluster.deploy`` applies them: ``docker build``, ``kind load docker-image`` (through
  the cluster provider) and ``kubectl apply|delete -f -`` through ``lab.exec``.

Reaching the lab from a pod: ``127.0.0.1`` inside a kind node is the node, and
``169.254.169.254`` there is not the lab's IMDS. The manifests therefore point the controller at
``http://<host-address>:<port>`` for both the AWS endpoint (cloud config ``[ServiceOverride]``)
and IMDS (``AWS_EC2_METADATA_SERVICE_ENDPOINT``), where the host address is the nodes' Docker
network gateway (``KindProvider.host_address()``). The lab's AWS endpoint and IMDS must then
listen on that address (or ``0.0.0.0``), not only on loopback. The pod uses ``hostNetwork`` so it
needs no CNI before the nodes it initializes are ready, as upstream cloud controllers do.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lab.controllerproc import LAB_AWS_ENV, render_cloud_config

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DOCKERFILE = Path("deploy") / "Dockerfile"
DEFAULT_IMAGE = "ccm-lab/cloud-controller-manager:dev"
DEFAULT_NAME = "cloud-controller-manager"
CLOUD_CONFIG_DIR = "/etc/kubernetes/cloud"
CLOUD_CONFIG_KEY = "cloud.conf"
#: Namespaces that exist before us and must never be deleted by :func:`undeploy`.
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})

Manifest = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One RBAC policy rule: ``verbs`` on ``resources`` of ``api_group``."""

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiGroups": [self.api_group],
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        return out


#: Cluster-wide permissions, one rule per ``KubeClient`` concern (controller/runtime/kube.py):
#: informers list+watch Services and Nodes; the service controller patches
#: ``services/{name}/status`` (finalizer and load-balancer status, one SMP each); the node
#: controller GETs and PUTs Nodes (initialization) and patches ``nodes/{name}/status``
#: (addresses); the lifecycle controller deletes Nodes whose instance is gone; the event
#: recorder creates Events (and patches them to aggregate repeats) in the involved object's
#: namespace, which may be any.
CLUSTER_RULES: tuple[Rule, ...] = (
    Rule("", ("services",), ("list", "watch")),
    Rule("", ("services/status",), ("patch",)),
    Rule("", ("nodes",), ("get", "list", "watch", "update", "delete")),
    Rule("", ("nodes/status",), ("patch",)),
    Rule("", ("events",), ("create", "patch")),
)


def lease_rules(lease_name: str) -> tuple[Rule, ...]:
    """Leader election (controller/runtime/leader.py): get and update *our* Lease by name;
    create cannot be limited by name in RBAC (the name is not in a create's URL)."""
    return (
        Rule("coordination.k8s.io", ("leases",), ("create",)),
        Rule("coordination.k8s.io", ("leases",), ("get", "update"), (lease_name,)),
    )


LEASE_RULES: tuple[Rule, ...] = lease_rules(DEFAULT_NAME)


@dataclasses.dataclass(frozen=True)
class InClusterSettings:
    """Everything the manifests depend on. ``cloud_config`` is the file's text."""

    image: str = DEFAULT_IMAGE
    cloud_config: str = ""
    imds_endpoint: str | None = None
    namespace: str = "kube-system"
    name: str = DEFAULT_NAME
    region: str = "us-east-1"
    cluster_name: str = "kubernetes"
    aws_credentials: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: dict(LAB_AWS_ENV)
    )
    legacy: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    metrics_port: int = 10258
    host_network: bool = True
    verbosity: int = 2
    image_pull_policy: str = "IfNotPresent"

    def __post_init__(self) -> None:
        if not self.image or any(c.isspace() for c in self.image):
            raise ValueError(f"image must be a non-empty reference without spaces: {self.image!r}")
        if self.image_pull_policy not in ("IfNotPresent", "Never", "Always"):
            raise ValueError(f"image_pull_policy: unknown value {self.image_pull_policy!r}")
        if not 1 <= self.metrics_port <= 65535:
            raise ValueError(f"metrics_port must be 1..65535, got {self.metrics_port}")
        bad = [k for k in self.aws_credentials if not k.startswith("AWS_")]
        if bad:
            raise ValueError(f"aws_credentials: keys must be AWS_* variables, got {bad}")

    @property
    def lease_name(self) -> str:
        return self.name


def lab_endpoints(host: str, *, aws_port: int, imds_port: int) -> tuple[str, str]:
    """(AWS endpoint URL, IMDS URL) on ``host`` as pods see it."""
    for field, port in (("aws_port", aws_port), ("imds_port", imds_port)):
        if not 1 <= port <= 65535:
            raise ValueError(f"{field} must be 1..65535, got {port}")
    return f"http://{host}:{aws_port}", f"http://{host}:{imds_port}"


def lab_settings(
    *,
    host: str,
    aws_port: int,
    imds_port: int,
    region: str = "us-east-1",
    cluster_id: str = "ccm-lab",
    **overrides: Any,
) -> InClusterSettings:
    """Settings for a lab whose endpoints listen on ``host`` (the nodes' gateway)."""
    aws_url, imds_url = lab_endpoints(host, aws_port=aws_port, imds_port=imds_port)
    text = render_cloud_config(region=region, cluster_id=cluster_id, aws_endpoint=aws_url)
    return InClusterSettings(cloud_config=text, imds_endpoint=imds_url, region=region, **overrides)


# --- rendering -------------------------------------------------------------------------------


def _labels(s: InClusterSettings) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": s.name,
        "app.kubernetes.io/component": "cloud-controller-manager",
        "app.kubernetes.io/part-of": "ccm-lab",
    }


def _meta(s: InClusterSettings, name: str, *, namespaced: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": _labels(s)}
    if namespaced:
        meta["namespace"] = s.namespace
    return meta


def controller_args(s: InClusterSettings) -> list[str]:
    """The container's arguments (the entrypoint is ``python -m controller``)."""
    args = [
        f"--cloud-config={CLOUD_CONFIG_DIR}/{CLOUD_CONFIG_KEY}",
        f"--cluster-name={s.cluster_name}",
        "--leader-elect",
        f"--leader-elect-resource-namespace={s.namespace}",
        f"--leader-elect-resource-name={s.lease_name}",
        f"--metrics-addr=0.0.0.0:{s.metrics_port}",
        f"--v={s.verbosity}",
    ]
    if s.legacy:
        args.append(f"--legacy-behavior={','.join(s.legacy)}")
    return args + list(s.extra_args)


def _env(s: InClusterSettings) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "AWS_DEFAULT_REGION", "value": s.region}]
    if s.imds_endpoint:
        env += [
            {"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT", "value": s.imds_endpoint},
            {"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "value": "IPv4"},
        ]
    return env


def _tolerations() -> list[dict[str, Any]]:
    return [
        # the CCM is what removes this taint, so it must run on nodes still carrying it
        {
            "key": "node.cloudprovider.kubernetes.io/uninitialized",
            "value": "true",
            "effect": "NoSchedule",
        },
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
        # Kubernetes <= 1.24 control planes (the lab runs 1.22 scenarios)
        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
    ]


def _container(s: InClusterSettings) -> dict[str, Any]:
    """The controller's container: its flags, probes on the metrics port, a read-only root."""
    probe_port = {"path": "/healthz", "port": s.metrics_port, "scheme": "HTTP"}
    return {
        "name": "cloud-controller-manager",
        "image": s.image,
        "imagePullPolicy": s.image_pull_policy,
        "args": controller_args(s),
        "env": _env(s),
        "envFrom": [{"secretRef": {"name": f"{s.name}-aws"}}],
        "ports": [{"name": "metrics", "containerPort": s.metrics_port, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": probe_port,
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {**probe_port, "path": "/readyz"},
            "periodSeconds": 5,
        },
        "resources": {
            "requests": {"cpu": "50m", "memory": "96Mi"},
            "limits": {"memory": "384Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "cloud-config", "mountPath": CLOUD_CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def _pod_spec(s: InClusterSettings) -> dict[str, Any]:
    """On a control-plane node, as its service account, non-root, with the cloud config."""
    pod_spec: dict[str, Any] = {
        "serviceAccountName": s.name,
        "hostNetwork": s.host_network,
        "dnsPolicy": "ClusterFirstWithHostNet" if s.host_network else "ClusterFirst",
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": _tolerations(),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(s)],
        "volumes": [
            {"name": "cloud-config", "configMap": {"name": f"{s.name}-cloud-config"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}},
        ],
    }
    if s.namespace == "kube-system":  # system-* priority classes are limited to kube-system
        pod_spec["priorityClassName"] = "system-cluster-critical"
    return pod_spec


def _deployment(s: InClusterSettings) -> Manifest:
    selector = {"app.kubernetes.io/name": s.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(s, s.name),
        "spec": {
            "replicas": 1,
            # hostNetwork binds the metrics port on the node: old and new pods cannot overlap
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": _labels(s)}, "spec": _pod_spec(s)},
        },
    }


def render_manifests(settings: InClusterSettings) -> list[Manifest]:
    """The objects to apply, in apply order (pure: no I/O)."""
    s = settings
    out: list[Manifest] = []
    if s.namespace not in PROTECTED_NAMESPACES:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": _meta(s, s.namespace, namespaced=False),
            }
        )
    out += [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(s, s.name)},
        *_rbac(s),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(s, f"{s.name}-cloud-config"),
            "data": {CLOUD_CONFIG_KEY: s.cloud_config},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta(s, f"{s.name}-aws"),
            "type": "Opaque",
            "stringData": dict(s.aws_credentials),
        },
        _deployment(s),
    ]
    return out


def _rbac(s: InClusterSettings) -> list[Manifest]:
    """The service account's cluster-wide rules and its leader-election Lease rules, bound."""
    subject = {"kind": "ServiceAccount", "name": s.name, "namespace": s.namespace}
    cluster_role = f"ccm-lab:{s.name}"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(s, cluster_role, namespaced=False),
            "rules": [r.render() for r in CLUSTER_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(s, cluster_role, namespaced=False),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role,
            },
            "subjects": [subject],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(s, f"{s.name}:leader-election"),
            "rules": [r.render() for r in lease_rules(s.lease_name)],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(s, f"{s.name}:leader-election"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{s.name}:leader-election",
            },
            "subjects": [subject],
        },
    ]


def to_yaml(manifests: Sequence[Manifest]) -> str:
    """One multi-document YAML stream, as ``kubectl apply -f -`` reads it."""
    return yaml.safe_dump_all(list(manifests), sort_keys=False, default_flow_style=False)
