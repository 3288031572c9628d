"""``Lab`` on the kind backend, through its seams (no Docker engine here).

A fake ``kind`` and ``docker`` (``tests/cluster/fakecli.py``, behaving as the pinned kind
release and Debian's docker.io 20.10) record every command; the fake ``kind create cluster``
makes the node containers on the lab's network with the IPs Docker would give, works out each
kubelet's arguments from the rendered config as kind's patching does, and hands back the
kubeconfig of an API simulator in which a kubelet stand-in registered each node *with those
arguments* (named after the containers, ``--node-ip`` = the container IP, ``--provider-id`` =
kind's ``kind://docker/<cluster>/<node>`` unless the lab's patch replaced it). What is asserted
is the lab's part: a VPC block free of the host's routes and Docker networks, the network
matching the VPC subnet with a gateway Docker reports, each fake instance with its container's
IP, kubelets registered with the instances' AWS providerIDs, the controller initializing the
nodes, reset restoring them, and stop deleting the cluster. A real kind run is ``pytest e2e
--backend kind`` (CI).
"""

from __future__ import annotations

import http.server
import ipaddress
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from kubernetes import client

from lab import daemon, labview
from lab.cluster import kind_network
from lab.cluster.base import Role
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.component import ProcessRef
from lab.compose import Lab, LabNotReady, wait_for
from lab.kube.server import KubeServer
from lab.pytest_plugin import quiesce_session_lab
from lab.spec import LabSpec
from lab.state import DaemonState, make_private_dir, write_state
from lab.versions.release import KubeVersion
from tests.cluster.fakecli import FakeCLI

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"
CLUSTER = "ccm-lab-k"
#: where the fake kind nodes answer the ELB's health checks (see ``kind_world``)
NODE_PORT = [0]

# After the fake kind created the cluster, the wrapper asks the test process (over loopback)
# to start the kubelets kind would have started, then hands back the simulator's kubeconfig.
_WRAPPER = """#!{python} -I
import shutil, subprocess, sys, urllib.request
code = subprocess.call([{fake!r}, *sys.argv[1:]])
if code == 0 and sys.argv[1:3] == ["create", "cluster"]:
    urllib.request.urlopen(urllib.request.Request({callback!r}, data=b"", method="POST")).read()
    shutil.copyfile({kubeconfig!r}, sys.argv[sys.argv.index("--kubeconfig") + 1])
sys.exit(code)
"""


class _Kubelets(http.server.BaseHTTPRequestHandler):
    start: Any = None

    def do_POST(self) -> None:
        try:
            type(self).start()
            self.send_response(200)
        except Exception:  # reported to the fake kind as a failed create
            self.send_response(500)
            raise
        finally:
            self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def kind_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[tuple[FakeCLI, Path, Path]]:
    """The fakes, a kind wrapper pointing at a simulator, and that simulator's kubelets. The
    host's routes are a home LAN on 10.0.0.0/24, so the lab must leave 10.0.0.0/16 alone."""
    quiesce_session_lab(request.config)  # these labs reset the process-global moto state
    # The ELB's health checks on kind are real connections to the node containers' IPs; the
    # fake containers' IPs exist nowhere, so every check goes to NODE_PORT on loopback instead
    # (a test opens it to play a node that answers).
    monkeypatch.setattr(
        Lab, "node_address", staticmethod(lambda inst, port: ("127.0.0.1", NODE_PORT[0]))
    )
    fake = FakeCLI(tmp_path / "fake")
    fake.set(kind_version="kind v0.29.0 go1.24.2 linux/amd64")
    lan = kind_network.UsedBlock(ipaddress.IPv4Network("10.0.0.0/24"), "host route via wlan0")
    monkeypatch.setattr(kind_network, "route_blocks", lambda *a, **k: [lan])
    with KubeServer() as sim, KubeletStandIn(sim.api_client()) as kubelets:

        def start_kubelets() -> None:
            for name, kubelet in fake.kubelets().items():
                args = kubelet["args"]
                kubelets.register(
                    NodeRegistration(
                        name=name,
                        ip=args["node-ip"],
                        version=KubeVersion.parse("1.33"),
                        role=Role(kubelet["role"]),
                        provider_id=args["provider-id"],
                    )
                )

        _Kubelets.start = start_kubelets
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Kubelets)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        kubeconfig = sim.write_kubeconfig(tmp_path / "cluster.kubeconfig")
        wrapper = tmp_path / "kind"
        wrapper.write_text(
            _WRAPPER.format(
                python=sys.executable,
                fake=str(fake.bin / "kind"),
                kubeconfig=str(kubeconfig),
                callback=f"http://127.0.0.1:{server.server_address[1]}/",
            )
        )
        wrapper.chmod(0o755)
        try:
            yield fake, wrapper, tmp_path
        finally:
            server.shutdown()
            server.server_close()


