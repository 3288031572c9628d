"""Run a Python module or script under debugpy, listening on a port chosen by the kernel.

Role: the first code that runs inside the debuggee process. The launcher (``launcher.py``)
starts ``python -X frozen_modules=off -m lab.debug.bootstrap [options] -- <target>``, where
``<target>`` is what you would give ``python`` itself: ``-m controller --kubeconfig …`` or
``path/to/script.py args…``.

Why a bootstrap instead of ``python -m debugpy --listen 127.0.0.1:0``: debugpy's CLI accepts
port 0, but it never tells the parent which port the kernel picked, so a launcher would have to
guess a free port (racy) or scrape logs. ``debugpy.listen(("127.0.0.1", 0))`` returns the real
client address; this module writes it, atomically, to a *ready file* that the launcher polls.

Sequence: optional ``debugpy.log_to(dir)`` → ``debugpy.listen`` (debugpy spawns its adapter
process, which owns the client port) → ready file → optional ``wait_for_client`` → the target
via ``runpy`` with ``sys.argv`` set as if it had been started directly, so its exit status and
``SystemExit`` propagate unchanged.

Only the standard library and debugpy are imported here: everything imported before the
target runs is visible to the debugger and slows the start of every debug session.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.debug.ready import READY_FILE_VERSION, ReadyFile, write_ready_file


@dataclass(frozen=True)
class BootstrapOptions:
    host: str
    port: int
    ready_file: Path
    wait_for_client: bool
    log_dir: Path | None
    module: str | None
    script: Path | None
    args: tuple[str, ...]


class BootstrapUsageError(ValueError):
    """The bootstrap command line is malformed; the message names the offending argument."""


def parse_argv(argv: Sequence[str]) -> BootstrapOptions:
    """Parse ``[options] -- (-m MODULE | SCRIPT) [ARGS...]``."""
    argv = list(argv)
    if "--" not in argv:
        raise BootstrapUsageError("missing '--' before the target (-m MODULE | SCRIPT) [ARGS...]")
    split = argv.index("--")
    own, target = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(prog="python -m lab.debug.bootstrap", exit_on_error=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--wait-for-client", action="store_true")
    parser.add_argument("--log-dir", type=Path, default=None)
    try:
        ns = parser.parse_args(own)
    except argparse.ArgumentError as exc:
        raise BootstrapUsageError(str(exc)) from exc
    port: int = ns.port
    if not 0 <= port < 65536:
        raise BootstrapUsageError(f"--port must be in 0..65535, got {port}")
    if not target:
        raise BootstrapUsageError("missing target after '--': expected -m MODULE or SCRIPT")
    module: str | None = None
    script: Path | None = None
    if target[0] == "-m":
        if len(target) < 2 or not target[1]:
            raise BootstrapUsageError("'-m' needs a module name")
        module, args = target[1], target[2:]
    elif target[0].startswith("-"):
        raise BootstrapUsageError(f"unsupported target option {target[0]!r}: use -m or a path")
    else:
        script, args = Path(target[0]), target[1:]
    return BootstrapOptions(
        host=ns.host,
        port=port,
        ready_file=ns.ready_file,
        wait_for_client=ns.wait_for_client,
        log_dir=ns.log_dir,
        module=module,
        script=script,
        args=tuple(args),
    )


def main(argv: Sequence[str] | None = None) -> None:
    opts = parse_argv(sys.argv[1:] if argv is None else argv)

    import debugpy

    if opts.log_dir is not None:
        opts.log_dir.mkdir(parents=True, exist_ok=True)
        debugpy.log_to(str(opts.log_dir))
    host, port = debugpy.listen((opts.host, opts.port))
    write_ready_file(
        opts.ready_file,
        ReadyFile(
            version=READY_FILE_VERSION,
            pid=os.getpid(),
            host=str(host),
            port=int(port),
            wait_for_client=opts.wait_for_client,
        ),
    )
    if opts.wait_for_client:
        debugpy.wait_for_client()

    if opts.module is not None:
        sys.argv = [opts.module, *opts.args]
        runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
    else:
        assert opts.script is not None
        script = opts.script.resolve()
        sys.argv = [str(script), *opts.args]
        sys.path.insert(0, str(script.parent))
        runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
