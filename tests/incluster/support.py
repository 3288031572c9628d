"""Helpers for the in-cluster deployment tests: builders, an RBAC evaluator, the image's build
inputs as Docker reads them, and fake ``docker``/``kubectl`` executables.

Neighbours: the test modules of this package use these; ``tests/cluster/fakecli.py`` supplies
the fake ``kind``/``docker`` these wrap. What is hand-written here and why:

* the RBAC evaluator (:func:`classify`, :func:`granting_rules`, :func:`allowed`,
  :func:`unused_grants`) follows kube-apiserver's ``RequestInfoFactory`` and rbac
  ``RuleAllows`` for the subset the rendered roles use (no wildcards, which a test forbids, and
  no non-resource URLs). The API simulator serves no ``rbac.authorization.k8s.io`` and no
  PyPI library evaluates Kubernetes RBAC, so this is the smallest faithful check;
* ``.dockerignore`` matching is not: it is docker-py's ``PatternMatcher`` (the Docker SDK for
  Python, a port of moby's ``fileutils`` rules: Go ``filepath.Match`` plus ``**``, ``!``
  exceptions, the last matching pattern decides, a pattern matching a parent directory covers
  what is inside). ``pathspec`` implements gitignore, whose rules differ (``!`` cannot re-include
  below an excluded directory, a bare name matches at any depth). One difference from the Docker
  CLI on Linux: docker-py compares case-insensitively;
* the Dockerfile is read by the ``dockerfile`` package, BuildKit's own parser, so a syntax the
  real build rejects fails here too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml
from docker.utils.build import PatternMatcher, exclude_paths

from lab.component import ProcessRef
from lab.exec import SubprocessRunner
from lab.incluster import REPO_ROOT, InClusterSettings, lab_settings
from lab.kube.server import KubeServer
from lab.kube.wire import Request
from lab.state import ControllerState, LabState, write_state
from tests.cluster.fakecli import FakeCLI, container

Obj = dict[str, Any]

# --- builders --------------------------------------------------------------------------------

PROBE_TOKEN = "ccm-rbac-probe"
"""The bearer token the RBAC tests give the controller, so its requests can be told apart."""
KUBECTL = Path(sys.executable).parent / "kubectl"
"""kubectl as the dev extras install it into the virtualenv."""
SERVICE_ACCOUNT = ("kube-system", "cloud-controller-manager")
"""Namespace and name of the service account the default manifests run as."""
LB_SERVICE: Obj = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "rbac-web", "namespace": "default"},
    "spec": {
        "type": "LoadBalancer",
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
    },
}


def lab_world_settings(lab: Any, **changes: Any) -> InClusterSettings:
    """The in-cluster controller's settings for a started kind ``lab`` (``lab.compose.Lab``
    with ``expose_to_nodes``): the lab's AWS endpoint, seeded with an instance per node, and
    its metadata service, whose default instance is the control plane's, both where the nodes
    reach them. Without that world (a bare AWS endpoint and metadata service) the controller
    finds no instance of its own and exits at start."""
    host = lab.cluster.host_address()
    return lab_settings(
        host=host,
        aws_port=urllib.parse.urlsplit(lab.aws.url).port or 0,
        imds_port=urllib.parse.urlsplit(lab.imds.url).port or 0,
        region=lab.config.region,
        cluster_id=lab.config.cluster_id,
        **changes,
    )


def kind_settings(**changes: Any) -> InClusterSettings:
    """Lab settings for a kind network gateway at 172.30.0.1 (AWS on 4566, IMDS on 4567)."""
    return lab_settings(host="172.30.0.1", aws_port=4566, imds_port=4567, **changes)


def by_kind(manifests: Iterable[Obj]) -> dict[str, Obj]:
    """Manifests keyed by ``kind`` (the rendered set has one object of each)."""
    return {m["kind"]: m for m in manifests}


def write_lab_state(root: Path, name: str = "t", **changes: Any) -> Path:
    """Write the ``state.json`` of a running kind lab ``name`` under ``root``; return ``root``.

    ``changes`` replace fields of the :class:`~lab.state.LabState`; ``controller=True`` records
    a running local controller.
    """
    state_dir = root / name
    state_dir.mkdir(parents=True)
    controller = changes.pop("controller", None)
    state = LabState(
        name=name,
        backend="kind",
        k8s_version="1.33",
        directory=str(state_dir),
        kubeconfig=str(state_dir / "kubeconfig"),
        cloud_config=str(state_dir / "cloud.conf"),
        aws_endpoint="http://0.0.0.0:41000",
        imds_endpoint="http://0.0.0.0:41001",
        region="us-east-1",
        cluster_id="ccm-lab",
        nodes=(),
        controller=ControllerState(process=ProcessRef(1, 0), log="controller.log")
        if controller
        else None,
    ).replace(**changes)
    write_state(state)
    return root


def token_kubeconfig(sim: KubeServer, path: Path, token: str = PROBE_TOKEN) -> Path:
    """A kubeconfig for ``sim`` that authenticates with the bearer ``token``."""
    config = sim.kubeconfig()
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


# --- RBAC: requests in RBAC terms, and the rules that allow them ------------------------------


@dataclasses.dataclass(frozen=True)
class ApiRequest:
    """One served request in RBAC terms."""

    method: str
    target: str
    status: int
    verb: str
    group: str  # "" for the core group
    resource: str  # "nodes" or, for a subresource, "nodes/status"
    namespace: str  # "" for cluster-scoped requests
    name: str  # "" for collection requests

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        request = f"{self.method} {self.target}"
        return f"{self.verb} {self.group or 'core'}/{self.resource}{where} ({request})"


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)
# Go's strconv.ParseBool, which kube-apiserver applies to ``?watch=``.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def classify(method: str, target: str, status: int) -> ApiRequest:
    """The RBAC attributes of a request, as kube-apiserver's ``RequestInfoFactory`` derives them.

    A GET of a collection is ``list``, or ``watch`` with ``?watch=true``; a DELETE of one is
    ``deletecollection``. Raises ``AssertionError`` for a non-resource request: the rendered
    roles grant no ``nonResourceURLs``, so the controller must make none.
    """
    url = urllib.parse.urlsplit(target)
    m = _PATH.match(url.path)
    if m is None:
        raise AssertionError(f"not a resource request (no RBAC rule can allow it): {target}")
    query = urllib.parse.parse_qs(url.query)
    name = m["name"] or ""
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch", [""])[-1] in _TRUE else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        if method == "DELETE":
            verb = "delete" if name else "deletecollection"
    resource = f"{m['res']}/{m['sub']}" if m["sub"] else m["res"]
    return ApiRequest(method, target, status, verb, m["group"] or "", resource, m["ns"] or "", name)


def rule_allows(rule: Mapping[str, Any], req: ApiRequest) -> bool:
    """rbac's ``RuleAllows`` without wildcards: group, resource, verb and, when the rule names
    objects, the object's name (so a rule with ``resourceNames`` never allows create or list)."""
    names = rule.get("resourceNames") or []
    return (
        req.group in rule["apiGroups"]
        and req.resource in rule["resources"]
        and req.verb in rule["verbs"]
        and (not names or req.name in names)
    )


