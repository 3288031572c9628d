"""Fake ``kind`` and ``docker`` executables for provider tests, as faithful as the real ones.

Each fake is a small Python script written into ``<tmp>/bin``. It appends its argv (plus the
kind network override variable) as one JSON line to ``<tmp>/calls.jsonl`` and works on one
shared ``<tmp>/state.json`` (networks, containers, images), which a test may edit to script
behaviour.

The fake ``kind`` is the release its ``kind version`` names, from ``kind_releases.py`` (derived
from kind's source at the pinned tags): unknown flags and malformed configs fail as that release
fails; ``create cluster`` makes one node container per config node on the network
``KIND_EXPERIMENTAL_DOCKER_NETWORK`` names (``kind`` by default, created if missing, as kind
does), with the IPs Docker would hand out, and records in ``state["kubelets"]`` the kubelet
arguments kind's patched kubeadm config gives each node: ``provider-id`` is kind's own
``kind://docker/<cluster>/<node>`` unless a patch that kind actually applies replaces it.

The fake ``docker`` answers as Debian's docker.io 20.10 does (checked against a real daemon):
``network inspect`` shows an IPAM ``Gateway`` only when ``--gateway`` was given; without one
the bridge still takes the first address of ``--ip-range`` (or of the subnet), which the
containers report as their ``Gateway``; overlapping subnets fail with "Pool overlaps"; ``save
--platform`` is an unknown flag of the 20.10 CLI unless ``state["docker_cli"]`` is newer.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from lab.exec import SubprocessRunner
from lab.kube.server import KubeServer

HERE = Path(__file__).resolve().parent

_PRELUDE = """#!{python} -I
import ipaddress, json, os, sys
from pathlib import Path
sys.path.insert(0, {here!r})
sys.path.insert(1, {repo!r})
root = Path({root!r})
argv = sys.argv[1:]
with open(root / "calls.jsonl", "a") as f:
    net = os.environ.get("KIND_EXPERIMENTAL_DOCKER_NETWORK")
    f.write(json.dumps({{"argv": [{name!r}, *argv], "network_env": net}}) + "\\n")
state = json.loads((root / "state.json").read_text())
def save():
    (root / "state.json").write_text(json.dumps(state))
def fail(msg, code=1):
    sys.stderr.write(msg + "\\n"); sys.exit(code)
def labels_match(obj, filters):
    labels = obj.get("Labels") or obj.get("Config", {{}}).get("Labels") or {{}}
    for f in filters:
        key, _, value = f.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True
def label_filters(args):
    return [args[i + 1][len("label="):] for i, a in enumerate(args)
            if a == "--filter" and args[i + 1].startswith("label=")]
"""

_KIND = """
import yaml
import kind_releases as kr
release = kr.release_for(state.get("kind_version", "kind v0.29.0"))
try:
    path, flags, args = kr.parse_command(release, argv)
except kr.KindCLIError as err:
    fail("ERROR: " + str(err))
def cluster_nodes(name):
    return [c for c in state.get("containers", [])
            if c["Config"]["Labels"].get("io.x-k8s.kind.cluster") == name]
name = flags.get("name") or os.environ.get("KIND_CLUSTER_NAME") or "kind"
if path == ("version",):
    print(release.display_version()); sys.exit(0)
