"""Deploying the in-cluster controller: build the image, load it into kind, apply the manifests.

Role: :func:`build_image` (``docker build -f deploy/Dockerfile``), :func:`deploy` /
:func:`undeploy` (``kind load docker-image`` through the cluster provider, then ``kubectl
apply|delete -f -`` through ``lab.exec``), and for a running lab (``invoke
lab.controller.deploy``) :func:`kind_lab_target`, :func:`deploy_to_lab`,
:func:`undeploy_from_lab`. Neighbours: ``lab.incluster.manifests`` (what is applied; pure),
``lab.exec`` (every external command), ``lab.state`` (the running lab, read lazily).
"""

from __future__ import annotations

import dataclasses
import logging
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from lab.exec import CommandError, CommandResult, Runner, SubprocessRunner
from lab.incluster.manifests import (
    DEFAULT_IMAGE,
    DOCKERFILE,
    PROTECTED_NAMESPACES,
    REPO_ROOT,
    InClusterSettings,
    Manifest,
    lab_settings,
    render_manifests,
    to_yaml,
)

log = logging.getLogger(__name__)

# --- deploy / undeploy -----------------------------------------------------------------------


class ImageLoadingCluster(Protocol):
    """What deploying needs from a cluster provider (``lab.cluster.kind.KindProvider``)."""

    name: str
    docker_binary: str

    def load_image(self, image: str, *, nodes: Sequence[str] = ()) -> None: ...


def build_image(
    runner: Runner,
    image: str,
    *,
    docker: str = "docker",
    context: Path = REPO_ROOT,
    timeout: float = 900.0,
    base_image: str | None = None,
) -> CommandResult:
    """``docker build -f deploy/Dockerfile -t IMAGE .`` in the repository root;
    ``base_image`` becomes ``--build-arg BASE_IMAGE=...`` (a local image, where no registry is
    reachable)."""
    args = ["--build-arg", f"BASE_IMAGE={base_image}"] if base_image else []
    return runner.run(
        [docker, "build", *args, "-f", str(DOCKERFILE), "-t", image, "."],
        timeout=timeout,
        cwd=context,
    )


def _kubectl(kubectl: str, kubeconfig: Path, *args: str) -> list[str]:
    return [kubectl, "--kubeconfig", str(kubeconfig), *args]


def deploy(
    provider: ImageLoadingCluster,
    *,
    settings: InClusterSettings,
    runner: Runner,
    kubeconfig: Path,
    kubectl: str = "kubectl",
    build: bool = True,
    context: Path = REPO_ROOT,
    wait_timeout: float | None = 180.0,
    base_image: str | None = None,
) -> list[Manifest]:
    """Build the image, load it into the kind nodes, apply the manifests, wait for rollout.

    ``wait_timeout=None`` skips the rollout wait. Returns the applied manifests.
    """
    manifests = render_manifests(settings)
    if build:
        log.info("building %s", settings.image)
        build_image(
            runner,
            settings.image,
            docker=provider.docker_binary,
            context=context,
            base_image=base_image,
        )
    log.info("loading %s into kind cluster %s", settings.image, provider.name)
    provider.load_image(settings.image)
    runner.run(
        _kubectl(kubectl, kubeconfig, "apply", "-f", "-"),
        input_text=to_yaml(manifests),
        timeout=120,
    )
    if wait_timeout is not None:
        runner.run(
            _kubectl(
                kubectl,
                kubeconfig,
                "rollout",
                "status",
                f"deployment/{settings.name}",
                "--namespace",
                settings.namespace,
                f"--timeout={int(wait_timeout)}s",
            ),
            timeout=wait_timeout + 30,
        )
    return manifests


