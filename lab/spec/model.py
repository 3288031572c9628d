"""The spec itself: :class:`LabSpec`, the backend and AWS kinds, and ``spec.json``.

Role: the frozen, typed description of one lab and its JSON form; building one runs the rules
of :attr:`~lab.spec.table.Scope.SPEC` (``lab.spec.rules``), so a spec that exists keeps them.
Neighbours: ``lab.spec.table`` below (the rule machinery, which knows no spec), ``lab.spec.rules``
above (the rules, which read specs); the package face (``lab.spec``) imports both, so the rules
are in the table before the first spec is made.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, Self

from lab.clock import DEFAULT_SPEED
from lab.controllerproc import ControllerCommand
from lab.spec.table import Scope, check, refusals
from lab.state import LabError, read_lab_file, write_private
from lab.versions.release import DEFAULT_K8S_VERSION

#: ``spec.json``'s format; a file of another format is refused saying what to do
SPEC_VERSION = 1
SPEC_FILE = "spec.json"
#: ``lab.up`` makes at most this many nodes (a lab built in Python may have more)
MAX_NODES = 20
#: Kubernetes minors the simulator's stand-ins have version facts for
SIM_MINORS = range(20, 38)
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?\Z")


class Backend(enum.StrEnum):
    """The cluster a lab runs on: the API simulator with kubelet stand-ins, kind through its
    CLI, or an existing cluster a kubeconfig names (its own nodes; nothing of ours in it)."""

    SIM = "sim"
    KIND = "kind"
    EXISTING = "existing"


class AwsKind(enum.StrEnum):
    """The AWS a lab talks to: the lab's moto endpoint, a LocalStack, or a real account."""

    MOTO = "moto"
    LOCALSTACK = "localstack"
    REAL = "real"


#: ``--backend auto``: a request of the front door (kind where Docker and kind answer, else
#: sim), resolved by :meth:`LabSpec.resolve` before the spec is final
AUTO: Final = "auto"
BackendRequest = Backend | Literal["auto"]