if path == ("create", "cluster"):
    doc = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4"}
    if flags.get("config"):
        try:
            doc = yaml.safe_load(Path(flags["config"]).read_text())
        except OSError as err:
            fail("ERROR: failed to read config: " + str(err))
    try:
        kr.check_config(release, doc)
        name = flags.get("name") or os.environ.get("KIND_CLUSTER_NAME") or doc.get("name") or "kind"
        kr.check_cluster_name(name)
    except kr.KindCLIError as err:
        fail("ERROR: " + str(err))
    if cluster_nodes(name):
        fail('ERROR: failed to create cluster: node(s) already exist for a cluster '
             'with the name "%s"' % name)
    print('Creating cluster "%s" ...' % name)
    network = os.environ.get("KIND_EXPERIMENTAL_DOCKER_NETWORK") or "kind"
    nets = state.setdefault("networks", {})
    if network not in nets:  # kind creates its network when it is missing
        nets[network] = {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1",
                         "_bridge": "172.18.0.1", "Labels": {}}
    net = nets[network]
    gateway = net.get("_bridge") or net.get("Gateway")
    pool = ipaddress.ip_network(net.get("IPRange") or net["Subnet"])
    subnet = ipaddress.ip_network(net["Subnet"])
    used = {c["NetworkSettings"]["Networks"][n]["IPAddress"]
            for c in state.get("containers", [])
            for n in c["NetworkSettings"]["Networks"] if n == network}
    reserved = (subnet.network_address, subnet.broadcast_address)
    candidates = (str(a) for a in pool if a not in reserved
                  and str(a) != gateway and str(a) not in used)
    nodes = doc.get("nodes") or [{"role": "control-plane"}]
    counts = {}
    kubelets = state.setdefault("kubelets", {})
    new = []
    for index, node in enumerate(nodes):
        role = node.get("role", "control-plane")
        counts[role] = counts.get(role, 0) + 1
        node_name = "%s-%s%s" % (name, role, "" if counts[role] == 1 else counts[role])
        image = flags.get("image") or node.get("image") or release.default_image
        tag = image.split(":", 1)[1].split("@")[0].lstrip("v").split(".")
        ip = next(candidates)
        labels = ",".join("%s=%s" % kv for kv in (node.get("labels") or {}).items())
        try:
            args = kr.kubelet_args(release, kube=(int(tag[0]), int(tag[1])), cluster=name,
                                   node=node_name, node_ip=ip, node_labels=labels,
                                   bootstrap=index == 0,
                                   cluster_patches=doc.get("kubeadmConfigPatches") or [],
                                   node_patches=node.get("kubeadmConfigPatches") or [])
        except kr.KindCLIError as err:
            fail("ERROR: failed to create cluster: " + str(err))
        kubelets[node_name] = {"args": args, "role": role, "image": image,
                               "version": "v" + ".".join(tag)}
        new.append({"Name": "/" + node_name,
                    "Config": {"Image": image, "Labels": {"io.x-k8s.kind.cluster": name,
                                                          "io.x-k8s.kind.role": role}},
                    "NetworkSettings": {"Networks": {network: {"IPAddress": ip, "Gateway": gateway,
                                                               "IPPrefixLen": subnet.prefixlen}}}})
    if state.get("fail_create"):
        if flags.get("retain") == "true":
            state.setdefault("containers", []).extend(new); save()
        fail("ERROR: failed to create cluster: failed to init node with kubeadm: exit status 1")
    state.setdefault("containers", []).extend(
        c for c in new if c["Name"].lstrip("/") not in state.get("vanish", []))
    save()
    kubeconfig = flags.get("kubeconfig") or os.path.expanduser("~/.kube/config")
    if state.get("rehearsal"):
        import shutil
        from tests.rehearsal import fakes
        try:
            pid, made = fakes.cluster_created(
                root, name, version=kubelets[new[0]["Name"].lstrip("/")]["version"],
                net=net, nodes=[
                    {"name": c["Name"].lstrip("/"), "role": kubelets[c["Name"].lstrip("/")]["role"],
                     "ip": c["NetworkSettings"]["Networks"][network]["IPAddress"],
                     "args": kubelets[c["Name"].lstrip("/")]["args"],
                     # kind untaints a one-node cluster's control plane
                     # (lab.versions.provisioning.kind_single_node_keeps_exclusion_label)
                     "control_plane_taints": len(new) > 1,
                     "exclusion_label": release.keeps_exclusion_label(len(new))}
                    for c in new])
        except RuntimeError as err:
            fail("ERROR: failed to create cluster: " + str(err))
        state = json.loads((root / "state.json").read_text())
        state.setdefault("rehearsal_pids", {})[name] = pid
        save()
        shutil.copyfile(made, kubeconfig)
        sys.exit(0)
    if not state.get("api_kubeconfig"):
        Path(kubeconfig).write_text("apiVersion: v1\\nkind: Config\\n")
        sys.exit(0)
    # The cluster's API is the test's simulator: hand back its kubeconfig, and register each
    # node as its kubelet would from the arguments above (``late_nodes`` register later, when
    # the test says: kind's --wait covers control planes only)
    import shutil
    from kubernetes import client, config as kube_config
    shutil.copyfile(state["api_kubeconfig"], kubeconfig)
    core = client.CoreV1Api(kube_config.new_client_from_config(state["api_kubeconfig"]))
    for c in new:
        node_name = c["Name"].lstrip("/")
        if node_name not in state.get("late_nodes", []):
            core.create_node(kr.registered_node(node_name, kubelets[node_name]))
    sys.exit(0)