def _taints(core: Any, name: str) -> set[str]:
    return {t.key for t in core.read_node(name).spec.taints or []}


def _kind_lab(fake: FakeCLI, wrapper: Path, tmp: Path, **changes: Any) -> Lab:
    """A lab on the fake kind and docker of ``kind_world``."""
    return Lab(
        LabSpec(
            name="k",
            backend="kind",
            kind_binary=str(wrapper),
            docker_binary=str(fake.bin / "docker"),
            state_dir=tmp / "lab",
            **changes,
        )
    )


def _exposed_kind_lab(fake: FakeCLI, wrapper: Path, tmp: Path) -> Lab:
    """A lab with ``expose_to_nodes`` on a network it reuses, whose gateway is loopback (so its
    servers may bind the nodes' gateway here)."""
    network = {"Subnet": "127.0.0.0/20", "IPRange": "127.0.8.0/21", "Gateway": "127.0.0.1"}
    fake.set(networks={f"ccm-lab-{CLUSTER}": {**network, "Labels": {}}})
    return _kind_lab(fake, wrapper, tmp, expose_to_nodes=True, vpc_cidr="127.0.0.0/16")


def test_lab_on_kind_seeds_instances_from_containers_and_initializes_nodes(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    fake, wrapper, tmp = kind_world
    with socket.socket() as sock:  # a node network this host cannot reach: a closed port
        sock.bind(("127.0.0.1", 0))
        NODE_PORT[0] = int(sock.getsockname()[1])
    lab = _kind_lab(fake, wrapper, tmp)
    try:
        lab.start()
        calls = fake.calls()
        create = next(c for c in calls if c[:3] == ["docker", "network", "create"])
        # 10.0.0.0/16 holds the host's LAN route: the next free /16 is the VPC
        assert lab.config.vpc_cidr == "10.1.0.0/16"
        assert create[create.index("--subnet") + 1] == "10.1.0.0/20", "the zone's VPC subnet"
        assert create[create.index("--gateway") + 1] == "10.1.0.1"
        assert create[create.index("--ip-range") + 1] == "10.1.8.0/21", "clear of reserved IPs"
        assert any(c[:3] == ["kind", "create", "cluster"] for c in calls)

        nodes = {f"{CLUSTER}-control-plane": "10.1.8.0", f"{CLUSTER}-worker": "10.1.8.1"}
        assert {n.name: n.private_ip for n in lab.nodes} == nodes
        vpc = lab.aws.client("ec2").describe_vpcs(VpcIds=[lab.topology.vpc_id])["Vpcs"][0]
        assert vpc["CidrBlock"] == "10.1.0.0/16"
        # the kubelets kind started carry the instances' ids (kind's own kind:// is replaced)
        assert {n: k["args"]["provider-id"] for n, k in fake.kubelets().items()} == {
            n.name: n.provider_id for n in lab.nodes
        }
        ec2 = lab.aws.client("ec2")
        for node in lab.nodes:
            inst = ec2.describe_instances(InstanceIds=[node.instance_id])["Reservations"][0]
            assert inst["Instances"][0]["PrivateIpAddress"] == node.private_ip
        core = client.CoreV1Api(lab.api_client())
        for node in lab.nodes:
            assert core.read_node(node.name).spec.provider_id == node.provider_id
        state = lab.state(tmp / "lab")
        assert state.backend == "kind"
        assert not lab.capabilities.kubelet_stand_in
        with pytest.raises(LabNotReady, match="the kind backend has real kubelets"):
            _ = lab.sim  # the simulator, stand-in and data plane are the sim provider's
        # Docker Desktop's case: the host cannot reach the nodes, so no real requests
        with pytest.raises(LabNotReady, match="cannot reach the node network"):
            lab.traffic.send("web")

        lab.start_controller()
        for node in lab.nodes:
            wait_for(
                lambda n=node.name: UNINIT not in _taints(core, n),
                what=f"{node.name} initialized",
            )

        # A test's leftovers: a Service with our finalizer, a label on a node.
        core.create_namespaced_service(
            "default",
            {
                "metadata": {
                    "name": "web",
                    "finalizers": ["service.kubernetes.io/load-balancer-cleanup"],
                },
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            },
        )
        worker = lab.workers[0].name
        core.patch_node(worker, {"metadata": {"labels": {"test": "leftover"}}})
        lab.reset()
        names = [s.metadata.name for s in core.list_namespaced_service("default").items]
        assert "web" not in names
        labels = core.read_node(worker).metadata.labels
        assert "test" not in labels
        assert UNINIT in _taints(core, worker), "restored as the kubelet registered it"
        assert core.read_node(worker).spec.provider_id == lab.node(worker).provider_id
    finally:
        lab.stop()
    assert any(c[:3] == ["kind", "delete", "cluster"] for c in fake.calls())
    assert json.loads((fake.root / "state.json").read_text())  # fakes still consistent


def test_expose_to_nodes_serves_aws_and_metadata_on_the_nodes_gateway(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    """For an in-cluster controller the endpoints listen where pods reach the host. The fake
    network reports 127.0.0.1 as its gateway (servers here bind loopback only), so what is
    checked is that the address comes from the network's IPAM answer."""
    fake, wrapper, tmp = kind_world
    lab = _exposed_kind_lab(fake, wrapper, tmp)
    try:
        lab.start()
        inspects = [c for c in fake.calls() if c[:3] == ["docker", "network", "inspect"]]
        assert [f"ccm-lab-{CLUSTER}"] in [c[3:] for c in inspects], "gateway from the network"
        state = lab.state(tmp / "lab")
        assert state.aws_endpoint.startswith("http://127.0.0.1:")
        assert state.imds_endpoint.startswith("http://127.0.0.1:")
    finally:
        lab.stop()


class _Node(http.server.BaseHTTPRequestHandler):
    """A node's nodePort as agnhost ``netexec`` behind it answers: ``/hostname`` is the pod."""

    def do_GET(self) -> None:
        body = b"web-7d9f\n" if self.path == "/hostname" else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_lab_on_kind_sends_health_checks_and_traffic_to_the_nodes(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    """On kind nothing models the nodes: the ELB's health checks are real connections (made off
    the AWS endpoint's lock) and ``lab.traffic`` really sends its requests. Here every node's
    address is one loopback port: while it answers, the instances go InService and requests are
    answered by the pod the body names; closed, checks fail with the connection's own error."""
    fake, wrapper, tmp = kind_world
    node = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Node)
    threading.Thread(target=node.serve_forever, daemon=True).start()
    NODE_PORT[0] = int(node.server_address[1])
    lab = _kind_lab(fake, wrapper, tmp)
    try:
        lab.start()
        lab.start_controller()
        core = client.CoreV1Api(lab.api_client())
        for n in lab.nodes:
            wait_for(lambda n=n.name: UNINIT not in _taints(core, n), what="initialized")
        core.create_namespaced_service(
            "default", {"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer",
                                                            "ports": [{"port": 80}]}}
        )  # fmt: skip
        name = wait_for(
            lambda: next(iter(lab.aws.client("elb").describe_load_balancers()
                              ["LoadBalancerDescriptions"]), {}).get("LoadBalancerName"),
            timeout=30, what="the ELB",
        )  # fmt: skip
        health = lab.aws.lab.elb_health
        worker = lab.workers[0].instance_id
        assert wait_for(lambda: health.in_service(name, worker)[0], timeout=30, what="InService")
        report = wait_for(
            lambda: (r := lab.traffic.send("web", requests=20)).answered_total == 20 and r,
            timeout=30,
            what="every request answered through the nodes",
        )
        assert dict(report.answered) == {"default/web-7d9f": 20}, report.to_json()
        node.shutdown()
        node.server_close()
        reason = wait_for(
            lambda: None if (r := health.in_service(name, worker))[0] else r[1],
            timeout=30,
            what="OutOfService once the node stops answering",
        )
        assert f"at 127.0.0.1:{NODE_PORT[0]}: connection refused" in reason, reason
    finally:
        node.server_close()
        lab.stop()


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
    }


