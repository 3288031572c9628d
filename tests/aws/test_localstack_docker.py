"""Starting a LocalStack through Docker (``--aws localstack`` without ``--aws-endpoint``).

No registry answers here and no LocalStack image runs, so these drive
:mod:`lab.aws.localstack_docker` through the fake ``docker`` of ``tests/cluster/fakecli.py``,
which answers ``run``/``port``/``inspect``/``logs``/``rm`` as the real CLI does. Where a test
needs the container's gateway to answer, the fake's published port is scripted to be where the
LocalStack stand-in (moto in a child process, ``tests/aws/localstack_standin.py``) listens:
that is the only thing standing in for the container; the commands, the port read-back, the
health wait and the clean-up are the lab's own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.aws.localstack import LocalStackUnavailable
from lab.aws.localstack_docker import (
    IMAGE,
    LABEL,
    TOKEN_ENV,
    docker_unavailable,
    published_port,
    run_argv,
    start_localstack,
    stop_localstack,
)
from tests.aws.localstack_standin import localstack_stand_in
from tests.cluster.fakecli import FakeCLI


@pytest.fixture
def fake(tmp_path: Path) -> FakeCLI:
    cli = FakeCLI(tmp_path / "fake")
    cli.set(images=[IMAGE])
    return cli


@pytest.fixture(scope="module")
def standin() -> Iterator[str]:
    with localstack_stand_in() as url:
        yield url


def test_the_pinned_image_runs_on_loopback_with_the_token_passed_by_name() -> None:
    argv = run_argv("lab1", env={TOKEN_ENV: "ls-SECRET-token"})
    assert argv[:2] == ["docker", "run"]
    assert argv[-1] == IMAGE == "localstack/localstack:4.14.0"
    assert argv[argv.index("--publish") + 1] == "127.0.0.1::4566", "loopback only, Docker's port"
    assert argv[argv.index("--label") + 1] == f"{LABEL}=lab1"
    assert argv[argv.index("--env") + 1] == TOKEN_ENV
    assert not any("SECRET" in a for a in argv), "the token's value is never on a command line"
    assert "--env" not in run_argv("lab1", env={}), "no token: nothing to pass"


def test_published_port_reads_the_loopback_line() -> None:
    assert published_port("127.0.0.1:49153\n") == 49153
    assert published_port("[::1]:49999\n127.0.0.1:50001\n") == 50001
    with pytest.raises(ValueError, match=r"no 127\.0\.0\.1 mapping"):
        published_port("0.0.0.0:49153\n")


def test_start_waits_for_health_and_stop_removes_the_container(
    fake: FakeCLI, standin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "ls-SECRET-token")
    fake.set(publish_to=int(standin.rsplit(":", 1)[1]))
    started = start_localstack("lab1", runner=fake.runner(), ready_timeout=30)
    assert started.endpoint.url == standin
    assert started.endpoint.services["ec2"] == "available"
    (container,) = fake.state["containers"]
    assert container["Id"] == started.container
    assert container["_env"] == [TOKEN_ENV]
    assert container["Config"]["Labels"] == {LABEL: "lab1"}
    calls = fake.calls()
    assert ["docker", "port", started.container, "4566/tcp"] in calls
    assert not any("ls-SECRET-token" in arg for call in calls for arg in call)

    stop_localstack(started.container, runner=fake.runner())
    assert fake.state["containers"] == []
    stop_localstack(started.container, runner=fake.runner())  # gone already: fine


def test_a_container_that_stops_is_reported_with_its_log_and_removed(fake: FakeCLI) -> None:
    # what the image prints without an auth token, then exits; the container stays (no --rm)
    # so its log says why, and the lab removes it
    fake.set(exit_on_start="ERROR: LOCALSTACK_AUTH_TOKEN is not set")
    with pytest.raises(LocalStackUnavailable) as caught:
        start_localstack("lab1", runner=fake.runner(), ready_timeout=30)
    message = str(caught.value)
    assert "stopped before it answered" in message
    assert TOKEN_ENV in message
    assert fake.state["containers"] == []


def test_a_missing_image_without_a_registry_is_one_clear_error(fake: FakeCLI) -> None:
    fake.set(images=[])
    with pytest.raises(LocalStackUnavailable) as caught:
        start_localstack("lab1", runner=fake.runner(), ready_timeout=5)
    message = str(caught.value)
    assert f"could not start LocalStack ({IMAGE}) with Docker" in message
    assert "registry-1.docker.io" in message
    assert not fake.state.get("containers")


def test_a_container_a_dead_lab_left_is_removed_before_a_new_start(
    fake: FakeCLI, standin: str
) -> None:
    fake.set(publish_to=int(standin.rsplit(":", 1)[1]))
    first = start_localstack("lab1", runner=fake.runner(), ready_timeout=30)
    second = start_localstack("lab1", runner=fake.runner(), ready_timeout=30)  # no name clash
    assert [c["Id"] for c in fake.state["containers"]] == [second.container]
    assert first.container != second.container
    stop_localstack(second.container, runner=fake.runner())


def test_docker_unavailable_says_why(fake: FakeCLI, tmp_path: Path) -> None:
    assert docker_unavailable(runner=fake.runner()) is None
    broken = tmp_path / "bin" / "docker"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    broken.chmod(0o755)
    why = docker_unavailable(str(broken))
    assert why is not None
    assert "Cannot connect to the Docker daemon" in why
    assert docker_unavailable(str(tmp_path / "nowhere" / "docker")) is not None
    assert os.path.exists(broken)
