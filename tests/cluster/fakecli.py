"""Fake ``kind`` and ``docker`` executables for provider tests.

Each fake is a small Python script written into ``<tmp>/bin``. It appends its argv (plus the
kind network override variable) as one JSON line to ``<tmp>/calls.jsonl`` and answers from
``<tmp>/state.json``, which the test edits to script behaviour (failures, node containers).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from lab.exec import SubprocessRunner

_PRELUDE = """#!{python} -IS
import json, os, sys
from pathlib import Path
root = Path({root!r})
argv = sys.argv[1:]
with open(root / "calls.jsonl", "a") as f:
    net = os.environ.get("KIND_EXPERIMENTAL_DOCKER_NETWORK")
    f.write(json.dumps({{"argv": [{name!r}, *argv], "network_env": net}}) + "\\n")
state = json.loads((root / "state.json").read_text())
def fail(msg, code=1):
    sys.stderr.write(msg + "\\n"); sys.exit(code)
"""

_KIND = """
if argv[:1] == ["version"]:
    print(state.get("kind_version", "kind v0.29.0 go1.24.2 linux/amd64")); sys.exit(0)
if argv[:2] == ["create", "cluster"]:
    if state.get("fail_create"):
        print("Creating cluster ...")
        fail("ERROR: failed to create cluster: failed to init node with kubeadm: exit status 1")
    kubeconfig = argv[argv.index("--kubeconfig") + 1]
    Path(kubeconfig).write_text("apiVersion: v1\\nkind: Config\\n")
    print("Creating cluster ..."); sys.exit(0)
if argv[:2] == ["delete", "cluster"]:
    print("Deleting cluster ..."); sys.exit(0)
if argv[:2] == ["load", "docker-image"]:
    sys.exit(0)
if argv[:2] == ["export", "logs"]:
    Path(argv[2]).mkdir(parents=True, exist_ok=True)
    (Path(argv[2]) / "kind-version.txt").write_text("fake")
    print(argv[2]); sys.exit(0)
fail("fake kind: unexpected arguments " + " ".join(argv), 2)
"""

_DOCKER = """
if argv[:1] == ["info"]:
    print("27.3.1"); sys.exit(0)
if argv[:2] == ["network", "inspect"]:
    if argv[2] not in state.get("networks", []):
        fail("Error response from daemon: network " + argv[2] + " not found")
    if "--format" in argv:
        print(state.get("gateway", "172.30.0.1") + " ")
    else:
        print("[]")
    sys.exit(0)
if argv[:2] == ["network", "create"]:
    if state.get("fail_network_create"):
        fail("Error response from daemon: Pool overlaps with other one on this address space")
    print("0123456789ab"); sys.exit(0)
if argv[:2] == ["network", "ls"]:
    print("\\n".join(state.get("owned_networks", []))); sys.exit(0)
if argv[:2] == ["network", "rm"]:
    print(argv[2]); sys.exit(0)
if argv[:1] == ["ps"]:
    print("\\n".join(c["Name"].lstrip("/") for c in state.get("containers", []))); sys.exit(0)
if argv[:1] == ["inspect"]:
    wanted = set(argv[1:])
    print(json.dumps([c for c in state.get("containers", []) if c["Name"].lstrip("/") in wanted]))
    sys.exit(0)
fail("fake docker: unexpected arguments " + " ".join(argv), 2)
"""


class FakeCLI:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        for name, body in (("kind", _KIND), ("docker", _DOCKER)):
            path = self.bin / name
            path.write_text(
                _PRELUDE.format(python=sys.executable, root=str(root), name=name) + body
            )
            path.chmod(0o755)
        self.state: dict[str, Any] = {}
        self.save()

    def save(self) -> None:
        (self.root / "state.json").write_text(json.dumps(self.state))

    def set(self, **values: Any) -> None:
        self.state.update(values)
        self.save()

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


def container(name: str, role: str, cluster: str, ip: str, network: str = "kind") -> dict[str, Any]:
    """A ``docker inspect`` entry shaped like a kind node container."""
    return {
        "Name": f"/{name}",
        "Config": {"Labels": {"io.x-k8s.kind.cluster": cluster, "io.x-k8s.kind.role": role}},
        "NetworkSettings": {"Networks": {network: {"IPAddress": ip, "Gateway": "172.30.0.1"}}},
    }