@dataclasses.dataclass(frozen=True)
class LabSpec:
    """Everything that shapes a lab. Defaults give the write-ups' setup, already fixed."""

    name: str = "default"
    nodes: int = 2
    k8s_version: str = DEFAULT_K8S_VERSION
    region: str = "us-east-1"
    zones: tuple[str, ...] = ("us-east-1a", "us-east-1b")
    cluster_id: str = "ccm-lab"
    seed: int = 1
    #: register nodes with ``provider-id`` (as the kind configs do); False = name lookup only
    provider_ids: bool = True
    #: sim, kind or existing (``kubeconfig`` names it); ``auto`` only in a front-door request.
    #: A word is taken and made the enum member (the rule table refuses an unknown one).
    backend: BackendRequest | str = Backend.SIM
    #: existing: the kubeconfig of the cluster to attach to
    kubeconfig: Path | None = None
    kind_binary: str = "kind"
    docker_binary: str = "docker"
    #: kind only: the AWS endpoint and metadata service listen on the nodes' Docker gateway
    #: (not loopback) so an in-cluster controller reaches them
    expose_to_nodes: bool = False
    #: sim: lab seconds per real second for every timed stand-in (``lab.clock``)
    clock_speed: float = DEFAULT_SPEED
    #: sim, in lab seconds: the kubelet's Lease renewal and kube-controller-manager's
    #: node-monitor grace period (None: that version's default)
    lease_renew_interval: float = 10.0
    node_monitor_grace_period: float | None = None
    #: sim: the data plane's ``--feature-gates`` (``Name=true,...``), checked against the release
    feature_gates: str = ""
    state_dir: Path | None = None
    #: the VPC's block; None: 10.0.0.0/16 on sim, the first block free on this host on kind
    vpc_cidr: str | None = None
    #: sim: the API simulator over plain HTTP to anyone (default: HTTPS and the lab's token)
    insecure_api: bool = False
    #: how our controller starts: "fork" from the fork server, or "exec" afresh each time
    controller_launch: str = "fork"
    #: moto, localstack or real (a word is taken as for ``backend``)
    aws: AwsKind | str = AwsKind.MOTO
    #: localstack: the base URL of a running LocalStack; None starts one through Docker
    aws_endpoint: str | None = None
    #: real: the run (``lab.aws.realaccount``) whose instances are the nodes
    run_id: str | None = None
    # --- the controller (started by the front door, or by a test through Lab) -----------
    #: lab.up: start a controller once the lab is up (``--no-controller``: False)
    controller: bool = True
    #: another controller build (``--controller-cmd``/``--controller``); None: ours
    controller_command: ControllerCommand | None = None
    #: our controller's legacy behaviours and extra flags at lab.up
    legacy: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    #: kind: a build's image run in-cluster instead of a local process
    controller_image: str | None = None
    # --- a real account's consent (lab.up --aws real) -----------------------------------
    accept_aws_charges: bool = False
    #: print the real-account plan only
    dry_run: bool = False

    def __post_init__(self) -> None:
        for name in ("zones", "legacy", "extra_args"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.kubeconfig is not None:
            object.__setattr__(self, "kubeconfig", Path(self.kubeconfig))
        check(self, Scope.SPEC)
        if self.backend != AUTO:
            object.__setattr__(self, "backend", Backend(self.backend))
        object.__setattr__(self, "aws", AwsKind(self.aws))

    @property
    def cluster_name(self) -> str:
        """The cluster's name (and its nodes' name prefix). kind clusters share the host's
        Docker engine, so each lab's is its own; the simulator's is the cluster id."""
        if self.backend in (Backend.SIM, Backend.EXISTING):
            return self.cluster_id
        return f"{self.cluster_id}-{self.name}"

    @property
    def final(self) -> bool:
        """Ready to become a lab: no rule of :attr:`Scope.FINAL` refuses it."""
        return not refusals(self, Scope.FINAL)

    def resolve(self, backend: Backend) -> LabSpec:
        """The spec on the backend ``auto`` chose; every rule that depends on it runs."""
        spec = dataclasses.replace(self, backend=backend)
        check(spec, Scope.UP)
        return spec

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)

    # --- JSON ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        check(self, Scope.FINAL)
        return {"version": SPEC_VERSION, **{k: _encode(v) for k, v in _items(self)}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, source: str = SPEC_FILE) -> LabSpec:
        if data.get("version") != SPEC_VERSION:
            raise LabError(
                f"{source} has format version {data.get('version')!r}, this checkout reads "
                f"version {SPEC_VERSION}; start the lab with this checkout's `invoke lab.up`"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names - {"version"})
        if unknown:
            raise LabError(
                f"{source}: unknown field {unknown[0]!r}; another checkout wrote it: start the "
                "lab with this one"
            )
        try:
            spec = cls(**{k: _decode(k, v) for k, v in data.items() if k != "version"})
        except TypeError as exc:
            raise LabError(f"{source} is damaged ({exc}); start the lab again") from None
        check(spec, Scope.FINAL)
        return spec


def _items(spec: LabSpec) -> list[tuple[str, Any]]:
    return [(f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec)]


def _encode(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, ControllerCommand):
        return {**dataclasses.asdict(value), "template": list(value.template)}
    return value


def _decode(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in ("kubeconfig", "state_dir"):
        return Path(value)
    if name == "controller_command":
        return ControllerCommand(**{**value, "template": tuple(value["template"])})
    return value


def up_request(**options: Any) -> LabSpec:
    """``lab.up``'s request: a spec whose backend defaults to ``auto``, checked by every rule
    of :attr:`Scope.SPEC` and :attr:`Scope.UP` (a :class:`SpecError` names the first broken)."""
    if options.get("controller_image") is not None:
        # the image's pod reaches the AWS endpoint and metadata service on the nodes' gateway
        options = {**options, "expose_to_nodes": True}
    spec = LabSpec(**{"backend": AUTO, **options})
    check(spec, Scope.UP)
    return spec


def zones_of(region: str) -> tuple[str, str]:
    """The two zones a lab spreads its nodes over in ``region``."""
    return f"{region}a", f"{region}b"


def write_spec(directory: Path, spec: LabSpec) -> Path:
    """``spec.json`` in the lab directory (private, written atomically)."""
    return write_private(directory / SPEC_FILE, json.dumps(spec.to_json(), indent=2) + "\n")


def read_spec(directory: Path) -> LabSpec | None:
    """The spec in ``directory``, None when there is none."""
    data = read_lab_file(directory, SPEC_FILE)
    return None if data is None else LabSpec.from_json(data, source=str(directory / SPEC_FILE))
