"""The controller under test as a local process: start, health, restart with other flags, stop.

The lab never imports ``controller/``; it runs ``python -m controller`` as a child process with
a kubeconfig, a cloud config and the AWS environment a real deployment would have
(``AWS_EC2_METADATA_SERVICE_ENDPOINT``, credentials). That keeps the controller honest (it
cannot know it is in a lab) and lets tests assert its exit code and log lines. The lifecycle is
:class:`lab.component.ChildProcess`'s; readiness is the controller's own signal: the address
file it writes (``--address-file``) and a 200 from ``/readyz`` there, and a readiness failure
raises ``ComponentNotReady`` with the log's tail. Any other controller build can stand in
(:class:`ControllerCommand`, ``--controller-cmd``): a command template the lab fills in
(:data:`PLACEHOLDERS`), the same AWS environment plus ``AWS_ENDPOINT_URL_*``, readiness from a
health URL or a log line; :func:`upstream_preset` knows the upstream binary's flags.
Neighbours: ``lab.compose`` decides the flags and files; ``lab.debug`` wraps the same command
under debugpy for ``invoke lab.debug``.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import os
import re
import shlex
import shutil
import socket
import ssl
import string
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from lab.component import ChildProcess, wait_until
from lab.component.forkserver import ForkServer

#: Credentials the lab's endpoints accept (moto's well-known dummies); never real ones.
LAB_AWS_ENV: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


def aws_env(credentials: tuple[str, str] | None) -> dict[str, str]:
    """The AWS credential variables for the lab's endpoint: :data:`LAB_AWS_ENV`, or the key
    pair ``credentials`` (no session token: the proxy's caller key is a long-term key)."""
    if credentials is None:
        return dict(LAB_AWS_ENV)
    return {"AWS_ACCESS_KEY_ID": credentials[0], "AWS_SECRET_ACCESS_KEY": credentials[1]}


#: What a ``--controller-cmd`` template may name; the lab fills each in (``python``: the lab's
#: own interpreter, whose virtualenv has our controller's dependencies; ``kubeconfig``,
#: ``cloud_config``: files; ``imds_endpoint``, ``aws_endpoint``: URLs (empty when absent);
#: ``metrics_addr``: a free ``127.0.0.1:PORT`` for the controller's health and metrics server,
#: ``metrics_port`` its port; ``secure_port``: another free port, for controllers that serve
#: health on a secure port; ``region``; ``log_dir``: the lab's directory for the controller)
PLACEHOLDERS = (
    "python",
    "kubeconfig",
    "cloud_config",
    "imds_endpoint",
    "aws_endpoint",
    "metrics_addr",
    "metrics_port",
    "secure_port",
    "region",
    "log_dir",
)


class ControllerCommandError(ValueError):
    """A ``--controller-cmd`` the lab cannot run; the message names the value and the fix."""


def program_search_path(path: str | None = None) -> str:
    """Where a command's program is looked up, as a shell in the lab's activated virtualenv
    would: the directory of the lab's interpreter first, then ``path`` (default ``$PATH``)."""
    first = str(Path(sys.executable).parent)  # not resolved: a venv's python is a symlink
    given = os.environ.get("PATH", os.defpath) if path is None else path
    rest = [p for p in given.split(os.pathsep) if p and p != first]
    return os.pathsep.join([first, *rest])


def find_program(word: str, path: str | None = None) -> str | None:
    """The executable ``word`` names, as a shell finds it: a word with a ``/`` is a path (from
    the current directory), any other is looked up on :func:`program_search_path`; None when
    there is no such executable file."""
    return shutil.which(word, path=program_search_path(path))


@dataclasses.dataclass(frozen=True)
class ControllerCommand:
    """Any controller build as the controller under test: a command template with
    placeholders (:data:`PLACEHOLDERS`, ``{{``/``}}`` for literal braces), split as a POSIX
    shell splits it, and how to tell it is ready: ``ready_log`` (a regular expression a log
    line must match) or else ``ready_url`` answering 200 (default
    ``http://{metrics_addr}/healthz``; an ``https://`` one is not verified, as for a
    self-signed serving certificate)."""

    template: tuple[str, ...]
    ready_log: str | None = None
    ready_url: str = "http://{metrics_addr}/healthz"
    name: str = "custom"

    @classmethod
    def parse(
        cls, text: str, *, ready_log: str | None = None, ready_url: str | None = None
    ) -> ControllerCommand:
        try:
            template = tuple(shlex.split(text))
        except ValueError as exc:
            raise ControllerCommandError(f"--controller-cmd {text!r}: {exc}") from None
        if not template:
            raise ControllerCommandError("--controller-cmd '': give the command to run")
        if ready_log is not None:
            try:
                re.compile(ready_log)
            except re.error as exc:
                raise ControllerCommandError(
                    f"--controller-ready-log {ready_log!r}: not a regular expression ({exc})"
                ) from None
        command = cls(template, ready_log, ready_url or cls.ready_url)
        command.check()
        return command

    def check(self) -> None:
        """Every placeholder is one the lab fills (ControllerCommandError otherwise)."""
        for part in (*self.template, self.ready_url):
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(part) if f is not None]
            except ValueError as exc:
                raise ControllerCommandError(
                    f"--controller-cmd: {part!r}: {exc} (write {{{{ and }}}} for literal braces)"
                ) from None
            for field in fields:
                if field not in PLACEHOLDERS:
                    raise ControllerCommandError(
                        f"--controller-cmd: unknown placeholder {{{field}}} in {part!r}; "
                        f"the lab fills {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
                    )

    def render(self, values: Mapping[str, str]) -> list[str]:
        return [part.format(**values) for part in self.template]

    def check_program(self, text: str) -> None:
        """The program (the first word) exists, found as :func:`find_program` finds it, unless
        it names a placeholder only a start fills; ``text``: the flag's value, for the error."""
        word = self.template[0]
        fields = {f for _, f, _, _ in string.Formatter().parse(word) if f is not None}
        if fields - {"python"}:
            return
        program = word.format(python=sys.executable)
        if find_program(program) is not None:
            return
        where = (
            "no executable file there"
            if "/" in program
            else f"not in the lab's virtualenv ({Path(sys.executable).parent}) nor on PATH"
        )
        raise ControllerCommandError(
            f"--controller-cmd {text!r}: no program {program!r} ({where}); give its path, or "
            "{python} for the lab's own interpreter (e.g. {python} -m controller ...)"
        )


