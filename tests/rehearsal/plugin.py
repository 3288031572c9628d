"""``pytest --kind-rehearsal``: the kind backend against a rehearsal cluster.

Nothing here can pull a kindest/node image, so the lab's kind path is rehearsed: the fake
``kind`` and ``docker`` (``tests/cluster/fakecli.py``, kind's release model derived from its
source) make real bridges, node network namespaces and processes (``tests.rehearsal``), and the
lab drives them through exactly the code it runs against real kind (``--backend kind``): no
stand-in hook, no rehearsal switch in ``lab/``.

How it runs: the first ``pytest_configure`` re-executes the whole pytest run inside new network,
mount and PID namespaces (``unshare --net --mount --pid``; root only), where ``/run`` is a
private tmpfs and only loopback exists, so every bridge, address and route the rehearsal makes
disappears with the run, nothing reaches the host's networks, and no process outlives it (the
run is the namespace's init: when it ends, the kernel ends every process left in it). Inside,
the fakes are put first on ``PATH`` in rehearsal mode at the kind release that pairs with
``--k8s-version``.

Cases that need what only real nodes do (a container image other than agnhost netexec) carry
``realnodes(reason)`` and are skipped here with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

INSIDE = "CCM_LAB_KIND_REHEARSAL"
#: made in the new namespaces before pytest runs again: a private /run (``ip netns`` keeps its
#: handles under /run/netns) and loopback up
_SETUP = (
    "mount -t tmpfs ccm-kind-rehearsal /run && mkdir -p /run/netns && ip link set lo up && "
    'exec "$@"'
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("ccm-lab").addoption(
        "--kind-rehearsal",
        action="store_true",
        default=False,
        help="run the kind backend against a rehearsal cluster (network namespaces as node "
        "containers, real sockets for kube-proxy and agnhost pods; root only)",
    )


def unavailable() -> str | None:
    """Why the rehearsal cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "--pid", "--fork", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:  # root in a container without CAP_SYS_ADMIN, for one
        return f"cannot make namespaces here: {probe.stderr.strip() or probe.returncode}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "realnodes(reason): needs what only real kind nodes do (skipped in the kind rehearsal)",
    )
    if not config.getoption("--kind-rehearsal", False):
        return
    if os.environ.get(INSIDE) is None:
        why = unavailable()
        if why is not None:
            raise pytest.UsageError(f"--kind-rehearsal {why}; run it as root, or drop the flag")
        argv = [sys.executable, *sys.orig_argv[1:]]
        if "--backend" not in argv:
            argv += ["--backend", "kind"]
        env = {**os.environ, INSIDE: "1"}
        os.execvpe(
            "unshare",
            ["unshare", "--net", "--mount", "--pid", "--mount-proc", "--fork", "--kill-child",
             "--", "sh", "-c", _SETUP, "sh", *argv],
            env,
        )  # fmt: skip
    if config.getoption("--backend", "sim") != "kind":
        raise pytest.UsageError("--kind-rehearsal rehearses --backend kind; drop --backend")
    _fakes_on_path(config)


def _fakes_on_path(config: pytest.Config) -> None:
    from lab.versions.release import KubeVersion, node_image
    from tests.cluster.fakecli import FakeCLI

    version = KubeVersion.parse(config.getoption("--k8s-version"))
    release = node_image(version).kind_release_text
    root = Path(tempfile.mkdtemp(prefix="ccm-kind-rehearsal-"))
    config.add_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))
    fake = FakeCLI(root / "fake")
    fake.set(kind_version=f"kind {release} go1.24.2 linux/amd64", rehearsal=True)
    os.environ["PATH"] = f"{fake.bin}{os.pathsep}{os.environ['PATH']}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--kind-rehearsal", False):
        return
    for item in items:
        mark = item.get_closest_marker("realnodes")
        if mark is not None:
            reason = mark.args[0] if mark.args else "it needs real kind nodes"
            item.add_marker(
                pytest.mark.skip(
                    reason=f"kind rehearsal: its nodes run agnhost netexec only; {reason}"
                )
            )
