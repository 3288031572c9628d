"""The kind provider through its seams: fake ``kind``/``docker`` executables on PATH record
their argv; the tests assert the exact commands, node discovery, and undo on failure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from lab.cluster import kind_config
from lab.cluster.base import ClusterSpec, NodeInfo, NodeName, NodeSpec, ProviderID, Role
from lab.cluster.kind import KindProvider
from lab.cluster.kind_steps import KindVersionError, check_kind_version, parse_kind_version
from lab.cluster.steps import ProvisionError
from lab.exec import CommandError
from lab.kube.server import KubeServer
from lab.versions.release import KubeVersion

from . import kind_releases
from .fakecli import FakeCLI, container

CP_ID = ProviderID("aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1")
W_ID = ProviderID("aws:///us-east-1b/i-0bbbbbbbbbbbbbbb2")


def spec(version: str = "1.29", name: str = "lab1") -> ClusterSpec:
    return ClusterSpec(
        name,
        KubeVersion.parse(version),
        (NodeSpec(Role.CONTROL_PLANE, provider_id=CP_ID), NodeSpec(Role.WORKER, provider_id=W_ID)),
    )


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeCLI]:
    """The fakes, with an API simulator as the cluster's API server: the nodes register there
    as kind's kubelets would."""
    cli = FakeCLI(tmp_path / "fake")
    cli.set(kind_version="kind v0.22.0 go1.20.13 linux/amd64")
    with KubeServer() as sim:
        cli.serve_api(sim)
        yield cli


def provider(fake: FakeCLI, tmp_path: Path, **kwargs: Any) -> KindProvider:
    return KindProvider("lab1", state_dir=tmp_path / "state", runner=fake.runner(), **kwargs)


def test_provision_runs_exact_commands_and_reports_nodes(fake: FakeCLI, tmp_path: Path) -> None:
    seen: list[list[NodeInfo]] = []
    fake.set(images=["ccm-lab/controller:dev-1"])
    p = provider(
        fake,
        tmp_path,
        network_subnet="10.0.0.0/20",
        network_ip_range="10.0.8.0/21",
        images_to_load=["ccm-lab/controller:dev-1"],
        on_nodes=lambda nodes: seen.append(list(nodes)),
    )
    p.provision(spec())
    state = tmp_path / "state"
    assert fake.calls() == [
        ["kind", "version"],
        ["docker", "network", "inspect", "ccm-lab-lab1"],
        [
            "docker", "network", "create", "--driver", "bridge", "--subnet", "10.0.0.0/20",
            "--gateway", "10.0.0.1", "--ip-range", "10.0.8.0/21",
            "--label", "io.x-k8s.ccm-lab.cluster=lab1", "ccm-lab-lab1",
        ],
        [
            "kind", "create", "cluster", "--name", "lab1",
            "--config", str(state / "kind-config.yaml"),
            "--kubeconfig", str(state / "kubeconfig"),
            "--wait", "120s", "--retain",
        ],
        ["docker", "ps", "--all", "--filter", "label=io.x-k8s.kind.cluster=lab1",
         "--format", "{{.Names}}"],
        ["docker", "inspect", "lab1-control-plane", "lab1-worker"],
        ["docker", "image", "inspect", "--format", "{{.Id}}", "ccm-lab/controller:dev-1"],
        ["kind", "load", "docker-image", "ccm-lab/controller:dev-1", "--name", "lab1"],
    ]  # fmt: skip
    # kind is pointed at the dedicated network only for the create call
    envs = fake.network_envs()
    assert envs[3] == "ccm-lab-lab1"
    assert envs[0] is None
    # the config handed to kind is the version-aware rendering
    config = yaml.safe_load((state / "kind-config.yaml").read_text())
    assert config["name"] == "lab1"
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker"]
    assert p.kubeconfig().read_text().startswith("apiVersion: v1")
    # Docker hands out the first addresses of the --ip-range (the gateway is outside it)
    expected = [
        NodeInfo(NodeName("lab1-control-plane"), Role.CONTROL_PLANE, "10.0.8.0", CP_ID),
        NodeInfo(NodeName("lab1-worker"), Role.WORKER, "10.0.8.1", W_ID),
    ]
    assert seen == [expected]
    assert p.nodes() == expected
    assert p.capabilities().host_address_for_nodes == "10.0.0.1"
    assert p.host_address() == "10.0.0.1"
    assert fake.state["node_images"] == {
        "lab1-control-plane": ["ccm-lab/controller:dev-1"],
        "lab1-worker": ["ccm-lab/controller:dev-1"],
    }


