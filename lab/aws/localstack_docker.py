"""Starting a LocalStack for a lab through Docker (``--aws localstack`` without ``--aws-endpoint``).

Role: where a Docker engine answers and no LocalStack was named, the lab runs one container of
:data:`IMAGE` (pinned), publishes its gateway port 4566 on ``127.0.0.1`` only (a port Docker
chooses, read back with ``docker port``), waits until ``/_localstack/health`` lists EC2 as
usable, and removes the container when the lab stops or fails to start (``docker rm --force``;
not ``--rm``, which would take a container that exits at start-up away with the log that says
why). Each container carries the label
``io.x-k8s.ccm-lab.localstack=<lab>``, so one whose lab died can be found and removed
(:func:`remove_for_lab`).

Since 2026-03-23 the LocalStack image needs an auth token (``shared/docs/reference/peers.md``
§6): ``LOCALSTACK_AUTH_TOKEN`` from the caller's environment is handed to the container by
name (``--env LOCALSTACK_AUTH_TOKEN``: Docker copies the value; it never appears on a command
line or in a log). Without it, the image stops at start-up and the lab's error carries the
container's last log lines, which say so.

Every command goes through :mod:`lab.exec` (argument lists, pasteable errors). The tests drive
this through the fake ``docker`` of ``tests/cluster/fakecli.py``, which answers as the real CLI
does; no LocalStack image runs on the machine that wrote this.

Neighbours: :mod:`lab.aws.localstack` (the health probe), :mod:`lab.compose` (calls this in its
``start-aws`` step).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from lab.aws.localstack import (
    LocalStackEndpoint,
    LocalStackUnavailable,
    connect_localstack_at,
)
from lab.exec import CommandError, Runner, SubprocessRunner

log = logging.getLogger(__name__)

#: The LocalStack image the lab runs (the last release before the single-image consolidation).
IMAGE = "localstack/localstack:4.14.0"
#: LocalStack's edge gateway port inside the container (``GATEWAY_LISTEN``).
GATEWAY_PORT = 4566
LABEL = "io.x-k8s.ccm-lab.localstack"
TOKEN_ENV = "LOCALSTACK_AUTH_TOKEN"
#: image pull on a first start takes minutes; later starts about ten seconds
RUN_TIMEOUT = 900.0


@dataclass(frozen=True)
class StartedLocalStack:
    """A LocalStack container the lab started, and its checked endpoint."""

    container: str
    endpoint: LocalStackEndpoint


def docker_unavailable(docker: str = "docker", *, runner: Runner | None = None) -> str | None:
    """None when a Docker engine answers ``docker info``; else why not (one phrase)."""
    import shutil

    if runner is None and shutil.which(docker) is None:
        return f"no {docker!r} CLI is on PATH"
    run = runner or SubprocessRunner()
    try:
        done = run.run([docker, "info", "--format", "{{.ServerVersion}}"], check=False, timeout=10)
    except (CommandError, OSError) as exc:
        return f"`{docker} info` failed ({exc})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no Docker engine answers `{docker} info` ({last})"
    return None


def container_name(lab: str) -> str:
    return f"ccm-lab-localstack-{lab}"


def run_argv(
    lab: str, *, docker: str = "docker", image: str = IMAGE, env: Mapping[str, str] | None = None
) -> list[str]:
    """The ``docker run`` command for ``lab``'s LocalStack (the token passed by name only)."""
    environ = os.environ if env is None else env
    argv = [
        docker,
        "run",
        "--detach",
        "--name",
        container_name(lab),
        "--label",
        f"{LABEL}={lab}",
        "--publish",
        f"127.0.0.1::{GATEWAY_PORT}",
    ]
    if environ.get(TOKEN_ENV):
        argv += ["--env", TOKEN_ENV]
    return [*argv, image]


def published_port(output: str) -> int:
    """The host port of ``docker port`` output (``127.0.0.1:49153``; IPv6 lines ignored)."""
    for line in output.splitlines():
        host, _, port = line.strip().rpartition(":")
        if host == "127.0.0.1" and port.isdigit():
            return int(port)
    raise ValueError(f"no 127.0.0.1 mapping in `docker port` output {output!r}")