def upstream_preset(binary: str) -> ControllerCommand:
    """kubernetes/cloud-provider-aws's ``aws-cloud-controller-manager`` as the lab runs it:
    the cloud provider ``aws`` with the lab's cloud config, the lab's kubeconfig also for
    delegated authentication and authorization, the controllers a single-cluster lab uses
    (``cloud-node``, ``cloud-node-lifecycle``, ``service``; no routes), no leader election,
    its secure serving on loopback at a port the lab picks, readiness from ``/healthz`` there
    (always allowed without credentials by ``--authorization-always-allow-paths``' default).
    Flag names as kubernetes/cloud-provider's ``options/options_test.go`` uses them (at
    46666112); ``--authentication-kubeconfig``/``--authorization-kubeconfig`` are
    k8s.io/apiserver's delegating options, ``--v`` component-base's; the controller names are
    the aliases ``names/controller_names.go`` keeps for every release (``cloud-node`` for
    ``cloud-node-controller``...), so old builds take them too."""
    return ControllerCommand(
        (
            binary,
            "--cloud-provider=aws",
            "--cloud-config={cloud_config}",
            "--kubeconfig={kubeconfig}",
            "--authentication-kubeconfig={kubeconfig}",
            "--authorization-kubeconfig={kubeconfig}",
            "--controllers=cloud-node,cloud-node-lifecycle,service",
            "--configure-cloud-routes=false",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            "--bind-address=127.0.0.1",
            "--secure-port={secure_port}",
            "--v=2",
        ),
        ready_url="https://127.0.0.1:{secure_port}/healthz",
        name="upstream",
    )


#: ``--controller`` values: our controller (the default) or a preset for another build
CONTROLLER_PRESETS = ("ours", "upstream=PATH")