# (kind release, Kubernetes version): the pairs the lab supports, one per kubeadm API form
PAIRS = [
    ("kind v0.20.0 go1.20.4 linux/amd64", "1.22"),  # v1beta2, map
    # the seed-004 clusters: a buggy and a fixed 1.22 patch, each with the kind that built it
    ("kind v0.14.0 go1.18.2 linux/amd64", "1.22.9"),  # v1beta2, map
    ("kind v0.15.0 go1.19 linux/amd64", "1.22.13"),  # v1beta2, map
    ("kind v0.22.0 go1.20.13 linux/amd64", "1.29"),  # v1beta3, map
    ("kind v0.29.0 go1.24.2 linux/amd64", "1.33"),  # v1beta3, map
    ("kind v0.32.0 go1.26.3 linux/amd64", "latest"),  # v1beta4, {name, value} list
]


@pytest.mark.parametrize(("kind_version", "version"), PAIRS)
def test_kubelets_get_the_aws_provider_id_not_kinds(
    fake: FakeCLI, tmp_path: Path, kind_version: str, version: str
) -> None:
    """kind starts every kubelet with --provider-id=kind://docker/<cluster>/<node> and a
    Node's providerID never changes; the per-node patch must replace it in the form the
    node's kubeadm API takes, while kind's own node-ip stays."""
    fake.set(kind_version=kind_version)
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/20")
    p.provision(spec(version))
    kubelets = fake.kubelets()
    ips = {n.name: n.ip for n in p.nodes()}
    for node, provider_id in (("lab1-control-plane", CP_ID), ("lab1-worker", W_ID)):
        args = kubelets[node]["args"]
        assert args["provider-id"] == provider_id, node
        assert args["node-ip"] == ips[node], "kind's node-ip survives the patch"
        assert args["cloud-provider"] == "external"


def test_without_lab_provider_ids_the_kubelets_carry_kinds(fake: FakeCLI, tmp_path: Path) -> None:
    p = provider(fake, tmp_path)
    bare = ClusterSpec(
        "lab1", KubeVersion.parse("1.29"), (NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER))
    )
    p.provision(bare)
    assert fake.kubelets()["lab1-worker"]["args"]["provider-id"] == "kind://docker/lab1/lab1-worker"


def test_default_network_is_kinds_and_no_network_steps(fake: FakeCLI, tmp_path: Path) -> None:
    p = provider(fake, tmp_path)
    p.provision(spec())
    commands = [c[:3] for c in fake.calls()]
    assert ["docker", "network", "create"] not in commands
    assert all(env is None for env in fake.network_envs())
    assert [n.ip for n in p.nodes()] == ["172.18.0.2", "172.18.0.3"]
    assert p.host_address() == "172.18.0.1"


def test_create_failure_undoes_cluster_and_network_in_reverse(
    fake: FakeCLI, tmp_path: Path
) -> None:
    fake.set(fail_create=True)
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError) as info:
        p.provision(spec())
    err = info.value
    assert err.step == "create-cluster"
    assert err.undone == ("create-cluster", "write-config", "ensure-network", "check-kind-version")
    cause = err.cause
    assert isinstance(cause, CommandError)
    assert "failed to init node with kubeadm" in str(cause)
    assert "kind create cluster --name lab1" in str(cause)  # pasteable command
    state = tmp_path / "state"
    assert fake.calls()[-2:] == [
        ["kind", "delete", "cluster", "--name", "lab1", "--kubeconfig", str(state / "kubeconfig")],
        ["docker", "network", "rm", "ccm-lab-lab1"],
    ]
    assert fake.network_envs()[-2] == "ccm-lab-lab1"  # delete targets the same network
    assert fake.state["networks"] == {}
    assert fake.state.get("containers") == []


