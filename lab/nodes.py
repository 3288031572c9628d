"""Node patches the write-ups applied by hand, as functions (and ``invoke lab.nodes.*`` tasks).

The seeds (docs in ``shared/seeds/``) show people running ``kubectl edit node`` to make a kind
node look like an EC2 node: rewriting ``alpha.kubernetes.io/provided-node-ip`` so the cloud
node controller accepts it, removing ``node-role.kubernetes.io/master`` so a single-node
cluster's control plane is put behind load balancers, and passing ``provider-id``. Each helper
here does one of those through the official client (``kubernetes.client.CoreV1Api``), with JSON
merge patches whose bodies are built by pure ``*_patch`` functions, and fails with an error that
names the node when it does not exist.

``spec.providerID`` is immutable once set: the API server rejects any change except from empty
to a value (``spec.providerID: Forbidden: node updates may not change providerID except from ""
to valid``). :func:`set_provider_id` checks first and raises :class:`ProviderIDImmutable`
instead of sending a doomed request; the way out is deleting the Node and letting its kubelet
re-register with the right ``--provider-id``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from kubernetes import client

from lab.cluster.kubeapi import MERGE_PATCH, raw
from lab.kubeclient import Conflict, NotFound, typed_api
from lab.versions.provisioning import (
    ANNOTATION_PROVIDED_NODE_IP,
    LABEL_ALPHA_EXCLUDE_BALANCER,
    LABEL_EXCLUDE_FROM_LB,
    LABEL_ROLE_MASTER,
)

_AWS_PROVIDER_ID = re.compile(r"^aws:///(?P<az>[a-z0-9-]*)/(?P<id>i-[0-9a-f]{8,17})\Z")
_PROVIDER_ID = re.compile(r"^[a-z][a-z0-9+.-]*://.+\Z")


class NodeNotFound(LookupError):
    def __init__(self, node: str, action: str) -> None:
        self.node = node
        super().__init__(f'{action}: node "{node}" not found')


class ProviderIDImmutable(ValueError):
    def __init__(self, node: str, current: str, requested: str) -> None:
        self.node, self.current, self.requested = node, current, requested
        super().__init__(
            f'node "{node}" already has spec.providerID "{current}"; it cannot be changed to '
            f'"{requested}" (the API server only allows setting it from empty). Delete the Node '
            "and re-register it with the right --provider-id instead."
        )


# --- pure patch bodies ------------------------------------------------------------------


def provided_ip_patch(ip: str) -> dict[str, Any]:
    """Set the provided-node-ip annotation; ``ip`` is one address or a dual-stack pair."""
    parts = [p.strip() for p in ip.split(",")]
    if not 1 <= len(parts) <= 2:
        raise ValueError(f"provided node ip {ip!r}: expected one address or 'ipv4,ipv6'")
    for part in parts:
        try:
            address = ipaddress.ip_address(part)
        except ValueError:
            raise ValueError(f"provided node ip {ip!r}: {part!r} is not an IP address") from None
        if address.is_unspecified:
            raise ValueError(f"provided node ip {ip!r}: {part!r} is unspecified")
    return {"metadata": {"annotations": {ANNOTATION_PROVIDED_NODE_IP: ",".join(parts)}}}


def include_patch() -> dict[str, Any]:
    """Remove every label that keeps a node out of load balancers, in any version: the
    exclusion label, the legacy master role label (honoured up to 1.20) and the alpha
    exclude-balancer label (up to 1.18)."""
    labels = dict.fromkeys((LABEL_EXCLUDE_FROM_LB, LABEL_ROLE_MASTER, LABEL_ALPHA_EXCLUDE_BALANCER))
    return {"metadata": {"labels": labels}}


def exclude_patch(*, legacy_master_label: bool = False) -> dict[str, Any]:
    """Add the exclusion label (value ``true``: from 1.34 only ``false`` means included);
    with ``legacy_master_label`` also the master role label that 1.16-1.20 service
    controllers honoured under ``LegacyNodeRoleBehavior``."""
    labels = {LABEL_EXCLUDE_FROM_LB: "true"}
    if legacy_master_label:
        labels[LABEL_ROLE_MASTER] = ""
    return {"metadata": {"labels": labels}}


def validate_provider_id(provider_id: str) -> str:
    """``<scheme>://…``; for ``aws`` the ``aws:///<az>/i-<hex>`` form the AWS provider parses."""
    if not _PROVIDER_ID.match(provider_id):
        raise ValueError(f"provider id {provider_id!r} is not of the form <scheme>://<id>")
    if provider_id.startswith("aws:") and not _AWS_PROVIDER_ID.match(provider_id):
        raise ValueError(
            f"provider id {provider_id!r} is not of the form aws:///<availability-zone>/i-<hex>"
        )
    return provider_id


