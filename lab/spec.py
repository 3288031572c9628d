"""One lab, described once: :class:`LabSpec`, its rule table and its JSON form.

Role: every option that shapes a lab, typed, in one frozen object that crosses every process
boundary: ``invoke lab.up`` (``tasks.py`` builds it with :func:`up_request`) hands it to the
front door (``lab.frontdoor``), which resolves ``--backend auto``, writes it to the lab
directory (``spec.json``) and starts ``lab.daemon``, which reads it back and hosts a
:class:`lab.compose.Lab` built from it; the pytest fixtures (``lab.pytest_plugin``) build the
same object from their options, and ``lab.status`` shows it. Nobody re-parses argv.

The rule table (:data:`RULES`) is the one place a combination of options is judged. A rule is a
small named function of the spec that returns its one-line refusal (the flag, the value and
the fix) or None. Each rule has a scope: :attr:`Scope.SPEC` rules are invariants of every
spec, checked when one is made (so a ``LabSpec`` that exists keeps them: ``Lab``, the daemon and
the fixtures never check again); :attr:`Scope.UP` rules are ``lab.up``'s own limits and consent
flags (at most 20 nodes, the releases the stand-ins model, ``--i-accept-aws-charges``), which a
lab built in Python (a benchmark of 50 nodes) need not keep; :attr:`Scope.FINAL` rules say a
spec is ready to become a lab (its backend chosen, a real-account run's id known), checked when
it is written or read. Rules that depend on the backend (``auto`` may become kind) run again
on the resolved spec: the same table, nothing else. What needs the machine (a kubeconfig file,
an API server or a LocalStack that answers, a Docker network) is ``lab.preflight``.

Neighbours: ``lab.state`` (the running lab's ``state.json``, and :class:`LabError`, which
:class:`SpecError` is); below this module only leaf helpers, imported where a rule needs them
so that building a spec imports no SDK.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Literal, Self

from lab.clock import DEFAULT_SPEED, check_speed
from lab.controllerproc import ControllerCommand
from lab.kube.version import DEFAULT_K8S_VERSION
from lab.state import LabError, write_private

#: ``spec.json``'s format; a file of another format is refused saying what to do
SPEC_VERSION = 1
SPEC_FILE = "spec.json"
#: ``lab.up`` makes at most this many nodes (a lab built in Python may have more)
MAX_NODES = 20
#: Kubernetes minors the simulator's stand-ins have version facts for
SIM_MINORS = range(20, 38)
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")


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


class Scope(enum.StrEnum):
    SPEC = "spec"
    UP = "up"
    FINAL = "final"


class SpecError(LabError, ValueError):
    """A spec broke a rule; the message is the rule's one-line refusal."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


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
    path = directory / SPEC_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LabError(f"{path} is unreadable ({exc}); remove {directory} and start again") from exc
    if not isinstance(data, dict):
        raise LabError(f"{path} is not a JSON object; remove {directory} and start again")
    return LabSpec.from_json(data, source=str(path))


def validate_name(name: str) -> None:
    """``--name``: raises the ``name`` rule's refusal (every lab command checks it first)."""
    if not NAME_RE.match(name):
        raise SpecError("name", _name_refusal(name))


# --- the rule table ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule: its name, where it applies, and the function that returns its refusal."""

    name: str
    scope: Scope
    refuse: Callable[[LabSpec], str | None]


RULES: list[Rule] = []


def rule(name: str, scope: Scope = Scope.SPEC) -> Callable[[Callable[[LabSpec], str | None]], Any]:
    """Add the decorated function to :data:`RULES` (the order is the order of refusals)."""

    def register(refuse: Callable[[LabSpec], str | None]) -> Callable[[LabSpec], str | None]:
        RULES.append(Rule(name, scope, refuse))
        return refuse

    return register


def refusals(spec: LabSpec, *scopes: Scope) -> list[tuple[Rule, str]]:
    """Every rule of ``scopes`` that ``spec`` breaks, with its refusal, in table order."""
    found = []
    for each in RULES:
        if each.scope in scopes:
            message = each.refuse(spec)
            if message is not None:
                found.append((each, message))
    return found


def check(spec: LabSpec, *scopes: Scope) -> None:
    """Raise :class:`SpecError` with the first refusal of the rules of ``scopes``."""
    for each in RULES:
        if each.scope in scopes:
            message = each.refuse(spec)
            if message is not None:
                raise SpecError(each.name, message)


def _name_refusal(name: str) -> str:
    return (
        f"--name {name!r}: use 1-32 lowercase letters, digits and '-' (it names a directory "
        "and, on kind, a cluster)"
    )


@rule("name")
def _name(spec: LabSpec) -> str | None:
    return None if NAME_RE.match(spec.name) else _name_refusal(spec.name)


# --- which controller -------------------------------------------------------------------------


