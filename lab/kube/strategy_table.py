"""Which strategy serves each resource type: the one table over every strategy module.

Role: :func:`build_strategies` gives the store (``store.py``) one strategy instance per
(group, plural), the Service strategy with the cluster's service CIDR and NodePort range.
Neighbours: the strategies themselves live in ``strategies.py`` (the generic base and the
data plane's kinds), ``kinds.py`` (workloads, RBAC, APIService) and ``services.py``
(allocation); each of those imports the base class, so the table that names them all sits
above them here rather than in ``strategies.py`` (which would close an import circle).
"""

from __future__ import annotations

from lab.kube import endpointslices, kinds, services
from lab.kube import strategies as S
from lab.kube.objects import RTKey
from lab.kube.resources import ResourceType

#: the strategy class of every kind that behaves specially (the rest get ``Strategy``)
SPECIAL: dict[RTKey, type[S.Strategy]] = {
    ("", "namespaces"): S.NamespaceStrategy,
    ("", "nodes"): S.NodeStrategy,
    ("", "pods"): S.PodStrategy,
    ("", "secrets"): S.SecretStrategy,
    ("", "events"): S.EventStrategy,
    ("events.k8s.io", "events"): S.EventsV1Strategy,
    ("", "serviceaccounts"): S.ServiceAccountStrategy,
    ("apps", "deployments"): S.DeploymentStrategy,
    ("apps", "replicasets"): S.ReplicaSetStrategy,
    ("coordination.k8s.io", "leases"): S.LeaseStrategy,
    ("discovery.k8s.io", "endpointslices"): endpointslices.EndpointSliceStrategy,
    **kinds.SPECIAL,
}


def build_strategies(
    resources: tuple[ResourceType, ...], *, service_cidr: str, node_port_range: tuple[int, int]
) -> dict[RTKey, S.Strategy]:
    """One strategy per (group, plural)."""
    out: dict[RTKey, S.Strategy] = {}
    for rt in resources:
        key = (rt.group, rt.plural)
        if key == ("", "services"):
            out[key] = services.ServiceStrategy(rt, cidr=service_cidr, node_ports=node_port_range)
        else:
            out[key] = SPECIAL.get(key, S.Strategy)(rt)
    return out
