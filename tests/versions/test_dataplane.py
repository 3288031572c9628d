"""The per-version behaviour table: each preset gets what termination-bugs.md says that
release does, and every row names its upstream source."""

from __future__ import annotations

import pytest

from lab.versions.dataplane import (
    CHANGES,
    change,
    endpoints_behaviour,
    kube_proxy_behaviour,
    kubelet_behaviour,
    node_lifecycle_behaviour,
    parse_feature_gates,
    table,
)
from lab.versions.release import KubeVersion


@pytest.mark.parametrize(
    ("version", "keeps_ready", "probes_stop"),
    [
        ("1.21.12", False, False),  # before the pod-worker rework
        ("1.22", True, True),
        ("1.22.8", True, True),
        ("1.22.10", True, True),
        ("1.22.11", False, False),  # #110481, #110418
        ("1.23.7", True, True),
        ("1.23.8", False, False),
        ("1.24.1", True, True),
        ("1.24.2", False, False),
        ("1.25", False, False),
        ("1.33", False, False),
    ],
)
def test_kubelet_termination_bugs_per_release(
    version: str, keeps_ready: bool, probes_stop: bool
) -> None:
    k = kubelet_behaviour(version)
    assert (k.terminal_keeps_ready, k.probes_stop_on_termination) == (keeps_ready, probes_stop)


@pytest.mark.parametrize(
    ("version", "skip_terminal", "tracks_terminating", "annotation", "missing_node_fails"),
    [
        ("1.21", False, False, True, True),
        ("1.22.8", False, True, True, True),
        ("1.22.11", True, True, True, True),
        ("1.23.8", True, True, True, True),
        ("1.24.1", False, True, False, True),
        ("1.24.2", True, True, False, True),
        ("1.25", True, True, False, False),
        ("1.33", True, True, False, False),
    ],
)
def test_endpoint_controllers_per_release(
    version: str,
    skip_terminal: bool,
    tracks_terminating: bool,
    annotation: bool,
    missing_node_fails: bool,
) -> None:
    e = endpoints_behaviour(version)
    assert (
        e.skip_terminal_pods,
        e.slices_track_terminating,
        e.tolerate_unready_annotation,
        e.missing_node_fails_sync,
    ) == (skip_terminal, tracks_terminating, annotation, missing_node_fails)


@pytest.mark.parametrize(
    ("version", "fallback", "proxy_healthy", "eligibility", "livez"),
    [
        ("1.22.8", False, False, False, False),
        ("1.25", False, False, False, False),
        ("1.26", True, False, False, False),
        ("1.27", True, True, False, False),
        ("1.28", True, True, False, True),
        ("1.29", True, True, False, True),
        ("1.30", True, True, True, True),
        ("1.33", True, True, True, True),
    ],
)
def test_kube_proxy_per_release(
    version: str, fallback: bool, proxy_healthy: bool, eligibility: bool, livez: bool
) -> None:
    p = kube_proxy_behaviour(version)
    assert (
        p.terminating_fallback,
        p.service_proxy_healthy_field,
        p.healthz_node_eligibility,
        p.livez,
    ) == (fallback, proxy_healthy, eligibility, livez)


def test_smaller_kubelet_and_lifecycle_facts() -> None:
    assert kubelet_behaviour("1.21").node_shutdown_reason == "Shutdown"
    assert kubelet_behaviour("1.22").node_shutdown_reason == "Terminated"
    assert not kubelet_behaviour("1.26").terminal_phase_on_delete
    assert kubelet_behaviour("1.27").terminal_phase_on_delete
    assert not kubelet_behaviour("1.25").disruption_target
    assert kubelet_behaviour("1.26").disruption_target
    assert not kubelet_behaviour("1.28").ready_to_start_condition
    assert kubelet_behaviour("1.29").ready_to_start_condition
    assert node_lifecycle_behaviour("1.31").node_monitor_grace_period == 40
    assert node_lifecycle_behaviour("1.32").node_monitor_grace_period == 50
    assert kubelet_behaviour(KubeVersion.parse("v1.22.8")).version == KubeVersion(1, 22, 8)


