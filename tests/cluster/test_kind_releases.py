"""The kind release model the fakes run on (``kind_releases.py``): its CLI, config checks and
kubeadm patch merging, each case written from kind's source at the pinned tag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.cluster.base import NodeSpec, ProviderID, Role
from lab.cluster.kind_config import config_document, render_config
from lab.exec import CommandError

from . import kind_releases as kr
from .fakecli import FakeCLI

AWS_ID = ProviderID("aws:///us-east-1a/i-0123456789abcdef0")
PAIRS = [("v0.20.0", "1.22"), ("v0.22.0", "1.29"), ("v0.29.0", "1.33"), ("v0.32.0", "latest")]


def args_of(tag: str, kube: tuple[int, int], *, bootstrap: bool = False, **patches: Any) -> Any:
    return kr.kubelet_args(
        kr.RELEASES[tag],
        kube=kube,
        cluster="c",
        node="c-worker",
        node_ip="10.0.8.1",
        node_labels="",
        bootstrap=bootstrap,
        cluster_patches=patches.get("cluster", []),
        node_patches=patches.get("node", []),
    )


def join_patch(api: str | None, args: Any) -> str:
    doc: dict[str, Any] = {
        "kind": "JoinConfiguration",
        "nodeRegistration": {"kubeletExtraArgs": args},
    }
    if api:
        doc["apiVersion"] = f"kubeadm.k8s.io/{api}"
    return yaml.safe_dump(doc)


# --- the CLI ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", sorted(kr.RELEASES))
def test_every_release_parses_the_commands_the_lab_runs(tag: str) -> None:
    release = kr.RELEASES[tag]
    path, flags, _ = kr.parse_command(
        release, ["create", "cluster", "--name", "x", "--config", "c.yaml", "--kubeconfig", "k",
                  "--wait", "120s", "--retain"]
    )  # fmt: skip
    assert path == ("create", "cluster")
    assert flags == {
        "name": "x",
        "config": "c.yaml",
        "kubeconfig": "k",
        "wait": "120s",
        "retain": "true",
    }
    assert kr.parse_command(release, ["export", "logs", "/d", "-n", "x"]) == (
        ("export", "logs"),
        {"name": "x"},
        ["/d"],
    )
    assert kr.parse_command(release, ["load", "docker-image", "a", "b", "--nodes=n1,n2"])[2] == [
        "a",
        "b",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "logs", "/d", "--kubeconfig", "k"], "unknown flag: --kubeconfig"),
        (["load", "docker-image", "--name", "x"], "a list of image names is required"),
        (["load", "image-archive"], "name of image archive is required"),
        (["export", "logs", "a", "b"], "accepts at most 1 arg(s), received 2"),
        (["delete", "cluster", "extra"], 'unknown command "extra" for "kind delete cluster"'),
        (["create", "cluster", "-x"], "unknown shorthand flag: 'x' in -x"),
        (["create", "cluster", "--wait", "2 minutes"], 'invalid argument "2 minutes"'),
        (["create"], "Subcommand is required"),
    ],
)
def test_cli_errors_are_kinds(argv: list[str], message: str) -> None:
    for release in kr.RELEASES.values():
        with pytest.raises(kr.KindCLIError) as info:
            kr.parse_command(release, argv)
        assert message in str(info.value)


def test_loglevel_went_away_between_v0_22_and_v0_29() -> None:
    argv = ["delete", "cluster", "--loglevel", "debug"]
    assert kr.parse_command(kr.RELEASES["v0.22.0"], argv)[1]["loglevel"] == "debug"
    with pytest.raises(kr.KindCLIError, match="unknown flag: --loglevel"):
        kr.parse_command(kr.RELEASES["v0.29.0"], argv)


def test_the_fake_binary_fails_like_kind(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.set(kind_version="kind v0.32.0")
    runner = fake.runner()
    assert runner.run(["kind", "version"]).stdout.strip() == "kind v0.32.0 go1.26.3 linux/amd64"
    with pytest.raises(CommandError) as info:
        runner.run(["kind", "export", "logs", str(tmp_path), "--kubeconfig", "k"])
    assert info.value.returncode == 1
    assert info.value.stderr.strip() == "ERROR: unknown flag: --kubeconfig"
    with pytest.raises(CommandError, match='unknown cluster "kind"'):
        runner.run(["kind", "export", "logs", str(tmp_path)])
    with pytest.raises(KeyError, match="no kind release model"):
        kr.release_for("kind v0.25.0 go1.22 linux/amd64")


# --- the config ------------------------------------------------------------------------------


@pytest.mark.parametrize(("tag", "version"), PAIRS)
def test_the_labs_rendered_configs_pass_each_releases_checks(tag: str, version: str) -> None:
    text = render_config(
        cluster_name="ccm-lab-x",
        version=version,
        nodes=[NodeSpec(Role.CONTROL_PLANE, provider_id=AWS_ID), NodeSpec(Role.WORKER)],
    )
    kr.check_config(kr.RELEASES[tag], yaml.safe_load(text))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"apiVersion": "kind.x-k8s.io/v1alpha3"}, "unknown apiVersion: kind.x-k8s.io/v1alpha3"),
        ({"kind": "Config"}, "unknown kind Config for apiVersion"),
        ({"providerID": "x"}, 'unknown field "providerID"'),
        ({"networking": {"gateway": "10.0.0.1"}}, 'unknown field "gateway"'),
        ({"nodes": [{"role": "worker"}]}, "must have at least one control-plane node"),
        ({"nodes": [{"role": "control-plane", "ip": "10.0.0.9"}]}, 'unknown field "ip"'),
        ({"nodes": [{"role": "master"}]}, '"master" is not a valid node role'),
    ],
)
def test_config_errors_are_kinds(change: dict[str, Any], message: str) -> None:
    doc = {
        **config_document(cluster_name="c", version="1.29", nodes=[NodeSpec(Role.CONTROL_PLANE)])
    }
    doc.update(change)
    with pytest.raises(kr.KindCLIError, match=message):
        kr.check_config(kr.RELEASES["v0.29.0"], doc)


def test_nftables_proxy_mode_arrives_after_v0_22() -> None:
    doc = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
           "networking": {"kubeProxyMode": "nftables"}}  # fmt: skip
    kr.check_config(kr.RELEASES["v0.29.0"], doc)
    with pytest.raises(kr.KindCLIError, match="invalid kubeProxyMode: nftables"):
        kr.check_config(kr.RELEASES["v0.22.0"], doc)


def test_dns_search_arrives_after_v0_15() -> None:
    doc = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
           "networking": {"dnsSearch": []}}  # fmt: skip
    kr.check_config(kr.RELEASES["v0.20.0"], doc)
    for old in ("v0.14.0", "v0.15.0"):
        with pytest.raises(kr.KindCLIError, match="dnsSearch"):
            kr.check_config(kr.RELEASES[old], doc)


# --- the kubelet's arguments after kind's patching --------------------------------------------


def test_without_patches_every_kubelet_carries_kinds_provider_id() -> None:
    for tag in kr.RELEASES:
        args = args_of(tag, (1, 29))
        assert args == {
            "node-ip": "10.0.8.1",
            "provider-id": "kind://docker/c/c-worker",
            "node-labels": "",
        }


@pytest.mark.parametrize(("tag", "api"), [("v0.20.0", "v1beta2"), ("v0.29.0", "v1beta3")])
def test_map_form_patch_replaces_provider_id_before_v1beta4(tag: str, api: str) -> None:
    kube = (1, 22) if api == "v1beta2" else (1, 33)
    args = args_of(tag, kube, node=[join_patch(api, {"provider-id": AWS_ID})])
    assert args == {"node-ip": "10.0.8.1", "provider-id": AWS_ID, "node-labels": ""}


def test_v1beta4_list_patch_merges_by_name_in_v0_32() -> None:
    patch = join_patch("v1beta4", [{"name": "provider-id", "value": AWS_ID}])
    args = args_of("v0.32.0", (1, 36), node=[patch])
    assert args == {"node-ip": "10.0.8.1", "provider-id": AWS_ID, "node-labels": ""}


def test_v1beta4_map_form_in_a_versioned_patch_is_dropped() -> None:
    """kubeadm_merge.go converts a map only for a patch without apiVersion: the lab's map-form
    patch would leave kind's providerID in place (the blocker, silently)."""
    patch = join_patch("v1beta4", {"provider-id": AWS_ID})
    assert args_of("v0.32.0", (1, 36), node=[patch])["provider-id"] == "kind://docker/c/c-worker"
    unversioned = join_patch(None, {"provider-id": AWS_ID})
    assert args_of("v0.32.0", (1, 36), node=[unversioned])["provider-id"] == AWS_ID