@rule("no-controller-with-command")
def _no_controller_with_command(spec: LabSpec) -> str | None:
    if spec.controller or spec.controller_command is None:
        return None
    return (
        f"--no-controller with --controller-cmd/--controller ({spec.controller_command.name}): "
        "drop one of them"
    )


@rule("command-with-our-flags")
def _command_with_our_flags(spec: LabSpec) -> str | None:
    if spec.controller_command is None or not (spec.legacy or spec.extra_args):
        return None
    flag = "--legacy-behavior" if spec.legacy else "--args"
    value = ",".join(spec.legacy) if spec.legacy else " ".join(spec.extra_args)
    return (
        f"{flag} {value!r}: that is our controller's flag; with another build "
        f"({spec.controller_command.name}) write every flag into --controller-cmd"
    )


@rule("image-reference")
def _image_reference(spec: LabSpec) -> str | None:
    image = spec.controller_image
    if image is None:
        return None
    well_formed = image and not image.startswith("-") and "://" not in image
    if well_formed and not any(c.isspace() for c in image):
        return None
    return (
        f"--controller-image {image!r}: expected an image reference such as "
        "registry.k8s.io/provider-aws/cloud-controller-manager:v1.33.0 or a local tag"
    )


@rule("image-is-the-controller")
def _image_is_the_controller(spec: LabSpec) -> str | None:
    if spec.controller_image is None:
        return None
    command = spec.controller_command
    clash = (
        f"--controller-cmd/--controller ({command.name})"
        if command is not None
        else "--legacy-behavior/--args (our controller's flags)"
        if spec.legacy or spec.extra_args
        else "--no-controller"
        if not spec.controller
        else None
    )
    if clash is None:
        return None
    return (
        f"--controller-image {spec.controller_image} with {clash}: the image is the "
        "controller; drop one"
    )


@rule("image-needs-kind")
def _image_needs_kind(spec: LabSpec) -> str | None:
    if spec.controller_image is None or spec.backend in (AUTO, Backend.KIND):
        return None
    return (
        f"--controller-image {spec.controller_image}: an image runs in-cluster on kind's nodes, "
        f"and a {spec.backend} lab's nodes run no containers; use --backend kind, or "
        "--controller-cmd for a local build"
    )


# --- an existing cluster ----------------------------------------------------------------------


@rule("kubeconfig-names-existing")
def _kubeconfig_without_existing(spec: LabSpec) -> str | None:
    if spec.kubeconfig is None or spec.backend == Backend.EXISTING:
        return None
    return (
        f"--kubeconfig {str(spec.kubeconfig)!r}: names the cluster of --backend existing; add "
        f"--backend existing, or drop --kubeconfig (--backend {spec.backend} makes its own "
        "cluster)"
    )


@rule("existing-needs-kubeconfig")
def _existing_needs_kubeconfig(spec: LabSpec) -> str | None:
    if spec.backend != Backend.EXISTING or spec.kubeconfig is not None:
        return None
    return "--backend existing: give --kubeconfig PATH naming the cluster to attach to"


@rule("existing-as-it-is")
def _existing_as_it_is(spec: LabSpec) -> str | None:
    if spec.backend != Backend.EXISTING:
        return None
    for flag, given in (
        ("--feature-gates", bool(spec.feature_gates)),
        ("--insecure-api", spec.insecure_api),
        ("--expose-to-nodes", spec.expose_to_nodes),
    ):
        if given:
            return (
                f"{flag}: shapes a cluster the lab makes (sim or kind); an existing cluster is "
                f"as its owner set it up: drop {flag} with --backend existing"
            )
    return None


# --- AWS --------------------------------------------------------------------------------------


@rule("aws-known")
def _aws_known(spec: LabSpec) -> str | None:
    if spec.aws in tuple(AwsKind):
        return None
    return f"--aws {spec.aws!r}: choose one of {', '.join(AwsKind)} (moto is the default)"


def _real_extras(spec: LabSpec) -> list[str]:
    """The flags ``--aws real`` does not take that ``spec`` sets."""
    given = {
        "--k8s-version": spec.k8s_version != DEFAULT_K8S_VERSION,
        "--legacy-behavior": bool(spec.legacy),
        "--args": bool(spec.extra_args),
        "--no-controller": not spec.controller,
        "--expose-to-nodes": spec.expose_to_nodes and spec.controller_image is None,
        "--clock-speed": spec.clock_speed != DEFAULT_SPEED,
        "--feature-gates": bool(spec.feature_gates),
        "--insecure-api": spec.insecure_api,
        "--controller-cmd/--controller": spec.controller_command is not None,
        "--aws-endpoint": bool(spec.aws_endpoint),
        "--controller-image": spec.controller_image is not None,
        "--kubeconfig": spec.kubeconfig is not None,
    }
    return [flag for flag, on in given.items() if on]