def start_localstack(
    lab: str,
    *,
    region: str = "us-east-1",
    runner: Runner | None = None,
    docker: str = "docker",
    image: str = IMAGE,
    ready_timeout: float = 120.0,
) -> StartedLocalStack:
    """Run ``lab``'s LocalStack container and wait until its EC2 answers; on any failure the
    container is removed and :class:`LocalStackUnavailable` says why (with its log tail)."""
    run = runner or SubprocessRunner()
    remove_for_lab(lab, runner=run, docker=docker)  # a container a dead lab of this name left
    try:
        started = run.run(run_argv(lab, docker=docker, image=image), timeout=RUN_TIMEOUT)
    except CommandError as exc:
        raise LocalStackUnavailable(
            f"could not start LocalStack ({image}) with Docker: {exc}"
        ) from None
    container = started.stdout.strip().splitlines()[-1] if started.stdout.strip() else ""
    if not container:
        raise LocalStackUnavailable(f"`docker run {image}` printed no container id")
    try:
        mapping = run.run(
            [docker, "port", container, f"{GATEWAY_PORT}/tcp"], check=False, timeout=30
        )
        if mapping.returncode != 0 and not _running(container, run, docker):
            raise _stopped(container, run, docker)
        if mapping.returncode != 0:
            raise LocalStackUnavailable(
                f"`docker port {container[:12]} {GATEWAY_PORT}/tcp` failed: "
                f"{mapping.stderr.strip()}"
            )
        url = f"http://127.0.0.1:{published_port(mapping.stdout)}"
        endpoint = _wait_healthy(url, region, container, run, docker, ready_timeout)
    except BaseException as exc:
        stop_localstack(container, runner=run, docker=docker)
        if isinstance(exc, CommandError | ValueError):
            raise LocalStackUnavailable(f"LocalStack container {container[:12]}: {exc}") from None
        raise
    log.info("LocalStack %s started in container %s at %s", image, container[:12], url)
    return StartedLocalStack(container=container, endpoint=endpoint)


def _wait_healthy(
    url: str, region: str, container: str, run: Runner, docker: str, timeout: float
) -> LocalStackEndpoint:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            return connect_localstack_at(url, region, timeout=2.0)
        except LocalStackUnavailable as exc:
            last = str(exc)
        if not _running(container, run, docker):
            raise _stopped(container, run, docker)
        if time.monotonic() > deadline:
            raise LocalStackUnavailable(
                f"LocalStack at {url} was not ready within {timeout:.0f}s ({last}); its log "
                f"ends with: {_logs(container, run, docker)}"
            )
        time.sleep(0.5)


def _running(container: str, run: Runner, docker: str) -> bool:
    state = run.run(
        [docker, "inspect", "--format", "{{.State.Running}}", container], check=False, timeout=30
    )
    return state.returncode == 0 and state.stdout.strip() == "true"


def _stopped(container: str, run: Runner, docker: str) -> LocalStackUnavailable:
    return LocalStackUnavailable(
        f"the LocalStack container {container[:12]} stopped before it answered (is {TOKEN_ENV} "
        f"set?); its log ends with: {_logs(container, run, docker)}"
    )


def _logs(container: str, run: Runner, docker: str) -> str:
    done = run.run([docker, "logs", "--tail", "5", container], check=False, timeout=30)
    text = (done.stdout + done.stderr).strip()
    return " | ".join(text.splitlines()[-5:]) or "(nothing)"


def stop_localstack(
    container: str, *, runner: Runner | None = None, docker: str = "docker"
) -> None:
    """Remove the container (gone already is fine)."""
    run = runner or SubprocessRunner()
    done = run.run([docker, "rm", "--force", container], check=False, timeout=120)
    if done.returncode != 0 and "No such container" not in done.stderr:
        log.warning("docker rm --force %s failed: %s", container[:12], done.stderr.strip())


def remove_for_lab(lab: str, *, runner: Runner | None = None, docker: str = "docker") -> list[str]:
    """Remove every LocalStack container labelled for ``lab``; returns their ids."""
    run = runner or SubprocessRunner()
    listed = run.run(
        [docker, "ps", "--all", "--quiet", "--filter", f"label={LABEL}={lab}"],
        check=False,
        timeout=30,
    )
    found = listed.stdout.split() if listed.returncode == 0 else []
    for container in found:
        stop_localstack(container, runner=run, docker=docker)
    return found