def test_patch_for_another_api_or_kind_is_skipped() -> None:
    wrong_api = join_patch("v1beta3", {"provider-id": AWS_ID})
    assert args_of("v0.32.0", (1, 36), node=[wrong_api])["provider-id"].startswith("kind://")
    # the bootstrap control plane reads InitConfiguration: a JoinConfiguration patch misses it
    join = join_patch("v1beta3", {"provider-id": AWS_ID})
    assert args_of("v0.29.0", (1, 33), bootstrap=True, node=[join])["provider-id"].startswith(
        "kind://"
    )


def test_list_form_before_v1beta4_breaks_kubeadm() -> None:
    patch = join_patch("v1beta3", [{"name": "provider-id", "value": AWS_ID}])
    with pytest.raises(kr.KindCLIError, match="wants a map"):
        args_of("v0.29.0", (1, 33), node=[patch])


def test_cluster_patches_apply_before_node_patches() -> None:
    cluster = join_patch(
        "v1beta3", {"provider-id": "aws:///cluster-wide", "cloud-provider": "external"}
    )
    node = join_patch("v1beta3", {"provider-id": AWS_ID})
    args = args_of("v0.29.0", (1, 33), cluster=[cluster], node=[node])
    assert args["provider-id"] == AWS_ID
    assert args["cloud-provider"] == "external"