if path == ("delete", "cluster"):
    print('Deleting cluster "%s" ...' % name, file=sys.stderr)
    if state.get("rehearsal") and name in state.get("rehearsal_pids", {}):
        from tests.rehearsal import fakes
        fakes.cluster_deleted(state["rehearsal_pids"].pop(name))
        save()
    gone = [c["Name"].lstrip("/") for c in cluster_nodes(name)]
    state["containers"] = [c for c in state.get("containers", [])
                           if c["Name"].lstrip("/") not in gone]
    for n in gone:
        state.get("kubelets", {}).pop(n, None)
    save()
    if gone and state.get("api_kubeconfig"):  # the cluster's API goes with its nodes
        from kubernetes import client, config as kube_config
        from kubernetes.client.rest import ApiException
        core = client.CoreV1Api(kube_config.new_client_from_config(state["api_kubeconfig"]))
        for n in gone:
            try:
                core.delete_node(n)
            except ApiException as err:
                if err.status != 404:
                    raise
    if gone:
        print("Deleted nodes: " + json.dumps(gone), file=sys.stderr)
    sys.exit(0)
def selected(nodes):
    if not nodes:
        fail('ERROR: no nodes found for cluster "%s"' % name)
    by_name = {c["Name"].lstrip("/"): c for c in nodes}
    wanted = [n for n in flags.get("nodes", "").split(",") if n] or list(by_name)
    for n in wanted:
        if n not in by_name:
            fail('ERROR: unknown node: "%s"' % n)
    return wanted
if path == ("load", "docker-image"):
    for image in args:
        if image not in state.get("images", []):
            fail('ERROR: image: "%s" not present locally' % image)
    targets = selected(cluster_nodes(name))
    if state.get("containerd_store"):
        fail('ERROR: failed to load image: command "docker exec --privileged -i %s ctr '
             '--namespace=k8s.io images import --all-platforms --digests '
             '--snapshotter=overlayfs -" '
             'failed with error: exit status 1\\nCommand Output: ctr: content digest '
             'sha256:82014a3cbf22d2e03382cd9b123f4151d956986e727340a466406a206408b7a2: not found'
             % targets[0])
    for n in targets:
        state.setdefault("node_images", {}).setdefault(n, []).extend(args)
    save(); sys.exit(0)
if path == ("load", "image-archive"):
    for archive in args:
        if not os.path.exists(archive):
            fail("ERROR: stat %s: no such file or directory" % archive)
    targets = selected(cluster_nodes(name))
    for archive in args:
        for image in json.loads(Path(archive).read_text())["images"]:
            for n in targets:
                state.setdefault("node_images", {}).setdefault(n, []).append(image)
    save(); sys.exit(0)
if path == ("export", "logs"):
    if not cluster_nodes(name):
        fail('ERROR: unknown cluster "%s"' % name)
    out = Path(args[0]) if args else Path(root / "logs-tmp")
    out.mkdir(parents=True, exist_ok=True)
    (out / "kind-version.txt").write_text(release.display_version())
    print(out); sys.exit(0)
fail("fake kind: command not modelled: " + " ".join(argv), 2)
"""

_DOCKER = """
def opt(args, name):
    return args[args.index(name) + 1] if name in args else None
def inspect_net(name, net):
    config = {"Subnet": net["Subnet"]}
    if net.get("IPRange"):
        config["IPRange"] = net["IPRange"]
    if net.get("Gateway"):
        config["Gateway"] = net["Gateway"]
    return {"Name": name, "Id": name, "Driver": "bridge",
            "IPAM": {"Driver": "default", "Options": {}, "Config": [config]},
            "Labels": net.get("Labels", {})}
