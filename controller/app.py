"""The controller manager: wiring, leader election, health/metrics, CLI.

:class:`ControllerManager` takes a :class:`~controller.runtime.kube.KubeClient` and a
:class:`~controller.cloud.Cloud` and runs the service, cloud-node and cloud-node-lifecycle
controllers on shared informers. With leader election on, informers and controllers start
only once this instance holds the Lease and the process exits (code 1) if it loses it; on
``stop`` (SIGTERM/SIGINT) the Lease is released so a standby takes over at once.

:func:`main` is the CLI (``python -m controller``): it parses flags, sets up logging, loads
the cloud config and builds the AWS cloud (``controller.aws``, imported lazily so the
generic parts never need boto3), then runs the manager until a signal. Exit codes: 0 clean
shutdown, 1 the cloud could not start or leadership was lost, 2 bad command line or cloud
config (the message names the flag or the config key).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from controller.cloud import Cloud
from controller.legacy import BEHAVIORS, LegacyFlags, UnknownLegacyBehavior
from controller.lifecycle import LifecycleController
from controller.node import NodeController
from controller.runtime.clock import Clock, RealClock
from controller.runtime.informer import Informer
from controller.runtime.kube import Kind, KubeClient
from controller.runtime.leader import LeaderElectionConfig, LeaderElector
from controller.runtime.logs import setup_logging
from controller.runtime.metrics import Metrics
from controller.runtime.server import HealthServer
from controller.service import ServiceController
from controller.tagging import TaggingController, TaggingOptions, tagging_options

log = logging.getLogger(__name__)

ALL_CONTROLLERS = ("service", "cloud-node", "cloud-node-lifecycle")
# Known but off unless named (upstream: ControllersDisabledByDefault).
DISABLED_BY_DEFAULT = ("tagging",)
KNOWN_CONTROLLERS = ALL_CONTROLLERS + DISABLED_BY_DEFAULT
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Options:
    cluster_name: str = "kubernetes"
    legacy: LegacyFlags = field(default_factory=LegacyFlags)
    controllers: tuple[str, ...] = ALL_CONTROLLERS
    leader_elect: bool = False
    leader: LeaderElectionConfig = field(
        default_factory=lambda: LeaderElectionConfig(identity=default_identity())
    )
    metrics_addr: str = "127.0.0.1:10258"
    address_file: str = ""
    node_monitor_period: float = 5.0
    node_status_update_frequency: float = 300.0
    node_deletion_grace_period: float = 120.0
    concurrent_service_syncs: int = 1
    informer_sync_timeout: float = 60.0
    tagging: TaggingOptions = field(default_factory=TaggingOptions)


def _write_atomically(path: str, text: str) -> None:
    """Readers polling for the file never see it half written."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class ControllerManager:
    def __init__(
        self,
        kube: KubeClient,
        cloud: Cloud,
        options: Options,
        *,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.options = options
        self.metrics = metrics or Metrics()
        self.clock: Clock = clock or RealClock()
        self.server: HealthServer | None = None
        self.elector: LeaderElector | None = None
        self.informers: dict[str, Informer] = {}
        self.service: ServiceController | None = None
        self.node: NodeController | None = None
        self.lifecycle: LifecycleController | None = None
        self.tagging: TaggingController | None = None
        self.exit_code = EXIT_OK
        self._stop = threading.Event()
        self._done = threading.Event()
        self._controllers_running = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        observe = getattr(cloud, "set_call_observer", None)
        if callable(observe):
            observe(self.metrics)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> ControllerManager:
        if self.options.metrics_addr:
            host, port = _split_addr(self.options.metrics_addr)
            self.server = HealthServer(host, port, metrics=self.metrics.render).start()
            self.server.live["leader-election"] = self._leader_health
            self.server.ready["controllers"] = self._ready
            log.info("serving /healthz, /readyz and /metrics on %s", self.server.url)
            if self.options.address_file:
                _write_atomically(self.options.address_file, self.server.url + "\n")
        if self.options.leader_elect:
            self.elector = LeaderElector(
                self.kube,
                self.options.leader,
                on_started_leading=self._start_controllers_safely,
                on_stopped_leading=self._stopped_leading,
                clock=self.clock,
            )
            t = threading.Thread(target=self.elector.run, name="leader-election", daemon=True)
            t.start()
            self._threads.append(t)
        else:
            self._start_controllers_safely()
        return self

    def _start_controllers_safely(self) -> None:
        try:
            self._start_controllers()
        except Exception:
            log.exception("starting the controllers failed")
            self.exit_code = EXIT_FAILURE
            self.stop()

    def _start_controllers(self) -> None:
        """Informers, then the named controllers registered on them, then (once every
        informer has synced, unless stopping) the controllers' workers."""
        self.metrics.leader.set(1)
        kinds: tuple[Kind, ...] = ("services", "nodes")
        for kind in kinds:
            informer = Informer(self.kube, kind, clock=self.clock, metrics=self.metrics)
            self.informers[kind] = informer
        self._build_controllers(self.informers["services"], self.informers["nodes"])
        for informer in self.informers.values():
            informer.start()
        if not self._informers_synced() or self._stop.is_set():
            return
        self._run_controllers()
        self._controllers_running.set()
        log.info("controllers running: %s", ", ".join(self.options.controllers))

    def _build_controllers(self, services: Informer, nodes: Informer) -> None:
        """Each controller named in ``--controllers``, registered on the shared informers."""
        o = self.options
        if "service" in o.controllers:
            self.service = ServiceController(
                self.kube,
                self.cloud,
                services=services,
                nodes=nodes,
                cluster_name=o.cluster_name,
                legacy=o.legacy,
                clock=self.clock,
                metrics=self.metrics,
            )
            self.service.register(services, nodes)
        if "cloud-node" in o.controllers:
            self.node = NodeController(
                self.kube,
                self.cloud,
                nodes=nodes,
                clock=self.clock,
                address_refresh_period=o.node_status_update_frequency,
                metrics=self.metrics,
            )
            self.node.register(nodes)
        if "cloud-node-lifecycle" in o.controllers:
            self.lifecycle = LifecycleController(
                self.kube,
                self.cloud,
                nodes=nodes,
                legacy=o.legacy,
                clock=self.clock,
                monitor_period=o.node_monitor_period,
                deletion_grace_period=o.node_deletion_grace_period,
            )
        if "tagging" in o.controllers:
            self.tagging = TaggingController(
                self.kube,
                self.cloud,
                nodes=nodes,
                options=o.tagging,
                clock=self.clock,
                metrics=self.metrics,
            )
            self.tagging.register(nodes)

    def _informers_synced(self) -> bool:
        """True once every informer has synced; False if stopped while waiting. An informer
        that does not sync in ``informer_sync_timeout`` is an error."""
        for name, informer in self.informers.items():
            if not self._wait_synced(informer):
                if self._stop.is_set():
                    return False
                raise RuntimeError(
                    f"informer for {name} did not sync in {self.options.informer_sync_timeout}s"
                )
        return True

    def _run_controllers(self) -> None:
        if self.service is not None:
            workers = self.options.concurrent_service_syncs
            self._threads += self.service.run(self._stop, workers=workers)
        if self.node is not None:
            self._threads += self.node.run(self._stop)
        if self.lifecycle is not None:
            self._threads += self.lifecycle.run(self._stop)
        if self.tagging is not None:
            self._threads += self.tagging.run(self._stop)

    def _wait_synced(self, informer: Informer) -> bool:
        deadline = self.clock.monotonic() + self.options.informer_sync_timeout
        while not informer.wait_synced(0.1):
            if self._stop.is_set() or self.clock.monotonic() > deadline:
                return False
        return True

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        if not self._stop.is_set():
            log.error("leader election lost; exiting so a fresh instance can stand by")
            self.exit_code = EXIT_FAILURE
            self.stop()

    def stop(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
        threading.Thread(target=self._shutdown, name="shutdown", daemon=True).start()

    def _shutdown(self) -> None:
        log.info("shutting down")
        if self.elector is not None:
            self.elector.stop()
        for ctrl in (self.service, self.node, self.tagging):
            if ctrl is not None:
                ctrl.shut_down()
        for informer in self.informers.values():
            informer.stop()
        current = threading.current_thread()
        for t in self._threads:
            if t is not current:
                t.join(10)
        if self.server is not None:
            self.server.stop()
        self._done.set()

    def wait(self, timeout: float | None = None) -> int:
        self._done.wait(timeout)
        return self.exit_code

    @property
    def running(self) -> bool:
        return self._controllers_running.is_set() and not self._stop.is_set()

    # -- health -------------------------------------------------------------------------------
    def _leader_health(self) -> str | None:
        e = self.elector
        if e is None or not e.is_leader:
            return None
        late = e.seconds_since_renew() - (self.options.leader.lease_duration + 20)
        return f"lease not renewed for {e.seconds_since_renew():.0f}s" if late > 0 else None

    def _ready(self) -> str | None:
        if self.options.leader_elect and (self.elector is None or not self.elector.is_leader):
            return None  # a standby is ready to take over
        if not self._controllers_running.is_set():
            return "controllers not started (informers syncing)"
        return None


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """``300ms``, ``5s``, ``2m``, ``1h`` or plain seconds."""
    m = _DURATION.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (want e.g. 500ms, 5s, 2m)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"duration must be positive, got {text!r}")
    return value


def _sg_retry(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"want INTERVAL,TIMEOUT (e.g. 5s,10m), got {text!r}")
    interval, timeout = (_positive_duration(p) for p in parts)
    if timeout < interval:
        raise argparse.ArgumentTypeError(f"timeout must not be shorter than interval: {text!r}")
    return interval, timeout


def _split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--metrics-addr: want HOST:PORT (e.g. 127.0.0.1:0), got {addr!r}")
    return host.strip("[]"), int(port)


def _metrics_addr(text: str) -> str:
    if text:
        try:
            _split_addr(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
    return text


def _controllers(text: str) -> tuple[str, ...]:
    """Upstream's ``--controllers``: ``*`` is every controller on by default, ``name`` adds
    one (``tagging`` is off by default), ``-name`` removes one; empty means ``*``."""
    names = [n.strip() for n in text.split(",") if n.strip()] or ["*"]
    unknown = [n for n in names if n != "*" and n.lstrip("-") not in KNOWN_CONTROLLERS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(KNOWN_CONTROLLERS)}"
        )
    on = {n for n in names if n != "*" and not n.startswith("-")}
    if "*" in names:
        on |= set(ALL_CONTROLLERS)
    on -= {n[1:] for n in names if n.startswith("-")}
    return tuple(n for n in KNOWN_CONTROLLERS if n in on)


def build_parser() -> argparse.ArgumentParser:
    """The command line, flag group by flag group in ``--help`` order (the groups' order is
    the help text's; ``tests/controller/golden/`` pins both the text and the parsing)."""
    legacy_help = "\n".join(f"  {b.id}: {b.summary}" for b in BEHAVIORS.values())
    p = argparse.ArgumentParser(
        prog="python -m controller",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "ccm-lab's AWS cloud controller manager: the service (Classic ELB), cloud-node\n"
            "and cloud-node-lifecycle controllers (and the opt-in tagging controller), driven\n"
            "by a Kubernetes API server and AWS."
        ),
        epilog=(
            "legacy behaviours (--legacy-behavior, all off by default):\n"
            f"{legacy_help}\n\n"
            "AWS endpoints come from the cloud config's [ServiceOverride] sections or the\n"
            "standard AWS_ENDPOINT_URL* / AWS_EC2_METADATA_SERVICE_ENDPOINT variables.\n"
            "Exit codes: 0 clean shutdown, 1 cloud start-up failure or leadership lost,\n"
            "2 bad flags or cloud config."
        ),
    )
    for add_group in (
        _cluster_and_cloud_flags,
        _tagging_flags,
        _tuning_flags,
        _leader_election_flags,
        _serving_and_logging_flags,
    ):
        add_group(p)
    return p


