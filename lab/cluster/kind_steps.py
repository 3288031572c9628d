"""The ordered steps that provision a kind cluster, and the kind-release check the first runs.

Role: :class:`KindProvider` (``lab.cluster.kind``) runs these through ``lab.cluster.steps``
(each ``execute(ctx)``, undone in reverse on failure unless ``retain``), in this order:

1. ``check-kind-version``: ``kind version`` must suit the node image (old images are paired with
   the kind release that built them — v1.22 needs kind v0.20.0; v1beta4 needs kind >= v0.32.0).
2. ``ensure-network`` (only with ``network_subnet``): a dedicated bridge network whose subnet
   matches the lab VPC subnet, so container IPs are valid private IPs of the fake instances,
   created with an explicit ``--gateway`` (Docker reports none otherwise; the block itself is
   chosen free of other networks and host routes by ``lab.cluster.kind_network``); kind is
   pointed at it with ``KIND_EXPERIMENTAL_DOCKER_NETWORK``. Undo removes it if created.
3. ``write-config``: the version-aware config (``lab.cluster.kind_config``) into the state dir.
4. ``create-cluster``: ``kind create cluster --name --config --kubeconfig --wait --retain``
   (``--retain`` so kind leaves failures to *our* undo). Undo: ``kind delete cluster``.
5. ``discover-nodes``: node containers by kind's label ``io.x-k8s.kind.cluster=<name>``, their
   IPs from ``docker inspect``; the ``on_nodes`` callback receives them so the lab can align each
   fake EC2 instance's private IP with its node (kubelet's ``--node-ip`` is the container IP and
   the CCM rejects a provided node IP the cloud does not report — peers.md §1.2).
6. ``wait-for-nodes``: every node's Node object registered (``--wait`` covers control-plane
   nodes only: a worker may still be joining when ``kind create`` returns), within another
   ``wait`` after kind returned, and each with the providerID the lab patched in: a patch kind
   skipped (its ``apiVersion`` not the node image's kubeadm API) leaves kind's own ``kind://``
   providerID, which can never change, and the controller would never initialize that node.
7. ``load-images``: ``kind load docker-image`` for an in-cluster controller image; where that
   fails (under Docker's containerd image store, kind#3795) ``docker save --platform`` of the
   engine's own platform and ``kind load image-archive``.

Neighbours: ``lab.cluster.kind_config`` renders the config, ``lab.cluster.kind_network`` picks
gateways, ``lab.versions.release`` pairs node images with kind releases.

Design: the steps see the provider only through :class:`KindHost`, the settings and the few
operations they use, so this module does not import the provider that runs it (no circle), and
a step can be tested against anything that has those members.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from lab.cluster.base import ClusterSpec, NodeInfo, ProviderID
from lab.cluster.kind_config import kind_node_names, render_config
from lab.cluster.kind_network import gateway_of
from lab.cluster.kubeapi import raw
from lab.exec import Runner
from lab.versions.provisioning import kubeadm_api_version
from lab.versions.release import KubeVersion, node_image

log = logging.getLogger(__name__)

#: the label on the Docker network the lab makes for a cluster (its value: the cluster name)
NETWORK_OWNER_LABEL = "io.x-k8s.ccm-lab.cluster"
_KIND_VERSION_RE = re.compile(r"kind v(\d+)\.(\d+)\.(\d+)")


class KindVersionError(RuntimeError):
    """The kind CLI on PATH cannot drive the requested node image."""


def parse_kind_version(text: str) -> tuple[int, int, int]:
    match = _KIND_VERSION_RE.search(text)
    if match is None:
        raise KindVersionError(f"cannot read a version from `kind version` output {text!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def check_kind_version(
    kind_version: tuple[int, int, int], kube: KubeVersion, *, explicit_image: bool
) -> None:
    """Refuse kind/image pairs known not to work; explain which kind release to use."""
    have = "v{}.{}.{}".format(*kind_version)
    if kube.at_least(36) and kind_version < (0, 32, 0):
        raise KindVersionError(
            f"kubernetes {kube} needs kubeadm v1beta4 configs, which kind >= v0.32.0 emits; "
            f"the kind on PATH is {have}"
        )
    if explicit_image:
        return
    image = node_image(kube)
    if kind_version < image.kind_release:
        raise KindVersionError(
            f"{image.reference} was built by kind {image.kind_release_text}; the kind on PATH "
            f"({have}) is older — install kind {image.kind_release_text} or newer"
        )
    if image.pair_exactly and kind_version != image.kind_release:
        raise KindVersionError(
            f"{image.reference} is only known to work with kind {image.kind_release_text} "
            f"(node image/entrypoint compatibility across kind releases is not promised); "
            f"the kind on PATH is {have}. Install kind {image.kind_release_text}, or pass "
            f"strict_kind_version=False to try anyway"
        )


class KindHost(Protocol):
    """What the steps use of the kind provider (``lab.cluster.kind.KindProvider``)."""

    name: str
    runner: Runner
    kind_binary: str
    docker_binary: str
    network_subnet: str | None
    network_ip_range: str | None
    image: str | None
    images_to_load: tuple[str, ...]
    on_nodes: Callable[[Sequence[NodeInfo]], None] | None
    wait: str
    create_timeout: float
    strict_kind_version: bool
    provider_ids: dict[str, ProviderID]
    gateway: str | None
    gateways: dict[str, str]

    @property
    def network(self) -> str | None: ...

    @property
    def config_path(self) -> Path: ...

    def kubeconfig(self) -> Path: ...

    def kind_env(self) -> dict[str, str]: ...

    def nodes(self) -> list[NodeInfo]: ...

    def api_client(self) -> Any: ...

    def load_image(self, image: str, *, nodes: Sequence[str] = ()) -> None: ...


@dataclasses.dataclass
class KindContext:
    """State shared by the kind steps."""

    spec: ClusterSpec
    provider: KindHost
    network_created: bool = False
    nodes: list[NodeInfo] = dataclasses.field(default_factory=list)


class CheckKindVersion:
    name = "check-kind-version"

    def execute(self, ctx: KindContext) -> None:
        p = ctx.provider
        out = p.runner.run([p.kind_binary, "version"], timeout=30).stdout
        try:
            check_kind_version(
                parse_kind_version(out), ctx.spec.version, explicit_image=p.image is not None
            )
        except KindVersionError as err:
            if p.strict_kind_version:
                raise
            log.warning("continuing despite: %s", err)

    def undo(self, ctx: KindContext) -> None:
        return None


class EnsureNetwork:
    name = "ensure-network"

    def execute(self, ctx: KindContext) -> None:
        p = ctx.provider
        if p.network is None or p.network_subnet is None:
            raise RuntimeError("ensure-network runs only when network_subnet is set")
        probe = p.runner.run([p.docker_binary, "network", "inspect", p.network], check=False)
        if probe.ok:
            subnets = [
                c.get("Subnet")
                for net in json.loads(probe.stdout)
                for c in (net.get("IPAM") or {}).get("Config") or []
            ]
            if p.network_subnet not in subnets:
                raise RuntimeError(
                    f"docker network {p.network} exists with subnet {subnets}, not the lab's "
                    f"{p.network_subnet}; remove it (`docker network rm {p.network}`)"
                )
            log.info("docker network %s exists; reusing it", p.network)
            return
        p.runner.run(
            [
                p.docker_binary,
                "network",
                "create",
                "--driver",
                "bridge",
                "--subnet",
                p.network_subnet,
                "--gateway",
                gateway_of(p.network_subnet),
                *(["--ip-range", p.network_ip_range] if p.network_ip_range else []),
                "--label",
                f"{NETWORK_OWNER_LABEL}={p.name}",
                p.network,
            ],
            timeout=60,
        )
        ctx.network_created = True

    def undo(self, ctx: KindContext) -> None:
        p = ctx.provider
        if ctx.network_created and p.network is not None:
            p.runner.run([p.docker_binary, "network", "rm", p.network], timeout=60)
            ctx.network_created = False


class WriteConfig:
    name = "write-config"

    def execute(self, ctx: KindContext) -> None:
        p = ctx.provider
        text = render_config(
            cluster_name=p.name, version=ctx.spec.version, nodes=ctx.spec.nodes, image=p.image
        )
        p.config_path.write_text(text)

    def undo(self, ctx: KindContext) -> None:
        return None  # the rendered config stays in the state dir for the post-mortem


class CreateCluster:
    name = "create-cluster"

    def execute(self, ctx: KindContext) -> None:
        p = ctx.provider
        p.runner.run(
            [
                p.kind_binary,
                "create",
                "cluster",
                "--name",
                p.name,
                "--config",
                str(p.config_path),
                "--kubeconfig",
                str(p.kubeconfig()),
                "--wait",
                p.wait,
                "--retain",
            ],
            timeout=p.create_timeout,
            env=p.kind_env(),
        )

    def undo(self, ctx: KindContext) -> None:
        p = ctx.provider
        p.runner.run(
            [
                p.kind_binary,
                "delete",
                "cluster",
                "--name",
                p.name,
                "--kubeconfig",
                str(p.kubeconfig()),
            ],
            timeout=180,
            env=p.kind_env(),
        )


class DiscoverNodes:
    name = "discover-nodes"

    def execute(self, ctx: KindContext) -> None:
        p = ctx.provider
        nodes = p.nodes()
        expected = kind_node_names(p.name, [n.role for n in ctx.spec.nodes])
        missing = sorted(set(expected) - {n.name for n in nodes})
        if missing:
            raise RuntimeError(f"kind reported success but node containers are missing: {missing}")
        without_ip = [n.name for n in nodes if n.ip is None]
        if without_ip:
            raise RuntimeError(f"node containers without an IPv4 address: {without_ip}")
        ctx.nodes = nodes
        p.gateway = p.gateways.get(nodes[0].name) if nodes else None
        wanted = dict(zip(expected, (n.ip for n in ctx.spec.nodes), strict=True))
        for node in nodes:
            if wanted.get(node.name) and wanted[node.name] != node.ip:
                log.info(
                    "node %s got %s from Docker, not the requested %s; on_nodes reports it",
                    node.name,
                    node.ip,
                    wanted[node.name],
                )
        if p.on_nodes is not None:
            p.on_nodes(nodes)

    def undo(self, ctx: KindContext) -> None:
        ctx.nodes = []


_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")


def duration_seconds(text: str) -> float:
    """A Go duration as kind's ``--wait`` takes it (``120s``, ``5m``, ``1m30s``, ``1.5m``,
    ``500ms``, ``0``) in seconds; ValueError naming the text otherwise."""
    value = text.strip()
    if value == "0":
        return 0.0
    terms = _TERM.findall(value)
    if not terms or "".join(n + u for n, u in terms) != value:
        raise ValueError(f"wait {text!r}: a duration such as 120s, 5m or 1m30s")
    return sum(float(n) * _UNITS[u] for n, u in terms)


class WaitForNodes:
    name = "wait-for-nodes"

    def execute(self, ctx: KindContext) -> None:
        from kubernetes import client, watch

        p = ctx.provider
        expected = kind_node_names(p.name, [n.role for n in ctx.spec.nodes])
        core = client.CoreV1Api(p.api_client())
        deadline = time.monotonic() + duration_seconds(p.wait)
        found: dict[str, Any] = {}
        while True:
            listed = raw(core.list_node(_preload_content=False))
            found = {n["metadata"]["name"]: n for n in listed.get("items") or []}
            missing = [n for n in expected if n not in found]
            left = deadline - time.monotonic()
            if not missing or left <= 0:
                break
            log.info(
                "waiting for nodes %s to register (kind --wait covers control planes)", missing
            )
            watcher = watch.Watch()  # type: ignore[no-untyped-call]
            stream = watcher.stream(  # type: ignore[no-untyped-call]
                core.list_node,
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=max(1, int(left)),
                _request_timeout=left + 10,  # a server that stops answering ends the watch
            )
            for event in stream:  # until one of them is added; then list again
                if event.get("type") == "ADDED":
                    watcher.stop()  # type: ignore[no-untyped-call]
        if missing:
            raise RuntimeError(
                f"kind created the cluster but nodes {missing} did not register within "
                f"{p.wait}; `kind export logs --name {p.name}` shows their kubelets' logs"
            )
        for name, node in sorted(found.items()):
            want = p.provider_ids.get(name)
            have = (node.get("spec") or {}).get("providerID")
            if want is not None and have != want:
                raise RuntimeError(
                    f"node {name} registered with providerID {have or '(none)'}, not the lab's "
                    f"{want}: kind skipped the lab's kubeadm patch (a patch applies only where "
                    f"its apiVersion is the node image's kubeadm API, here "
                    f"{kubeadm_api_version(ctx.spec.version)} for Kubernetes "
                    f"{ctx.spec.version}), so the node image does not run that version. A "
                    "providerID never changes: delete the lab and bring it up with a node image "
                    "of the --k8s-version asked for"
                )

    def undo(self, ctx: KindContext) -> None:
        return None


class LoadImages:
    name = "load-images"

    def execute(self, ctx: KindContext) -> None:
        for image in ctx.provider.images_to_load:
            ctx.provider.load_image(image)

    def undo(self, ctx: KindContext) -> None:
        return None  # images go with the cluster
