"""What a fresh cluster contains: kind's namespaces and services, per-namespace companions.

Seeded at start and after every reset (``apiserver-spec.md`` §6.4): namespaces ``default``,
``kube-system``, ``kube-public``, ``kube-node-lease``; Services ``default/kubernetes`` (first
service IP, 443 -> 6443) with its Endpoints and EndpointSlice (``apiserver_endpoints``) and
``kube-system/kube-dns`` (.10); and in every namespace the
``default`` ServiceAccount and ``kube-root-ca.crt`` ConfigMap that kube-controller-manager
would add (created synchronously with the namespace).

Everything here writes through the writer it is given (``writes.py``; ``writer.store`` is the
store it reads); ``registry.py`` calls :func:`seed_defaults` at start and on reset and hands
:func:`namespace_companions` to the writer as its namespace hook.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from lab.kube import apiserver_endpoints, authentication_trust
from lab.kube.store import Store
from lab.kube.writes import Writer

SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def seed_defaults(writer: Writer) -> None:
    """The namespaces and services a fresh kind cluster has."""
    store = writer.store
    ns_rt = store.rt("", "namespaces")
    for ns in SEED_NAMESPACES:
        if store.find(ns_rt, "", ns) is None:
            writer.create(ns_rt, "", {"metadata": {"name": ns}}, manager="kube-apiserver")
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
                        {
                            "name": "https",
                            "protocol": "TCP",
                            "port": 443,
                            "targetPort": apiserver_endpoints.SECURE_PORT,
                        }
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
            writer.create(svc, ns, body, manager="kube-apiserver")
    seed_api_services(writer)
    seed_rbac(writer)
    # the first run of the kubernetes service controller (ports reconciled too)
    apiserver_endpoints.reconcile(writer, reconcile_ports=True)
    # the start-cluster-authentication-info-controller post-start hook's first sync
    authentication_trust.reconcile(writer)


# kube-apiserver's apiVersionPriorities (cmd/kube-apiserver/app/aggregator.go), for the group
# versions the simulator serves: the autoregister controller makes one local APIService for each
# served group version found in this table (named <version>.<group>, core is "v1.").
API_SERVICE_PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("batch", "v1"): (17400, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
}


_BOOTSTRAP = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
# A few of the RBAC authorizer's bootstrap roles (plugin/pkg/auth/authorizer/rbac/
# bootstrappolicy): the admin's, and what every authenticated user may do (ask about itself,
# read discovery and health). Name -> (rules, groups bound by a ClusterRoleBinding).
BOOTSTRAP_CLUSTER_ROLES: dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]] = {
    "cluster-admin": (
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
        ("system:masters",),
    ),
    "system:basic-user": (
        [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["selfsubjectreviews"],
                "verbs": ["create"],
            },
        ],
        ("system:authenticated",),
    ),
    "system:discovery": (
        [
            {
                "nonResourceURLs": [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
                "verbs": ["get"],
            }
        ],
        ("system:authenticated",),
    ),
    "system:public-info-viewer": (
        [
            {
                "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                "verbs": ["get"],
            }
        ],
        ("system:authenticated", "system:unauthenticated"),
    ),
}


def seed_rbac(writer: Writer) -> None:
    store = writer.store
    roles = store.rt("rbac.authorization.k8s.io", "clusterroles")
    bindings = store.rt("rbac.authorization.k8s.io", "clusterrolebindings")
    meta = {"labels": _BOOTSTRAP, "annotations": _AUTOUPDATE}
    for name, (rules, groups) in BOOTSTRAP_CLUSTER_ROLES.items():
        if store.find(roles, "", name) is None:
            writer.create(
                roles,
                "",
                {"metadata": {"name": name, **meta}, "rules": rules},
                manager="kube-apiserver",
            )
        if store.find(bindings, "", name) is None:
            subjects = [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                for g in groups
            ]
            writer.create(
                bindings,
                "",
                {
                    "metadata": {"name": name, **meta},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": name,
                    },
                    "subjects": subjects,
                },
                manager="kube-apiserver",
            )


def seed_api_services(writer: Writer) -> None:
    """The local APIServices, as the autoregister and availability controllers leave them."""
    store = writer.store
    from lab.kube.objects import now_rfc3339
    from lab.kube.resources import groups

    rt = store.rt("apiregistration.k8s.io", "apiservices")
    for group, versions in groups().items():
        for version in versions:
            priority = API_SERVICE_PRIORITIES.get((group, version))
            name = f"{version}.{group}"
            if priority is None or store.find(rt, "", name) is not None:
                continue
            writer.create(
                rt,
                "",
                {
                    "metadata": {
                        "name": name,
                        "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
                    },
                    "spec": {
                        "group": group,
                        "version": version,
                        "groupPriorityMinimum": priority[0],
                        "versionPriority": priority[1],
                    },
                },
                manager="kube-apiserver",
            )
            current = store.get(rt, "", name).obj
            writer.update(
                rt,
                "",
                name,
                {
                    **current,
                    "status": {
                        "conditions": [
                            {
                                "type": "Available",
                                "status": "True",
                                "lastTransitionTime": now_rfc3339(),
                                "reason": "Local",
                                "message": "Local APIServices are always available",
                            }
                        ]
                    },
                },
                subresource="status",
                manager="kube-apiserver",
            )


def _service_ip(store: Store, offset: int) -> str:
    strategy = store.strategies[("", "services")]
    net = getattr(strategy, "network", ipaddress.ip_network("10.96.0.0/16"))
    return str(net.network_address + offset)


def _first_service_ip(store: Store) -> str:
    return _service_ip(store, 1)


def namespace_companions(writer: Writer, ns: str) -> None:
    """What kube-controller-manager adds to every namespace: SA ``default``, root CA map."""
    store = writer.store
    sa, cm = store.rt("", "serviceaccounts"), store.rt("", "configmaps")
    if store.find(sa, ns, "default") is None:
        writer.create(sa, ns, {"metadata": {"name": "default"}}, manager="kube-controller-manager")
    if store.find(cm, ns, "kube-root-ca.crt") is None:
        writer.create(
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
