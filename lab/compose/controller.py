"""The controller under test as a part of the lab: which build, with which flags, started when.

Role: :class:`ControllerPart` holds everything about the lab's controller process: the one
running (``Lab.controller``), how many have run (each logs to its own file), the AWS trail's
sequence number when the last one started (``Lab.controller_since_seq``), and the session's
choice of build (``--controller-cmd``: the spec's ``controller_command``, with
``Lab.needs_our_controller`` deciding about a call that needs our controller's flags).
:class:`ControllerSite` is what the lab's other parts contribute to a start: where the
kubeconfig, cloud config, metadata service and AWS endpoint are.

Neighbours: ``lab.controllerproc`` runs the process; ``lab.compose.lab.Lab`` owns one part and
keeps its public ``start_controller``/``controller_spec``/``stop_controller``;
``lab.pytest_plugin`` sets the build under test.

Design: the controller's state moved out of ``Lab``'s attribute list into one object, which
needs nothing of the lab but a :class:`ControllerSite`, so it is read (and changed) apart from
the endpoints and the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from lab.controllerproc import (
    ControllerCommand,
    ControllerProcess,
    ControllerSpec,
    controller_launcher,
)


@dataclasses.dataclass(frozen=True)
class ControllerSite:
    """Where a controller started now finds the lab."""

    kubeconfig: Path
    cloud_config: Path
    #: each run's log is ``controller-<n>.log`` here
    log_dir: Path
    imds_endpoint: str | None
    aws_endpoint: str
    region: str
    aws_credentials: tuple[str, str] | None


class ControllerPart:
    """The lab's controller (see the module doc)."""

    def __init__(self) -> None:
        self.process: ControllerProcess | None = None
        self.runs = 0
        #: what to do with a call that needs our controller (its flags) while another build
        #: (the spec's ``controller_command``, pytest ``--controller-cmd``) runs instead
        self.needs_ours: Callable[[str], bool] | None = None
        #: the AWS trail's last sequence number when the controller last started (what came
        #: after is the controller's doing, or the test's)
        self.since_seq = 0

    def spec(
        self,
        site: Callable[[], ControllerSite],
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        command: ControllerCommand | None = None,
    ) -> ControllerSpec:
        """``command``: another controller build instead of ours; then ``legacy`` and
        ``args`` (our controller's flags) must be empty."""
        if command is not None and (legacy or args):
            raise ValueError("--legacy-behavior and --args are our controller's flags; with "
                             "--controller-cmd write every flag into the command")  # fmt: skip
        self.runs += 1
        where = site()
        return ControllerSpec(
            kubeconfig=where.kubeconfig,
            cloud_config=where.cloud_config,
            log_path=where.log_dir / f"controller-{self.runs}.log",
            imds_endpoint=where.imds_endpoint,
            legacy=tuple(legacy),
            extra_args=tuple(args),
            command=command,
            aws_endpoint=where.aws_endpoint,
            region=where.region,
            aws_credentials=where.aws_credentials,
        )

    def stop(self, *, kill: bool = False) -> None:
        """Stop the controller if one runs (``kill``: without letting it clean up)."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        self.process.stop()
        self.process = None

    def build_under_test(
        self, legacy: Iterable[str], args: Sequence[str], under_test: ControllerCommand | None
    ) -> tuple[Iterable[str], Sequence[str], ControllerCommand | None]:
        """With ``under_test`` set, that build runs instead of ours; a call asking for our
        controller's flags is handed to :attr:`needs_ours`, which skips the test (pytest),
        says to run the build without them (True: conformance mode, the build stands in for
        them), or else the call is refused."""
        if under_test is None:
            return legacy, args, None
        if legacy or args:
            flags = " ".join([*(f"--legacy-behavior {b}" for b in legacy), *args])
            reason = (
                f"this case runs our controller with {flags}; the build under test "
                f"({under_test.name}) takes only its own flags"
            )
            if self.needs_ours is None or not self.needs_ours(reason):
                raise ValueError(reason)
            legacy, args = (), ()  # the build under test stands in for them
        return legacy, args, under_test

    def warm(self, under_test: ControllerCommand | None, launch: str) -> None:
        """Start the fork server our controller is forked from (not waiting for it) when a
        start forks ours (``launch``: the spec's ``controller_launch``): its imports overlap
        whatever this process does meanwhile."""
        if under_test is None and launch == "fork":
            controller_launcher().launch()

    def start(
        self,
        site: Callable[[], ControllerSite],
        *,
        legacy: Iterable[str],
        args: Sequence[str],
        command: ControllerCommand | None,
        under_test: ControllerCommand | None,
        fork_ours: bool,
        trail_seq: Callable[[], int],
        wait_ready: bool,
    ) -> ControllerProcess:
        """(Re)start the controller; ``command``: this build now; ``under_test``: the build every
        start runs instead of ours; ``fork_ours``: start ours from the fork server."""
        if command is None:
            legacy, args, command = self.build_under_test(legacy, args, under_test)
        self.stop()
        fork = command is None and fork_ours
        self.since_seq = trail_seq()
        self.process = ControllerProcess(
            self.spec(site, legacy=legacy, args=args, command=command),
            launcher=controller_launcher() if fork else None,
        )
        self.process.start(wait_ready=wait_ready)
        return self.process