def test_create_failure_with_retain_leaves_everything(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(fail_create=True)
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError) as info:
        p.provision(spec(), retain=True)
    assert info.value.retained
    verbs = [c[:3] for c in fake.calls()]
    assert ["kind", "delete", "cluster"] not in verbs
    assert ["docker", "network", "rm"] not in verbs
    assert len(fake.state["containers"]) == 2  # kind --retain keeps the failed nodes


def test_existing_network_is_reused_and_not_removed_on_failure(
    fake: FakeCLI, tmp_path: Path
) -> None:
    fake.set(
        fail_create=True,
        networks={"ccm-lab-lab1": {"Subnet": "10.0.0.0/16", "Gateway": "10.0.0.1", "Labels": {}}},
    )
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError):
        p.provision(spec())
    verbs = [c[:3] for c in fake.calls()]
    assert ["docker", "network", "create"] not in verbs
    assert ["docker", "network", "rm"] not in verbs
    assert ["kind", "delete", "cluster"] in verbs


def test_existing_network_with_another_subnet_is_refused(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(networks={"ccm-lab-lab1": {"Subnet": "10.9.0.0/16", "Labels": {}}})
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError, match=r"exists with subnet \['10.9.0.0/16'\]"):
        p.provision(spec())
    assert ["kind", "create", "cluster"] not in [c[:3] for c in fake.calls()]


def test_overlapping_network_fails_as_docker_does(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(networks={"other": {"Subnet": "10.0.0.0/8", "Labels": {}}})
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError, match="Pool overlaps") as info:
        p.provision(spec())
    assert info.value.step == "ensure-network"