def choose_command(
    *,
    controller_cmd: str = "",
    controller: str = "",
    ready_log: str = "",
    ready_url: str = "",
) -> ControllerCommand | None:
    """The controller the front door's flags ask for: None for ours, else the command.

    ``controller_cmd``: ``--controller-cmd`` (a template); ``controller``: ``--controller``
    (``ours`` or ``upstream=PATH``); ``ready_log``/``ready_url``: how to tell a command is
    ready. Raises :class:`ControllerCommandError` naming the flag, its value and the fix;
    nothing is run or written."""
    if controller_cmd and controller:
        raise ControllerCommandError(
            f"--controller {controller!r} and --controller-cmd: give one of them"
        )
    command: ControllerCommand | None = None
    if controller_cmd:
        command = ControllerCommand.parse(
            controller_cmd, ready_log=ready_log or None, ready_url=ready_url or None
        )
        command.check_program(controller_cmd)
    elif controller and controller != "ours":
        kind, _, path = controller.partition("=")
        if kind != "upstream" or not path:
            raise ControllerCommandError(
                f"--controller {controller!r}: choose {' or '.join(CONTROLLER_PRESETS)} (PATH: "
                "an aws-cloud-controller-manager binary), or give --controller-cmd"
            )
        binary = Path(path).expanduser()
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise ControllerCommandError(
                f"--controller {controller!r}: no executable file at {binary}; build it in a "
                "kubernetes/cloud-provider-aws checkout (`make aws-cloud-controller-manager`) "
                "and give its path"
            )
        # a brace in the path is the path's, not a placeholder
        preset = upstream_preset(str(binary.resolve()).replace("{", "{{").replace("}", "}}"))
        command = ControllerCommand.parse(
            shlex.join(preset.template),
            ready_log=ready_log or None,
            ready_url=ready_url or preset.ready_url,
        )
        command = dataclasses.replace(command, name=preset.name)
    elif ready_log or ready_url:
        flag = "--controller-ready-log" if ready_log else "--controller-ready-url"
        raise ControllerCommandError(
            f"{flag} {ready_log or ready_url!r}: it tells when another build is ready; our "
            "controller reports readiness itself (give --controller-cmd or --controller "
            "upstream=PATH with it)"
        )
    return command


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice on loopback)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class ControllerSpec:
    """How to run the controller: everything but the process itself."""

    kubeconfig: Path
    cloud_config: Path
    log_path: Path
    imds_endpoint: str | None
    legacy: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: another controller build instead of ``python -m controller`` (``--controller-cmd``)
    command: ControllerCommand | None = None
    aws_endpoint: str | None = None
    region: str = "us-east-1"
    #: the key pair the AWS endpoint accepts instead of :data:`LAB_AWS_ENV`'s (a lab in a
    #: real account: the recording proxy checks its callers' signatures)
    aws_credentials: tuple[str, str] | None = None

    def placeholders(self, *, metrics_port: int, secure_port: int) -> dict[str, str]:
        """The values a :class:`ControllerCommand` template is filled with."""
        return {
            "python": sys.executable,
            "kubeconfig": str(self.kubeconfig),
            "cloud_config": str(self.cloud_config),
            "imds_endpoint": self.imds_endpoint or "",
            "aws_endpoint": self.aws_endpoint or "",
            "metrics_addr": f"127.0.0.1:{metrics_port}",
            "metrics_port": str(metrics_port),
            "secure_port": str(secure_port),
            "region": self.region,
            "log_dir": str(self.log_path.parent),
        }

    def argv(self, *, address_file: Path) -> list[str]:
        """The whole command line: ``python -m controller`` and :meth:`args`."""
        return [sys.executable, "-m", "controller", *self.args(address_file=address_file)]

    def args(self, *, address_file: Path) -> list[str]:
        """The controller's flags."""
        args = [
            "--kubeconfig",
            str(self.kubeconfig),
            "--cloud-config",
            str(self.cloud_config),
            "--metrics-addr",
            "127.0.0.1:0",
            "--address-file",
            str(address_file),
        ]
        if self.legacy:
            args += ["--legacy-behavior", ",".join(self.legacy)]
        args += list(self.extra_args)
        return args

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(aws_env(self.aws_credentials))
        env["AWS_DEFAULT_REGION"] = env.get("AWS_DEFAULT_REGION", "us-east-1")
        if self.imds_endpoint:
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = self.imds_endpoint
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"] = "IPv4"
        else:
            # Nothing answers here: a closed loopback port, so "no metadata" fails fast.
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:9"
        if self.command is not None and self.aws_endpoint:
            # what an SDK-based build reads besides the cloud config's [ServiceOverride]s
            for service in ("EC2", "ELASTIC_LOAD_BALANCING", "ELASTIC_LOAD_BALANCING_V2", "STS"):
                env[f"AWS_ENDPOINT_URL_{service}"] = self.aws_endpoint
            env["AWS_REGION"] = self.region
        env.update(self.env)
        if self.command is not None:  # what a shell in the lab's virtualenv finds first
            env["PATH"] = program_search_path(env.get("PATH", os.defpath))
        return env


