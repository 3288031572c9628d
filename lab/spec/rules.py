"""The rules: every combination of ``lab.up`` options the lab refuses, each in one place.

Role: small named functions of a :class:`~lab.spec.model.LabSpec`, each returning its one-line
refusal (the flag, the value and the fix) or None, registered in table order with
:func:`~lab.spec.table.rule`; grouped by what they judge: the controller, an existing cluster,
AWS, the lab's shape, and whether a spec is ready to become a lab. ``tests/test_spec.py`` has a
case per rule. Rules import what they check against (versions, feature gates) where they need
it, so that building a spec imports no SDK.
"""

from __future__ import annotations

import ipaddress

from lab.clock import DEFAULT_SPEED, check_speed
from lab.spec.model import AUTO, MAX_NODES, NAME_RE, SIM_MINORS, AwsKind, Backend, LabSpec
from lab.spec.table import Scope, SpecError, rule
from lab.versions.release import DEFAULT_K8S_VERSION


def validate_name(name: str) -> None:
    """``--name``: raises the ``name`` rule's refusal (every lab command checks it first)."""
    if not NAME_RE.match(name):
        raise SpecError("name", _name_refusal(name))


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


def image_refusal(image: str, flag: str = "--controller-image") -> str | None:
    """Why ``image`` is not an image reference as Docker takes it (non-empty, no spaces, no
    scheme, not a flag), naming ``flag``; None when it is one (``lab.incluster_image`` asks
    too)."""
    well_formed = image and not image.startswith("-") and "://" not in image
    if well_formed and not any(c.isspace() for c in image):
        return None
    return (
        f"{flag} {image!r}: expected an image reference such as "
        "registry.k8s.io/provider-aws/cloud-controller-manager:v1.33.0 or a local tag"
    )


@rule("image-reference")
def _image_reference(spec: LabSpec) -> str | None:
    return None if spec.controller_image is None else image_refusal(spec.controller_image)


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
    from lab.versions.release import KubeVersion

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
    from lab.versions.release import KubeVersion

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
    from lab.versions.release import node_image

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
    from lab.versions.dataplane import parse_feature_gates

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
