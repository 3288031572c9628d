"""Pure builders for the objects a kubelet with ``--cloud-provider=external`` registers.

:func:`node_manifest` returns the ``v1.Node`` a kubelet of a given Kubernetes version (joined by
kubeadm, as kind does) would create, and :func:`lease_manifest` its ``kube-node-lease`` Lease. No
I/O: the stand-in in ``lab.cluster.kubelet`` sends them, and tests check them per version.

What is version-dependent (docs/reference/peers.md §1.2, upstream-ccm.md §6-§7,
``lab.versions.provisioning``):

* role labels kubeadm applies to control planes (``master`` ≤ 1.23, ``control-plane`` ≥ 1.20,
  ``exclude-from-external-load-balancers`` ≥ 1.21) and its NoSchedule taints (``master`` ≤ 1.24,
  ``control-plane`` ≥ 1.24); workers get no role label.
* initial ``status.addresses``: with a specific ``--node-ip`` every version seeds
  ``InternalIP=<ip>`` + ``Hostname=<name>``; without ``--node-ip`` kubelets up to 1.28 still seed
  them, 1.29+ leave addresses empty for the CCM; ``--node-ip=0.0.0.0`` seeds the default address
  again from 1.30.
* ``status.nodeInfo.kubeletVersion``; ``kubeProxyVersion`` (the same string) only before 1.33:
  KEP-4004's ``DisableNodeKubeProxyVersion`` became default-on in 1.33 (k/k#129713; it was
  briefly on in 1.31.0 and reverted in 1.31.1 by k/k#126720, which is not modelled).

Always present: the ``node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule`` taint,
and ``alpha.kubernetes.io/provided-node-ip`` when ``--node-ip`` is a specific address (kind
always passes one). Fields a kube-controller-manager adds later (``podCIDR``, the TTL annotation)
and kubeadm's CRI-socket annotation are left out; nodeInfo strings other than the versions are
illustrative but stable (derived from the node name).
"""

from __future__ import annotations

import enum
import ipaddress
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from lab.cluster.base import Role
from lab.versions.provisioning import (
    ANNOTATION_PROVIDED_NODE_IP,
    LABEL_EXCLUDE_FROM_LB,
    TAINT_UNINITIALIZED,
    kubeadm_control_plane_labels,
    kubeadm_control_plane_taints,
    kubelet_seeds_addresses_without_node_ip,
    kubelet_seeds_default_address_for_unspecified_ip,
)
from lab.versions.release import KubeVersion, node_image

NODE_LEASE_NAMESPACE = "kube-node-lease"
#: kubelet's ``nodeLeaseDurationSeconds`` default; it renews every quarter of it (10 s).
LEASE_DURATION_SECONDS = 40

DEFAULT_CAPACITY: Mapping[str, str] = {
    "cpu": "2",
    "ephemeral-storage": "61202244Ki",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "8148412Ki",
    "pods": "110",
}

# kubelet's condition vocabulary (pkg/kubelet/nodestatus/setters.go)
HEALTHY_CONDITIONS: tuple[tuple[str, str, str], ...] = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "KubeletReady", "kubelet is posting ready status"),
)


class NodeIPFlag(enum.Enum):
    """How the kubelet's ``--node-ip`` was given."""

    SPECIFIC = "specific"  # --node-ip=<ip> (what kind passes)
    UNSPECIFIED = "unspecified"  # --node-ip=0.0.0.0
    ABSENT = "absent"  # no --node-ip


class NodeManifest(TypedDict):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]
    status: dict[str, Any]


class LeaseManifest(TypedDict):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


def rfc3339(moment: datetime) -> str:
    """``metav1.Time``: seconds precision, UTC, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: microseconds, UTC, ``Z`` (Lease renewTime/acquireTime)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kubelet_version_string(version: KubeVersion) -> str:
    """``vMAJOR.MINOR.PATCH``; a missing patch takes the pinned node image's, else 0."""
    if version.patch is not None:
        return str(version)
    try:
        return str(node_image(version).version)
    except ValueError:
        return f"v{version.major}.{version.minor}.0"


def _stable_uuid(name: str, what: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{what}.{name}.ccm-lab"))


def node_addresses(
    version: KubeVersion, *, name: str, ip: str, node_ip_flag: NodeIPFlag
) -> list[dict[str, str]]:
    """The addresses the kubelet seeds before the CCM initialises the node."""
    seeded = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]
    if node_ip_flag is NodeIPFlag.SPECIFIC:
        return seeded
    if node_ip_flag is NodeIPFlag.ABSENT:
        return seeded if kubelet_seeds_addresses_without_node_ip(version) else []
    return seeded if kubelet_seeds_default_address_for_unspecified_ip(version) else []