if argv[:1] == ["info"]:
    print("20.10.24+dfsg1"); sys.exit(0)
if argv[:1] == ["version"]:
    print("linux/amd64"); sys.exit(0)
nets = state.setdefault("networks", {})
if argv[:2] == ["network", "inspect"]:
    names = [a for a in argv[2:] if not a.startswith("-")]
    missing = [n for n in names if n not in nets]
    if missing:
        print("[]")
        fail("Error: No such network: " + missing[0])
    print(json.dumps([inspect_net(n, nets[n]) for n in names], indent=4)); sys.exit(0)
if argv[:2] == ["network", "create"]:
    args = argv[2:]
    name = args[-1]
    if name in nets:
        fail("Error response from daemon: network with name %s already exists" % name)
    subnet = opt(args, "--subnet")
    if subnet is None:
        fail("fake docker: network create without --subnet is not modelled", 2)
    new = ipaddress.ip_network(subnet)
    for other in nets.values():
        if new.overlaps(ipaddress.ip_network(other["Subnet"])):
            fail("Error response from daemon: Pool overlaps with other one on this address space")
    ip_range = opt(args, "--ip-range")
    gateway = opt(args, "--gateway")
    first = ipaddress.ip_network(ip_range or subnet)
    bridge = str(first.network_address if ip_range else next(first.hosts()))
    labels = dict(a.split("=", 1) for a in
                  (args[i + 1] for i, x in enumerate(args) if x == "--label"))
    nets[name] = {"Subnet": subnet, "Labels": labels, "_bridge": gateway or bridge}
    if ip_range:
        nets[name]["IPRange"] = ip_range
    if gateway:
        nets[name]["Gateway"] = gateway
    if state.get("rehearsal"):
        from tests.rehearsal import fakes
        fakes.network_created(name, nets[name])
    save(); print("%012x" % abs(hash(name))); sys.exit(0)
if argv[:2] == ["network", "ls"]:
    filters = label_filters(argv)
    print("\\n".join(n for n, net in nets.items() if labels_match(net, filters))); sys.exit(0)
if argv[:2] == ["network", "rm"]:
    for n in argv[2:]:
        if n not in nets:
            fail("Error: No such network: " + n)
        if any(n in c["NetworkSettings"]["Networks"] for c in state.get("containers", [])):
            fail("Error response from daemon: error while removing network: "
                 "network %s id %s has active endpoints" % (n, n))
        if state.get("rehearsal"):
            from tests.rehearsal import fakes
            fakes.network_removed(nets[n])
        del nets[n]
        print(n)
    save(); sys.exit(0)
if argv[:1] == ["ps"]:
    filters = label_filters(argv)
    quiet = "--quiet" in argv or "-q" in argv
    print("\\n".join((c.get("Id", "")[:12] if quiet and c.get("Id") else c["Name"].lstrip("/"))
                    for c in state.get("containers", [])
                    if labels_match(c, filters))); sys.exit(0)
if argv[:1] == ["inspect"] and "--format" not in argv:
    wanted = [a for a in argv[1:] if not a.startswith("-")]
    found = [c for c in state.get("containers", []) if c["Name"].lstrip("/") in wanted]
    print(json.dumps(found))
    if len(found) < len(wanted):
        fail("Error: No such object: " + next(w for w in wanted
             if w not in {c["Name"].lstrip("/") for c in found}))
    sys.exit(0)
