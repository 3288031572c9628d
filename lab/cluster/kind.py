"""The ``kind`` cluster provider: real Kubernetes in Docker, driven through the kind CLI.

Why the CLI and not a library: pytest-kind (PyPI 22.11.1, Nov 2022) is unmaintained, downloads
kind v0.17.0 and an amd64-only kubectl from GitHub at run time, and its fixture cannot pass a
config file (docs/reference/peers.md §7.1); the kind CLI is the stable, documented surface. Every
command goes through ``lab.exec`` so failures print a pasteable command and its output.

Provisioning steps (``lab.cluster.steps``, undone in reverse on failure unless ``retain``):

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
   ``wait`` after kind returned,
   and each with the providerID the lab patched in: a patch kind skipped (its ``apiVersion``
   not the node image's kubeadm API) leaves kind's own ``kind://`` providerID, which can never
   change, and the controller would never initialize that node.
7. ``load-images``: ``kind load docker-image`` for an in-cluster controller image; where that
   fails (under Docker's containerd image store, kind#3795) ``docker save --platform`` of the
   engine's own platform and ``kind load image-archive``.

kind passes ``--provider-id=kind://docker/<cluster>/<node>`` to every kubelet, and a Node's
providerID can never change once set; ``lab.cluster.kind_config`` replaces it per node with a
kubeadm patch in the form the node's kubeadm API needs, so the kubelets register the AWS ids.

Reaching the host from the nodes: containers reach the host at the gateway address of their
Docker network (``host_address()``; typically ``172.18.0.1`` on kind's default network). The lab's
AWS endpoint and IMDS must listen on that address (not only 127.0.0.1) for an in-cluster
controller; point it there with ``AWS_ENDPOINT_URL`` and ``AWS_EC2_METADATA_SERVICE_ENDPOINT``
(``http://<gateway>:<port>``) since 169.254.169.254 inside a kind node is not ours. A controller
run on the host (the default) needs none of this.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lab.cluster.base import (
    Capabilities,
    ClusterSpec,
    NodeInfo,
    NodeName,
    ProviderID,
    Role,
)
from lab.cluster.kind_config import kind_node_names, render_config
from lab.cluster.kind_network import gateway_of, ipam_gateway
from lab.cluster.kubeapi import raw
from lab.cluster.restore import ClusterBaseline
from lab.cluster.steps import ProgressReporter, Step, StepRun
from lab.cluster.versions import KubeVersion, kubeadm_api_version, node_image
from lab.exec import CommandError, Runner, SubprocessRunner
from lab.kubeclient import kubeconfig_server, new_api_client
from lab.settle import Reporter

log = logging.getLogger(__name__)

CLUSTER_LABEL = "io.x-k8s.kind.cluster"
ROLE_LABEL = "io.x-k8s.kind.role"
NETWORK_OWNER_LABEL = "io.x-k8s.ccm-lab.cluster"
NETWORK_ENV = "KIND_EXPERIMENTAL_DOCKER_NETWORK"
#: where delete() exports the cluster's logs first (CI uploads them when a job fails)
LOGS_ENV = "CCM_LAB_KIND_LOGS"
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


@dataclasses.dataclass
class KindContext:
    """State shared by the kind steps."""

    spec: ClusterSpec
    provider: KindProvider
    network_created: bool = False
    nodes: list[NodeInfo] = dataclasses.field(default_factory=list)


class KindProvider:
    """A kind cluster named ``name`` whose files (config, kubeconfig) live in ``state_dir``."""

    kind = "kind"

    def __init__(
        self,
        name: str,
        *,
        state_dir: Path,
        runner: Runner | None = None,
        kind_binary: str = "kind",
        docker_binary: str = "docker",
        network_subnet: str | None = None,
        network_ip_range: str | None = None,
        image: str | None = None,
        images_to_load: Sequence[str] = (),
        on_nodes: Callable[[Sequence[NodeInfo]], None] | None = None,
        wait: str = "120s",
        create_timeout: float = 600.0,
        strict_kind_version: bool = True,
    ) -> None:
        self.name = name
        self.state_dir = state_dir
        self.runner = runner or SubprocessRunner()
        self.kind_binary = kind_binary
        self.docker_binary = docker_binary
        self.network_subnet = network_subnet
        #: where Docker allocates container IPs inside ``network_subnet`` (``--ip-range``), so
        #: node IPs can avoid the first addresses of the subnet, which AWS reserves
        self.network_ip_range = network_ip_range
        self.image = image
        self.images_to_load = tuple(images_to_load)
        self.on_nodes = on_nodes
        self.wait = wait
        self.create_timeout = create_timeout
        self.strict_kind_version = strict_kind_version
        #: provider IDs by kind node name, as passed to the kubelets (set by provision())
        self.provider_ids: dict[str, ProviderID] = {}
        self.gateway: str | None = None
        self.gateways: dict[str, str] = {}
        self._baseline = ClusterBaseline(sweep_pods=True)  # the lab's own cluster
        self._api_client: Any = None

    # --- paths and names ---------------------------------------------------------------

    @property
    def network(self) -> str | None:
        """The dedicated Docker network, or None to use kind's shared ``kind`` network."""
        return f"ccm-lab-{self.name}" if self.network_subnet else None

    @property
    def config_path(self) -> Path:
        return self.state_dir / "kind-config.yaml"

    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def kind_env(self) -> dict[str, str]:
        return {NETWORK_ENV: self.network} if self.network else {}

    def capabilities(self) -> Capabilities:
        return Capabilities(
            provisions=True,
            real_kubelet=True,
            real_controller_manager=True,
            load_images=True,
            stop_node_heartbeat=False,
            kubelet_stand_in=False,
            assigns_node_ips=True,
            # the nodes' network gateway, known once discover-nodes ran (else host_address())
            host_address_for_nodes=self.gateway,
        )

    # --- lifecycle ---------------------------------------------------------------------

    def steps(self) -> list[Step[KindContext]]:
        steps: list[Step[KindContext]] = [CheckKindVersion()]
        if self.network_subnet:
            steps.append(EnsureNetwork())
        steps += [WriteConfig(), CreateCluster(), DiscoverNodes(), WaitForNodes()]
        if self.images_to_load:
            steps.append(LoadImages())
        return steps

    def prepare(self, spec: ClusterSpec) -> None:
        """Check the kind release and create the lab's Docker network (its gateway is where the
        lab's endpoints listen for in-cluster clients). ``provision`` reuses the network."""
        if spec.name != self.name:
            raise ValueError(f"spec.name {spec.name!r} differs from provider name {self.name!r}")
        ctx = KindContext(spec=spec, provider=self)
        steps: list[Step[KindContext]] = [CheckKindVersion()]
        if self.network_subnet:
            steps.append(EnsureNetwork())
        StepRun(steps).run(ctx)

    def provision(
        self, spec: ClusterSpec, *, retain: bool = False, progress: ProgressReporter | None = None
    ) -> None:
        if spec.name != self.name:
            raise ValueError(f"spec.name {spec.name!r} differs from provider name {self.name!r}")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        ctx = KindContext(spec=spec, provider=self)
        names = kind_node_names(self.name, [n.role for n in spec.nodes])
        self.provider_ids = {
            name: node.provider_id
            for name, node in zip(names, spec.nodes, strict=True)
            if node.provider_id is not None
        }
        # kind's delete() finds what to remove by label, so no step log is kept for teardown
        StepRun(self.steps(), progress=progress).run(ctx, retain=retain)

    def api_client(self) -> Any:
        if self._api_client is None:
            self._api_client = new_api_client(self.kubeconfig())
        return self._api_client

    def api_url(self) -> str | None:
        return kubeconfig_server(self.kubeconfig())

    def baseline(self) -> None:
        self._baseline.take(self.api_client())

    def reset_objects(self) -> None:
        self._baseline.restore(self.api_client())

    def reporters(self) -> list[Reporter]:
        """Real components run here: nothing of the lab's to settle."""
        return []

    def take_internal_errors(self) -> list[str]:
        return []  # nothing of the lab's runs inside a kind cluster

    def delete(self) -> None:
        """Delete the cluster and the dedicated network (found by label, so a fresh process
        can clean up a lab it did not create). Idempotent. With ``$CCM_LAB_KIND_LOGS`` set
        (CI), ``kind export logs`` into ``$CCM_LAB_KIND_LOGS/<cluster>`` first, so a failed
        run's node logs outlive the cluster."""
        logs_root = os.environ.get(LOGS_ENV)
        if logs_root:
            try:
                self.logs(Path(logs_root) / self.name)
            except CommandError as err:  # no such cluster (any more): nothing to keep
                log.info("no kind logs exported for %s: %s", self.name, err.reason)
        self.runner.run(
            [
                self.kind_binary,
                "delete",
                "cluster",
                "--name",
                self.name,
                "--kubeconfig",
                str(self.kubeconfig()),
            ],
            timeout=180,
            env=self.kind_env(),
        )
        if self._api_client is not None:
            self._api_client.close()
            self._api_client = None
        # by the owner label, not by this provider's settings: a process cleaning up after a
        # lab whose daemon died does not know the subnet the network was made with
        for network in self._owned_networks():
            self.runner.run([self.docker_binary, "network", "rm", network], timeout=60)

    def logs(self, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        self.runner.run(
            [self.kind_binary, "export", "logs", str(dest), "--name", self.name], timeout=300
        )
        return dest

    def load_image(self, image: str, *, nodes: Sequence[str] = ()) -> None:
        """Load a host image into the nodes: ``kind load docker-image``, or, when that fails
        (Docker's containerd image store exports an index whose other platforms' blobs are
        absent, kind#3795), ``docker save`` of this engine's platform + ``kind load
        image-archive``."""
        target = ["--name", self.name, *(["--nodes", ",".join(nodes)] if nodes else [])]
        self.ensure_local_image(image)
        try:
            self.runner.run([self.kind_binary, "load", "docker-image", image, *target], timeout=300)
            return
        except CommandError as err:
            log.warning(
                "kind load docker-image %s failed (%s); retrying through docker save and "
                "kind load image-archive (kind#3795)",
                image,
                err.reason,
            )
        archive = self.state_dir / "images" / (re.sub(r"[^A-Za-z0-9_.-]", "_", image) + ".tar")
        archive.parent.mkdir(parents=True, exist_ok=True)
        platform = self.runner.run(
            [self.docker_binary, "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}"],
            timeout=30,
        ).stdout.strip()
        save = [self.docker_binary, "save", "--platform", platform, "-o", str(archive), image]
        saved = self.runner.run(save, timeout=300, check=False)
        if not saved.ok and "--platform" in saved.stdout + saved.stderr:
            # "unknown flag: --platform" (a CLI before 28) or "requires API version 1.48" (an
            # older engine): neither has a containerd image store that would need it
            self.runner.run([self.docker_binary, "save", "-o", str(archive), image], timeout=300)
        elif not saved.ok:
            raise CommandError(
                save, returncode=saved.returncode, stdout=saved.stdout, stderr=saved.stderr
            )
        try:
            self.runner.run(
                [self.kind_binary, "load", "image-archive", str(archive), *target], timeout=300
            )
        finally:
            archive.unlink(missing_ok=True)

    def ensure_local_image(self, image: str) -> None:
        """Pull ``image`` unless the host's engine has it: kind loads only local images ("not
        present locally"), so a released build named by reference must be pulled first."""
        present = self.runner.run(
            [self.docker_binary, "image", "inspect", "--format", "{{.Id}}", image],
            timeout=30,
            check=False,
        )
        if present.ok:
            return
        log.info("pulling %s: kind loads only images the host's engine has", image)
        self.runner.run([self.docker_binary, "pull", image], timeout=900)

    def nodes(self) -> list[NodeInfo]:
        listed = self.runner.run(
            [
                self.docker_binary,
                "ps",
                "--all",
                "--filter",
                f"label={CLUSTER_LABEL}={self.name}",
                "--format",
                "{{.Names}}",
            ],
            timeout=30,
        )
        names = sorted(n for n in listed.stdout.split() if n)
        if not names:
            return []
        inspected = self.runner.run([self.docker_binary, "inspect", *names], timeout=30)
        nodes = [self._node_from_inspect(item) for item in json.loads(inspected.stdout)]
        return sorted((n for n in nodes if n is not None), key=lambda n: n.name)

    def host_address(self) -> str:
        """The gateway of the nodes' Docker network: where nodes reach host processes. The
        network's IPAM answer, else (a network made without ``--gateway``) what the node
        containers report."""
        network = self.network or "kind"
        result = self.runner.run([self.docker_binary, "network", "inspect", network], timeout=30)
        gateway = (
            ipam_gateway(result.stdout) or self.gateway or next(iter(self.gateways.values()), None)
        )
        if gateway is None:
            raise RuntimeError(
                f"docker network {network!r} reports no IPv4 gateway (created without "
                "--gateway?) and no node container reports one"
            )
        return gateway

    # --- helpers -----------------------------------------------------------------------

    def _owned_networks(self) -> list[str]:
        """The Docker networks the lab made for this cluster (its owner label)."""
        result = self.runner.run(
            [
                self.docker_binary,
                "network",
                "ls",
                "--filter",
                f"label={NETWORK_OWNER_LABEL}={self.name}",
                "--format",
                "{{.Name}}",
            ],
            timeout=30,
        )
        return sorted(n for n in result.stdout.split() if n)

    def _node_from_inspect(self, item: dict[str, Any]) -> NodeInfo | None:
        """A Kubernetes node from a container, or None for kind's other containers (the
        ``external-load-balancer`` it runs in front of several control planes)."""
        name = str(item["Name"]).lstrip("/")
        labels = item.get("Config", {}).get("Labels") or {}
        try:
            role = Role(labels.get(ROLE_LABEL, ""))
        except ValueError:
            return None
        networks = item.get("NetworkSettings", {}).get("Networks") or {}
        net: dict[str, Any] = networks.get(self.network or "kind") or next(
            iter(networks.values()), {}
        )
        ip = net.get("IPAddress") or None
        if net.get("Gateway"):
            self.gateways[name] = str(net["Gateway"])
        return NodeInfo(NodeName(name), role, ip, self.provider_ids.get(name))


# --- steps -----------------------------------------------------------------------------


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