@rule("real-takes-few-flags")
def _real_takes_few_flags(spec: LabSpec) -> str | None:
    extras = _real_extras(spec) if spec.aws == AwsKind.REAL else []
    if not extras:
        return None
    return (
        f"{extras[0]}: --aws real runs the sim cluster on the run's instances with our "
        "controller as it is, so it takes --name, --nodes, --vpc-cidr, --backend sim, "
        f"--i-accept-aws-charges and --dry-run: drop {extras[0]}"
    )


@rule("endpoint-names-localstack")
def _endpoint_names_localstack(spec: LabSpec) -> str | None:
    if spec.aws_endpoint is None or spec.aws == AwsKind.LOCALSTACK:
        return None
    return (
        f"--aws-endpoint {spec.aws_endpoint!r} names a LocalStack; add --aws localstack "
        "(the lab's moto endpoint is its own)"
    )


@rule("endpoint-url")
def _endpoint_url(spec: LabSpec) -> str | None:
    if spec.aws_endpoint is None:
        return None
    from lab.aws.localstack import LocalStackConfigError, check_endpoint_url

    try:
        check_endpoint_url(spec.aws_endpoint)
    except LocalStackConfigError as exc:
        return str(exc)
    return None


@rule("localstack-not-on-kind")
def _localstack_not_on_kind(spec: LabSpec) -> str | None:
    if spec.aws != AwsKind.LOCALSTACK or spec.backend != Backend.KIND:
        return None
    return (
        "--aws localstack runs with --backend sim only so far: on kind, Docker chooses the "
        "node IPs after the instances exist, and LocalStack cannot re-create them with the "
        "same ids; use --backend sim"
    )


@rule("localstack-not-on-existing")
def _localstack_not_on_existing(spec: LabSpec) -> str | None:
    if spec.aws != AwsKind.LOCALSTACK or spec.backend != Backend.EXISTING:
        return None
    return (
        "--aws localstack runs with --backend sim only so far (an existing cluster's nodes "
        "are seeded in the lab's moto endpoint); use --backend sim, or --aws moto"
    )


@rule("consent-is-for-real", Scope.UP)
def _consent_is_for_real(spec: LabSpec) -> str | None:
    if spec.aws == AwsKind.REAL:
        return None
    consent = (("--i-accept-aws-charges", spec.accept_aws_charges), ("--dry-run", spec.dry_run))
    for flag, given in consent:
        if given:
            return (
                f"{flag}: belongs to --aws real (a real AWS account); --aws {spec.aws} charges "
                f"nothing and has no plan to print: drop {flag}"
            )
    return None


@rule("real-needs-consent", Scope.UP)
def _real_needs_consent(spec: LabSpec) -> str | None:
    if spec.aws != AwsKind.REAL or spec.accept_aws_charges:
        return None
    return (
        "--aws real: creates billable resources (a VPC and an instance per node) in the AWS "
        "account of your credentials; add --i-accept-aws-charges to go ahead (with "
        "--dry-run to print the plan only)"
    )


@rule("real-runs-sim")
def _real_runs_sim(spec: LabSpec) -> str | None:
    if spec.aws != AwsKind.REAL or spec.backend in (AUTO, Backend.SIM):
        return None
    return (
        f"--aws real --backend {spec.backend}: a real-account lab runs the sim cluster, whose "
        "nodes are the run's instances (kind's would be containers no instance stands "
        "behind): use --backend sim, or drop --backend"
    )


@rule("run-id-is-for-real")
def _run_id_is_for_real(spec: LabSpec) -> str | None:
    if spec.run_id is None or spec.aws == AwsKind.REAL:
        return None
    return (
        f"run_id {spec.run_id!r}: names the real-account run of --aws real and only that; "
        "drop it, or use --aws real"
    )


# --- shape --------------------------------------------------------------------------------------


@rule("vpc-cidr", Scope.UP)
def _vpc_cidr(spec: LabSpec) -> str | None:
    """An IPv4 block AWS accepts for a VPC holding the lab's two /20 zone subnets (/16 to
    /19), host bits zero."""
    if spec.vpc_cidr is None:
        return None
    fix = "give an IPv4 block from /16 to /19 with its host bits zero, e.g. 10.42.0.0/16"
    try:
        block = ipaddress.ip_network(spec.vpc_cidr)
    except ValueError as exc:
        return f"--vpc-cidr {spec.vpc_cidr!r}: {exc}; {fix}"
    if block.version != 4 or not 16 <= block.prefixlen <= 19:
        return f"--vpc-cidr {spec.vpc_cidr!r}: the lab's VPC holds two /20 zone subnets; {fix}"
    return None