if argv[:1] == ["run"]:
    # docker run --detach [--rm] [--name N] [--label K=V]... [--publish 127.0.0.1::PORT]
    # [--env NAME]... IMAGE: as the real CLI, an image that is not local is pulled, and with no
    # registry reachable that fails (exit 125); the host port is the one the test scripted as
    # where the container's port is served (state["publish_to"]), else a free one
    args = argv[1:]
    takes = ("--name", "--label", "--publish", "-p", "--env", "-e")
    image, i = None, 0
    while i < len(args):
        if args[i] in takes:
            i += 2; continue
        if args[i].startswith("-"):
            i += 1; continue
        image = args[i]; break
    if image is None:
        fail('"docker run" requires at least 1 argument.', 125)
    if image not in state.get("images", []):
        sys.stderr.write("Unable to find image '%s' locally\\n" % image)
        fail('docker: Error response from daemon: Get "https://registry-1.docker.io/v2/": '
             "dial tcp: lookup registry-1.docker.io: no such host.", 125)
    name = opt(args, "--name") or "container-%d" % len(state.get("containers", []))
    if any(c["Name"].lstrip("/") == name for c in state.get("containers", [])):
        fail('docker: Error response from daemon: Conflict. The container name "/%s" is '
             'already in use.' % name, 125)
    labels = dict(a.split("=", 1) for a in
                  (args[i + 1] for i, x in enumerate(args) if x == "--label"))
    cid = "%064x" % (abs(hash((name, len(state.get("containers", []))))) + 1)
    publish = opt(args, "--publish") or opt(args, "-p")
    ports = {}
    if publish:
        host_ip, _, rest = publish.rpartition(":")
        host_ip = host_ip.rstrip(":") or "0.0.0.0"
        ports[rest + "/tcp"] = "%s:%s" % (host_ip, state.get("publish_to", 49153))
    exits = state.get("exit_on_start")
    state.setdefault("containers", []).append({
        "Id": cid, "Name": "/" + name, "Image": image,
        "Config": {"Labels": labels, "Image": image},
        "NetworkSettings": {"Networks": {}}, "_ports": ports,
        "_env": [args[i + 1] for i, x in enumerate(args) if x in ("--env", "-e")],
        "State": {"Running": not exits}, "_log": exits or "Ready.",
        "_rm": "--rm" in args})
    if exits and "--rm" in args:  # an --rm container that exits is gone with its log
        state["containers"].pop()
    save(); print(cid); sys.exit(0)
def find(ref):
    for c in state.get("containers", []):
        if ref in (c.get("Id"), c["Name"].lstrip("/")) or (len(ref) >= 12 and
                                                       str(c.get("Id", "")).startswith(ref)):
            return c
    return None
if argv[:1] == ["port"]:
    c = find(argv[1])
    if c is None:
        fail("Error response from daemon: No such container: " + argv[1])
    want = argv[2] if len(argv) > 2 else None
    if not c.get("State", {}).get("Running", True):  # a stopped container publishes nothing
        fail("Error: No public port '%s' published for %s" % (want, argv[1]))
    for port, host in c.get("_ports", {}).items():
        if want is None or want == port:
            print(host if want else "%s -> %s" % (port, host))
    if want and want not in c.get("_ports", {}):
        fail("Error: No public port '%s' published for %s" % (want, argv[1]))
    sys.exit(0)
if argv[:1] == ["logs"]:
    c = find(argv[-1])
    if c is None:
        fail("Error response from daemon: No such container: " + argv[-1])
    print(c.get("_log", "")); sys.exit(0)
if argv[:1] == ["rm"]:
    refs = [a for a in argv[1:] if not a.startswith("-")]
    for ref in refs:
        c = find(ref)
        if c is None:
            fail("Error response from daemon: No such container: " + ref)
        if c.get("State", {}).get("Running") and "--force" not in argv and "-f" not in argv:
            fail("Error response from daemon: You cannot remove a running container")
        state["containers"].remove(c)
        print(ref)
    save(); sys.exit(0)
if argv[:1] == ["inspect"] and "--format" in argv:
    ref = argv[-1]
    c = find(ref)
    if c is None:
        print(""); fail("Error: No such object: " + ref)
    if argv[argv.index("--format") + 1] != "{{.State.Running}}":
        fail("fake docker: inspect format not modelled", 2)
    print("true" if c.get("State", {}).get("Running", True) else "false"); sys.exit(0)
