"""What each Kubernetes release does, per data-plane component: one table, one row per change.

Role: the stand-ins in ``lab.dataplane`` never test version numbers themselves; they ask for a
behaviour record (:func:`kubelet_behaviour`, :func:`endpoints_behaviour`,
:func:`kube_proxy_behaviour`, :func:`node_lifecycle_behaviour`) built from :data:`CHANGES` for
the lab's ``--k8s-version``. A row says which release (and which patch releases of older
minors, for cherry-picks) first behaves the new way, what changed, the upstream PRs, and how sure
the row is: ``V`` read in upstream source, changelogs or PR threads; ``I`` inferred (the
reasoning is in ``note``). Facts come from ``shared/docs/reference/termination-bugs.md``
(§0-§3) and were re-checked upstream where that file marked them unverified (notes below).

A version without a patch (``1.22``) means its ``.0`` release. Presets the catalog uses:
``1.22.8`` (every 1.22 termination bug), ``1.22.11`` (fixed), ``1.26`` (terminating fallback in
kube-proxy, KEP-1672 GA), ``1.33`` (KEP-3836 draining /healthz).

Neighbours: :mod:`lab.versions.release` (the version type), :mod:`lab.versions.provisioning`
(the node monitor grace period the node-lifecycle record repeats). It sits in the lowest layer,
beside them, rather than in ``lab.dataplane``, so that the CLIs, the compose layer and the
catalog can read a release's behaviour without importing the stand-ins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from lab.versions.provisioning import node_monitor_grace_period
from lab.versions.release import KubeVersion

Minor = tuple[int, int]
Confidence = Literal["V", "I"]


@dataclasses.dataclass(frozen=True)
class Change:
    """One behaviour change: from ``since`` (a minor's .0) on, and from the patch releases in
    ``backports`` (minor -> first patch) of older minors."""

    key: str
    component: str
    what: str
    since: Minor
    sources: tuple[str, ...]
    backports: Mapping[Minor, int] = dataclasses.field(default_factory=dict)
    confidence: Confidence = "V"
    note: str = ""

    def applies(self, version: KubeVersion) -> bool:
        """True when ``version`` behaves the new way."""
        if version.minor_key >= self.since:
            return True
        first = self.backports.get(version.minor_key)
        return first is not None and (version.patch or 0) >= first


CHANGES: tuple[Change, ...] = (
    # --- kubelet ------------------------------------------------------------------------
    Change(
        "kubelet-pod-worker",
        "kubelet",
        "pod workers (SyncPod/TerminatingPod/TerminatedPod): the 1.22 lifecycle rework that "
        "introduced #108594 (terminal phase with Ready=True) and #110309 (no readiness probes "
        "while terminating)",
        (1, 22),
        ("k/k#102344",),
        note="termination-bugs.md §1.1",
    ),
    Change(
        "kubelet-terminal-not-ready",
        "kubelet",
        "a terminal phase (Failed/Succeeded) is written with Ready=False and "
        "ContainersReady=False (fixes #108594, seen as #109414/#109718)",
        (1, 25),
        ("k/k#110256", "k/k#110479 (1.24.2)", "k/k#110480 (1.23.8)", "k/k#110481 (1.22.11)"),
        backports={(1, 24): 2, (1, 23): 8, (1, 22): 11},
        note="CHANGELOG-1.22 v1.22.11 lists #110481",
    ),
    Change(
        "kubelet-probes-while-terminating",
        "kubelet",
        "readiness probes keep running during graceful termination, so a terminating pod goes "
        "NotReady when its app fails readiness (fixes #110309, #110195)",
        (1, 25),
        ("k/k#110191", "k/k#110416 (1.24.2)", "k/k#110417 (1.23.8)", "k/k#110418 (1.22.11)"),
        backports={(1, 24): 2, (1, 23): 8, (1, 22): 11},
        note="CHANGELOG-1.22 v1.22.11 lists #110418",
    ),
    Change(
        "kubelet-shutdown-reason-terminated",
        "kubelet",
        "graceful node shutdown writes reason 'Terminated' (was 'Shutdown') with message 'Pod "
        "was terminated in response to imminent node shutdown.'",
        (1, 22),
        ("k/k#102820",),
    ),
    Change(
        "pod-disruption-conditions",
        "kubelet, node-lifecycle",
        "a DisruptionTarget condition precedes kubelet terminations (reason "
        "TerminationByKubelet) and taint-manager deletions (DeletionByTaintManager): "
        "PodDisruptionConditions beta, on by default",
        (1, 26),
        ("KEP-3329",),
    ),
    Change(
        "kubelet-terminal-phase-on-delete",
        "kubelet",
        "a deleted running pod gets a terminal phase (Succeeded or Failed from its exit codes) "
        "before it is removed; before, restartPolicy=Always pods stayed Running",
        (1, 27),
        ("k/k#115331",),
        note="CHANGELOG-1.27 urgent upgrade notes",
    ),
    Change(
        "kubelet-ready-to-start-containers",
        "kubelet",
        "pods carry the PodReadyToStartContainers condition (KEP-3085, beta)",
        (1, 29),
        ("k/k#119659",),
    ),
    # --- endpoints / endpointslice controllers ----------------------------------------------
    Change(
        "slices-terminating-condition",
        "endpointslice-controller",
        "EndpointSlices keep terminating pods with ready=false and carry serving/terminating "
        "(EndpointSliceTerminatingCondition beta on 1.22, GA 1.26)",
        (1, 22),
        ("k/k#103596 (beta)", "k/k#113351 (GA)"),
    ),
    Change(
        "endpoints-skip-terminal-pods",
        "endpoints-controller, endpointslice-controller",
        "terminal (Failed/Succeeded) pods are never published, whatever restartPolicy or "
        "publishNotReadyAddresses (fixes #109414, #109718)",
        (1, 25),
        ("k/k#110255", "k/k#110258 (1.24.2)", "k/k#110259 (1.23)", "k/k#110260 (1.22)"),
        backports={(1, 24): 2, (1, 23): 8, (1, 22): 11},
        confidence="I",
        note="#110258 is in v1.24.2's changelog; #110259/#110260 carry an empty release note "
        "and are absent from the changelogs; they were approved with #110258 on 2022-06-03 "
        "and merged, and v1.22.11/v1.23.8 were cut the same day as v1.24.2, so those are "
        "taken as the first fixed patches (termination-bugs.md §1.2 says: safe from "
        "v1.22.13/v1.23.10)",
    ),
    Change(
        "endpoints-no-tolerate-unready-annotation",
        "endpoints-controller, endpointslice-controller",
        "the service.alpha.kubernetes.io/tolerate-unready-endpoints annotation is ignored; "
        "only spec.publishNotReadyAddresses counts",
        (1, 24),
        ("k/k#108020",),
    ),
    Change(
        "slices-skip-missing-node",
        "endpointslice-controller",
        "a pod whose spec.nodeName names no Node is skipped (and retried) instead of failing "
        "the whole Service's sync",
        (1, 25),
        ("k/k#110639",),
        note="the 1.22 cherry-pick (k/k#112244) was closed unmerged; others not modelled",
    ),
    # --- kube-proxy -------------------------------------------------------------------------
    Change(
        "proxy-terminating-fallback",
        "kube-proxy",
        "when a Service has no ready endpoints, traffic falls back to serving+terminating ones "
        "(all traffic policies): ProxyTerminatingEndpoints beta, on by default",
        (1, 26),
        ("k/k#97238 (alpha 1.22, eTP=Local)", "k/k#108691 (all policies)", "k/k#113363 (beta)"),
        note="earlier releases do it only with the alpha gate on: see FEATURE_GATES",
    ),
    Change(
        "proxy-terminating-fallback-all-policies",
        "kube-proxy",
        "with ProxyTerminatingEndpoints on, the fallback applies to every traffic policy, not "
        "only externalTrafficPolicy=Local",
        (1, 24),
        ("k/k#108691", "KEP-1669"),
    ),
    Change(
        "proxy-hc-service-proxy-healthy",
        "kube-proxy",
        "the healthCheckNodePort answer also requires kube-proxy to be healthy and carries "
        "'serviceProxyHealthy'",
        (1, 27),
        ("k/k#111661",),
        note="CHANGELOG-1.27",
    ),
    Change(
        "proxy-livez",
        "kube-proxy",
        "/livez on 10256 keeps /healthz's old meaning (KEP-3836)",
        (1, 28),
        ("k/k#116470",),
    ),
    Change(
        "proxy-healthz-node-eligible",
        "kube-proxy",
        '/healthz answers 503 with "nodeEligible": false for a Node being deleted or tainted '
        "ToBeDeletedByClusterAutoscaler (KubeProxyDrainingTerminatingNodes: alpha 1.28 off, "
        "beta 1.30 on, GA 1.31)",
        (1, 30),
        ("k/k#116470", "KEP-3836"),
        note="the body of /healthz on 1.28/1.29 with the gate off was not checked; modelled "
        "without nodeEligible",
    ),
    # --- deployment controller ---------------------------------------------------------------
    Change(
        "deployment-scaling-from-to",
        "deployment",
        "ScalingReplicaSet events read 'Scaled up replica set R from 1 to 3' (were '... R to 3 "
        "from 1', the order #101142 introduced)",
        (1, 32),
        ("k/k#125118",),
        note="CHANGELOG-1.32 (v1.32.0-alpha.2); before #101142 the message had no 'from' at "
        "all, not modelled",
    ),
    # --- node lifecycle -----------------------------------------------------------------------
    Change(
        "node-monitor-grace-50s",
        "node-lifecycle",
        "--node-monitor-grace-period defaults to 50 s (was 40 s)",
        (1, 32),
        ("k/k#126287",),
        note="the kubelet stand-in's table (lab.versions.provisioning) has the same boundary",
    ),
)

_BY_KEY = {c.key: c for c in CHANGES}


@dataclasses.dataclass(frozen=True)
class FeatureGate:
    """A feature gate a data-plane component of the modelled releases accepts
    (``pkg/features/kube_features.go`` per release): alpha (default off) from ``alpha``, beta
    (default on) from ``beta``, GA and locked on from ``ga``, unrecognized from ``removed``."""

    name: str
    component: str
    alpha: Minor
    beta: Minor
    ga: Minor
    removed: Minor
    sources: tuple[str, ...]

    def default(self, version: KubeVersion) -> bool:
        return version.minor_key >= self.beta

    def known(self, version: KubeVersion) -> bool:
        return self.alpha <= version.minor_key < self.removed

    def locked(self, version: KubeVersion) -> bool:
        return version.minor_key >= self.ga


FEATURE_GATES: Mapping[str, FeatureGate] = {
    g.name: g
    for g in (
        FeatureGate(
            "ProxyTerminatingEndpoints",
            "kube-proxy",
            alpha=(1, 22),
            beta=(1, 26),
            ga=(1, 28),
            removed=(1, 30),
            sources=("k/k#97238", "k/k#113363", "KEP-1669"),
        ),
        # removal: the GA line in kube_features.go says "remove in 1.33" (not checked against
        # the v1.33.0 tag)
        FeatureGate(
            "KubeProxyDrainingTerminatingNodes",
            "kube-proxy",
            alpha=(1, 28),
            beta=(1, 30),
            ga=(1, 31),
            removed=(1, 33),
            sources=("k/k#116470", "KEP-3836"),
        ),
    )
}


def parse_feature_gates(text: str, version: KubeVersion | str) -> dict[str, bool]:
    """``Name=true,Other=false`` as the components' ``--feature-gates`` flag takes it, checked
    against what ``version`` knows (ValueError in the components' own words otherwise). Only
    the gates the data-plane models act on are known here."""
    v = KubeVersion.parse(version)
    gates: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        gate = FEATURE_GATES.get(name)
        if gate is None or not gate.known(v):
            modelled = ", ".join(
                f"{n} (1.{g.alpha[1]} to 1.{g.removed[1] - 1})" for n, g in FEATURE_GATES.items()
            )
            raise ValueError(
                f"unrecognized feature gate: {name} at Kubernetes {v} (the lab models {modelled})"
            )
        value = raw.strip().lower()
        if not sep or value not in ("true", "false"):
            raise ValueError(f"invalid value of {name}={raw.strip()}: want true or false")
        if gate.locked(v) and value == "false":
            raise ValueError(f"cannot set feature gate {name} to false, feature is locked to true")
        gates[name] = value == "true"
    return gates


def gate_enabled(name: str, version: KubeVersion, gates: Mapping[str, bool]) -> bool:
    """Whether ``name`` is on at ``version`` with these ``--feature-gates`` settings."""
    gate = FEATURE_GATES[name]
    if not gate.known(version):
        return version.minor_key >= gate.removed
    return gates.get(name, gate.default(version))


def change(key: str) -> Change:
    """The row ``key`` of :data:`CHANGES` (KeyError naming the known keys)."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no data-plane change {key!r}; known: {', '.join(_BY_KEY)}") from None


def _has(version: KubeVersion, key: str) -> bool:
    return change(key).applies(version)


@dataclasses.dataclass(frozen=True)
class KubeletBehaviour:
    version: KubeVersion
    #: terminal phase written with Ready=True left in place (#108594)
    terminal_keeps_ready: bool
    #: readiness probes stop when termination starts; Ready freezes (#110309)
    probes_stop_on_termination: bool
    #: deleted running pods end in Succeeded/Failed before removal (#115331)
    terminal_phase_on_delete: bool
    #: the pod status reason graceful node shutdown writes
    node_shutdown_reason: str
    #: DisruptionTarget condition before kubelet-initiated terminations
    disruption_target: bool
    #: PodReadyToStartContainers condition
    ready_to_start_condition: bool


@dataclasses.dataclass(frozen=True)
class EndpointsBehaviour:
    version: KubeVersion
    #: terminating pods stay in slices (ready=false) with serving/terminating conditions
    slices_track_terminating: bool
    #: terminal pods are never published (#110255)
    skip_terminal_pods: bool
    #: service.alpha.kubernetes.io/tolerate-unready-endpoints still honoured
    tolerate_unready_annotation: bool
    #: a pod on a missing Node fails the Service's slice sync (before #110639)
    missing_node_fails_sync: bool


@dataclasses.dataclass(frozen=True)
class KubeProxyBehaviour:
    version: KubeVersion
    #: fall back to serving+terminating endpoints when none is ready (every traffic policy)
    terminating_fallback: bool
    #: the same, only for externalTrafficPolicy=Local (the 1.22/1.23 alpha gate)
    terminating_fallback_local: bool
    #: healthCheckNodePort body carries serviceProxyHealthy
    service_proxy_healthy_field: bool
    #: /healthz fails for deleting / ToBeDeletedByClusterAutoscaler nodes (KEP-3836)
    healthz_node_eligibility: bool
    #: /livez exists
    livez: bool


@dataclasses.dataclass(frozen=True)
class DeploymentBehaviour:
    version: KubeVersion
    #: "Scaled up replica set R from 1 to 3" (else "... R to 3 from 1")
    scaling_from_to: bool

    def scaling_message(self, direction: str, name: str, old: int, new: int) -> str:
        if self.scaling_from_to:
            return f"Scaled {direction} replica set {name} from {old} to {new}"
        return f"Scaled {direction} replica set {name} to {new} from {old}"


@dataclasses.dataclass(frozen=True)
class NodeLifecycleBehaviour:
    version: KubeVersion
    node_monitor_grace_period: float
    #: DisruptionTarget condition before taint-manager deletions
    disruption_target: bool


def kubelet_behaviour(version: KubeVersion | str) -> KubeletBehaviour:
    v = KubeVersion.parse(version)
    worker = _has(v, "kubelet-pod-worker")
    return KubeletBehaviour(
        version=v,
        terminal_keeps_ready=worker and not _has(v, "kubelet-terminal-not-ready"),
        probes_stop_on_termination=worker and not _has(v, "kubelet-probes-while-terminating"),
        terminal_phase_on_delete=_has(v, "kubelet-terminal-phase-on-delete"),
        node_shutdown_reason=(
            "Terminated" if _has(v, "kubelet-shutdown-reason-terminated") else "Shutdown"
        ),
        disruption_target=_has(v, "pod-disruption-conditions"),
        ready_to_start_condition=_has(v, "kubelet-ready-to-start-containers"),
    )


def deployment_behaviour(version: KubeVersion | str) -> DeploymentBehaviour:
    v = KubeVersion.parse(version)
    return DeploymentBehaviour(version=v, scaling_from_to=_has(v, "deployment-scaling-from-to"))


def endpoints_behaviour(version: KubeVersion | str) -> EndpointsBehaviour:
    v = KubeVersion.parse(version)
    return EndpointsBehaviour(
        version=v,
        slices_track_terminating=_has(v, "slices-terminating-condition"),
        skip_terminal_pods=_has(v, "endpoints-skip-terminal-pods"),
        tolerate_unready_annotation=not _has(v, "endpoints-no-tolerate-unready-annotation"),
        missing_node_fails_sync=not _has(v, "slices-skip-missing-node"),
    )


def kube_proxy_behaviour(
    version: KubeVersion | str, gates: Mapping[str, bool] | None = None
) -> KubeProxyBehaviour:
    """``gates``: kube-proxy's ``--feature-gates`` (:func:`parse_feature_gates`)."""
    v = KubeVersion.parse(version)
    terminating = gate_enabled("ProxyTerminatingEndpoints", v, gates or {})
    return KubeProxyBehaviour(
        version=v,
        terminating_fallback=terminating and _has(v, "proxy-terminating-fallback-all-policies"),
        terminating_fallback_local=terminating,
        service_proxy_healthy_field=_has(v, "proxy-hc-service-proxy-healthy"),
        healthz_node_eligibility=gate_enabled("KubeProxyDrainingTerminatingNodes", v, gates or {}),
        livez=_has(v, "proxy-livez"),
    )


def node_lifecycle_behaviour(version: KubeVersion | str) -> NodeLifecycleBehaviour:
    v = KubeVersion.parse(version)
    return NodeLifecycleBehaviour(
        version=v,
        node_monitor_grace_period=node_monitor_grace_period(v),
        disruption_target=_has(v, "pod-disruption-conditions"),
    )


def table(component: str | None = None) -> list[dict[str, str]]:
    """The rows (for ``component``, or all) as plain dicts, for docs and ``lab.status``."""
    rows = []
    for c in CHANGES:
        if component is not None and component not in c.component:
            continue
        backports = ", ".join(f"{a}.{b}.{p}" for (a, b), p in sorted(c.backports.items()))
        rows.append(
            {
                "key": c.key,
                "component": c.component,
                "since": f"{c.since[0]}.{c.since[1]}"
                + (f" (and {backports})" if backports else ""),
                "what": c.what,
                "sources": ", ".join(c.sources),
                "confidence": c.confidence,
                "note": c.note,
            }
        )
    return rows
