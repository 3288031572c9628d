"""The one way the lab makes a Kubernetes client: the official client from a kubeconfig.

Everything in the lab that talks to a cluster (the simulator's own ready-made client, the
cluster providers, the kubelet stand-in, ``invoke lab.*``) gets its ``ApiClient`` here, so TLS,
tokens and contexts are read the same way everywhere. A bottom-layer module: it imports nothing
of the lab.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def new_api_client(kubeconfig: Path | str, *, context: str | None = None) -> Any:
    """A new ``kubernetes.client.ApiClient`` for ``kubeconfig``; the caller closes it."""
    from kubernetes import config

    return config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), context=context
    )


def kubeconfig_server(kubeconfig: Path | str, *, context: str | None = None) -> str | None:
    """The API server URL ``kubeconfig`` points at (its current or the given context)."""
    try:
        doc: Any = yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    wanted = context or doc.get("current-context")
    ctx = next((c for c in doc.get("contexts") or [] if c.get("name") == wanted), None)
    cluster_name = (ctx or {}).get("context", {}).get("cluster")
    for cluster in doc.get("clusters") or []:
        if cluster.get("name") == cluster_name:
            server = (cluster.get("cluster") or {}).get("server")
            return str(server) if server else None
    return None