def test_reset_on_kind_removes_the_tests_pods_and_empties_their_namespaces(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    """A real cluster keeps what a test made: the reset removes its pods (finalizers too) in
    ``default`` and in every namespace created since the baseline, so the next test may create
    ``web-0`` again; the cluster's own pods and namespaces are left alone."""
    fake, wrapper, tmp = kind_world
    lab = _kind_lab(fake, wrapper, tmp)
    try:
        lab.start()
        core = client.CoreV1Api(lab.api_client())
        # the cluster's own (kube-system was there at the baseline: not a test's namespace)
        core.create_namespaced_pod("kube-system", _pod("coredns-1"))
        core.create_namespaced_pod("default", _pod("web-0"))
        core.create_namespace({"metadata": {"name": "k1-lab-a"}})
        stuck = {**_pod("web-1"), "metadata": {"name": "web-1", "finalizers": ["test/hold"]}}
        core.create_namespaced_pod("k1-lab-a", stuck)
        core.create_namespaced_service(
            "k1-lab-a", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
        )
        lab.reset()
        assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == []
        assert [p.metadata.name for p in core.list_namespaced_pod("k1-lab-a").items] == []
        assert [s.metadata.name for s in core.list_namespaced_service("k1-lab-a").items] == []
        assert [p.metadata.name for p in core.list_namespaced_pod("kube-system").items] == [
            "coredns-1"
        ]
        core.create_namespaced_pod("default", _pod("web-0"))  # the name is free again
    finally:
        lab.stop()


def test_lab_traffic_through_the_daemon_sends_real_requests_on_kind(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    """``invoke lab.traffic`` asks the lab daemon, whose probe on kind really sends the requests
    through the nodes (here one loopback port answering as agnhost netexec does)."""
    fake, wrapper, tmp = kind_world
    node = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Node)
    threading.Thread(target=node.serve_forever, daemon=True).start()
    NODE_PORT[0] = int(node.server_address[1])
    lab = _kind_lab(fake, wrapper, tmp)
    control = daemon.control_server(lab)
    threading.Thread(target=control.serve_forever, daemon=True).start()
    try:
        lab.start()
        lab.start_controller()
        core = client.CoreV1Api(lab.api_client())
        core.create_namespaced_service(
            "default", {"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer",
                                                            "ports": [{"port": 80}]}}
        )  # fmt: skip
        root = tmp / "labs"
        make_private_dir(root / "k")
        url = f"http://127.0.0.1:{control.server_address[1]}"
        me = ProcessRef.of(os.getpid())
        assert me is not None
        write_state(
            lab.state(root / "k").replace(
                daemon=DaemonState(process=me, control_url=url, log=str(tmp / "lab.log"))
            )
        )
        doc = wait_for(
            lambda: (d := labview.traffic("web", name="k", requests=20, root=root))
            .get("answered", {}).get("default/web-7d9f") == 20 and d,
            timeout=30,
            what="every request answered through the nodes, asked of the daemon",
        )  # fmt: skip
        assert doc["requests"] == 20, doc
    finally:
        control.shutdown()
        control.server_close()
        node.shutdown()
        node.server_close()
        lab.stop()