def test_every_row_cites_a_source_and_inferred_rows_say_why() -> None:
    keys = [c.key for c in CHANGES]
    assert len(keys) == len(set(keys))
    for c in CHANGES:
        assert c.sources, c.key
        assert all(s.startswith(("k/k#", "KEP-")) for s in c.sources), c.key
        if c.confidence == "I":
            assert c.note, c.key
    rows = table("kube-proxy")
    assert {r["key"] for r in rows} >= {"proxy-terminating-fallback", "proxy-healthz-node-eligible"}
    (fix,) = [r for r in table() if r["key"] == "endpoints-skip-terminal-pods"]
    assert fix["since"] == "1.25 (and 1.22.11, 1.23.8, 1.24.2)"
    assert "k/k#110255" in fix["sources"]


def test_unknown_change_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no data-plane change 'nope'; known: kubelet-pod-worker"):
        change("nope")


@pytest.mark.parametrize(
    ("version", "gates", "all_policies", "local"),
    [
        ("1.21", "", False, False),
        ("1.22.8", "", False, False),  # alpha, off by default
        ("1.22.8", "ProxyTerminatingEndpoints=true", False, True),  # eTP=Local only (#97238)
        ("1.23.7", "ProxyTerminatingEndpoints=true", False, True),
        ("1.24.1", "ProxyTerminatingEndpoints=true", True, True),  # every policy (#108691)
        ("1.25", "", False, False),
        ("1.26", "", True, True),  # beta, on
        ("1.26", "ProxyTerminatingEndpoints=false", False, False),
        ("1.28", "ProxyTerminatingEndpoints=true", True, True),  # GA, locked
        ("1.33", "", True, True),  # gate removed, behaviour stays
    ],
)
def test_proxy_terminating_endpoints_gate(
    version: str, gates: str, all_policies: bool, local: bool
) -> None:
    p = kube_proxy_behaviour(version, parse_feature_gates(gates, version))
    assert (p.terminating_fallback, p.terminating_fallback_local) == (all_policies, local)


@pytest.mark.parametrize(
    ("version", "gates", "eligibility"),
    [
        ("1.27", "", False),  # before the gate
        ("1.28", "", False),  # alpha, off
        ("1.29", "KubeProxyDrainingTerminatingNodes=true", True),  # recipe R8's 1.28/1.29 case
        ("1.30", "", True),  # beta, on
        ("1.30", "KubeProxyDrainingTerminatingNodes=false", False),
        ("1.31", "KubeProxyDrainingTerminatingNodes=true", True),  # GA, locked
        ("1.33", "", True),  # gate removed, behaviour stays
    ],
)
def test_kube_proxy_draining_terminating_nodes_gate(
    version: str, gates: str, eligibility: bool
) -> None:
    p = kube_proxy_behaviour(version, parse_feature_gates(gates, version))
    assert p.healthz_node_eligibility is eligibility


@pytest.mark.parametrize(
    ("version", "text", "message"),
    [
        ("1.21", "ProxyTerminatingEndpoints=true", "unrecognized feature gate"),
        ("1.30", "ProxyTerminatingEndpoints=true", "unrecognized feature gate"),
        ("1.22.8", "NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("1.22.8", "ProxyTerminatingEndpoints", "invalid value of ProxyTerminatingEndpoints="),
        ("1.22.8", "ProxyTerminatingEndpoints=on", "ProxyTerminatingEndpoints=on"),
        ("1.28", "ProxyTerminatingEndpoints=false", "locked to true"),
        ("1.27", "KubeProxyDrainingTerminatingNodes=true", "unrecognized feature gate"),
        ("1.31", "KubeProxyDrainingTerminatingNodes=false", "locked to true"),
        ("1.33", "KubeProxyDrainingTerminatingNodes=true", "unrecognized feature gate"),
    ],
)
def test_feature_gates_are_checked_against_the_release(
    version: str, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_feature_gates(text, version)
    assert parse_feature_gates(" ProxyTerminatingEndpoints=True ,", "1.22.8") == {
        "ProxyTerminatingEndpoints": True
    }