@rule("clock-speed")
def _clock_speed(spec: LabSpec) -> str | None:
    try:
        check_speed(spec.clock_speed)
    except (ValueError, TypeError):
        return (
            f"--clock-speed {spec.clock_speed!r}: lab seconds per real second, a number > 0 "
            f"(1 is real time; default {DEFAULT_SPEED:g})"
        )
    return None


@rule("nodes")
def _nodes(spec: LabSpec) -> str | None:
    if spec.nodes >= 1:
        return None
    return (
        f"--nodes {spec.nodes}: a lab has 1 to {MAX_NODES} nodes (the first is the control plane)"
    )


@rule("nodes-at-most", Scope.UP)
def _nodes_at_most(spec: LabSpec) -> str | None:
    if spec.nodes <= MAX_NODES:
        return None
    return (
        f"--nodes {spec.nodes}: a lab has 1 to {MAX_NODES} nodes (the first is the control plane)"
    )


@rule("k8s-version")
def _k8s_version(spec: LabSpec) -> str | None:
    from lab.cluster.versions import KubeVersion

    try:
        KubeVersion.parse(spec.k8s_version)
    except ValueError:
        return (
            f"--k8s-version {spec.k8s_version!r}: expected a Kubernetes version like 1.33 or "
            f"1.22.8 (default {DEFAULT_K8S_VERSION})"
        )
    return None


@rule("backend-known")
def _backend_known(spec: LabSpec) -> str | None:
    if spec.backend in (AUTO, *Backend):
        return None
    return f"--backend {spec.backend!r}: choose one of auto, {', '.join(Backend)}"


@rule("k8s-modelled", Scope.UP)
def _k8s_modelled(spec: LabSpec) -> str | None:
    from lab.cluster.versions import KubeVersion

    version = KubeVersion.parse(spec.k8s_version)
    if version.major == 1 and version.minor in SIM_MINORS:
        return None
    return (
        f"--k8s-version {spec.k8s_version}: the lab models Kubernetes 1.{SIM_MINORS.start} to "
        f"1.{SIM_MINORS.stop - 1}"
    )


@rule("kind-node-image", Scope.UP)
def _kind_node_image(spec: LabSpec) -> str | None:
    if spec.backend != Backend.KIND:
        return None
    from lab.cluster.versions import node_image

    try:
        node_image(spec.k8s_version)
    except ValueError as exc:
        return f"--k8s-version {spec.k8s_version} on kind: {exc}"
    return None


@rule("feature-gates-are-sim")
def _feature_gates_are_sim(spec: LabSpec) -> str | None:
    if not spec.feature_gates or spec.backend != Backend.KIND:
        return None
    return (
        f"--feature-gates {spec.feature_gates!r}: these set the sim backend's data plane; a "
        "kind cluster takes them in its kubeadm config (use --backend sim)"
    )


@rule("feature-gates")
def _feature_gates(spec: LabSpec) -> str | None:
    if not spec.feature_gates:
        return None
    from lab.dataplane.versions import parse_feature_gates

    try:
        parse_feature_gates(spec.feature_gates, spec.k8s_version)
    except ValueError as exc:
        return f"--feature-gates {spec.feature_gates!r}: {exc}"
    return None


@rule("insecure-api-is-sim")
def _insecure_api_is_sim(spec: LabSpec) -> str | None:
    if not spec.insecure_api or spec.backend != Backend.KIND:
        return None
    return (
        "--insecure-api opens the sim backend's API simulator (plain HTTP, no token); a "
        "kind cluster's API server always serves TLS with kind's own credentials: drop the "
        "flag or use --backend sim"
    )


@rule("expose-is-kind")
def _expose_is_kind(spec: LabSpec) -> str | None:
    if not spec.expose_to_nodes or spec.backend != Backend.SIM:
        return None
    return (
        "--expose-to-nodes is for kind labs (pods reaching the host); a sim lab's nodes "
        "are not processes: drop the flag or use --backend kind"
    )


@rule("controller-launch")
def _controller_launch(spec: LabSpec) -> str | None:
    if spec.controller_launch in ("fork", "exec"):
        return None
    return f"--controller-launch {spec.controller_launch!r}: choose fork or exec"


@rule("zones")
def _zones(spec: LabSpec) -> str | None:
    return None if spec.zones else "zones: give at least one availability zone"


# --- ready for a lab --------------------------------------------------------------------------


@rule("backend-chosen", Scope.FINAL)
def _backend_chosen(spec: LabSpec) -> str | None:
    if spec.backend != AUTO:
        return None
    return "--backend auto: the front door chooses sim or kind before a lab starts (resolve it)"


@rule("real-has-a-run", Scope.FINAL)
def _real_has_a_run(spec: LabSpec) -> str | None:
    if spec.aws != AwsKind.REAL or spec.run_id is not None:
        return None
    return "--aws real: the lab runs on a run's instances; lab.up creates the run and names it"