def granting_rules(manifests: Sequence[Obj], namespace: str, sa: str) -> list[tuple[str, Obj]]:
    """(scope, rule) for every rule bound to the service account; scope "" = cluster-wide.

    A ClusterRoleBinding grants cluster-wide, a RoleBinding only in its own namespace (whether
    it refers to a Role or a ClusterRole).
    """
    roles = {
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"]): m
        for m in manifests
        if m["kind"] in ("ClusterRole", "Role")
    }
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": namespace}
    out: list[tuple[str, Obj]] = []
    for binding in manifests:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if subject not in binding["subjects"]:
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace", "")
        role_ns = "" if ref["kind"] == "ClusterRole" else scope
        role = roles[(ref["kind"], role_ns, ref["name"])]
        out += [(scope, rule) for rule in role["rules"]]
    return out


def allowed(rules: Sequence[tuple[str, Obj]], req: ApiRequest) -> bool:
    """Whether any of the (scope, rule) pairs allows ``req``."""
    return any((not scope or scope == req.namespace) and rule_allows(r, req) for scope, r in rules)


def unused_grants(rules: Sequence[tuple[str, Obj]], used: Iterable[ApiRequest]) -> list[str]:
    """Every (rule, resource, verb) cell that no served request needed."""
    used = list(used)
    out = []
    for scope, rule in rules:
        for resource in rule["resources"]:
            for verb in rule["verbs"]:
                cell = {**rule, "resources": [resource], "verbs": [verb]}
                if not any(
                    (not scope or scope == r.namespace) and rule_allows(cell, r) for r in used
                ):
                    out.append(
                        f"{verb} {rule['apiGroups']}/{resource} (scope {scope or 'cluster'})"
                    )
    return out


class ServedRequests:
    """Records what the simulator's request handler served to one bearer token.

    Wraps ``sim.api.handle`` (undone by ``monkeypatch`` at the end of the test), so it sees
    each request exactly as served, with the status the client got.
    """

    def __init__(self, sim: KubeServer, monkeypatch: pytest.MonkeyPatch, token: str) -> None:
        self.requests: list[ApiRequest] = []
        inner = sim.api.handle
        header = f"Bearer {token}"

        def handle(req: Request) -> Any:
            resp = inner(req)
            if req.headers.get("authorization") == header:
                self.requests.append(classify(req.method, req.target, resp.status))
            return resp

        monkeypatch.setattr(sim.api, "handle", handle)

    def where(self, pred: Callable[[ApiRequest], bool]) -> list[ApiRequest]:
        """The requests so far for which ``pred`` holds."""
        return [r for r in list(self.requests) if pred(r)]


# --- the image's build inputs, read as Docker reads them ---------------------------------------

DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"


def dockerfile_steps(path: Path = DOCKERFILE) -> list[dockerfile.Command]:
    """The instructions of a Dockerfile, parsed by BuildKit's parser (continuations joined,
    comments dropped, exec-form arguments decoded: ``json`` says which form was used)."""
    return list(dockerfile.parse_file(str(path)))


