"""A private Docker engine for the ``docker`` test group, in namespaces the test makes.

The lab's Docker operations (bridge networks, containers) change a host's interfaces, routes and
iptables; tests may not. So the engine runs as ``unshare --net --mount --pid --fork dockerd``:
its bridges, routes and rules live in a fresh network namespace that disappears with it, its
overlay mounts in a private mount namespace, its containerd and containers in a PID namespace
whose init is dockerd (stopping it ends them all). Its containerd is its own: dockerd adopts a
running system containerd when ``/run/containerd/containerd.sock`` exists (moby's
``initializeContainerd``), and that containerd, in the host's mount namespace, would not see
the private namespace's mounts; so the private mount namespace hides ``/run/containerd`` under
an empty tmpfs before dockerd starts, and dockerd starts a managed containerd of its own. It
listens on a socket under a temporary
directory (``DOCKER_HOST``), never on the host's ``/var/run/docker.sock``; nothing can be pulled
(no registry is reachable from the namespace), so images are made with ``docker import`` of a
minimal root filesystem (:func:`minimal_rootfs`).

Needs root (namespaces, dockerd), ``dockerd`` and ``unshare`` on PATH and a ``docker`` CLI;
:func:`unavailable` says which is missing, for the skip reason.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from lab.exec import CommandError, SubprocessRunner


def unavailable() -> str | None:
    """Why a private dockerd cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root to run a private dockerd in a network namespace"
    for tool in ("dockerd", "unshare", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (Debian: apt-get install docker.io)"
    return None


#: where a system containerd listens (moby's ``containerddefaults.DefaultAddress`` directory)
SYSTEM_CONTAINERD = "/run/containerd"
#: ``sh -c`` in the new mount namespace: cover ``$1`` (if it exists) with an empty tmpfs, then
#: exec the rest; a failed mount stops there (dockerd would adopt the system containerd)
_HIDE_THEN_EXEC = (
    'if [ -d "$1" ]; then mount -t tmpfs ccm-no-system-containerd "$1" || exit 97; fi; '
    'shift; exec "$@"'
)


class PrivateDockerd:
    """``dockerd`` in new network, mount and PID namespaces; ``runner()`` talks to it."""

    def __init__(self) -> None:
        # short: a unix socket path must fit in 108 bytes
        self.root = Path(tempfile.mkdtemp(prefix="ccm-dockerd-"))
        self.socket = self.root / "docker.sock"
        self.log = self.root / "dockerd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def runner(self) -> SubprocessRunner:
        return SubprocessRunner(base_env={"DOCKER_HOST": self.host})

    def command(self, *, hide: str = SYSTEM_CONTAINERD, dockerd: str = "dockerd") -> list[str]:
        """The argv: new namespaces, ``hide`` (the system containerd's directory) covered by an
        empty tmpfs in the private mount namespace where it exists, then ``dockerd``."""
        return [
            "unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc",
            "--kill-child=SIGTERM",
            "sh", "-c", _HIDE_THEN_EXEC, "sh", hide,
            dockerd, "--host", self.host,
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "dockerd.pid"),
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> str | None:
        """Start and wait until ``docker info`` answers; None, or why it did not (log tail)."""
        argv = self.command()
        with self.log.open("wb") as out:
            self._proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        runner = self.runner()
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return f"dockerd exited ({self._proc.returncode}): {self._tail()}"
            try:
                runner.run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=10)
                return None
            except CommandError:
                time.sleep(0.2)
        return f"dockerd did not answer within {timeout:g}s: {self._tail()}"

    def _tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return " | ".join(lines[-3:])

    def stop(self) -> None:
        """SIGTERM to unshare (forwarded to dockerd, PID 1 of its namespace: everything in it
        ends), then remove the directory. Idempotent."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._proc = None
        shutil.rmtree(self.root, ignore_errors=True)


def minimal_rootfs(program: str = "sleep") -> bytes:
    """A tar of ``/bin/<program>`` and the shared libraries ``ldd`` lists for it: enough for
    ``docker import`` to make an image whose containers run ``<program>``."""
    path = shutil.which(program)
    if path is None:
        raise FileNotFoundError(program)
    libs = []
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
    for line in ldd.stdout.splitlines():
        match = re.search(r"(/\S+) \(0x", line)
        if match:
            libs.append(match.group(1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(path, arcname=f"bin/{program}")
        for lib in libs:
            tar.add(os.path.realpath(lib), arcname=lib.lstrip("/"))
    return buf.getvalue()