def aws_provider_id(availability_zone: str, instance_id: str) -> str:
    return validate_provider_id(f"aws:///{availability_zone}/{instance_id}")


def provider_id_patch(provider_id: str, *, resource_version: str | None = None) -> dict[str, Any]:
    patch: dict[str, Any] = {"spec": {"providerID": validate_provider_id(provider_id)}}
    if resource_version:
        patch["metadata"] = {"resourceVersion": resource_version}
    return patch


# --- API calls --------------------------------------------------------------------------


def _patch(api: client.CoreV1Api, node: str, body: dict[str, Any], action: str) -> dict[str, Any]:
    try:
        answer = typed_api(api).patch_node(
            node, body, _content_type=MERGE_PATCH, _preload_content=False
        )
    except NotFound:
        raise NodeNotFound(node, action) from None
    return raw(answer)


def get_node(api: client.CoreV1Api, node: str, *, action: str = "get") -> dict[str, Any]:
    try:
        return raw(typed_api(api).read_node(node, _preload_content=False))
    except NotFound:
        raise NodeNotFound(node, action) from None


def fix_provided_ip(api: client.CoreV1Api, node: str, ip: str) -> dict[str, Any]:
    """Point ``alpha.kubernetes.io/provided-node-ip`` at ``ip`` (an address the cloud reports)."""
    return _patch(api, node, provided_ip_patch(ip), "fix_provided_ip")


def include(api: client.CoreV1Api, node: str) -> dict[str, Any]:
    """Make ``node`` eligible for load balancers (see :func:`include_patch`)."""
    return _patch(api, node, include_patch(), "include")


def exclude(
    api: client.CoreV1Api, node: str, *, legacy_master_label: bool = False
) -> dict[str, Any]:
    """Keep ``node`` out of load balancers (see :func:`exclude_patch`)."""
    return _patch(api, node, exclude_patch(legacy_master_label=legacy_master_label), "exclude")


def set_provider_id(api: client.CoreV1Api, node: str, provider_id: str) -> dict[str, Any]:
    """Set ``spec.providerID`` on a node that has none; a no-op if it already has this one.

    Raises :class:`ProviderIDImmutable` when a different value is set. The patch carries the
    resourceVersion read, so a concurrent writer (the cloud node controller also fills an
    empty providerID) makes it re-check instead of racing.
    """
    validate_provider_id(provider_id)
    for _ in range(5):
        current = get_node(api, node, action="set_provider_id")
        existing = (current.get("spec") or {}).get("providerID") or ""
        if existing == provider_id:
            return current
        if existing:
            raise ProviderIDImmutable(node, existing, provider_id)
        rv = str(current["metadata"].get("resourceVersion") or "") or None
        try:
            return _patch(
                api,
                node,
                provider_id_patch(provider_id, resource_version=rv),
                "set_provider_id",
            )
        except Conflict:
            continue  # a concurrent writer: read again
    raise RuntimeError(f'set_provider_id: node "{node}" kept changing; gave up after 5 tries')
