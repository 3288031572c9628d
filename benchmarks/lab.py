"""How fast a lab comes up, resets between tests, and goes down.

Prints, in one run: ``Lab`` start to all-nodes-initialized for 2 and 20 nodes on sim (the
in-process composition ``invoke lab.up`` and the pytest plugin share); per-test reset time;
stop time; and the same start for ``invoke lab.up`` (background processes) with 2 nodes
against its ``lab.down``. The cost of serving the simulator over HTTPS with the lab's token
(the default) is start and reset against ``--insecure-api`` (plain HTTP, no token), alternated
in the same warm process, and ``invoke lab.up`` with and without the flag. Targets (issue 5):
lab.up (2 nodes) < 5 s, reset < 300 ms on 2 cores.
The baseline ratio compares a reset with a full stop+start of the lab, measured in this run.

``--compare REF`` (issue 28) measures the three start and stop figures at git ``REF`` too, in
the same run (a temporary worktree, this virtualenv, ``PYTHONPATH`` at it:
``benchmarks.worktree``), alternated with this checkout's, each in fresh processes, and prints
the medians of ``--rounds`` with the ratios now / REF: ``invoke lab.up`` (2 nodes, sim, until
it returns with every node initialized), an in-process ``Lab`` start to all nodes initialized
(in a fresh Python process, timed from ``Lab(...)``; its imports before are not counted,
the check's ``CoreV1Api`` too, which ``kubernetes`` 37 loads on first use) and
``invoke lab.down``. Targets (issue 28): lab.up <= 2.5 s, in-process start <= 1.5 s, lab.down
<= 1 s. With ``--quick`` the comparison is all that runs.

    .venv/bin/python -m benchmarks.lab [--quick] [--repeat N] [--compare REF [--rounds N]]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client
from rich.console import Console

from benchmarks.worktree import ROOT, constraints_differ, env_for, worktree
from lab.compose import Lab, wait_for
from lab.frontdoor.down import down
from lab.frontdoor.up import up
from lab.spec import LabSpec, up_request

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"


def all_initialized(lab: Lab) -> bool:
    core = client.CoreV1Api(lab.api_client())
    nodes = core.list_node().items
    return len(nodes) == len(lab.nodes) and all(
        not any(t.key == UNINIT for t in (n.spec.taints or [])) for n in nodes
    )


def up_to_initialized(nodes: int, *, insecure_api: bool = False) -> tuple[float, float, float, Lab]:
    t0 = time.monotonic()
    lab = Lab(
        LabSpec(
            name=f"bench-{nodes}",
            nodes=nodes,
            zones=("us-east-1a", "us-east-1b"),
            insecure_api=insecure_api,
        )
    )
    lab.start()
    servers = time.monotonic() - t0
    lab.start_controller()
    wait_for(lambda: all_initialized(lab), timeout=120, what="all nodes initialized")
    total = time.monotonic() - t0
    return servers, total - servers, total, lab


def tls_cost(rounds: int, repeat: int) -> list[tuple[str, str]]:
    """The default lab (simulator over HTTPS with the lab's token) against ``insecure_api``
    (plain HTTP, no token: the baseline), alternated ``rounds`` times in this warm process:
    start to all nodes initialized, and per-test reset (median)."""
    totals: dict[bool, list[float]] = {True: [], False: []}
    resets: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for insecure in (True, False):
            _, _, total, lab = up_to_initialized(2, insecure_api=insecure)
            try:
                for _ in range(repeat):
                    lab.start_controller()
                    t0 = time.monotonic()
                    lab.reset()
                    resets[insecure].append(time.monotonic() - t0)
            finally:
                lab.stop()
            totals[insecure].append(total)
    tls_up, open_up = statistics.median(totals[False]), statistics.median(totals[True])
    tls_reset, open_reset = statistics.median(resets[False]), statistics.median(resets[True])
    return [
        (f"TLS + token vs --insecure-api, warm, median of {rounds} alternated starts", ""),
        ("  start to all initialized: TLS + token / insecure", f"{tls_up:.2f} / {open_up:.2f} s"),
        ("  ratio (baseline: insecure)", f"{tls_up / open_up:.2f}x"),
        (
            f"  reset, median of {rounds * repeat}: TLS + token / insecure",
            f"{tls_reset * 1000:.0f} / {open_reset * 1000:.0f} ms",
        ),
        ("  ratio (baseline: insecure)", f"{tls_reset / open_reset:.2f}x"),
    ]


#: an in-process start, run in a fresh process of either checkout (the same code for both)
START_PROBE = """
import json, time
from kubernetes import client
from lab.compose import Lab, wait_for
from lab.spec import LabSpec

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"
CoreV1Api = client.CoreV1Api  # the client loads it on first use: imported here, not timed


def initialized(lab):
    nodes = CoreV1Api(lab.api_client()).list_node().items
    return len(nodes) == len(lab.nodes) and all(
        not any(t.key == UNINIT for t in (n.spec.taints or [])) for n in nodes
    )


t0, cpu0 = time.monotonic(), time.process_time()
lab = Lab(LabSpec(name="bench-compare", nodes=2, zones=("us-east-1a", "us-east-1b")))
lab.start()
lab.start_controller()
wait_for(lambda: initialized(lab), timeout=120, what="all nodes initialized")
total, cpu = time.monotonic() - t0, time.process_time() - cpu0
lab.stop()
print(json.dumps({"start": total, "start CPU": cpu}))
"""

INVOKE = str(Path(sys.executable).parent / "invoke")


def _timed(cmd: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return elapsed, done.stdout


def start_and_stop(tree: Path) -> dict[str, float]:
    """One round of the three figures with ``tree``'s code, each in fresh processes."""
    env = env_for(tree)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ccm-lab-bench-") as tmp:
        where = Path(tmp)
        lab = ("--name", "bench", "--backend", "sim")
        figures["lab.up"], _ = _timed([INVOKE, "-r", str(tree), "lab.up", *lab], cwd=where, env=env)
        figures["lab.down"], _ = _timed(
            [INVOKE, "-r", str(tree), "lab.down", "--name", "bench"], cwd=where, env=env
        )
        if any(where.joinpath(".lab").glob("*")):
            raise SystemExit(f"lab.down of {tree} left {sorted(where.joinpath('.lab').iterdir())}")
        _, out = _timed([sys.executable, "-c", START_PROBE], cwd=where, env=env)
        figures.update(json.loads(out.strip().splitlines()[-1]))
    return figures


COMPARED = (
    ("lab.up", "invoke lab.up (2 nodes, sim) to all initialized", 2.5),
    ("start", "in-process Lab start to all initialized", 1.5),
    ("start CPU", "  its process's CPU time meanwhile (the controller's apart)", None),
    ("lab.down", "invoke lab.down (verified)", 1.0),
)


def compare(ref: str, rounds: int) -> list[tuple[str, str]]:
    """The three figures at ``ref`` and here, alternated round by round; medians, ratios."""
    before: dict[str, list[float]] = {key: [] for key, _, _ in COMPARED}
    now: dict[str, list[float]] = {key: [] for key, _, _ in COMPARED}
    with worktree(ref) as tree:
        if constraints_differ(tree):
            print(f"note: {ref} pins other dependencies; its figures run with this checkout's")
        for _ in range(rounds):
            for side, checkout in ((before, tree), (now, ROOT)):
                for key, value in start_and_stop(checkout).items():
                    side[key].append(value)
    rows = [(f"at {ref} and now, fresh processes, median of {rounds} alternated rounds", "")]
    for key, label, target in COMPARED:
        was, is_ = statistics.median(before[key]), statistics.median(now[key])
        goal = f" (target <= {target} s)" if target is not None else ""
        rows.append(
            (f"  {label}{goal}", f"{was:.2f} s -> {is_:.2f} s   now/{ref} {is_ / was:.2f}x")
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="skip the 20-node and CLI runs (--compare: all else)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="resets to time")
    parser.add_argument(
        "--tls-rounds", type=int, default=3, help="alternated TLS/insecure starts to time"
    )
    parser.add_argument(
        "--compare",
        metavar="REF",
        default=None,
        help="also measure lab.up, the in-process start and lab.down at git REF, alternated",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of --compare")
    args = parser.parse_args()

    rows: list[tuple[str, str]] = []
    if args.compare is not None:
        rows.extend(compare(args.compare, args.rounds))
        if args.quick:
            _print(rows)
            return
    servers, ctl, total, lab = up_to_initialized(2)
    rows.append(("Lab start (2 nodes): servers + topology + kubelet", f"{servers:.2f} s"))
    rows.append(("  controller start to all nodes initialized", f"{ctl:.2f} s"))
    rows.append(("  total: up to all nodes initialized (target < 5 s)", f"{total:.2f} s"))
    resets = []
    for _ in range(args.repeat):
        lab.start_controller()
        t0 = time.monotonic()
        lab.reset()
        resets.append(time.monotonic() - t0)
    reset_p50 = statistics.median(resets)
    rows.append((f"reset, median of {args.repeat} (target < 300 ms)", f"{reset_p50 * 1000:.0f} ms"))
    t0 = time.monotonic()
    lab.stop()
    stop_s = time.monotonic() - t0
    rows.append(("stop", f"{stop_s:.2f} s"))
    rows.append(
        (
            "ratio: full restart / reset (baseline: stop + start)",
            f"{(stop_s + servers) / reset_p50:.1f}x",
        )
    )
    rows.extend(tls_cost(args.tls_rounds, args.repeat))
    if not args.quick:
        _, ctl20, total20, lab20 = up_to_initialized(20)
        rows.append(("Lab start (20 nodes) to all initialized", f"{total20:.2f} s"))
        rows.append(("  of which controller start to initialized", f"{ctl20:.2f} s"))
        lab20.stop()
        with tempfile.TemporaryDirectory() as root:
            console = Console(file=io.StringIO())
            t0 = time.monotonic()
            up(up_request(name="bench", backend="sim"), root=Path(root), console=console)
            up_s = time.monotonic() - t0
            t0 = time.monotonic()
            down(name="bench", root=Path(root), console=console)
            down_s = time.monotonic() - t0
        rows.append(
            ("invoke lab.up (background processes, 2 nodes) to initialized", f"{up_s:.2f} s")
        )
        rows.append(("invoke lab.down", f"{down_s:.2f} s"))
        with tempfile.TemporaryDirectory() as root:
            console = Console(file=io.StringIO())
            t0 = time.monotonic()
            up(
                up_request(name="bench", backend="sim", insecure_api=True),
                root=Path(root),
                console=console,
            )
            open_s = time.monotonic() - t0
            down(name="bench", root=Path(root), console=console)
        rows.append(("invoke lab.up --insecure-api (baseline for the TLS cost)", f"{open_s:.2f} s"))
        rows.append(("  ratio lab.up (TLS + token) / --insecure-api", f"{up_s / open_s:.2f}x"))
    _print(rows)


def _print(rows: list[tuple[str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
