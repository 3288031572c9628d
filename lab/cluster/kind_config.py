"""Version-aware kind cluster configs for a cluster whose nodes run "on EC2".

Pure rendering, no I/O: :func:`config_document` builds the ``kind.x-k8s.io/v1alpha4`` Cluster
object for a Kubernetes version, :func:`render_config` dumps it as YAML. What changes with the
version (docs/reference/peers.md §1.1, checked against kind's ``pkg/cluster/internal/kubeadm``):

* the kubeadm API of every patch: ``v1beta2`` below 1.23, ``v1beta3`` up to 1.35, ``v1beta4``
  from 1.36. Patches name their ``apiVersion`` explicitly, so kind matches them by kind *and*
  version; in ``v1beta4`` ``extraArgs``/``kubeletExtraArgs`` are ``[{name, value}]`` lists, which
  kind >= v0.32.0 merges by name into its own (keeping its ``node-ip``/``node-labels``).
* ``cloud-provider: external`` goes on every kubelet and on kube-controller-manager always, and
  on kube-apiserver only while the flag exists (< 1.33; deprecated 1.29, removed 1.33 — setting
  it on 1.33+ stops the apiserver from starting).
* each node's ``provider-id`` kubelet argument (``aws:///<az>/<instance-id>``) replaces kind's
  default ``kind://docker/<cluster>/<node>``; it goes in the node's own patch
  (``InitConfiguration`` for the first control plane, ``JoinConfiguration`` for the rest),
  because ``KubeletConfiguration`` is read from the first node only.
* the pinned ``kindest/node`` image (``lab.versions.release.NODE_IMAGES``).

Node IPs: kind passes ``--node-ip`` itself (the container's address on the Docker network) and
kubelet refuses an address that is not on one of its interfaces, so the config cannot choose
IPs. The provider instead discovers the container IPs after creation and hands them to the lab,
which aligns the fake EC2 instances (see ``lab.cluster.kind``).

Rendered examples for 1.22, 1.29, 1.33 and latest live in ``kind/examples/``; a test keeps them
identical to this module's output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from lab.cluster.base import NodeSpec, Role
from lab.versions.provisioning import apiserver_has_cloud_provider_flag, kubeadm_api_version
from lab.versions.release import KubeVersion, node_image

KIND_API_VERSION = "kind.x-k8s.io/v1alpha4"


def kind_node_names(cluster: str, roles: Sequence[Role]) -> list[str]:
    """The node (and container) names kind gives ``roles`` in order: ``<cluster>-<role>``
    for the first of a role, then ``<cluster>-<role>2``, ``3`` … (kind's node namer)."""
    counts: dict[Role, int] = {}
    names = []
    for role in roles:
        counts[role] = counts.get(role, 0) + 1
        suffix = "" if counts[role] == 1 else str(counts[role])
        names.append(f"{cluster}-{role.value}{suffix}")
    return names


def _args(api: str, args: Mapping[str, str]) -> dict[str, str] | list[dict[str, str]]:
    """extraArgs in the form ``api`` expects: a map before v1beta4, a name/value list after."""
    if api.endswith("v1beta4"):
        return [{"name": k, "value": v} for k, v in args.items()]
    return dict(args)


def _patch(doc: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False)


def cluster_patches(version: KubeVersion) -> list[str]:
    """Cluster-wide kubeadm patches: external cloud provider on KCM, kubelets (and apiserver
    while the flag exists)."""
    api = kubeadm_api_version(version)
    external = {"cloud-provider": "external"}
    cluster_cfg: dict[str, Any] = {
        "apiVersion": api,
        "kind": "ClusterConfiguration",
    }
    if apiserver_has_cloud_provider_flag(version):
        cluster_cfg["apiServer"] = {"extraArgs": _args(api, external)}
    cluster_cfg["controllerManager"] = {"extraArgs": _args(api, external)}
    kubelet = {"kubeletExtraArgs": _args(api, external)}
    return [
        _patch(cluster_cfg),
        _patch({"apiVersion": api, "kind": "InitConfiguration", "nodeRegistration": kubelet}),
        _patch({"apiVersion": api, "kind": "JoinConfiguration", "nodeRegistration": kubelet}),
    ]


def node_patch(version: KubeVersion, *, provider_id: str, first_control_plane: bool) -> str:
    """The per-node patch that sets the kubelet's ``--provider-id``."""
    api = kubeadm_api_version(version)
    kind = "InitConfiguration" if first_control_plane else "JoinConfiguration"
    return _patch(
        {
            "apiVersion": api,
            "kind": kind,
            "nodeRegistration": {"kubeletExtraArgs": _args(api, {"provider-id": provider_id})},
        }
    )


def config_document(
    *,
    cluster_name: str,
    version: str | KubeVersion,
    nodes: Sequence[NodeSpec],
    image: str | None = None,
    api_server_address: str = "127.0.0.1",
    node_labels: Mapping[str, str] | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """The kind ``Cluster`` object (as a dict) for ``nodes`` at ``version``.

    ``image`` overrides the pinned ``kindest/node`` image (e.g. a locally built one); it must
    run Kubernetes ``version``, because patches name the kubeadm API of that version and kind
    silently skips a patch whose ``apiVersion`` does not match its generated config.
    ``node_labels`` become kubelet ``--node-labels`` on every node, merged under each node's
    own ``NodeSpec.labels`` (kubelet refuses most ``kubernetes.io`` keys there; topology and
    instance-type keys are allowed).
    """
    kube = KubeVersion.parse(version)
    if not nodes:
        raise ValueError("nodes must not be empty")
    roles = [n.role for n in nodes]
    if roles[0] is not Role.CONTROL_PLANE:
        raise ValueError(
            f"nodes[0].role must be control-plane (kind initialises the first node), "
            f"got {roles[0].value!r}"
        )
    image_ref = image or node_image(kube).reference
    names = kind_node_names(cluster_name, roles)
    doc_nodes: list[dict[str, Any]] = []
    for index, (spec, name) in enumerate(zip(nodes, names, strict=True)):
        if spec.name is not None and spec.name != name:
            raise ValueError(
                f"nodes[{index}].name {spec.name!r} differs from the name kind will give it "
                f"({name!r}); leave name unset for the kind backend"
            )
        node: dict[str, Any] = {"role": spec.role.value, "image": image_ref}
        merged_labels = {**(node_labels or {}), **spec.labels}
        if merged_labels:
            node["labels"] = merged_labels
        if spec.provider_id is not None:
            node["kubeadmConfigPatches"] = [
                node_patch(kube, provider_id=spec.provider_id, first_control_plane=index == 0)
            ]
        doc_nodes.append(node)
    doc: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": KIND_API_VERSION,
        "name": cluster_name,
        "networking": {"apiServerAddress": api_server_address},
    }
    if feature_gates:
        doc["featureGates"] = dict(feature_gates)
    doc["kubeadmConfigPatches"] = cluster_patches(kube)
    doc["nodes"] = doc_nodes
    return doc


class _LiteralDumper(yaml.SafeDumper):
    """Dumps multi-line strings (the kubeadm patches) as ``|`` blocks, like hand-written configs."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def render_config(
    *,
    cluster_name: str,
    version: str | KubeVersion,
    nodes: Sequence[NodeSpec],
    image: str | None = None,
    api_server_address: str = "127.0.0.1",
    node_labels: Mapping[str, str] | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> str:
    """YAML for :func:`config_document` (same arguments), with a provenance header."""
    kube = KubeVersion.parse(version)
    doc = config_document(
        cluster_name=cluster_name,
        version=kube,
        nodes=nodes,
        image=image,
        api_server_address=api_server_address,
        node_labels=node_labels,
        feature_gates=feature_gates,
    )
    apiserver = (
        "set" if apiserver_has_cloud_provider_flag(kube) else "omitted (flag removed in 1.33)"
    )
    header = (
        f"# kind cluster config rendered by lab.cluster.kind_config for kubernetes {kube}\n"
        f"# kubeadm API {kubeadm_api_version(kube)}; apiserver --cloud-provider {apiserver}\n"
    )
    body = yaml.dump(doc, Dumper=_LiteralDumper, sort_keys=False, default_flow_style=False)
    return header + body
