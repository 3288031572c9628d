"""The LocalStack seam: URL resolution through localstack-client, the health probe, errors.

Most tests run against a tiny stand-in that serves ``/_localstack/health`` on 127.0.0.1 port 0
(the probe's parsing and error paths). One test, marked ``localstack``, talks to a real
LocalStack at the default URL and skips with the reason when none answers.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from lab.aws.localstack import (
    LocalStackConfigError,
    LocalStackUnavailable,
    connect_localstack,
    localstack_url,
    probe,
)
from lab.aws.seeding import describe_topology, seed_topology
from lab.aws.topology import (
    NodeSpec,
    TopologySpec,
    delete_topology,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in ("AWS_ENDPOINT_URL", "LOCALSTACK_HOST", "USE_SSL"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_default_url(clean_env: pytest.MonkeyPatch) -> None:
    assert localstack_url() == "http://localhost:4566"


def test_localstack_host_env_and_argument(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOCALSTACK_HOST", "127.0.0.1:4599")
    assert localstack_url() == "http://127.0.0.1:4599"
    assert localstack_url("ls.internal:4510") == "http://ls.internal:4510"  # argument wins
    assert localstack_url("ls.internal") == "http://ls.internal:4566"


def test_use_ssl_and_aws_endpoint_url(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("USE_SSL", "1")
    assert localstack_url("127.0.0.1:4566") == "https://127.0.0.1:4566"
    clean_env.setenv("AWS_ENDPOINT_URL", "http://10.1.2.3:4566/")
    assert localstack_url("ignored:1") == "http://10.1.2.3:4566"  # AWS_ENDPOINT_URL wins


def test_unparsable_host_names_the_value(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOCALSTACK_HOST", "localhost:edge")
    with pytest.raises(LocalStackConfigError, match=r"LOCALSTACK_HOST='localhost:edge'"):
        localstack_url()
    with pytest.raises(LocalStackConfigError, match=r"localstack_host='h:x'"):
        localstack_url("h:x")


# -- the probe, against a stand-in health endpoint ---------------------------------------------


@pytest.fixture
def health_server() -> Iterator[Callable[[Any, int], str]]:
    """Start a stand-in answering ``/_localstack/health`` with (body, status); returns its URL."""
    servers: list[Any] = []

    def start(body: Any, status: int = 200) -> str:
        def app(environ: dict[str, Any], start_response: Any) -> Any:
            request = Request(environ)
            if request.path != "/_localstack/health":
                return Response("not found", status=404)(environ, start_response)
            text = body if isinstance(body, str) else json.dumps(body)
            return Response(text, status=status, content_type="application/json")(
                environ, start_response
            )

        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


HEALTHY = {
    "services": {"ec2": "available", "sts": "running", "elb": "disabled"},
    "edition": "community",
    "version": "4.0.3",
}


def test_connect_returns_endpoint_and_clients(
    health_server: Callable[[Any, int], str], clean_env: pytest.MonkeyPatch
) -> None:
    url = health_server(HEALTHY, 200)
    endpoint = connect_localstack(url.removeprefix("http://"), "eu-west-1")
    assert endpoint.url == url
    assert endpoint.version == "4.0.3"
    assert endpoint.edition == "community"
    assert endpoint.services["ec2"] == "available"
    ec2 = endpoint.client("ec2")
    assert ec2.meta.endpoint_url == url
    assert ec2.meta.region_name == "eu-west-1"


def test_missing_pro_service_says_pro(
    health_server: Callable[[Any, int], str], clean_env: pytest.MonkeyPatch
) -> None:
    url = health_server(HEALTHY, 200)
    with pytest.raises(LocalStackUnavailable, match=r"'elb' \(state 'disabled'\).*Pro feature"):
        connect_localstack(url.removeprefix("http://"), required_services=("ec2", "elb"))


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ("<html>hi</html>", 200, "did not return JSON"),
        ({"status": "ok"}, 200, "no 'services' map"),
        ({}, 503, "answered HTTP 503"),
    ],
)
def test_probe_rejects_what_is_not_localstack(
    health_server: Callable[[Any, int], str], body: Any, status: int, needle: str
) -> None:
    url = health_server(body, status)
    with pytest.raises(LocalStackUnavailable, match=needle):
        probe(url)


def test_probe_of_closed_port_is_fast_and_clear(clean_env: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    clean_env.setenv("LOCALSTACK_HOST", f"127.0.0.1:{port}")
    with pytest.raises(LocalStackUnavailable) as caught:
        connect_localstack(timeout=0.2)
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}" in message
    assert f"LOCALSTACK_HOST': '127.0.0.1:{port}'" in message


# -- a real LocalStack, when one answers -------------------------------------------------------


@pytest.mark.localstack
def test_topology_on_real_localstack() -> None:
    try:
        endpoint = connect_localstack(timeout=0.3)
    except LocalStackUnavailable as exc:
        pytest.skip(f"no LocalStack: {exc}")
    spec = TopologySpec(
        cluster_id="ls-lab",
        region=endpoint.region,
        zones=("us-east-1a",),
        nodes=(NodeSpec("n1", "10.0.0.10", "us-east-1a"),),
    )
    ec2 = endpoint.client("ec2", max_attempts=3)
    delete_topology(ec2, spec.cluster_id)  # a previous run's leftovers (LocalStack persists)
    try:
        topo = seed_topology(ec2, spec)
        assert describe_topology(ec2, spec) == topo
        raw = ec2.describe_instances(InstanceIds=[topo.instances["n1"].instance_id])
        assert raw["Reservations"][0]["Instances"][0]["PrivateIpAddress"] == "10.0.0.10"
    finally:
        delete_topology(ec2, spec.cluster_id)