def dockerignore_patterns(root: Path = REPO_ROOT) -> list[str]:
    """The patterns of ``root/.dockerignore`` as the Docker CLI reads them: one per line,
    trimmed, blank lines and ``#`` comments skipped."""
    lines = (root / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def dockerignored(path: str, patterns: Sequence[str]) -> bool:
    """Whether Docker leaves ``path`` (relative to the context, ``/``-separated) out."""
    return bool(PatternMatcher(list(patterns)).matches(path))


def build_context_files(root: Path = REPO_ROOT, file: str = "deploy/Dockerfile") -> list[Path]:
    """The regular files ``docker build -f <file> .`` in ``root`` sends to the builder:
    everything ``.dockerignore`` keeps, plus the Dockerfile and ``.dockerignore`` themselves,
    which Docker always sends (``COPY`` cannot copy them when they are ignored)."""
    kept = exclude_paths(str(root), dockerignore_patterns(root), dockerfile=file)
    return sorted(root / rel for rel in kept if (root / rel).is_file())


# --- fake docker and kubectl -----------------------------------------------------------------

# A wrapper ahead of tests/cluster/fakecli's docker on PATH: records `docker build` and every
# kubectl call (argv, cwd, stdin) and fails one on demand; other docker calls go to the fake.
_FAKE = """#!{python} -IS
import json, os, sys
argv = sys.argv[1:]
root = {root!r}
stdin = sys.stdin.read() if "-f" in argv and argv[argv.index("-f") + 1] == "-" else None
if {name!r} == "docker" and argv[:1] != ["build"]:
    os.execv({fallback!r}, [{fallback!r}, *argv])
with open(os.path.join(root, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": [{name!r}, *argv], "cwd": os.getcwd(), "stdin": stdin}}) + "\\n")
if os.path.exists(os.path.join(root, "fail-" + {name!r} + "-" + argv[0])):
    sys.stderr.write("ERROR: fake " + {name!r} + " " + argv[0] + " failed\\n"); sys.exit(1)
if {name!r} == "docker" and not os.path.exists("deploy/Dockerfile"):
    sys.stderr.write("unable to prepare context: deploy/Dockerfile not found\\n"); sys.exit(1)
if {name!r} == "docker":  # the built image is now local, as `docker build -t` leaves it
    state_path = os.path.join(root, "state.json")
    state = json.load(open(state_path))
    state.setdefault("images", []).append(argv[argv.index("-t") + 1])
    json.dump(state, open(state_path, "w"))
"""


@dataclasses.dataclass
class Fakes:
    """Fake ``docker``, ``kind`` and ``kubectl`` on the PATH of ``runner``."""

    cli: FakeCLI
    runner: SubprocessRunner
    kubeconfig: Path

    def calls(self) -> list[Obj]:
        """Every recorded call in order: ``{"argv", ...}`` (``cwd`` and ``stdin`` for the
        wrapped ``docker build`` and ``kubectl``)."""
        path = self.cli.root / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def fail(self, tool: str, command: str) -> None:
        """Make ``<tool> <command> ...`` (``docker build``, ``kubectl apply``) exit 1."""
        (self.cli.root / f"fail-{tool}-{command}").touch()


def make_fakes(tmp_path: Path) -> Fakes:
    """Fakes under ``tmp_path/fake``: a kind network with gateway 172.30.0.1 and the node
    containers of kind cluster ``ccm-lab`` on it."""
    cli = FakeCLI(tmp_path / "fake")
    cli.set(
        networks={"kind": {"Subnet": "172.30.0.0/16", "Gateway": "172.30.0.1", "Labels": {}}},
        containers=[
            container("ccm-lab-control-plane", "control-plane", "ccm-lab", "172.30.0.2"),
            container("ccm-lab-worker", "worker", "ccm-lab", "172.30.0.3"),
        ],
    )
    extra = tmp_path / "fake" / "wrappers"
    extra.mkdir()
    for name in ("docker", "kubectl"):
        path = extra / name
        path.write_text(
            _FAKE.format(
                python=sys.executable,
                root=str(cli.root),
                name=name,
                fallback=str(cli.bin / "docker"),
            )
        )
        path.chmod(0o755)
    runner = SubprocessRunner(
        base_env={"PATH": os.pathsep.join([str(extra), str(cli.bin), os.environ["PATH"]])}
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    return Fakes(cli, runner, kubeconfig)


# --- the real thing --------------------------------------------------------------------------


def docker_and_kind_missing() -> str | None:
    """Why a real build-load-deploy cannot run here, or None when Docker and kind answer."""
    problems = []
    if shutil.which("kind") is None:
        problems.append("no kind CLI on PATH")
    if shutil.which("docker") is None:
        problems.append("no docker CLI on PATH")
    else:
        try:
            done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
            if done.returncode != 0:
                problems.append("`docker info` does not answer (no Docker engine)")
        except subprocess.TimeoutExpired:
            problems.append("`docker info` timed out")
    return "; ".join(problems) or None
