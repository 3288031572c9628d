"""What a :class:`~lab.spec.LabSpec` needs of this machine, checked before a lab starts.

Role: the rule table (``lab.spec``) judges a spec by itself; these checks ask the machine: the
kubeconfig of ``--backend existing`` is a readable file naming an API server, and that server
answers; ``--backend auto`` becomes kind where a Docker engine and the kind CLI answer, else
sim, and ``--backend kind`` finds them; a LocalStack (or Docker to start one) answers; a kind
lab's ``--vpc-cidr`` overlaps no Docker network or host route. Each failure is a
:class:`~lab.state.LabError` whose one line names the flag, the value and the fix.

Neighbours: the front door (``lab.frontdoor.up``) runs them in order before it changes
anything; the pytest fixtures (``lab.pytest_plugin``) run the kubeconfig file check at
configure time. The SDKs (Kubernetes client, boto3) are imported inside the check that needs
one, so a refusal costs no imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.spec import Backend
from lab.state import LabError


def check_kubeconfig_file(kubeconfig: Path) -> None:
    """``--kubeconfig``: a file that can be read and names an API server (whether it answers:
    :func:`check_reachable`)."""
    if not kubeconfig.expanduser().is_file():
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: no such file; give the path of the cluster's "
            "kubeconfig (e.g. ~/.kube/config)"
        )
    try:
        kubeconfig.expanduser().read_bytes()
    except OSError as exc:
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: cannot be read ({exc.strerror}); fix its "
            "permissions or give another path"
        ) from None
    from lab.kubeclient import kubeconfig_server

    if kubeconfig_server(kubeconfig.expanduser()) is None:
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: names no API server (no current context with a "
            "cluster server); give a kubeconfig kubectl can use"
        )


def check_reachable(kubeconfig: Path, *, timeout: float = 5.0) -> str:
    """The API server ``kubeconfig`` names answers a version request; its version. Else a
    :class:`LabError` naming the flag, the server and what happened."""
    from lab.kubeclient import kubeconfig_server, new_api_client

    server = kubeconfig_server(kubeconfig)
    try:
        api = new_api_client(kubeconfig)
    except Exception as exc:  # the client's own config errors: bad certificates, no user...
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: the Kubernetes client cannot use it ({exc}); "
            "give a kubeconfig kubectl can use"
        ) from None
    try:
        from kubernetes import client

        info = client.VersionApi(api).get_code(_request_timeout=timeout)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: its API server {server} does not answer "
            f"({reason[:200]}); start the cluster or fix the kubeconfig"
        ) from None
    finally:
        api.close()
    return str(info.git_version)


@dataclass(frozen=True)
class BackendChoice:
    """The backend a request gets, and why (printed by the front door for ``auto``)."""

    backend: Backend
    reason: str


def choose_backend(requested: str) -> BackendChoice:
    """``auto`` → kind where Docker and kind answer, else sim (with the reason); ``kind`` →
    checked to be usable, with what to do otherwise; sim and existing as they are."""
    from lab.cluster.base import choose_provider

    if requested not in ("auto", Backend.KIND):
        return BackendChoice(Backend(requested), "")
    probe = choose_provider(None)
    if requested == Backend.KIND and probe.name != Backend.KIND:
        raise LabError(
            f"--backend kind needs a Docker engine and the kind CLI: {probe.reason}; "
            "start Docker (and install kind), or use --backend sim"
        )
    return BackendChoice(Backend(probe.name), probe.reason)


def check_localstack_reachable(aws_endpoint: str | None) -> None:
    """``--aws localstack``: the named LocalStack answers its health check, or (none named)
    a Docker engine answers to start one; otherwise one line saying which and what to do."""
    from lab.aws.localstack import LocalStackUnavailable, connect_localstack_at
    from lab.aws.localstack_docker import IMAGE, docker_unavailable

    if aws_endpoint is not None:
        try:
            connect_localstack_at(aws_endpoint, timeout=3.0)
        except LocalStackUnavailable as exc:
            raise LabError(f"--aws-endpoint {aws_endpoint}: {exc}") from None
        return
    why = docker_unavailable()
    if why is not None:
        raise LabError(
            f"--aws localstack without --aws-endpoint starts {IMAGE} with Docker, and {why}; "
            "give a running LocalStack with --aws-endpoint URL, or start Docker"
        )


def check_vpc_cidr_free(vpc_cidr: str, *, docker: str = "docker") -> None:
    """kind: the block must overlap no Docker network and no host route."""
    from lab.cluster.kind_network import (
        NetworkCollision,
        choose_vpc_cidr,
        docker_blocks,
        route_blocks,
    )
    from lab.exec import SubprocessRunner

    runner = SubprocessRunner()
    try:
        choose_vpc_cidr(docker_blocks(runner, docker) + route_blocks(runner), wanted=vpc_cidr)
    except NetworkCollision as exc:
        raise LabError(str(exc)) from None
