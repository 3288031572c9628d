"""Does the lab keep serving while a client misbehaves? ``GET /readyz`` on the API simulator,
quiet against while one TCP connection idles on the simulator's port (no TLS handshake sent)
and a client in another process (as a controller under test is) sends ``DescribeSecurityGroups``
calls with filter values as large as the endpoint admits, one after the other, to one sim lab
(every server in one process, as the lab daemon runs them).

Issue 27's bar: ``/readyz`` answers within 100 ms meanwhile. The baseline is the same lab's
quiet ``/readyz`` in the same run; the ratio is the busy p99 against the quiet p99.

    .venv/bin/python -m benchmarks.hostile [--samples N]
"""

from __future__ import annotations

import argparse
import http.client
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from lab.compose import Lab
from lab.spec import LabSpec

#: the largest filter value that fits the AWS endpoint's 1 MiB body with the rest of the call
FILTER_BYTES = 1024 * 1024 - 4096


def readyz_latencies(
    port: int, token: str, ca: bytes, *, samples: int, until: Callable[[], bool] | None = None
) -> list[float]:
    """``samples`` answers of ``GET /readyz`` on one connection, or as many as come before
    ``until()`` holds."""
    context = ssl.create_default_context(cadata=ca.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    out: list[float] = []
    try:
        while (until is None and len(out) < samples) or (until is not None and not until()):
            t0 = time.perf_counter()
            conn.request("GET", "/readyz", headers={"Authorization": f"Bearer {token}"})
            answer = conn.getresponse()
            body = answer.read()
            out.append(time.perf_counter() - t0)
            if (answer.status, body) != (200, b"ok"):
                raise SystemExit(f"/readyz answered {answer.status} {body!r}")
    finally:
        conn.close()
    return out


def filter_values() -> list[str]:
    """Two filter values as large as the AWS endpoint's 1 MiB body admits once URL-encoded:
    1 MiB of plain characters after one ``*``, and the worst a backtracking matcher meets
    (``*a*a...*ab``: each ``*`` costs three bytes encoded, so about 512 KiB of value)."""
    plain = "*" + "a" * (FILTER_BYTES - 2) + "b"
    pairs = (FILTER_BYTES // 4) * "*a" + "b"
    return [plain, pairs]


#: the misbehaving client, in its own process as a controller under test is: it sends the
#: calls until stdin closes and prints each call's seconds
CLIENT = """
import sys, threading, time
from lab.aws.clients import make_client
from benchmarks.hostile import filter_values
ec2 = make_client("ec2", sys.argv[1], "us-east-1")
values, stop, n = filter_values(), threading.Event(), 0
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
while not stop.is_set():
    t0 = time.perf_counter()
    ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [values[n % 2]]}])
    n += 1
    print(time.perf_counter() - t0, flush=True)
"""


def start_client(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def summary(name: str, values: list[float]) -> str:
    return (
        f"{name:<32} p50 {statistics.median(values) * 1000:7.2f} ms   "
        f"p99 {p99(values) * 1000:7.2f} ms   max {max(values) * 1000:7.2f} ms   "
        f"(n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=300, help="quiet /readyz samples")
    parser.add_argument("--calls", type=int, default=4, help="big calls to measure through")
    args = parser.parse_args()
    lab = Lab(LabSpec(name="bench-hostile", nodes=2)).start()
    try:
        kube = lab.sim.kube
        ca = kube.ca_pem
        assert ca is not None
        assert kube.token is not None
        quiet = readyz_latencies(kube.port, kube.token, ca, samples=args.samples)
        idle = socket.create_connection(("127.0.0.1", kube.port))  # never sends a ClientHello
        client = start_client(lab.aws.url)
        took: list[float] = []
        assert client.stdout is not None
        reader = threading.Thread(target=lambda: took.extend(map(float, client.stdout or ())))
        try:
            reader.start()
            while not took and client.poll() is None:  # the first big call done: warm
                time.sleep(0.01)
            busy = readyz_latencies(
                kube.port,
                kube.token,
                ca,
                samples=0,
                until=lambda: len(took) > args.calls or client.poll() is not None,
            )
        finally:
            client.communicate(input="", timeout=120)  # stdin closed: it stops
            reader.join()
            idle.close()
        if client.returncode != 0 or len(took) <= args.calls:
            raise SystemExit(f"the hostile client failed (exit {client.returncode})")
    finally:
        lab.stop()
    print(summary("/readyz, quiet", quiet))
    print(summary("/readyz, idle conn + 1 MiB filter", busy))
    print(summary("DescribeSecurityGroups, 1 MiB", took))
    print(
        f"ratio busy p99 / quiet p99: {p99(busy) / p99(quiet):.2f}x; slowest busy answer "
        f"{max(busy) * 1000:.1f} ms (target: every answer within 100 ms)"
    )


if __name__ == "__main__":
    main()