def _cluster_and_cloud_flags(p: argparse.ArgumentParser) -> None:
    """Where the cluster and the cloud are, and what to run."""
    g = p.add_argument_group("cluster and cloud")
    g.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig to use (default: $KUBECONFIG, else in-cluster config)",
    )
    g.add_argument(
        "--cloud-config",
        metavar="PATH",
        help='AWS cloud config file (gcfg/INI: [Global], [ServiceOverride "n"])',
    )
    g.add_argument(
        "--cluster-name",
        default="kubernetes",
        metavar="NAME",
        help="cluster name handed to the cloud (default: %(default)s)",
    )
    g.add_argument(
        "--legacy-behavior",
        action="append",
        default=[],
        metavar="ID[,ID]",
        help="switch a documented legacy behaviour back on (repeatable; see below)",
    )
    g.add_argument(
        "--controllers",
        type=_controllers,
        default=ALL_CONTROLLERS,
        metavar="LIST",
        help="controllers to run, comma-separated: '*' (the defaults: "
        f"{','.join(ALL_CONTROLLERS)}), a name to add one ({', '.join(DISABLED_BY_DEFAULT)} "
        "is off by default), -NAME to drop one",
    )


def _tagging_flags(p: argparse.ArgumentParser) -> None:
    """The opt-in tagging controller's tags, resources and queue."""
    g = p.add_argument_group("tagging controller (on with --controllers=*,tagging)")
    g.add_argument(
        "--tags",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="tags to apply to the nodes' AWS resources (repeatable; items merge)",
    )
    g.add_argument(
        "--resources",
        action="append",
        default=[],
        metavar="NAME",
        help="AWS resources to tag (repeatable; supported: instance)",
    )
    g.add_argument(
        "--tagging-controller-rate-limit",
        type=float,
        default=0.0,
        metavar="QPS",
        help="steady rate of the tagging queue; 0 (default) disables rate limiting",
    )
    g.add_argument(
        "--tagging-controller-burst-limit",
        type=int,
        default=0,
        metavar="N",
        help="burst of the tagging queue; 0 (default) disables rate limiting",
    )
    g.add_argument(
        "--tagging-controller-concurrent-node-syncs",
        type=int,
        default=1,
        metavar="N",
        help="tagging workers (default: %(default)s)",
    )
    g.add_argument(
        "--tagging-controller-enable-batching",
        action="store_true",
        help="merge concurrent CreateTags/DeleteTags calls with the same tags",
    )