def healthy_conditions(now: datetime) -> list[dict[str, str]]:
    stamp = rfc3339(now)
    return [
        {
            "type": ctype,
            "status": "True" if ctype == "Ready" else "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for ctype, reason, message in HEALTHY_CONDITIONS
    ]


def node_manifest(
    *,
    version: str | KubeVersion,
    name: str,
    ip: str,
    role: Role = Role.WORKER,
    provider_id: str | None = None,
    node_ip_flag: NodeIPFlag = NodeIPFlag.SPECIFIC,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    control_plane_taints: bool = True,
    exclusion_label: bool = True,
    arch: str = "amd64",
    now: datetime | None = None,
) -> NodeManifest:
    """The Node a ``--cloud-provider=external`` kubelet of ``version`` registers.

    ``ip`` is the node's primary address (what ``--node-ip`` names, or what the kubelet would
    detect); ``labels`` are extra ``--node-labels``. ``control_plane_taints=False`` and
    ``exclusion_label=False`` model what kind does to a one-node cluster after kubeadm (it
    removes the control-plane taints, and from kind v0.22.0 the exclusion label; see
    ``lab.versions.provisioning.kind_single_node_keeps_exclusion_label``).
    """
    kube = KubeVersion.parse(version)
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise ValueError(f"node {name!r}: ip {ip!r} is not an IP address") from None
    moment = now or datetime.now(UTC)
    node_labels, taints = _labels_and_taints(
        kube,
        name,
        role,
        arch=arch,
        extra=labels or {},
        control_plane_taints=control_plane_taints,
        exclusion_label=exclusion_label,
    )
    annotations = {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    if node_ip_flag is NodeIPFlag.SPECIFIC:
        annotations[ANNOTATION_PROVIDED_NODE_IP] = ip
    spec: dict[str, Any] = {"taints": taints}
    if provider_id is not None:
        spec["providerID"] = provider_id
    resources = dict(capacity or DEFAULT_CAPACITY)
    status: dict[str, Any] = {
        "addresses": node_addresses(kube, name=name, ip=ip, node_ip_flag=node_ip_flag),
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "conditions": healthy_conditions(moment),
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": _node_info(kube, name, arch=arch),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels, "annotations": annotations},
        "spec": spec,
        "status": status,
    }


def _labels_and_taints(
    kube: KubeVersion,
    name: str,
    role: Role,
    *,
    arch: str,
    extra: Mapping[str, str],
    control_plane_taints: bool,
    exclusion_label: bool,
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The kubelet's own labels, kubeadm's role labels and taints for a control plane (as kind
    leaves them), the ``--node-labels`` and the uninitialized taint."""
    node_labels: dict[str, str] = {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    taints: list[dict[str, str]] = []
    if role is Role.CONTROL_PLANE:
        node_labels.update(kubeadm_control_plane_labels(kube))
        if not exclusion_label:
            node_labels.pop(LABEL_EXCLUDE_FROM_LB, None)
        if control_plane_taints:
            keys = kubeadm_control_plane_taints(kube)
            taints += [{"key": k, "effect": "NoSchedule"} for k in keys]
    node_labels.update(extra)
    taints.append({"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"})
    return node_labels, taints


def _node_info(kube: KubeVersion, name: str, *, arch: str) -> dict[str, Any]:
    """``status.nodeInfo``: stable per node name; no kube-proxy version from 1.33."""
    kubelet_version = kubelet_version_string(kube)
    return {
        "architecture": arch,
        "bootID": _stable_uuid(name, "boot"),
        "containerRuntimeVersion": "containerd://1.7.24",
        "kernelVersion": "6.8.0-ccm-lab",
        "kubeProxyVersion": kubelet_version if not kube.at_least(33) else "",
        "kubeletVersion": kubelet_version,
        "machineID": uuid.UUID(_stable_uuid(name, "machine")).hex,
        "operatingSystem": "linux",
        "osImage": "Debian GNU/Linux 12 (bookworm)",
        "systemUUID": _stable_uuid(name, "system"),
    }


def lease_manifest(
    *, name: str, node_uid: str | None = None, now: datetime | None = None
) -> LeaseManifest:
    """The node's heartbeat Lease, owned by its Node (so it is garbage-collected with it)."""
    metadata: dict[str, Any] = {"name": name, "namespace": NODE_LEASE_NAMESPACE}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}
        ]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now or datetime.now(UTC)),
        },
    }
