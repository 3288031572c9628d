"""Cluster providers: ``sim`` (API simulator + kubelet stand-in), ``kind`` and ``existing``.

``base`` holds the interface, the spec types and provider selection (:func:`choose_provider`),
``factory`` builds the chosen provider (:func:`make_provider`), ``steps`` is the ordered-steps
framework, ``kind_config`` the kind config renderer, ``node_shapes`` the Node/Lease builders,
``kubelet`` the node-registration stand-in the ``sim`` provider runs, and ``kubeapi`` the small
wire-JSON helpers over the official client.

Typical use by the orchestration layer (``KubeVersion`` from ``lab.versions.release``)::

    choice = choose_provider(requested_backend)          # ProviderChoice(name, reason)
    provider = make_provider(choice.name, name="lab", state_dir=Path(".lab/lab"))
    provider.provision(ClusterSpec("lab", KubeVersion.parse("1.29"), nodes), progress=reporter)
    ...
    provider.delete()
"""

from lab.cluster.base import (
    Capabilities,
    ClusterProvider,
    ClusterSpec,
    NodeInfo,
    NodeSpec,
    ProviderChoice,
    Role,
    choose_provider,
)
from lab.cluster.factory import make_provider
from lab.cluster.steps import ProgressReporter, ProvisionError

__all__ = [
    "Capabilities",
    "ClusterProvider",
    "ClusterSpec",
    "NodeInfo",
    "NodeSpec",
    "ProgressReporter",
    "ProviderChoice",
    "ProvisionError",
    "Role",
    "choose_provider",
    "make_provider",
]
