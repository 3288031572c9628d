"""What a fresh cluster contains: kind's namespaces and services, per-namespace companions.

Seeded at start and after every reset (``apiserver-spec.md`` §6.4): namespaces ``default``,
``kube-system``, ``kube-public``, ``kube-node-lease``; Services ``default/kubernetes`` (first
service IP, 443 -> 6443) and ``kube-system/kube-dns`` (.10); and in every namespace the
``default`` ServiceAccount and ``kube-root-ca.crt`` ConfigMap that kube-controller-manager
would add (created synchronously with the namespace).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lab.kube.store import Store

SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def seed_defaults(store: Store) -> None:
    """The namespaces and services a fresh kind cluster has."""
    ns_rt = store.rt("", "namespaces")
    for ns in SEED_NAMESPACES:
        if store.find(ns_rt, "", ns) is None:
            store.writer.create(ns_rt, "", {"metadata": {"name": ns}}, manager="kube-apiserver")
    svc = store.rt("", "services")
    seeds: list[tuple[str, dict[str, Any]]] = [
        (
            "default",
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "clusterIP": _first_service_ip(store),
                    "ports": [
                        {"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}
                    ],
                },
            },
        ),
        (
            "kube-system",
            {
                "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns"}},
                "spec": {
                    "clusterIP": _service_ip(store, 10),
                    "selector": {"k8s-app": "kube-dns"},
                    "ports": [
                        {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": 53},
                        {"name": "dns-tcp", "protocol": "TCP", "port": 53, "targetPort": 53},
                        {
                            "name": "metrics",
                            "protocol": "TCP",
                            "port": 9153,
                            "targetPort": 9153,
                        },
                    ],
                },
            },
        ),
    ]
    for ns, body in seeds:
        if store.find(svc, ns, body["metadata"]["name"]) is None:
            store.writer.create(svc, ns, body, manager="kube-apiserver")


def _service_ip(store: Store, offset: int) -> str:
    strategy = store.strategies[("", "services")]
    net = getattr(strategy, "network", ipaddress.ip_network("10.96.0.0/16"))
    return str(net.network_address + offset)


def _first_service_ip(store: Store) -> str:
    return _service_ip(store, 1)


def namespace_companions(store: Store, ns: str) -> None:
    """What kube-controller-manager adds to every namespace: SA ``default``, root CA map."""
    sa, cm = store.rt("", "serviceaccounts"), store.rt("", "configmaps")
    if store.find(sa, ns, "default") is None:
        store.writer.create(
            sa, ns, {"metadata": {"name": "default"}}, manager="kube-controller-manager"
        )
    if store.find(cm, ns, "kube-root-ca.crt") is None:
        store.writer.create(
            cm,
            ns,
            {
                "metadata": {
                    "name": "kube-root-ca.crt",
                    "annotations": {"kubernetes.io/description": _CA_DESCRIPTION},
                },
                "data": {"ca.crt": store.ca_pem},
            },
            manager="kube-controller-manager",
        )
