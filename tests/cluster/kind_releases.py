"""What each pinned kind release does, written down from kind's source at its tag.

The fake ``kind`` (``tests/cluster/fakecli.py``) behaves like the release named by its
``kind version`` answer, from this table; a test of the lab's kind provider therefore fails where
the real release would. Read from kubernetes-sigs/kind at v0.14.0, v0.15.0 (the seed-004 clusters'
1.22 patches), v0.20.0, v0.22.0, v0.29.0, v0.32.0:

* ``pkg/cmd/kind/**``: the flags each command accepts (cobra/pflag: an unknown flag fails the
  command with ``ERROR: unknown flag: --x`` and exit status 1, ``cmd/kind/app/main.go``), the
  argument rules (``cobra.NoArgs``, ``MaximumNArgs(1)``, "at least one image"). The root's
  deprecated ``--loglevel`` exists up to v0.22.0 and is gone by v0.29.0.
* ``pkg/cluster/internal/kubeadm/config.go``: the kubeadm API per Kubernetes version (v1beta2
  below 1.23, v1beta3 from 1.23, v1beta4 from 1.36 only in v0.32.0) and the kubelet arguments
  kind sets on every node, ``node-ip``, ``provider-id: kind://<provider>/<cluster>/<node>`` and
  ``node-labels``, in ``InitConfiguration`` (the bootstrap control plane) and
  ``JoinConfiguration`` (every other node).
* ``pkg/internal/patch``: patches match a document by ``kind`` and, when the patch names one,
  ``apiVersion``; cluster patches apply first, then the node's; each is an RFC 7386 merge patch.
  v0.32.0 adds ``kubeadm_merge.go``: against a v1beta4 document, ``extraArgs`` and
  ``kubeletExtraArgs`` merge by ``name`` (a map-form value is converted only when the patch names
  no ``apiVersion``; otherwise it is dropped), so kind's own ``node-ip`` survives.
* ``pkg/internal/apis/config``: the ``kind.x-k8s.io/v1alpha4`` ``Cluster`` fields (strict
  decoding: an unknown field is an error), the cluster name pattern, roles, proxy modes
  (``nftables`` absent at v0.22.0, accepted at v0.29.0), ``networking.dnsSearch`` (absent at
  v0.15.0, there at v0.20.0).
* ``pkg/apis/config/defaults/image.go``: the default node image.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

CLUSTER_FIELDS = frozenset(
    {
        "kind",
        "apiVersion",
        "name",
        "nodes",
        "networking",
        "featureGates",
        "runtimeConfig",
        "kubeadmConfigPatches",
        "kubeadmConfigPatchesJSON6902",
        "containerdConfigPatches",
        "containerdConfigPatchesJSON6902",
    }
)
NODE_FIELDS = frozenset(
    {
        "role",
        "image",
        "labels",
        "extraMounts",
        "extraPortMappings",
        "kubeadmConfigPatches",
        "kubeadmConfigPatchesJSON6902",
    }
)
NETWORKING_FIELDS_V014 = frozenset(
    {
        "ipFamily",
        "apiServerPort",
        "apiServerAddress",
        "podSubnet",
        "serviceSubnet",
        "disableDefaultCNI",
        "kubeProxyMode",
    }
)
NETWORKING_FIELDS = frozenset(
    {
        "ipFamily",
        "apiServerPort",
        "apiServerAddress",
        "podSubnet",
        "serviceSubnet",
        "disableDefaultCNI",
        "kubeProxyMode",
        "dnsSearch",
    }
)
CLUSTER_NAME_RE = re.compile(r"^[a-z0-9.-]+$")  # validate.go, every pinned release


@dataclasses.dataclass(frozen=True)
class Command:
    """One cobra command: its value flags, boolean flags, shorthands and argument rule."""

    flags: frozenset[str]
    bool_flags: frozenset[str] = frozenset()
    shorthands: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: (min, max) positional arguments; max None = unbounded
    args: tuple[int, int | None] = (0, 0)
    #: the error kind prints when fewer than ``min`` arguments are given
    missing_args: str = ""


_NAME = {"n": "name"}
_COMMANDS: dict[tuple[str, ...], Command] = {
    ("version",): Command(frozenset()),
    ("create", "cluster"): Command(
        frozenset({"name", "config", "image", "wait", "kubeconfig"}),
        frozenset({"retain"}),
        _NAME,
    ),
    ("delete", "cluster"): Command(frozenset({"name", "kubeconfig"}), shorthands=_NAME),
    ("export", "logs"): Command(frozenset({"name"}), shorthands=_NAME, args=(0, 1)),
    ("load", "docker-image"): Command(
        frozenset({"name", "nodes"}),
        shorthands=_NAME,
        args=(1, None),
        missing_args="a list of image names is required",
    ),
    ("load", "image-archive"): Command(
        frozenset({"name", "nodes"}),
        shorthands=_NAME,
        args=(1, None),
        missing_args="name of image archive is required",
    ),
}


@dataclasses.dataclass(frozen=True)
class KindRelease:
    version: tuple[int, int, int]
    go: str
    default_image: str
    #: root persistent flags (value flags); ``verbosity``/``quiet`` in every release
    root_flags: frozenset[str]
    #: newest kubeadm API this release generates (v1beta4 only from v0.32.0)
    newest_kubeadm_api: str
    #: kubeadm_merge.go: extraArgs merged by name against v1beta4 documents
    merges_extra_args_by_name: bool
    proxy_modes: frozenset[str]
    networking_fields: frozenset[str] = NETWORKING_FIELDS
    commands: Mapping[tuple[str, ...], Command] = dataclasses.field(
        default_factory=lambda: dict(_COMMANDS)
    )

    @property
    def tag(self) -> str:
        return "v{}.{}.{}".format(*self.version)

    def keeps_exclusion_label(self, nodes: int) -> bool:
        """Whether the control plane keeps kubeadm's
        ``node.kubernetes.io/exclude-from-external-load-balancers``: kubeadm labels every
        control plane, and kubeadminit removes the label from a one-node cluster only, from
        v0.22 (kind commit 18bb5af0, "Remove exclude-from-external-load-balancers from single
        node clusters"; ``lab.versions.provisioning.kind_single_node_keeps_exclusion_label``)."""
        return nodes > 1 or self.version < (0, 22, 0)

    def display_version(self) -> str:
        """What ``kind version`` prints (version.go ``DisplayVersion``)."""
        return f"kind {self.tag} go{self.go} linux/amd64"

    def kubeadm_api(self, kube: tuple[int, int]) -> str:
        """config.go ``Config()``: the template chosen for Kubernetes ``kube`` (major, minor)."""
        if kube < (1, 23):
            return "kubeadm.k8s.io/v1beta2"
        if kube < (1, 36) or self.newest_kubeadm_api.endswith("v1beta3"):
            return "kubeadm.k8s.io/v1beta3"
        return "kubeadm.k8s.io/v1beta4"


_OLD_ROOT = frozenset({"loglevel", "verbosity"})
_NEW_ROOT = frozenset({"verbosity"})
_IMG = "kindest/node:{}@sha256:{}"

RELEASES: dict[str, KindRelease] = {
    r.tag: r
    for r in (
        KindRelease(
            (0, 14, 0),
            "1.18.2",
            _IMG.format(
                "v1.24.0", "0866296e693efe1fed79d5e6c7af8df71fc73ae45e3679af05342239cdc5bc8e"
            ),
            _OLD_ROOT,
            "kubeadm.k8s.io/v1beta3",
            False,
            frozenset({"iptables", "ipvs", "none"}),
            NETWORKING_FIELDS_V014,
        ),
        KindRelease(
            (0, 15, 0),
            "1.19",
            _IMG.format(
                "v1.25.0", "428aaa17ec82ccde0131cb2d1ca6547d13cf5fdabcc0bbecf749baa935387cbf"
            ),
            _OLD_ROOT,
            "kubeadm.k8s.io/v1beta3",
            False,
            frozenset({"iptables", "ipvs", "none"}),
            NETWORKING_FIELDS_V014,
        ),
        KindRelease(
            (0, 20, 0),
            "1.20.4",
            _IMG.format(
                "v1.27.3", "3966ac761ae0136263ffdb6cfd4db23ef8a83cba8a463690e98317add2c9ba72"
            ),
            _OLD_ROOT,
            "kubeadm.k8s.io/v1beta3",
            False,
            frozenset({"iptables", "ipvs", "none"}),
        ),
        KindRelease(
            (0, 22, 0),
            "1.20.13",
            _IMG.format(
                "v1.29.2", "51a1434a5397193442f0be2a297b488b6c919ce8a3931be0ce822606ea5ca245"
            ),
            _OLD_ROOT,
            "kubeadm.k8s.io/v1beta3",
            False,
            frozenset({"iptables", "ipvs", "none"}),
        ),
        KindRelease(
            (0, 29, 0),
            "1.24.2",
            _IMG.format(
                "v1.33.1", "050072256b9a903bd914c0b2866828150cb229cea0efe5892e2b644d5dd3b34f"
            ),
            _NEW_ROOT,
            "kubeadm.k8s.io/v1beta3",
            False,
            frozenset({"iptables", "ipvs", "nftables", "none"}),
        ),
        KindRelease(
            (0, 32, 0),
            "1.26.3",
            _IMG.format(
                "v1.36.1", "3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5"
            ),
            _NEW_ROOT,
            "kubeadm.k8s.io/v1beta4",
            True,
            frozenset({"iptables", "ipvs", "nftables", "none"}),
        ),
    )
}


def release_for(display: str) -> KindRelease:
    """The release a ``kind version`` line names (must be one of the pinned tags)."""
    match = re.search(r"kind (v\d+\.\d+\.\d+)", display)
    if match is None or match.group(1) not in RELEASES:
        raise KeyError(f"no kind release model for {display!r}; modelled: {sorted(RELEASES)}")
    return RELEASES[match.group(1)]


# --- the command line, as pflag parses it ---------------------------------------------------


class KindCLIError(Exception):
    """What kind prints after ``ERROR: `` before exiting with status 1."""


def parse_command(
    release: KindRelease, argv: list[str]
) -> tuple[tuple[str, ...], dict[str, str], list[str]]:
    """Split ``argv`` into (command path, flags by long name, positional args) or raise
    :class:`KindCLIError` with the message cobra/pflag gives."""
    path: tuple[str, ...] = ()
    rest = list(argv)
    # the command path is the leading words that name a known command
    while rest and not rest[0].startswith("-"):
        candidate = (*path, rest[0])
        if any(key[: len(candidate)] == candidate for key in release.commands):
            path = candidate
            rest.pop(0)
            if path in release.commands:
                break
        else:
            break
    if path not in release.commands:
        if not path:
            raise KindCLIError(f'unknown command "{rest[0] if rest else ""}" for "kind"')
        raise KindCLIError("Subcommand is required")
    command = release.commands[path]
    value_flags = command.flags | release.root_flags
    shorthands = {**command.shorthands, "v": "verbosity"}
    bool_flags = command.bool_flags | {"quiet", "help"}
    flags: dict[str, str] = {}
    args: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if token == "--":
            args.extend(rest[i:])
            break
        if token.startswith("--"):
            name, eq, value = token[2:].partition("=")
            if name in bool_flags:
                flags[name] = value if eq else "true"
                continue
            if name not in value_flags:
                raise KindCLIError(f"unknown flag: --{name}")
            if not eq:
                if i >= len(rest):
                    raise KindCLIError(f"flag needs an argument: --{name}")
                value = rest[i]
                i += 1
            flags[name] = value
        elif token.startswith("-") and len(token) > 1:
            short = token[1]
            if short == "q":
                flags["quiet"] = "true"
                continue
            if short not in shorthands:
                raise KindCLIError(f"unknown shorthand flag: '{short}' in {token}")
            value = token[2:].lstrip("=")
            if not value:
                if i >= len(rest):
                    raise KindCLIError(f"flag needs an argument: '{short}' in -{short}")
                value = rest[i]
                i += 1
            flags[shorthands[short]] = value
        else:
            args.append(token)
    low, high = command.args
    if len(args) < low:
        raise KindCLIError(command.missing_args)
    if high is not None and len(args) > high:
        if high == 0:
            raise KindCLIError(f'unknown command "{args[0]}" for "kind {" ".join(path)}"')
        raise KindCLIError(f"accepts at most {high} arg(s), received {len(args)}")
    if "wait" in flags and not re.fullmatch(r"(\d+(\.\d+)?(ns|us|ms|s|m|h))+|0", flags["wait"]):
        raise KindCLIError(
            f'invalid argument "{flags["wait"]}" for "--wait" flag: '
            f'time: invalid duration "{flags["wait"]}"'
        )
    return path, flags, args


# --- the config file ------------------------------------------------------------------------


def check_config(release: KindRelease, doc: Any) -> None:
    """encoding/load.go and validate.go: raise :class:`KindCLIError` as kind would."""
    if not isinstance(doc, dict):
        raise KindCLIError("could not determine kind / apiVersion for config")
    if doc.get("apiVersion") != "kind.x-k8s.io/v1alpha4":
        raise KindCLIError(f"unknown apiVersion: {doc.get('apiVersion', '')}")
    if doc.get("kind") != "Cluster":
        raise KindCLIError(
            f"unknown kind {doc.get('kind', '')} for apiVersion: {doc['apiVersion']}"
        )
    _strict(doc, CLUSTER_FIELDS)
    _strict(doc.get("networking") or {}, release.networking_fields)
    nodes = doc.get("nodes") or [{"role": "control-plane"}]
    for node in nodes:
        _strict(node, NODE_FIELDS)
    errors = []
    mode = (doc.get("networking") or {}).get("kubeProxyMode", "iptables")
    if mode not in release.proxy_modes:
        errors.append(f"invalid kubeProxyMode: {mode}")
    for index, node in enumerate(nodes):
        if node.get("role", "control-plane") not in ("control-plane", "worker"):
            errors.append(
                f'invalid configuration for node {index}: "{node["role"]}" is not a valid node role'
            )
    if not any(n.get("role", "control-plane") == "control-plane" for n in nodes):
        errors.append("must have at least one control-plane node")
    if errors:
        raise KindCLIError("invalid configuration: " + ", ".join(errors))


def check_cluster_name(name: str) -> None:
    if not CLUSTER_NAME_RE.match(name):
        raise KindCLIError(
            f"'{name}' is not a valid cluster name, cluster names must match "
            f"`{CLUSTER_NAME_RE.pattern}`"
        )


def _strict(obj: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in obj:
        if key not in allowed:
            raise KindCLIError(
                f'error unmarshaling JSON: while decoding JSON: json: unknown field "{key}"'
            )


# --- what the kubelet is started with -------------------------------------------------------


def kubelet_args(
    release: KindRelease,
    *,
    kube: tuple[int, int],
    cluster: str,
    node: str,
    node_ip: str,
    node_labels: str,
    bootstrap: bool,
    cluster_patches: list[str],
    node_patches: list[str],
    provider: str = "docker",
) -> dict[str, str]:
    """The kubelet arguments kind's generated, patched kubeadm config gives node ``node``.

    ``bootstrap``: the first control plane (kubeadm init reads ``InitConfiguration``; every
    other node joins and reads ``JoinConfiguration``). Raises :class:`KindCLIError` where
    kubeadm would refuse the patched config (extraArgs of the wrong shape for the API)."""
    import yaml

    api = release.kubeadm_api(kube)
    kind = "InitConfiguration" if bootstrap else "JoinConfiguration"
    own = {
        "node-ip": node_ip,
        "provider-id": f"kind://{provider}/{cluster}/{node}",
        "node-labels": node_labels,
    }
    args: Any = _as_list(own) if api.endswith("v1beta4") else dict(own)
    target: dict[str, Any] = {
        "apiVersion": api,
        "kind": kind,
        "nodeRegistration": {"kubeletExtraArgs": args},
    }
    for group in (cluster_patches, node_patches):  # cluster-level patches first
        for raw in group:
            for loaded in (p for p in yaml.safe_load_all(raw) if p):
                if loaded.get("kind") != kind:
                    continue
                if loaded.get("apiVersion") and loaded["apiVersion"] != api:
                    continue  # kind skips it silently
                patch = _copy(loaded)
                if release.merges_extra_args_by_name and api.endswith("v1beta4"):
                    _merge_args_by_name(
                        target, patch, patch_versioned=bool(patch.get("apiVersion"))
                    )
                target = _merge_patch(target, patch)
    final = (target.get("nodeRegistration") or {}).get("kubeletExtraArgs")
    if api.endswith("v1beta4"):
        if not isinstance(final, list):
            raise KindCLIError(
                "failed to init node with kubeadm: kubeletExtraArgs: "
                f"{api} wants a list of {{name, value}}, got {type(final).__name__}"
            )
        return {str(a["name"]): str(a["value"]) for a in final}
    if not isinstance(final, dict):
        raise KindCLIError(
            f"failed to init node with kubeadm: kubeletExtraArgs: {api} wants a map, "
            f"got {type(final).__name__}"
        )
    return {str(k): str(v) for k, v in final.items()}


def _as_list(args: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in args.items()]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _merge_args_by_name(
    target: dict[str, Any], patch: dict[str, Any], *, patch_versioned: bool
) -> None:
    """kubeadm_merge.go ``walkAndMerge`` (v0.32.0): merge extraArgs by name, strip from patch."""
    for key in list(patch):
        value = patch[key]
        if key in ("extraArgs", "kubeletExtraArgs"):
            if isinstance(value, list):
                items = value
            elif isinstance(value, dict) and not patch_versioned:
                items = _as_list(value)
            else:
                items = []  # a map under a versioned v1beta4 patch is dropped
            current = target.get(key)
            merged = (
                list(current)
                if isinstance(current, list)
                else (_as_list(current) if isinstance(current, dict) else [])
            )
            for item in items:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    continue
                found = next((m for m in merged if m.get("name") == item["name"]), None)
                if found is not None:
                    if item.get("value") is None:
                        merged.remove(found)
                    else:
                        found["value"] = item["value"]
                elif item.get("value") is not None:
                    merged.append({"name": item["name"], "value": item["value"]})
            target[key] = merged
            del patch[key]
        elif isinstance(value, dict):
            sub = target.setdefault(key, {})
            if isinstance(sub, dict):
                _merge_args_by_name(sub, value, patch_versioned=patch_versioned)


def registered_node(name: str, kubelet: Mapping[str, Any]) -> dict[str, Any]:
    """The Node a kind node's kubelet registers from its arguments (``kubelet_args``), as
    kubelet's ``initialNode`` builds it with ``--cloud-provider=external``: the hostname, os and
    arch labels plus ``--node-labels``, ``spec.providerID`` from ``--provider-id``, the
    ``node.cloudprovider.kubernetes.io/uninitialized`` taint, and ``--node-ip`` as the provided
    node IP (annotation and InternalIP); kubeadm then labels a control plane's role."""
    args = kubelet["args"]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    for pair in filter(None, str(args.get("node-labels") or "").split(",")):
        key, _, value = pair.partition("=")
        labels[key] = value
    if kubelet.get("role") == "control-plane":
        labels["node-role.kubernetes.io/control-plane"] = ""
    taints = []
    if args.get("cloud-provider") == "external":
        taints.append(
            {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true",
             "effect": "NoSchedule"}
        )  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"alpha.kubernetes.io/provided-node-ip": args["node-ip"]},
        },
        "spec": {"providerID": args["provider-id"], "taints": taints},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": args["node-ip"]},
                {"type": "Hostname", "address": name},
            ],
            # what a kindest/node container reports (Debian, containerd)
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.18",
                "kubeletVersion": kubelet.get("version", ""),
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
