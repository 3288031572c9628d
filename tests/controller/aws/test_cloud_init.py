"""Start-up: self identity from instance metadata, the off-cluster dummy mode, and a bounded,
explicit failure when metadata is unreachable (failure catalog §5 ``imds-required``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from controller.aws import CloudInitError, load_cloud_config, new_cloud
from controller.aws.metadata import MAX_ATTEMPTS
from lab.aws import AwsServer
from lab.imds import ImdsServer
from tests.controller.aws.conftest import REGION, cloud_config_text
from tests.controller.aws.topology import CLUSTER, Topology


def overrides_only(url: str, topo: Topology) -> str:
    """Region and endpoints only: identity must come from instance metadata."""
    text = cloud_config_text(url, topo)
    return "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith(("VPC", "SubnetID", "KubernetesClusterID"))
    )


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BlackHole:
    """A listener that accepts connections, counts them and never answers."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
        self._sock.close()
        self._thread.join(5)
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


def test_unreachable_metadata_fails_fast_naming_the_endpoint(
    aws: AwsServer, topo: Topology, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint)
    cfg, _ = load_cloud_config(overrides_only(aws.url, topo))
    with pytest.raises(CloudInitError) as err:
        new_cloud(cfg, metadata_timeout=2.0)
    assert f"{endpoint}/" in str(err.value)
    assert "refused" in str(err.value)  # answered at once: no waiting out the timeout
    assert "KubernetesClusterID" in str(err.value)  # says how to run off-cluster


def test_silent_metadata_is_bounded_by_the_timeout(
    aws: AwsServer, topo: Topology, black_hole: BlackHole, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", black_hole.url)
    cfg, _ = load_cloud_config(overrides_only(aws.url, topo))
    with pytest.raises(CloudInitError, match=black_hole.url) as err:
        new_cloud(cfg, metadata_timeout=1.0)
    # bounded by attempts, not by luck: each attempt a token request and a read at most
    assert 1 <= len(black_hole.accepted) <= 2 * MAX_ATTEMPTS
    assert "timed out" in str(err.value)


def test_dummy_self_instance_needs_no_metadata(
    aws: AwsServer, topo: Topology, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    cfg, _ = load_cloud_config(cloud_config_text(aws.url, topo))
    cloud = new_cloud(cfg)
    assert (cloud.provider_name, cloud.vpc_id, cloud.cluster_id) == ("aws", topo.vpc, CLUSTER)
    assert cloud.self_instance_id == "master-dummy"
    assert cloud.region == REGION


@pytest.mark.parametrize("imdsv2", ["required", "optional"])
def test_identity_from_metadata_and_cluster_id_from_tags(
    aws: AwsServer, topo: Topology, monkeypatch: pytest.MonkeyPatch, imdsv2: str
) -> None:
    iid = topo.instances["node-0"]
    with ImdsServer(
        aws.url, REGION, instance_id=iid, cache_ttl=0, imdsv2=cast(Any, imdsv2)
    ) as imds:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
        cfg, _ = load_cloud_config(overrides_only(aws.url, topo))
        cloud = new_cloud(cfg)
    assert cloud.self_instance_id == iid
    assert cloud.vpc_id == topo.vpc
    assert cloud.cluster_id == CLUSTER  # from the instance's kubernetes.io/cluster/<id> tag
    assert cloud.context.self_subnet_id == topo.public_subnets[0]


def test_missing_cluster_id_is_a_clear_error(
    aws: AwsServer, topo: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    ec2 = aws.client("ec2")
    iid = topo.instances["node-0"]
    ec2.delete_tags(Resources=[iid], Tags=[{"Key": f"kubernetes.io/cluster/{CLUSTER}"}])
    with ImdsServer(aws.url, REGION, instance_id=iid, cache_ttl=0) as imds:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
        cfg, _ = load_cloud_config(overrides_only(aws.url, topo))
        with pytest.raises(CloudInitError, match="failed to find ClusterID"):
            new_cloud(cfg)


def _imds_override(url: str, region: str = "eu-west-3") -> str:
    return (
        f'\n[ServiceOverride "imds"]\nService = ec2imds\nRegion = {region}\nURL = {url}\n'
        f"SigningRegion = {region}\n"
    )


def test_imds_override_is_used_when_region_is_unset(
    aws: AwsServer, topo: Topology, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upstream ``GetIMDSEndpointOpts``: the ``ec2imds`` override is the metadata endpoint
    whatever its Region, so it is used exactly when ``Region`` is unset and the region must
    come from metadata; before, ours looked it up by the (still unknown) region and fell back
    to the default endpoint. The environment points at a closed port to prove it is unused."""
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    iid = topo.instances["node-0"]
    with ImdsServer(aws.url, REGION, instance_id=iid, cache_ttl=0) as imds:
        text = overrides_only(aws.url, topo).replace(f"Region = {REGION}\nVPC", "VPC")
        text = text.replace(f"[Global]\nRegion = {REGION}\n", "[Global]\n")
        cfg, _ = load_cloud_config(text + _imds_override(imds.url))
        assert cfg.region == ""
        cloud = new_cloud(cfg, metadata_timeout=2.0)
    assert (cloud.self_instance_id, cloud.region) == (iid, REGION)


def test_zone_decides_the_region_metadata_is_not_asked(
    aws: AwsServer, topo: Topology, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upstream ``getRegionFromMetadata``: off-cluster with a ``Zone`` in another region and
    no ``Region``, the clients go to the zone's region and metadata is never asked (its
    endpoint here refuses every connection)."""
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    text = (
        cloud_config_text(aws.url, topo)
        .replace(f"[Global]\nRegion = {REGION}\n", "[Global]\nZone = eu-west-1a\n")
        .replace(f"Region = {REGION}\n", "Region = eu-west-1\n")
    )
    cfg, _ = load_cloud_config(text)
    cloud = new_cloud(cfg, metadata_timeout=2.0)
    assert cloud.self_instance_id == "master-dummy"
    assert cloud.region == "eu-west-1"


@pytest.fixture
def imds_v1_only() -> Iterator[str]:
    """A metadata server that refuses IMDSv2 tokens (405) and answers v1 GETs."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    answers = {
        "/latest/meta-data/instance-id": "i-0v1only",
        "/latest/meta-data/placement/availability-zone": "eu-west-1b",
    }

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            self.send_error(405)

        def do_GET(self) -> None:
            body = answers.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_metadata_falls_back_to_v1_and_derives_region(imds_v1_only: str) -> None:
    from controller.aws.metadata import fetch_self_identity, metadata_endpoint

    ident = fetch_self_identity(metadata_endpoint(imds_v1_only), timeout=2.0)
    assert (ident.instance_id, ident.availability_zone, ident.region) == (
        "i-0v1only",
        "eu-west-1b",
        "eu-west-1",
    )


def test_aws_cloud_satisfies_the_provider_contract(
    aws: AwsServer, topo: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.cloud import Cloud, InstancesV2, LoadBalancer

    cfg, _ = load_cloud_config(cloud_config_text(aws.url, topo))
    cloud: Cloud = new_cloud(cfg)  # mypy checks the structural conformance here
    balancer: LoadBalancer | None = cloud.load_balancer()
    instances: InstancesV2 | None = cloud.instances_v2()
    assert balancer is not None
    assert instances is not None
    assert cloud.provider_name == "aws"
