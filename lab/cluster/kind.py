"""The ``kind`` cluster provider: real Kubernetes in Docker, driven through the kind CLI.

Why the CLI and not a library: pytest-kind (PyPI 22.11.1, Nov 2022) is unmaintained, downloads
kind v0.17.0 and an amd64-only kubectl from GitHub at run time, and its fixture cannot pass a
config file (docs/reference/peers.md §7.1); the kind CLI is the stable, documented surface. Every
command goes through ``lab.exec`` so failures print a pasteable command and its output.

Provisioning runs the steps of ``lab.cluster.kind_steps`` (check the kind release, the
network, the config, ``kind create cluster``, discover and wait for the nodes, load images), undone
in reverse on failure unless ``retain``.

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

import json
import logging
import os
import re
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
from lab.cluster.kind_config import kind_node_names
from lab.cluster.kind_network import ipam_gateway
from lab.cluster.kind_steps import (
    NETWORK_OWNER_LABEL,
    CheckKindVersion,
    CreateCluster,
    DiscoverNodes,
    EnsureNetwork,
    KindContext,
    LoadImages,
    WaitForNodes,
    WriteConfig,
)
from lab.cluster.restore import ClusterBaseline
from lab.cluster.steps import ProgressReporter, Step, StepRun
from lab.exec import CommandError, Runner, SubprocessRunner
from lab.kubeclient import kubeconfig_server, new_api_client
from lab.settle import Reporter

log = logging.getLogger(__name__)

CLUSTER_LABEL = "io.x-k8s.kind.cluster"
ROLE_LABEL = "io.x-k8s.kind.role"
NETWORK_ENV = "KIND_EXPERIMENTAL_DOCKER_NETWORK"
#: where delete() exports the cluster's logs first (CI uploads them when a job fails)
LOGS_ENV = "CCM_LAB_KIND_LOGS"


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
