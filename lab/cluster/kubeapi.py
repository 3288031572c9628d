"""Small helpers for calling the official Kubernetes client and getting wire JSON back.

The kubelet stand-in (``lab.cluster.kubelet``) and the node patch helpers (``lab.nodes``) use
``kubernetes.client.CoreV1Api``/``CoordinationV1Api`` methods, but with ``_preload_content=False``
so they work on the JSON the server sent (camelCase keys, RFC 3339 strings) rather than on the
client's pydantic models. Patch bodies always name their content type: the client would otherwise
pick ``application/json-patch+json`` for a dict.
"""

from __future__ import annotations

import json
from typing import Any, cast

import urllib3

from lab.cluster.base import NodeInfo, NodeName, ProviderID, Role
from lab.versions.provisioning import (
    ANNOTATION_PROVIDED_NODE_IP,
    LABEL_ROLE_CONTROL_PLANE,
    LABEL_ROLE_MASTER,
)

SMP = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def raw(response: object) -> dict[str, Any]:
    """The JSON object of a ``_preload_content=False`` response."""
    data = cast(urllib3.HTTPResponse, response).data
    parsed = json.loads(data) if data else {}
    if not isinstance(parsed, dict):
        raise TypeError(f"expected a JSON object from the API server, got {type(parsed).__name__}")
    return parsed


def node_info(node: dict[str, Any]) -> NodeInfo:
    """A :class:`NodeInfo` from a Node's JSON (role from kubeadm's role labels)."""
    labels = node.get("metadata", {}).get("labels") or {}
    control_plane = LABEL_ROLE_CONTROL_PLANE in labels or LABEL_ROLE_MASTER in labels
    addresses = node.get("status", {}).get("addresses") or []
    ip = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), None)
    annotations = node.get("metadata", {}).get("annotations") or {}
    ip = ip or annotations.get(ANNOTATION_PROVIDED_NODE_IP)
    provider_id = (node.get("spec") or {}).get("providerID") or None
    return NodeInfo(
        NodeName(node["metadata"]["name"]),
        Role.CONTROL_PLANE if control_plane else Role.WORKER,
        ip,
        ProviderID(provider_id) if provider_id else None,
    )


def list_node_infos(api_client: Any) -> list[NodeInfo]:
    """Every Node in the cluster behind ``api_client``, sorted by name."""
    from kubernetes import client

    items = raw(client.CoreV1Api(api_client).list_node(_preload_content=False)).get("items") or []
    return sorted((node_info(n) for n in items), key=lambda n: n.name)