def test_external_load_balancer_container_is_not_a_node(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(
        containers=[
            container("lab1-external-load-balancer", "external-load-balancer", "lab1", "10.0.1.9"),
            container("lab1-control-plane", "control-plane", "lab1", "10.0.1.2"),
            container("lab1-control-plane2", "control-plane", "lab1", "10.0.1.4"),
        ]
    )
    p = provider(fake, tmp_path)
    assert [(n.name, n.role) for n in p.nodes()] == [
        ("lab1-control-plane", Role.CONTROL_PLANE),
        ("lab1-control-plane2", Role.CONTROL_PLANE),
    ]


def test_missing_node_container_fails_discovery_and_deletes(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(vanish=["lab1-worker"])  # kind reports success, the container is gone
    p = provider(fake, tmp_path)
    with pytest.raises(ProvisionError, match=r"missing: \['lab1-worker'\]") as info:
        p.provision(spec())
    assert info.value.step == "discover-nodes"
    assert ["kind", "delete", "cluster"] in [c[:3] for c in fake.calls()]


def test_old_kind_is_refused_before_anything_is_created(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(kind_version="kind v0.20.0 go1.20.4 linux/amd64")
    p = provider(fake, tmp_path)
    with pytest.raises(ProvisionError, match=r"built by kind v0\.29\.0.*install kind v0\.29\.0"):
        p.provision(spec("1.33"))
    assert fake.calls() == [["kind", "version"]]


@pytest.mark.parametrize("kind_version", [k for k, _ in PAIRS])
def test_delete_logs_load_and_host_address(
    fake: FakeCLI, tmp_path: Path, kind_version: str
) -> None:
    """Every command the provider issues is one each pinned release accepts (the fake fails
    unknown flags as kind's CLI does: ``kind export logs`` has no ``--kubeconfig``)."""
    fake.set(kind_version=kind_version, images=["img:1"])
    version = next(v for k, v in PAIRS if k == kind_version)
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    p.provision(spec(version))
    before = len(fake.calls())
    assert p.host_address() == "10.0.0.1"
    logs = p.logs(tmp_path / "logs")
    assert (logs / "kind-version.txt").read_text().startswith(kind_version.split(" go", 1)[0])
    p.load_image("img:1", nodes=["lab1-worker"])
    p.delete()
    p.delete()  # idempotent
    state = tmp_path / "state"
    delete = [
        "kind",
        "delete",
        "cluster",
        "--name",
        "lab1",
        "--kubeconfig",
        str(state / "kubeconfig"),
    ]
    assert fake.calls()[before:] == [
        ["docker", "network", "inspect", "ccm-lab-lab1"],
        ["kind", "export", "logs", str(tmp_path / "logs"), "--name", "lab1"],
        ["docker", "image", "inspect", "--format", "{{.Id}}", "img:1"],
        ["kind", "load", "docker-image", "img:1", "--name", "lab1", "--nodes", "lab1-worker"],
        delete,
        ["docker", "network", "ls", "--filter", "label=io.x-k8s.ccm-lab.cluster=lab1",
         "--format", "{{.Name}}"],
        ["docker", "network", "rm", "ccm-lab-lab1"],
        delete,
        ["docker", "network", "ls", "--filter", "label=io.x-k8s.ccm-lab.cluster=lab1",
         "--format", "{{.Name}}"],
    ]  # fmt: skip
    assert fake.state["networks"] == {}
    assert fake.state["containers"] == []


@pytest.mark.parametrize(
    ("docker_cli", "docker_api", "with_platform"),
    [("20.10", "1.41", False), ("28.2", "1.41", False), ("28.2", "1.50", True)],
)
def test_load_falls_back_to_an_archive_under_the_containerd_store(
    fake: FakeCLI, tmp_path: Path, docker_cli: str, docker_api: str, with_platform: bool
) -> None:
    """kind#3795: ``kind load docker-image`` fails under Docker's containerd image store; the
    image goes in through ``docker save`` (of the engine's platform where the CLI can) and
    ``kind load image-archive``."""
    fake.set(images=["img:1"])
    p = provider(fake, tmp_path)
    p.provision(spec())
    fake.set(containerd_store=True, docker_cli=docker_cli, docker_api=docker_api)
    before = len(fake.calls())
    p.load_image("img:1")
    archive = str(tmp_path / "state" / "images" / "img_1.tar")
    calls = fake.calls()[before:]
    assert calls[0] == ["docker", "image", "inspect", "--format", "{{.Id}}", "img:1"], "local"
    calls = calls[1:]
    assert calls[0] == ["kind", "load", "docker-image", "img:1", "--name", "lab1"]
    assert calls[1] == ["docker", "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}"]
    assert calls[2] == ["docker", "save", "--platform", "linux/amd64", "-o", archive, "img:1"]
    if not with_platform:  # "unknown flag: --platform", or "requires API version 1.48"
        assert calls[3] == ["docker", "save", "-o", archive, "img:1"]
    assert calls[-1] == ["kind", "load", "image-archive", archive, "--name", "lab1"]
    assert len(calls) == (4 if with_platform else 5)
    assert fake.state["node_images"] == {"lab1-control-plane": ["img:1"], "lab1-worker": ["img:1"]}
    assert not Path(archive).exists()


def test_host_address_from_the_containers_when_the_network_reports_no_gateway(
    fake: FakeCLI, tmp_path: Path
) -> None:
    """A network made without --gateway (by hand, or an older lab): Docker's inspect has no
    Gateway, the containers still report theirs."""
    fake.runner().run(
        ["docker", "network", "create", "--driver", "bridge", "--subnet", "10.0.0.0/20",
         "--ip-range", "10.0.8.0/21", "ccm-lab-lab1"]
    )  # fmt: skip
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/20")
    p.provision(spec())
    assert p.host_address() == "10.0.8.0"  # the bridge took the range's first address
    assert [n.ip for n in p.nodes()] == ["10.0.8.1", "10.0.8.2"]


@pytest.mark.parametrize(
    ("kind", "version", "explicit", "problem"),
    [
        ((0, 20, 0), "1.22", False, None),
        ((0, 29, 0), "1.22", False, r"only known to work with kind v0\.20\.0"),
        ((0, 14, 0), "1.22.9", False, None),
        ((0, 15, 0), "1.22.9", False, r"kind v0\.14\.0"),
        ((0, 15, 0), "1.22.13", False, None),
        ((0, 20, 0), "1.22.13", False, r"kind v0\.15\.0"),
        ((0, 14, 0), "1.22", False, r"older"),
        ((0, 22, 0), "1.29", False, None),
        ((0, 32, 0), "1.29", False, None),
        ((0, 21, 0), "1.29", False, r"older"),
        ((0, 31, 0), "1.36", False, r"v1beta4"),
        ((0, 31, 0), "1.36", True, r"v1beta4"),
        ((0, 10, 0), "1.29", True, None),
        ((0, 32, 0), "latest", False, None),
    ],
)
def test_kind_version_pairing(
    kind: tuple[int, int, int], version: str, explicit: bool, problem: str | None
) -> None:
    kube = KubeVersion.parse(version)
    if problem is None:
        check_kind_version(kind, kube, explicit_image=explicit)
    else:
        with pytest.raises(KindVersionError, match=problem):
            check_kind_version(kind, kube, explicit_image=explicit)


def test_parse_kind_version() -> None:
    assert parse_kind_version("kind v0.33.0-alpha.12+fed268827e21ab go1.24 linux/arm64") == (
        0,
        33,
        0,
    )
    with pytest.raises(KindVersionError, match="cannot read a version"):
        parse_kind_version("something else")


def test_delete_exports_logs_first_when_asked(
    fake: FakeCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI sets CCM_LAB_KIND_LOGS so a failed job's node logs survive the lab's teardown."""
    monkeypatch.setenv("CCM_LAB_KIND_LOGS", str(tmp_path / "kind-logs"))
    p = provider(fake, tmp_path)
    p.provision(spec())
    p.delete()
    assert (tmp_path / "kind-logs" / "lab1" / "kind-version.txt").exists()
    p.delete()  # no cluster left: nothing exported, still idempotent
    exports = [c for c in fake.calls() if c[:3] == ["kind", "export", "logs"]]
    assert (
        exports
        == [["kind", "export", "logs", str(tmp_path / "kind-logs" / "lab1"), "--name", "lab1"]] * 2
    )


def test_load_pulls_an_image_the_host_does_not_have(fake: FakeCLI, tmp_path: Path) -> None:
    """``--controller-image registry.k8s.io/...``: kind loads only local images ("not present
    locally"), so the provider pulls a released build first; one already local is not pulled."""
    image = "registry.k8s.io/provider-aws/cloud-controller-manager:v1.33.0"
    fake.set(images=[], registry=[image])
    p = provider(fake, tmp_path)
    p.provision(spec())
    before = len(fake.calls())
    p.load_image(image)
    calls = fake.calls()[before:]
    assert ["docker", "pull", image] in calls
    assert calls[-1] == ["kind", "load", "docker-image", image, "--name", "lab1"]
    assert fake.state["node_images"] == {"lab1-control-plane": [image], "lab1-worker": [image]}
    before = len(fake.calls())
    p.load_image(image)
    assert not [c for c in fake.calls()[before:] if c[:2] == ["docker", "pull"]]


def test_load_of_an_image_no_registry_has_names_the_registry(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(images=[], registry=[])
    p = provider(fake, tmp_path)
    p.provision(spec())
    with pytest.raises(CommandError, match=r"lookup registry\.example: no such host"):
        p.load_image("registry.example/ccm:1")


def test_provision_waits_for_a_worker_that_registers_after_kind_returns(
    fake: FakeCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kind create --wait`` waits for control planes only: the worker's kubelet may register
    after kind returns. Here it registers once the provider is watching for it (the evidence
    the provider waits on, not a pause), and provisioning finishes with both nodes there."""
    fake.set(late_nodes=["lab1-worker"])
    sim = fake.api
    assert sim is not None
    inner = sim.api.handle
    joined = threading.Event()

    def join() -> None:
        body = kind_releases.registered_node("lab1-worker", fake.kubelets()["lab1-worker"])
        client.CoreV1Api(sim.api_client()).create_node(body)

    def handle(req: Any) -> Any:
        watching = req.target.startswith("/api/v1/nodes?") and "watch=" in req.target
        if watching and not joined.is_set():
            joined.set()
            threading.Thread(target=join, daemon=True).start()
        return inner(req)

    monkeypatch.setattr(sim.api, "handle", handle)
    p = provider(fake, tmp_path)
    p.provision(spec())
    assert joined.is_set(), "the provider watched for the missing worker"
    names = [n.metadata.name for n in client.CoreV1Api(sim.api_client()).list_node().items]
    assert sorted(names) == ["lab1-control-plane", "lab1-worker"]


def test_a_worker_that_never_registers_fails_provisioning_naming_it(
    fake: FakeCLI, tmp_path: Path
) -> None:
    fake.set(late_nodes=["lab1-worker"])
    p = provider(fake, tmp_path, wait="1s")
    with pytest.raises(ProvisionError, match=r"nodes \['lab1-worker'\] did not register within 1s"):
        p.provision(spec())
    assert ["kind", "delete", "cluster"] in [c[:3] for c in fake.calls()], "undone"


def test_a_patch_kind_skipped_leaves_kinds_provider_id_and_fails_at_once(
    fake: FakeCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config whose patches name another kubeadm API than the node image's: kind skips them
    silently (the fake applies kind's matching rules), the kubelets register with kind's own
    immutable ``kind://`` providerID, and provisioning says so instead of a lab that waits for
    nodes the controller can never initialize."""
    monkeypatch.setattr(kind_config, "kubeadm_api_version", lambda v: "kubeadm.k8s.io/v1beta2")
    p = provider(fake, tmp_path)
    with pytest.raises(ProvisionError) as caught:
        p.provision(spec())
    message = str(caught.value.__cause__ or caught.value)
    assert "node lab1-control-plane registered with providerID kind://docker/lab1/" in message
    assert f"not the lab's {CP_ID}" in message
    assert "kind skipped the lab's kubeadm patch" in message
    assert "kubeadm.k8s.io/v1beta3 for Kubernetes v1.29" in message


def test_delete_from_a_fresh_process_removes_the_labs_network(
    fake: FakeCLI, tmp_path: Path
) -> None:
    """``lab.down`` after the daemon died builds the provider from the state file alone, without
    the subnet its network was made with: the network is found by its owner label and removed,
    and another lab's network is left alone."""
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    p.provision(spec())
    other = KindProvider(
        "lab10", state_dir=tmp_path / "other", runner=fake.runner(), network_subnet="10.9.0.0/16"
    )
    other.prepare(spec(name="lab10"))
    assert {"ccm-lab-lab1", "ccm-lab-lab10"} <= set(fake.state["networks"])
    orphan = KindProvider("lab1", state_dir=tmp_path / "state", runner=fake.runner())
    orphan.delete()
    assert "ccm-lab-lab1" not in fake.state["networks"]
    assert "ccm-lab-lab10" in fake.state["networks"]
    assert not [c for c in fake.state.get("containers", []) if "lab1-" in c["Name"]]


def test_wait_takes_go_durations_and_names_a_bad_one() -> None:
    from lab.cluster.kind_steps import duration_seconds

    assert [duration_seconds(t) for t in ("120s", "5m", "1m30s", "1.5m", "500ms", "0")] == [
        120.0, 300.0, 90.0, 90.0, 0.5, 0.0,
    ]  # fmt: skip
    for bad in ("", "5", "5mm", "2 m"):
        with pytest.raises(ValueError, match="a duration such as 120s"):
            duration_seconds(bad)
