"""Any controller build's image in-cluster on kind (``invoke lab.up --controller-image IMAGE``).

Role: issue 16 scope 1's in-cluster option for *another* build, e.g.
``registry.k8s.io/provider-aws/cloud-controller-manager:v1.33.0`` or a local build of it. The
lab runs it the way kubernetes/cloud-provider-aws's ``examples/existing-cluster/base`` (at
v1.33.0) runs the upstream controller: a DaemonSet in ``kube-system`` on the control-plane nodes
(``hostNetwork``, tolerating the uninitialized and control-plane taints), the service account
``cloud-controller-manager`` bound to a ClusterRole with upstream's rules and to
``extension-apiserver-authentication-reader``, and upstream's flags (``--cloud-provider=aws``,
``--use-service-account-credentials=true``, ``--configure-cloud-routes=false``). The manifests
are written here as data (:func:`render_image_manifests`), not copied.

What the lab adds, so that the pod reaches the lab: the cloud config (a ConfigMap mounted at
``/etc/kubernetes/cloud/cloud.conf``, ``--cloud-config``) whose ``[ServiceOverride]`` sections
point EC2, ELB and STS at the lab's AWS endpoint **on the nodes' gateway** (inside a node
``127.0.0.1`` is the node), ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` at the lab's metadata service
there, the AWS SDKs' endpoint variables, ``AWS_REGION`` and the lab's dummy credentials (a
Secret); the controllers a single-cluster lab runs (``--controllers=cloud-node,
cloud-node-lifecycle,service``, as :func:`lab.controllerproc.upstream_preset`).

:func:`deploy_image` loads the image into the nodes (``kind load docker-image``, with the
provider's ``docker save`` fallback), applies the manifests and waits for the DaemonSet's
rollout; :func:`deploy_image_to_lab` does so for a running kind lab (``lab.up`` calls it after
the servers are up, instead of starting a local controller).

Neighbours: :mod:`lab.incluster` (our controller's own image and least-privilege RBAC; shares
``Rule``, ``to_yaml`` and the lab lookup), :mod:`lab.cluster.kind` (image loading).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.controllerproc import LAB_AWS_ENV, render_cloud_config
from lab.exec import CommandError, Runner, SubprocessRunner
from lab.incluster.deploy import ImageLoadingCluster, kind_lab_target
from lab.incluster.manifests import (
    CLOUD_CONFIG_DIR,
    CLOUD_CONFIG_KEY,
    Manifest,
    Rule,
    lab_endpoints,
    to_yaml,
)
from lab.spec.rules import image_refusal

log = logging.getLogger(__name__)

NAME = "aws-cloud-controller-manager"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cloud-controller-manager"
CLUSTER_ROLE = "system:cloud-controller-manager"

#: The ClusterRole upstream grants its controller (``examples/existing-cluster/base/
#: cluster-role.yaml`` at v1.33.0), as data.
UPSTREAM_RULES: tuple[Rule, ...] = (
    Rule("", ("events",), ("create", "patch", "update")),
    Rule("", ("nodes",), ("*",)),
    Rule("", ("nodes/status",), ("patch",)),
    Rule("", ("services",), ("list", "patch", "update", "watch")),
    Rule("", ("services/status",), ("list", "patch", "update", "watch")),
    Rule("", ("serviceaccounts",), ("create", "get", "list", "watch")),
    Rule("", ("persistentvolumes",), ("get", "list", "update", "watch")),
    Rule("", ("endpoints",), ("create", "get", "list", "watch", "update")),
    Rule("coordination.k8s.io", ("leases",), ("create", "get", "list", "watch", "update")),
    Rule("", ("serviceaccounts/token",), ("create",)),
)


@dataclasses.dataclass(frozen=True)
class ImageSettings:
    """What the manifests of an in-cluster build depend on; ``cloud_config`` is the text."""

    image: str
    cloud_config: str
    aws_endpoint: str
    imds_endpoint: str
    region: str = "us-east-1"
    aws_credentials: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: dict(LAB_AWS_ENV)
    )
    verbosity: int = 2

    def __post_init__(self) -> None:
        check_image(self.image)


def check_image(image: str, *, flag: str = "--controller-image") -> str:
    """An image reference as Docker takes it, or ValueError naming ``flag`` (the spec's rule
    ``image-reference`` judges it: :func:`lab.spec.rules.image_refusal`)."""
    refusal = image_refusal(image, flag)
    if refusal is not None:
        raise ValueError(refusal)
    return image


def image_args(s: ImageSettings) -> list[str]:
    """The container's arguments: upstream's example flags, the lab's cloud config and the
    controllers a single-cluster lab runs."""
    return [
        f"--v={s.verbosity}",
        "--cloud-provider=aws",
        f"--cloud-config={CLOUD_CONFIG_DIR}/{CLOUD_CONFIG_KEY}",
        "--use-service-account-credentials=true",
        "--configure-cloud-routes=false",
        "--controllers=cloud-node,cloud-node-lifecycle,service",
    ]


def _env(s: ImageSettings) -> list[dict[str, str]]:
    pairs = [
        ("AWS_REGION", s.region),
        ("AWS_DEFAULT_REGION", s.region),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.imds_endpoint),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv4"),
        ("AWS_ENDPOINT_URL_EC2", s.aws_endpoint),
        ("AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING", s.aws_endpoint),
        ("AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2", s.aws_endpoint),
        ("AWS_ENDPOINT_URL_STS", s.aws_endpoint),
    ]
    return [{"name": k, "value": v} for k, v in pairs]


def _daemonset(s: ImageSettings) -> Manifest:
    labels = {"k8s-app": NAME, "app.kubernetes.io/part-of": "ccm-lab"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": NAME}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                    "tolerations": [
                        {
                            "key": "node.cloudprovider.kubernetes.io/uninitialized",
                            "value": "true",
                            "effect": "NoSchedule",
                        },
                        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
                    ],
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "hostNetwork": True,
                    "containers": [
                        {
                            "name": NAME,
                            "image": s.image,
                            # a tag loaded with `kind load` is used as is, never pulled again
                            "imagePullPolicy": "IfNotPresent",
                            "args": image_args(s),
                            "env": _env(s),
                            "envFrom": [{"secretRef": {"name": f"{NAME}-aws"}}],
                            "resources": {"requests": {"cpu": "200m"}},
                            "volumeMounts": [
                                {
                                    "name": "cloud-config",
                                    "mountPath": CLOUD_CONFIG_DIR,
                                    "readOnly": True,
                                }
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "cloud-config", "configMap": {"name": f"{NAME}-cloud-config"}}
                    ],
                },
            },
        },
    }


def render_image_manifests(s: ImageSettings) -> list[Manifest]:
    """The objects to apply, in apply order (pure)."""
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    rbac = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": CLUSTER_ROLE},
            "rules": [r.render() for r in UPSTREAM_RULES],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": CLUSTER_ROLE},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": CLUSTER_ROLE},
            "subjects": [subject],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": f"{SERVICE_ACCOUNT}:apiserver-authentication-reader",
                "namespace": NAMESPACE,
            },
            "roleRef": {
                "apiGroup": rbac,
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": [subject],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{NAME}-cloud-config", "namespace": NAMESPACE},
            "data": {CLOUD_CONFIG_KEY: s.cloud_config},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{NAME}-aws", "namespace": NAMESPACE},
            "type": "Opaque",
            "stringData": dict(s.aws_credentials),
        },
        _daemonset(s),
    ]


def deploy_image(
    provider: ImageLoadingCluster,
    *,
    settings: ImageSettings,
    runner: Runner,
    kubeconfig: Path,
    kubectl: str = "kubectl",
    wait_timeout: float | None = 300.0,
) -> list[Manifest]:
    """Load the image into the kind nodes, apply the manifests, wait for the DaemonSet."""
    manifests = render_image_manifests(settings)
    log.info("loading %s into kind cluster %s", settings.image, provider.name)
    provider.load_image(settings.image)
    base = [kubectl, "--kubeconfig", str(kubeconfig)]
    runner.run([*base, "apply", "-f", "-"], input_text=to_yaml(manifests), timeout=120)
    if wait_timeout is not None:
        runner.run(
            [
                *base,
                "rollout",
                "status",
                f"daemonset/{NAME}",
                "--namespace",
                NAMESPACE,
                f"--timeout={int(wait_timeout)}s",
            ],
            timeout=wait_timeout + 30,
        )
    return manifests


def restart_image_in_lab(
    name: str,
    *,
    root: Path | None = None,
    runner: Runner | None = None,
    kubectl: str = "kubectl",
    wait_timeout: float = 300.0,
) -> None:
    """Restart the in-cluster controller of the kind lab ``name`` (``lab.controller.restart``
    for a lab of ``--controller-image``): ``kubectl rollout restart`` of its DaemonSet, then
    wait for the rollout, as a user would by hand. LabError with the command and its output
    when either fails."""
    from lab.state import LabError

    run = runner or SubprocessRunner()
    target = kind_lab_target(name, root=root, runner=run)
    base = [kubectl, "--kubeconfig", str(target.kubeconfig)]
    where = [f"daemonset/{NAME}", "--namespace", NAMESPACE]
    try:
        run.run([*base, "rollout", "restart", *where], timeout=60)
        run.run(
            [*base, "rollout", "status", *where, f"--timeout={int(wait_timeout)}s"],
            timeout=wait_timeout + 30,
        )
    except CommandError as exc:
        raise LabError(str(exc)) from exc


def deploy_image_to_lab(
    name: str,
    image: str,
    *,
    root: Path | None = None,
    runner: Runner | None = None,
    kubectl: str = "kubectl",
    wait_timeout: float | None = 300.0,
) -> list[Manifest]:
    """Run ``image`` as the controller of the kind lab ``name`` (LabError with the reason)."""
    from lab.state import LabError

    try:
        check_image(image)
    except ValueError as exc:
        raise LabError(str(exc)) from None
    run = runner or SubprocessRunner()
    target = kind_lab_target(name, root=root, runner=run)
    aws_url, imds_url = lab_endpoints(
        target.host, aws_port=target.aws_port, imds_port=target.imds_port
    )
    state: Any = target.state
    settings = ImageSettings(
        image=image,
        cloud_config=render_cloud_config(
            region=state.region, cluster_id=state.cluster_id, aws_endpoint=aws_url
        ),
        aws_endpoint=aws_url,
        imds_endpoint=imds_url,
        region=state.region,
    )
    try:
        return deploy_image(
            target.provider,
            settings=settings,
            runner=run,
            kubeconfig=target.kubeconfig,
            kubectl=kubectl,
            wait_timeout=wait_timeout,
        )
    except CommandError as exc:  # the pasteable command and its output tail
        raise LabError(str(exc)) from exc