def _tuning_flags(p: argparse.ArgumentParser) -> None:
    """Intervals, grace periods and worker counts of the controllers."""
    g = p.add_argument_group("controller tuning")
    g.add_argument(
        "--node-monitor-period",
        type=_positive_duration,
        default=5.0,
        metavar="DUR",
        help="node lifecycle check interval (default: 5s)",
    )
    g.add_argument(
        "--node-status-update-frequency",
        type=_positive_duration,
        default=300.0,
        metavar="DUR",
        help="node address refresh interval (default: 5m)",
    )
    g.add_argument(
        "--node-deletion-grace-period",
        type=parse_duration,
        default=120.0,
        metavar="DUR",
        help="a node younger than this is not deleted for an instance "
        "lookup miss (kubernetes#81636; default: 2m)",
    )
    g.add_argument(
        "--sg-delete-retry",
        type=_sg_retry,
        default=(5.0, 600.0),
        metavar="INTERVAL,TIMEOUT",
        help="retry deleting an ELB's security group "
        "every INTERVAL for up to TIMEOUT (default: 5s,10m)",
    )
    g.add_argument(
        "--concurrent-service-syncs",
        type=int,
        default=1,
        metavar="N",
        help="service workers (default: %(default)s)",
    )


def _leader_election_flags(p: argparse.ArgumentParser) -> None:
    """The Lease and its timing (upstream's --leader-elect-*)."""
    g = p.add_argument_group("leader election")
    g.add_argument(
        "--leader-elect",
        action="store_true",
        help="run the controllers only while holding a coordination.k8s.io/v1 Lease",
    )
    g.add_argument(
        "--leader-elect-lease-duration",
        type=_positive_duration,
        default=15.0,
        metavar="DUR",
        help="default: 15s",
    )
    g.add_argument(
        "--leader-elect-renew-deadline",
        type=_positive_duration,
        default=10.0,
        metavar="DUR",
        help="default: 10s",
    )
    g.add_argument(
        "--leader-elect-retry-period",
        type=_positive_duration,
        default=2.0,
        metavar="DUR",
        help="default: 2s",
    )
    g.add_argument(
        "--leader-elect-resource-name",
        default="cloud-controller-manager",
        metavar="NAME",
        help="Lease name (default: %(default)s)",
    )
    g.add_argument(
        "--leader-elect-resource-namespace",
        default="kube-system",
        metavar="NS",
        help="Lease namespace (default: %(default)s)",
    )
    g.add_argument(
        "--leader-elect-identity",
        default="",
        metavar="ID",
        help="holder identity (default: <hostname>_<uuid>)",
    )


