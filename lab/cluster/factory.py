"""Build the provider a :class:`~lab.cluster.base.ProviderChoice` names.

The orchestration layer calls :func:`choose_provider` (``lab.cluster.base``) and then
:func:`make_provider`; imports of the implementations are local so choosing ``existing`` never
imports the simulator, and ``kind`` never needs a Docker SDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.cluster.base import ClusterProvider


def make_provider(
    backend: str,
    *,
    name: str,
    state_dir: Path,
    kubeconfig: Path | None = None,
    **options: Any,
) -> ClusterProvider:
    """``sim`` / ``kind`` → a new provider for cluster ``name`` under ``state_dir``;
    ``existing`` → attach to ``kubeconfig``. ``options`` go to the provider's constructor."""
    if backend == "sim":
        from lab.cluster.sim import SimProvider

        return SimProvider(name, state_dir=state_dir, **options)
    if backend == "kind":
        from lab.cluster.kind import KindProvider

        return KindProvider(name, state_dir=state_dir, **options)
    if backend == "existing":
        if kubeconfig is None:
            raise ValueError("backend 'existing' needs kubeconfig=<path to a kubeconfig>")
        from lab.cluster.existing import ExistingProvider

        return ExistingProvider(kubeconfig, **options)
    raise ValueError(f"backend {backend!r} is not one of sim, kind, existing")
