"""How fast a lab comes up, resets between tests, and goes down.

Prints, in one run: ``Lab`` start to all-nodes-initialized for 2 and 20 nodes on sim (the
in-process composition ``invoke lab.up`` and the pytest plugin share); per-test reset time;
stop time; and the same start for ``invoke lab.up`` (background processes) with 2 nodes
against its ``lab.down``. The cost of serving the simulator over HTTPS with the lab's token
(the default) is start and reset against ``--insecure-api`` (plain HTTP, no token), alternated
in the same warm process, and ``invoke lab.up`` with and without the flag. Targets (issue 5):
lab.up (2 nodes) < 5 s, reset < 300 ms on 2 cores.
The baseline ratio compares a reset with a full stop+start of the lab, measured in this run.

    .venv/bin/python -m benchmarks.lab [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

from kubernetes import client
from rich.console import Console

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 20-node and CLI runs")
    parser.add_argument("--repeat", type=int, default=5, help="resets to time")
    parser.add_argument(
        "--tls-rounds", type=int, default=3, help="alternated TLS/insecure starts to time"
    )
    args = parser.parse_args()

    rows: list[tuple[str, str]] = []
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
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