def test_the_in_cluster_controller_gets_the_labs_world(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    """What the real-kind in-cluster test deploys into (``lab_world_settings``): the cloud
    config's EC2 endpoint lists an instance for every node, with its container's IP, and the
    metadata service answers botocore's own fetcher as the control plane's instance. A bare
    endpoint and metadata service (what that test used to start by hand) answer neither, and
    the controller exits at start."""
    from botocore.utils import InstanceMetadataRegionFetcher

    from tests.incluster.support import lab_world_settings

    fake, wrapper, tmp = kind_world
    lab = _exposed_kind_lab(fake, wrapper, tmp)
    try:
        lab.start()
        settings = lab_world_settings(lab)
        url = next(
            line.split("=", 1)[1].strip()
            for line in settings.cloud_config.splitlines()
            if line.strip().startswith("URL") and "elasticloadbalancing" not in line
        )
        creds = settings.aws_credentials
        ec2 = boto3.client(
            "ec2",
            endpoint_url=url,
            region_name=lab.config.region,
            aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
        )
        listed = {
            i["PrivateIpAddress"]: i["InstanceId"]
            for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"]
        }
        assert listed == {n.private_ip: n.instance_id for n in lab.nodes}
        assert settings.imds_endpoint is not None
        fetcher = InstanceMetadataRegionFetcher(base_url=settings.imds_endpoint)
        assert fetcher.retrieve_region() == lab.config.region
    finally:
        lab.stop()
