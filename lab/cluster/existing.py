"""The ``existing`` cluster provider: any cluster reachable through a kubeconfig.

No provisioning and no teardown: ``provision`` only checks that the API server answers with the
given kubeconfig (one step, nothing to undo) and ``delete`` deliberately does nothing — the lab
never deletes a cluster it did not create. Nodes are read from the API. Logs are
``kubectl cluster-info dump`` through ``lab.exec``. Capabilities are declared conservatively:
real kubelets and controller-manager are assumed (it is somebody's real cluster), image loading
and heartbeat control are not available.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from lab.cluster.base import Capabilities, ClusterSpec, NodeInfo
from lab.cluster.kubeapi import list_node_infos
from lab.cluster.restore import ClusterBaseline
from lab.cluster.steps import ProgressReporter, run_steps
from lab.exec import Runner, SubprocessRunner
from lab.kubeclient import kubeconfig_server, new_api_client
from lab.settle import Reporter

log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Ctx:
    provider: ExistingProvider


class CheckReachable:
    name = "check-api-reachable"

    def execute(self, ctx: _Ctx) -> None:
        nodes = ctx.provider.nodes()
        log.info("existing cluster answers; %d node(s)", len(nodes))

    def undo(self, ctx: _Ctx) -> None:
        return None


class ExistingProvider:
    kind = "existing"

    def __init__(
        self,
        kubeconfig: Path,
        *,
        context: str | None = None,
        runner: Runner | None = None,
        kubectl: str = "kubectl",
    ) -> None:
        if not kubeconfig.is_file():
            raise FileNotFoundError(f"kubeconfig {str(kubeconfig)!r} does not exist")
        self._kubeconfig = kubeconfig
        self.context = context
        self.runner = runner or SubprocessRunner()
        self.kubectl = kubectl
        self._api_client: Any = None
        self._baseline = ClusterBaseline()

    def capabilities(self) -> Capabilities:
        return Capabilities(
            provisions=False,
            real_kubelet=True,
            real_controller_manager=True,
            load_images=False,
            stop_node_heartbeat=False,
            kubelet_stand_in=False,
            assigns_node_ips=True,
        )

    def api_client(self) -> Any:
        if self._api_client is None:
            self._api_client = new_api_client(self._kubeconfig, context=self.context)
        return self._api_client

    def api_url(self) -> str | None:
        return kubeconfig_server(self._kubeconfig, context=self.context)

    def host_address(self) -> str:
        raise RuntimeError(
            "an existing cluster's nodes reach the host at an address only its owner knows; "
            "pass the lab's endpoints to in-cluster components yourself"
        )

    def baseline(self) -> None:
        self._baseline.take(self.api_client())

    def reset_objects(self) -> None:
        self._baseline.restore(self.api_client())

    def reporters(self) -> list[Reporter]:
        """Real components run here: nothing of the lab's to settle."""
        return []

    def take_internal_errors(self) -> list[str]:
        return []

    def prepare(self, spec: ClusterSpec) -> None:
        """Nothing has to exist before the lab's endpoints start."""

    def provision(
        self, spec: ClusterSpec, *, retain: bool = False, progress: ProgressReporter | None = None
    ) -> None:
        del spec  # the cluster is what it is; the spec's nodes are not created
        run_steps([CheckReachable()], _Ctx(self), retain=retain, progress=progress)

    def nodes(self) -> list[NodeInfo]:
        return list_node_infos(self.api_client())

    def kubeconfig(self) -> Path:
        return self._kubeconfig

    def logs(self, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        argv = [self.kubectl, "--kubeconfig", str(self._kubeconfig)]
        if self.context:
            argv += ["--context", self.context]
        argv += ["cluster-info", "dump", "--output-directory", str(dest)]
        self.runner.run(argv, timeout=300)
        return dest

    def delete(self) -> None:
        log.info("existing cluster: delete() leaves the cluster alone (the lab did not create it)")
        if self._api_client is not None:
            self._api_client.close()
            self._api_client = None