def _serving_and_logging_flags(p: argparse.ArgumentParser) -> None:
    """The health/metrics endpoint and the log output."""
    g = p.add_argument_group("serving and logging")
    g.add_argument(
        "--metrics-addr",
        type=_metrics_addr,
        default="127.0.0.1:10258",
        metavar="HOST:PORT",
        help="serve /healthz, /readyz, /metrics here; port 0 "
        "picks a free port, '' disables (default: %(default)s)",
    )
    g.add_argument(
        "--address-file",
        default="",
        metavar="PATH",
        help="write the health/metrics base URL here once serving (useful with :0)",
    )
    g.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=int,
        default=0,
        metavar="N",
        help="log verbosity: 0 info, 2 controller debug, 4 library debug",
    )
    g.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="default: %(default)s"
    )


def options_from_args(args: argparse.Namespace, legacy: LegacyFlags) -> Options:
    leader = LeaderElectionConfig(
        namespace=args.leader_elect_resource_namespace,
        name=args.leader_elect_resource_name,
        identity=args.leader_elect_identity or default_identity(),
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
    return Options(
        cluster_name=args.cluster_name,
        legacy=legacy,
        controllers=args.controllers,
        leader_elect=args.leader_elect,
        leader=leader,
        metrics_addr=args.metrics_addr,
        address_file=args.address_file,
        node_monitor_period=args.node_monitor_period,
        node_status_update_frequency=args.node_status_update_frequency,
        node_deletion_grace_period=args.node_deletion_grace_period,
        concurrent_service_syncs=args.concurrent_service_syncs,
        tagging=tagging_options(
            args.tags,
            args.resources,
            rate_limit=args.tagging_controller_rate_limit,
            burst_limit=args.tagging_controller_burst_limit,
            workers=args.tagging_controller_concurrent_node_syncs,
            batching=args.tagging_controller_enable_batching,
        ),
    )


def _fail(code: int, message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbosity, args.log_format)
    try:
        legacy = LegacyFlags.parse(args.legacy_behavior)
    except UnknownLegacyBehavior as exc:
        return _fail(EXIT_USAGE, str(exc))
    if args.concurrent_service_syncs < 1:
        return _fail(EXIT_USAGE, "--concurrent-service-syncs must be at least 1")
    try:
        options = options_from_args(args, legacy)
        if options.leader_elect:
            options.leader.validate()
        if "tagging" in options.controllers:
            options.tagging.validate()
    except ValueError as exc:
        return _fail(EXIT_USAGE, str(exc))
    if legacy.on:
        log.warning("legacy behaviours switched on: %s", ", ".join(sorted(legacy.on)))

    cloud_text, source = "", "<no cloud config>"
    if args.cloud_config:
        try:
            with open(args.cloud_config, encoding="utf-8") as fh:
                cloud_text, source = fh.read(), args.cloud_config
        except OSError as exc:
            return _fail(EXIT_USAGE, f"--cloud-config: cannot read {args.cloud_config}: {exc}")

    from controller.aws import CloudInitError, new_cloud
    from controller.aws.config import CloudConfigError, load_cloud_config

    try:
        config, warnings = load_cloud_config(cloud_text, source=source)
    except CloudConfigError as exc:
        return _fail(EXIT_USAGE, f"invalid cloud config: {exc}")
    for warning in warnings:
        log.warning("cloud config: %s", warning)
    sg_interval, sg_timeout = args.sg_delete_retry
    try:
        cloud = new_cloud(
            config, legacy=legacy, sg_delete_interval=sg_interval, sg_delete_timeout=sg_timeout
        )
    except CloudInitError as exc:
        return _fail(EXIT_FAILURE, f"cloud provider could not start: {exc}")

    from controller.runtime.kube import ApiKube

    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        kube = ApiKube.from_kubeconfig(kubeconfig)
    except Exception as exc:  # the official loader raises several unrelated types
        where = kubeconfig or "in-cluster config"
        return _fail(EXIT_USAGE, f"cannot load Kubernetes config from {where}: {exc}")
    return run(kube, cloud, options)


def run(kube: KubeClient, cloud: Any, options: Options) -> int:
    """Run a manager until SIGTERM/SIGINT (or leadership loss); return the exit code."""
    manager = ControllerManager(kube, cloud, options)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        manager.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        manager.start()
        while not manager._done.is_set():  # short waits keep the main thread signal-responsive
            manager.wait(0.5)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return manager.exit_code