def undeploy(
    settings: InClusterSettings,
    *,
    runner: Runner,
    kubeconfig: Path,
    kubectl: str = "kubectl",
) -> None:
    """Delete what :func:`deploy` applied (never a pre-existing namespace). Idempotent."""
    manifests = [
        m
        for m in render_manifests(settings)
        if not (m["kind"] == "Namespace" and m["metadata"]["name"] in PROTECTED_NAMESPACES)
    ]
    runner.run(
        _kubectl(kubectl, kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", "-"),
        input_text=to_yaml(manifests[::-1]),
        timeout=120,
    )


# --- a running lab (``invoke lab.controller.deploy``) ----------------------------------------


def _loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


@dataclasses.dataclass(frozen=True)
class KindLabTarget:
    """A running kind lab an in-cluster controller can be deployed into."""

    state: Any  # lab.state.LabState (imported lazily: lab.state sits above this module)
    provider: Any  # lab.cluster.kind.KindProvider
    kubeconfig: Path
    host: str
    """The nodes' gateway: where pods reach the lab's AWS endpoint and IMDS."""
    aws_port: int
    imds_port: int


def kind_lab_target(name: str, *, root: Path | None, runner: Runner) -> KindLabTarget:
    """The kind lab ``name``, checked for an in-cluster controller: on kind, no local
    controller running (two unelected controllers would fight over the same objects), its AWS
    endpoint and IMDS not on loopback only (pods could not reach them); LabError otherwise."""
    from lab.cluster.kind import KindProvider
    from lab.state import LabError, load_state

    state = load_state(name, root)
    if state.backend != "kind":
        raise LabError(
            f"lab {name!r} runs on {state.backend!r}; the in-cluster controller needs "
            f"kind (`invoke lab.up --name {name} --backend kind --no-controller`)"
        )
    if state.controller is not None:
        raise LabError(
            f"lab {name!r} already runs the controller as a local process; bring the lab up "
            "with --no-controller to run it in-cluster instead"
        )
    aws_url, imds_url = state.aws_endpoint, state.imds_endpoint
    local = [u for u in (aws_url, imds_url) if _loopback(u)]
    if local:
        raise LabError(
            f"the lab's endpoints {local} listen on loopback only; pods reach the host at "
            "the nodes' gateway, so the AWS endpoint and IMDS must listen there (or 0.0.0.0)"
        )
    provider = KindProvider(
        f"{state.cluster_id}-{name}", state_dir=Path(state.directory) / "kind", runner=runner
    )
    provider.nodes()  # records each node container's gateway on its (dedicated) network
    if not provider.gateways:
        raise LabError(f"no node container of kind cluster {provider.name!r} reports a gateway")
    return KindLabTarget(
        state=state,
        provider=provider,
        kubeconfig=Path(state.kubeconfig),
        host=sorted(provider.gateways.values())[0],
        aws_port=urllib.parse.urlsplit(aws_url).port or 80,
        imds_port=urllib.parse.urlsplit(imds_url).port or 80,
    )


def deploy_to_lab(
    name: str = "default",
    *,
    image: str = DEFAULT_IMAGE,
    build: bool = True,
    legacy: Sequence[str] = (),
    root: Path | None = None,
    runner: Runner | None = None,
    kubectl: str = "kubectl",
    wait_timeout: float | None = 180.0,
    base_image: str | None = None,
) -> list[Manifest]:
    """Deploy the controller into the kind cluster of the lab ``name`` (``.lab/<name>``).

    Refuses, with the reason, when the lab is not on kind, when its local controller still
    runs (two unelected controllers would fight over the same objects), or when its AWS
    endpoint or IMDS listen on loopback only (pods could not reach them).
    """
    from lab.state import LabError

    run = runner or SubprocessRunner()
    target = kind_lab_target(name, root=root, runner=run)
    provider, kubeconfig = target.provider, target.kubeconfig
    settings = lab_settings(
        host=target.host,
        aws_port=target.aws_port,
        imds_port=target.imds_port,
        region=target.state.region,
        cluster_id=target.state.cluster_id,
        image=image,
        legacy=tuple(legacy),
    )
    try:
        return deploy(
            provider,
            settings=settings,
            runner=run,
            kubeconfig=kubeconfig,
            kubectl=kubectl,
            build=build,
            wait_timeout=wait_timeout,
            base_image=base_image,
        )
    except CommandError as exc:  # the pasteable command and its output tail, no traceback
        raise LabError(str(exc)) from exc


def undeploy_from_lab(
    name: str = "default",
    *,
    root: Path | None = None,
    runner: Runner | None = None,
    kubectl: str = "kubectl",
) -> None:
    """Remove the in-cluster controller from the lab ``name`` (the Lease it held stays)."""
    from lab.state import LabError, load_state

    state = load_state(name, root)
    try:
        undeploy(
            InClusterSettings(),
            runner=runner or SubprocessRunner(),
            kubeconfig=Path(state.kubeconfig),
            kubectl=kubectl,
        )
    except CommandError as exc:
        raise LabError(str(exc)) from exc