class ControllerProcess(ChildProcess):
    """One run of the controller: ``start()`` returns once it is ready (see ``_await_ready``).

    ``detach=True`` spawns it in its own session with nothing holding it, for ``invoke lab.*``
    (the controller outlives the command; ``ref`` names it for whoever stops it later);
    otherwise it is a child the caller owns (tests), with its exit code available. Either way
    it leads its own process group, and stopping it signals the group.
    """

    what = "controller"
    module = "controller"
    own_group = True
    reads_ready_line = False

    def __init__(
        self,
        spec: ControllerSpec,
        *,
        detach: bool = False,
        ready_timeout: float = 30.0,
        launcher: ForkServer | None = None,
    ) -> None:
        if launcher is not None and spec.command is not None:
            raise ValueError("launcher: only our own controller is forked from a server")
        self.spec = spec
        self._address_file = spec.log_path.with_suffix(".address")
        self._skip_ready = False
        self._values = spec.placeholders(metrics_port=free_port(), secure_port=free_port())
        super().__init__(
            spec.args(address_file=self._address_file),
            log_path=spec.log_path,
            ready_timeout=ready_timeout,
            detach=detach,
            env=spec.environ(),
            launcher=launcher,
        )

    @property
    def health_url(self) -> str | None:
        """Where the running controller answers health: ours ``<url>/healthz``; another build
        its readiness URL (None when it is told ready by a log line)."""
        command = self.spec.command
        if command is None:
            return f"{self._url}/healthz" if self._url else None
        if command.ready_log is not None:
            return None
        return command.ready_url.format(**self._values)

    @property
    def metrics_url(self) -> str | None:
        """Ours: ``<url>/metrics``; another build's is its own business (None)."""
        if self.spec.command is None and self._url:
            return f"{self._url}/metrics"
        return None

    @property
    def command(self) -> list[str]:
        """``python -m controller ...``, or the rendered ``--controller-cmd`` with its program
        found as a shell finds it (:func:`find_program`; left as given when there is none, and
        the start says the program could not be run)."""
        if self.spec.command is not None:
            argv = self.spec.command.render(self._values)
            found = find_program(argv[0], (self.env or {}).get("PATH"))
            return [found or argv[0], *argv[1:]]
        return super().command

    def start(self, *, wait_ready: bool = True) -> Self:
        """Start the controller; unless told not to, wait until it is ready."""
        self._skip_ready = not wait_ready
        self._address_file.unlink(missing_ok=True)
        return super().start()

    def _await_ready(self) -> str | None:
        """Wait for the address file and a 200 from ``/readyz`` (informers synced, controllers
        running); returns the base URL (None when told not to wait)."""
        if self._skip_ready:
            return None
        return self.wait_ready(timeout=self.ready_timeout)

    def wait_ready(self, *, timeout: float = 30.0) -> str:
        """Wait until the controller serves ``/readyz`` with 200; returns its base URL."""
        found: list[str] = []
        command = self.spec.command
        pattern = re.compile(command.ready_log) if command and command.ready_log else None
        ready_url = command.ready_url.format(**self._values) if command else ""

        def ready() -> bool:
            if not self.running:
                raise self._not_ready(f"exited with status {self.returncode} first")
            if pattern is not None:
                if any(pattern.search(line) for line in self.log_text().splitlines()):
                    found.append(ready_url.rsplit("/", 1)[0])
                    return True
                return False
            if command is not None:
                if health_ok(ready_url):
                    found.append(ready_url.rsplit("/", 1)[0])
                    return True
                return False
            if self._address_file.exists():
                url = self._address_file.read_text(encoding="utf-8").strip()
                if url and health_ok(f"{url}/readyz"):
                    found.append(url)
                    return True
            return False

        if not wait_until(ready, timeout=timeout, interval=0.05):
            if pattern is not None:
                what = f"no log line matched {pattern.pattern!r}"
            elif command is not None:
                what = f"{ready_url} did not answer 200"
            else:
                what = "/readyz did not answer 200"
            raise self._not_ready(f"{what} within {timeout:.0f}s")
        self._url = found[0]
        return found[0]


#: What a fork server imports before it forks our controller (see ``controller/preload.py``).
CONTROLLER_PRELOAD = ("controller.preload",)


@functools.cache
def controller_launcher() -> ForkServer:
    """This process's fork server for our controller (started on first use, stopped at exit).

    One per process, shared by every in-process :class:`~lab.compose.Lab`: the imports are paid
    once however many labs a test session starts. The controllers it forks are their labs' to
    stop; the server itself goes at interpreter exit or with this process."""
    launcher = ForkServer(CONTROLLER_PRELOAD)
    atexit.register(launcher.stop)
    return launcher


def health_ok(url: str) -> bool:
    """A 200 from ``url`` within a second (an ``https://`` one's certificate unverified: a
    controller's self-signed serving certificate)."""
    context = None
    if url.startswith("https://"):  # a controller's self-signed serving certificate
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=1.0, context=context) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def render_cloud_config(
    *,
    region: str,
    cluster_id: str,
    aws_endpoint: str | None,
    extra_global: Sequence[tuple[str, str]] = (),
) -> str:
    """The controller's cloud config: ``[Global]`` plus ``[ServiceOverride]`` endpoints."""
    lines = ["[Global]", f"Region = {region}", f"KubernetesClusterID = {cluster_id}"]
    lines += [f"{k} = {v}" for k, v in extra_global]
    if aws_endpoint:
        for n, service in enumerate(("ec2", "elasticloadbalancing", "sts"), start=1):
            lines += [
                "",
                f'[ServiceOverride "{n}"]',
                f"Service = {service}",
                f"Region = {region}",
                f"URL = {aws_endpoint}",
                f"SigningRegion = {region}",
            ]
    return "\n".join(lines) + "\n"