if argv[:2] == ["image", "inspect"]:
    # docker image inspect [--format F] IMAGE...: exit 1 naming the first image not local
    args = argv[2:]
    wanted = [a for i, a in enumerate(args) if not a.startswith("-")
              and (i == 0 or args[i - 1] not in ("--format", "-f"))]
    for image in wanted:
        if image not in state.get("images", []):
            print("[]" if "--format" not in args else "")
            fail("Error: No such image: " + image)
    print("\\n".join("sha256:%064x" % abs(hash(w)) for w in wanted)); sys.exit(0)
if argv[:1] == ["pull"]:
    # docker pull IMAGE: from the registry the test scripted (state["registry"]), else as
    # with no registry reachable
    image = next(a for a in argv[1:] if not a.startswith("-"))
    if image not in state.get("registry", []):
        host = image.split("/")[0] if "." in image.split("/")[0] else "registry-1.docker.io"
        fail('Error response from daemon: Get "https://%s/v2/": dial tcp: lookup %s: '
             "no such host" % (host, host))
    state.setdefault("images", []).append(image)
    print("Status: Downloaded newer image for " + image); save(); sys.exit(0)
if argv[:1] == ["save"]:
    args = argv[1:]
    if "--platform" in args and state.get("docker_cli", "20.10") < "28":
        fail("unknown flag: --platform\\nSee 'docker save --help'.", 125)
    if "--platform" in args and state.get("docker_api", "1.41") < "1.48":
        fail('"--platform" requires API version 1.48, but the Docker daemon API version is '
             + state.get("docker_api", "1.41"))
    images = [a for i, a in enumerate(args) if not a.startswith("-")
              and (i == 0 or args[i - 1] not in ("-o", "--output", "--platform"))]
    for image in images:
        if image not in state.get("images", []):
            fail("Error response from daemon: reference does not exist")
    Path(opt(args, "-o")).write_text(json.dumps({"images": images})); sys.exit(0)
fail("fake docker: command not modelled: " + " ".join(argv), 2)
"""


class FakeCLI:
    #: the API simulator ``serve_api`` gave the cluster, if any
    api: KubeServer | None = None

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        for name, body in (("kind", _KIND), ("docker", _DOCKER)):
            path = self.bin / name
            prelude = _PRELUDE.format(
                python=sys.executable,
                root=str(root),
                name=name,
                here=str(HERE),
                repo=str(HERE.parent.parent),
            )
            path.write_text(prelude + body)
            path.chmod(0o755)
        self.save({})

    @property
    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / "state.json").read_text())
        return data

    def save(self, state: dict[str, Any]) -> None:
        (self.root / "state.json").write_text(json.dumps(state))

    def set(self, **values: Any) -> None:
        state = self.state
        state.update(values)
        self.save(state)

    def runner(self) -> SubprocessRunner:
        return SubprocessRunner(base_env={"PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}"})

    def calls(self) -> list[list[str]]:
        path = self.root / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line)["argv"] for line in path.read_text().splitlines()]

    def network_envs(self) -> list[str | None]:
        path = self.root / "calls.jsonl"
        return [json.loads(line)["network_env"] for line in path.read_text().splitlines()]

    def serve_api(self, sim: KubeServer) -> None:
        """``kind create cluster`` hands back ``sim``'s kubeconfig and registers the nodes there
        as their kubelets would (``kind_releases.registered_node``); ``kind delete cluster``
        removes them again."""
        kubeconfig = sim.write_kubeconfig(self.root / "api.kubeconfig")
        self.set(api_kubeconfig=str(kubeconfig))
        self.api = sim

    def kubelets(self) -> dict[str, dict[str, Any]]:
        """What ``kind create cluster`` started each node's kubelet with."""
        kubelets: dict[str, dict[str, Any]] = self.state.get("kubelets", {})
        return kubelets


def container(name: str, role: str, cluster: str, ip: str, network: str = "kind") -> dict[str, Any]:
    """A ``docker inspect`` entry shaped like a kind node container."""
    return {
        "Name": f"/{name}",
        "Config": {"Labels": {"io.x-k8s.kind.cluster": cluster, "io.x-k8s.kind.role": role}},
        "NetworkSettings": {"Networks": {network: {"IPAddress": ip, "Gateway": "172.30.0.1"}}},
    }
