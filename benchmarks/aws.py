"""Benchmark of the lab's AWS endpoint (moto + fidelity layer + trail).

Measures, in one run:

1. start-to-ready: the first ``AwsServer`` in a process (imports, moto's apps, warm-up),
   further ones (share moto's dispatcher), and ``AwsProcess`` (a child process);
2. per-call latency of a representative controller call mix against three endpoints on the same
   machine, rounds interleaved so machine load hits all alike:
   * ``moto``: moto's own server app, no lab layer (the baseline),
   * ``lab-bare``: the lab's app with fidelity off and the trail off,
   * ``lab-full``: fidelity on and trail on (the default),
   * ``lab-noval``: as lab-full with request validation switched off (``validation=False``);
   * ``proxy-moto``: the recording proxy (:mod:`lab.aws.proxy`: re-signing, faults consulted,
     trail on) in front of the same stock moto as ``moto``;
   * ``proxy-lab``: the recording proxy in front of a lab-full endpoint;
   and the ratio of each to the baseline (target: lab-full <= 1.15 x moto), the cost of
   request validation, lab-full vs lab-noval (target: <= +10%), and the proxy's overhead per
   call, proxy-moto vs moto and proxy-lab vs lab-full (target: <= +10%);
3. the same per-call cost in-process (WSGI calls, no sockets, no boto3), which isolates what
   the lab layer adds from network and client noise, validation on and off; and the
   validator alone (``RequestValidator.check`` on the parsed calls of the mix), us per call;
4. sustained calls/second for ``DescribeSecurityGroups`` (one group by id) among 500 groups on
   ``lab-full`` (10,000 calls; ``--quick``: 1,000).

Between processes (the endpoint and the proxy each a child process, as a lab runs them) the
proxy's CPU per call is printed too; ``--compare REF`` adds the proxy of commit ``REF`` (a
temporary git worktree, ``benchmarks.e2e.worktree``) in front of the same endpoint in the same
interleaved rounds, so before and after share the machine's load (issue 28).

Usage: ``.venv/bin/python -m benchmarks.aws [--quick] [--latency-only] [--compare REF]
[--rounds N]`` (more rounds: a steadier CPU figure, read from ``/proc`` in 10 ms ticks).
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.worktree import env_for, worktree
from lab.aws import AwsServer
from lab.aws.clients import make_client
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.process import AwsProcess
from lab.aws.proxy import AwsProxyProcess, AwsProxyServer

ENDPOINT_PROCESS = "endpoint (process)"
PROXY_PROCESSES = "proxy>endpoint (processes)"


class RawMoto:
    """moto's server app on port 0 with no lab layer (the baseline)."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class Quiet(MotoRequestHandler):
            def log_request(self, *args: Any) -> None:
                return None

        app = DomainDispatcherApplication(create_backend_app)
        self.server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _populate(clients: dict[str, Any], *, groups: int, tag: str) -> dict[str, Any]:
    """Topology for the call mix: groups with cross references, instances, Classic ELBs."""
    ec2, elb = clients["ec2"], clients["elb"]
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    ids = [
        ec2.create_security_group(GroupName=f"{tag}-g{i}", Description="bench", VpcId=vpc)[
            "GroupId"
        ]
        for i in range(groups)
    ]
    for i in range(0, min(groups, 40), 2):
        ec2.authorize_security_group_ingress(
            GroupId=ids[i],
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": ids[i + 1]}]}],
        )
    ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=5, MaxCount=5, SubnetId=subnet, SecurityGroupIds=[ids[0]]
    )
    for i in range(3):
        elb.create_load_balancer(
            LoadBalancerName=f"{tag}-lb{i}",
            Listeners=[
                {
                    "Protocol": "TCP",
                    "LoadBalancerPort": 80,
                    "InstanceProtocol": "TCP",
                    "InstancePort": 30080,
                }
            ],
            Subnets=[subnet],
            SecurityGroups=[ids[2 * i], ids[2 * i + 1]],
        )
    return {"ids": ids, "vpc": vpc}


def _mix(clients: dict[str, Any], world: dict[str, Any], tag: str) -> list[Callable[[], Any]]:
    """One round of calls shaped like a controller's sync (reads dominate)."""
    ec2, elb = clients["ec2"], clients["elb"]
    ids, vpc = world["ids"], world["vpc"]
    perm = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": ids[3]}]}]

    def create_delete() -> None:
        gid = ec2.create_security_group(GroupName=f"{tag}-tmp", Description="t", VpcId=vpc)[
            "GroupId"
        ]
        ec2.delete_security_group(GroupId=gid)

    return [
        lambda: ec2.describe_security_groups(GroupIds=[ids[1]]),
        lambda: ec2.describe_security_groups(
            Filters=[{"Name": "ip-permission.group-id", "Values": [ids[1]]}]
        ),
        lambda: ec2.describe_security_groups(
            Filters=[
                {"Name": "group-name", "Values": [f"{tag}-g4"]},
                {"Name": "vpc-id", "Values": [vpc]},
            ]
        ),
        ec2.describe_instances,
        lambda: elb.describe_load_balancers(LoadBalancerNames=[f"{tag}-lb0"]),
        lambda: elb.describe_load_balancer_attributes(LoadBalancerName=f"{tag}-lb1"),
        lambda: ec2.authorize_security_group_ingress(GroupId=ids[5], IpPermissions=perm),
        lambda: ec2.revoke_security_group_ingress(GroupId=ids[5], IpPermissions=perm),
        create_delete,
    ]


def _clients(url: str) -> dict[str, Any]:
    return {s: make_client(s, url, "us-east-1") for s in ("ec2", "elb")}


def bench_startup(rounds: int) -> dict[str, float]:
    thread_times: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        endpoint = AwsServer().start()
        thread_times.append(time.perf_counter() - started)
        endpoint.stop()
    started = time.perf_counter()
    process = AwsProcess().start()
    process_time = time.perf_counter() - started
    process.stop()
    return {
        "thread_first_s": thread_times[0],
        "thread_median_s": statistics.median(thread_times[1:]),
        "process_s": process_time,
    }


def bench_latency(rounds: int) -> dict[str, list[float]]:
    from lab.aws.app import AwsApp, AwsLab, LabSettings
    from lab.aws.server import make_wsgi_server

    raw = RawMoto()
    full = AwsServer().start()
    noval = AwsServer(fidelity=FidelityConfig(validation=False)).start()
    bare_lab = AwsLab(LabSettings(fidelity=FidelityConfig(enabled=False), trail_enabled=False))
    bare_server = make_wsgi_server(AwsApp(bare_lab), host="127.0.0.1", port=0)
    threading.Thread(target=bare_server.serve_forever, daemon=True).start()
    proxy_moto = AwsProxyServer(raw.url, credentials=("testing", "testing")).start()
    proxy_lab = AwsProxyServer(full.url, credentials=("testing", "testing")).start()
    targets = {
        "moto": raw.url,
        "lab-bare": f"http://127.0.0.1:{bare_server.server_address[1]}",
        "lab-full": full.url,
        "lab-noval": noval.url,
        "proxy-moto": proxy_moto.url,
        "proxy-lab": proxy_lab.url,
    }
    mixes: dict[str, list[Callable[[], Any]]] = {}
    for name, url in targets.items():  # shared moto state: distinct names per target
        clients = _clients(url)
        world = _populate(clients, groups=50, tag=name)
        mixes[name] = _mix(clients, world, name)
        for call in mixes[name]:  # warm up
            call()
    samples: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(rounds):
        for name, mix in mixes.items():
            for call in mix:
                started = time.perf_counter()
                call()
                samples[name].append((time.perf_counter() - started) * 1000.0)
    proxy_moto.stop()
    proxy_lab.stop()
    raw.stop()
    full.stop()
    noval.stop()
    bare_server.shutdown()
    bare_server.server_close()
    return samples


def bench_proxy_processes(
    rounds: int, compare: str | None = None
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """The call mix against an endpoint in a child process, directly and through the proxy in
    a child process of its own (as a lab would run them): no GIL shared between the hops.

    ``compare``: also through the proxy of git commit ``compare`` (a temporary worktree, the
    same virtualenv), in front of the same endpoint, rounds interleaved with the others. Also
    returns each proxy's CPU seconds per call (its process's user+system time over the
    measured rounds, in ms), less exposed to machine load than latency."""
    with contextlib.ExitStack() as stack:
        upstream = AwsProcess(fidelity=False).start()
        stack.callback(upstream.stop)
        proxies = {
            PROXY_PROCESSES: AwsProxyProcess(upstream.url, credentials=("testing", "testing"))
        }
        if compare is not None:
            tree = stack.enter_context(worktree(compare))
            old = AwsProxyProcess(
                upstream.url,
                credentials=("testing", "testing"),
                env=env_for(tree),
            )
            old.cwd = tree  # ``python -m`` imports from its working directory first
            proxies[f"proxy@{compare}>endpoint (processes)"] = old
        targets = {ENDPOINT_PROCESS: upstream.url}
        for name, proxy in proxies.items():
            stack.callback(proxy.start().stop)
            targets[name] = proxy.url
        mixes: dict[str, list[Callable[[], Any]]] = {}
        for index, (name, url) in enumerate(targets.items()):
            clients = _clients(url)
            tag = f"p{index}"
            mixes[name] = _mix(clients, _populate(clients, groups=50, tag=tag), tag)
            for call in mixes[name]:
                call()
        samples: dict[str, list[float]] = {name: [] for name in targets}
        cpu_before = {name: _cpu_seconds(proxy.pid) for name, proxy in proxies.items()}
        for _ in range(rounds):
            for name, mix in mixes.items():
                for call in mix:
                    started = time.perf_counter()
                    call()
                    samples[name].append((time.perf_counter() - started) * 1000.0)
        cpu = {
            name: (_cpu_seconds(proxy.pid) - cpu_before[name]) / len(samples[name]) * 1000.0
            for name, proxy in proxies.items()
        }
        return samples, cpu


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (Linux ``/proc``; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_wsgi(rounds: int, per_round: int) -> dict[str, float]:
    """Per-call cost inside the process (no sockets, no boto3): median of per-round means, us.

    Less exposed to machine noise than the HTTP mix; isolates what the lab adds per call.
    """
    from werkzeug.test import EnvironBuilder

    from lab.aws.app import AwsApp, AwsLab, LabSettings
    from lab.aws.motostate import call_wsgi as _call_wsgi
    from lab.aws.motostate import moto_dispatcher as _moto_dispatcher

    apps: dict[str, Any] = {
        "moto": _moto_dispatcher(),
        "lab-bare": AwsApp(
            AwsLab(LabSettings(fidelity=FidelityConfig(enabled=False), trail_enabled=False))
        ),
        "lab-full": AwsApp(AwsLab(LabSettings())),
        "lab-noval": AwsApp(AwsLab(LabSettings(fidelity=FidelityConfig(validation=False)))),
    }

    def environ(service: str, body: str) -> dict[str, Any]:
        auth = (
            f"AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request,"
            " SignedHeaders=host, Signature=0"
        )
        return EnvironBuilder(
            method="POST",
            path="/",
            data=body,
            content_type="application/x-www-form-urlencoded; charset=utf-8",
            headers=[("Authorization", auth), ("User-Agent", "bench")],
        ).get_environ()

    created = _call_wsgi(
        apps["lab-full"],
        environ(
            "ec2",
            "Action=CreateSecurityGroup&Version=2016-11-15"
            f"&GroupName=w{time.time_ns()}&GroupDescription=w",
        ),
    )
    group = created.body.split(b"<groupId>")[1].split(b"</groupId>")[0].decode()
    permission = (
        f"GroupId={group}&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=80"
        "&IpPermissions.1.ToPort=80&IpPermissions.1.IpRanges.1.CidrIp=10.0.0.0/8"
    )
    bodies = [
        ("ec2", f"Action=DescribeSecurityGroups&Version=2016-11-15&GroupId.1={group}"),
        ("elasticloadbalancing", "Action=DescribeLoadBalancers&Version=2012-06-01"),
        ("ec2", f"Action=AuthorizeSecurityGroupIngress&Version=2016-11-15&{permission}"),
        ("ec2", f"Action=RevokeSecurityGroupIngress&Version=2016-11-15&{permission}"),
    ]
    means: dict[str, list[float]] = {name: [] for name in apps}
    for _ in range(rounds):
        for name, app in apps.items():
            started = time.perf_counter()
            for i in range(per_round):
                service, body = bodies[i % len(bodies)]
                _call_wsgi(app, environ(service, body))
            means[name].append((time.perf_counter() - started) / per_round * 1e6)
    result = {name: statistics.median(values) for name, values in means.items()}
    result["validator-only"] = _bench_validator(apps["lab-full"], [environ(*b) for b in bodies])
    return result


def _bench_validator(app: Any, environs: list[dict[str, Any]]) -> float:
    """``RequestValidator.check`` alone on the parsed calls of the mix: us per call."""
    from lab.aws.fidelity import MotoView
    from lab.aws.protocol import parse_request
    from lab.aws.protocol import read_body as _read_body

    lab = app.lab
    requests = [parse_request(e, _read_body(e), default_region="us-east-1") for e in environs]
    config = lab.fidelity.config
    calls = 4_000
    started = time.perf_counter()
    for i in range(calls):
        request = requests[i % len(requests)]
        error = lab.validator.check(
            request, config, lambda r=request: MotoView(lab.settings.account, r.region)
        )
        assert error is None, error
    return (time.perf_counter() - started) / calls * 1e6


def bench_throughput(calls: int, groups: int) -> tuple[float, float]:
    with AwsServer() as aws:
        ec2 = aws.client("ec2")
        vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
        ids = [
            ec2.create_security_group(GroupName=f"t{i}", Description="t", VpcId=vpc)["GroupId"]
            for i in range(groups)
        ]
        started = time.perf_counter()
        for i in range(calls):
            ec2.describe_security_groups(GroupIds=[ids[i % groups]])
        elapsed = time.perf_counter() - started
        assert aws.trail.count("DescribeSecurityGroups") == calls
    return calls / elapsed, elapsed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _print_latency(console: Any, samples: dict[str, list[float]], rounds: int) -> None:
    """The call-mix table and the ratios to their baselines, with targets."""
    from rich.table import Table

    lat = Table(title=f"call-mix latency, {rounds} rounds x 9 calls (ms)")

    for column in ("endpoint", "mean", "median", "p95", "mean vs moto"):
        lat.add_column(column, justify="right")
    base = statistics.mean(samples["moto"])
    for name, values in samples.items():
        mean = statistics.mean(values)
        lat.add_row(
            name,
            f"{mean:.2f}",
            f"{statistics.median(values):.2f}",
            f"{_pct(values, 0.95):.2f}",
            f"{mean / base:.3f}",
        )
    console.print(lat)
    full = statistics.mean(samples["lab-full"])
    overhead = full / base - 1.0
    layer = full / statistics.mean(samples["lab-bare"]) - 1.0
    console.print(f"lab-full vs moto: {overhead * 100:+.1f}% (target <= +15%)")
    console.print(f"fidelity+trail alone (lab-full vs lab-bare): {layer * 100:+.1f}%")
    validation = full / statistics.mean(samples["lab-noval"]) - 1.0
    console.print(
        f"request validation (lab-full vs lab-noval, HTTP mix): {validation * 100:+.1f}% "
        "(target <= +10%)"
    )
    pairs = [("proxy-moto", "moto"), ("proxy-lab", "lab-full")]
    pairs += [(name, ENDPOINT_PROCESS) for name in samples if name.endswith("(processes)")]
    for name, base_name in pairs:
        if name not in samples:
            continue
        proxied, direct = samples[name], samples[base_name]
        mean_ratio = statistics.mean(proxied) / statistics.mean(direct) - 1.0
        median_ratio = statistics.median(proxied) / statistics.median(direct) - 1.0
        extra = statistics.mean(proxied) - statistics.mean(direct)
        console.print(
            f"recording proxy overhead per call, {name} vs {base_name}: mean "
            f"{mean_ratio * 100:+.1f}% ({extra:+.2f} ms), median {median_ratio * 100:+.1f}% "
            "(target <= +10%)"
        )


def _print_proxy_cpu(console: Any, cpu: dict[str, float]) -> None:
    for name, ms in cpu.items():
        console.print(f"recording proxy CPU per call, {name}: {ms:.3f} ms")
    if len(cpu) == 2:
        new, old = cpu.values()
        console.print(f"  this tree vs the compared commit: {(new / old - 1) * 100:+.1f}% CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller run (~15 s)")
    parser.add_argument(
        "--latency-only", action="store_true", help="only the call-mix latency (and ratios)"
    )
    parser.add_argument(
        "--compare",
        metavar="REF",
        help="also measure the recording proxy of git commit REF (a temporary worktree) "
        "between processes, in the same rounds",
    )
    parser.add_argument(
        "--rounds", type=int, help="rounds of the call mix per endpoint (default 60; quick 15)"
    )
    args = parser.parse_args()
    rounds = args.rounds if args.rounds is not None else (15 if args.quick else 60)
    if rounds < 1:
        parser.error(f"--rounds {rounds}: give a positive number of rounds")
    calls = 1_000 if args.quick else 10_000

    from rich.console import Console
    from rich.table import Table

    console = Console()
    processes, cpu = bench_proxy_processes(rounds, args.compare)
    if args.latency_only:
        _print_latency(console, bench_latency(rounds) | processes, rounds)
        _print_proxy_cpu(console, cpu)
        return 0
    startup = bench_startup(3 if args.quick else 5)
    samples = bench_latency(rounds) | processes
    wsgi = bench_wsgi(5 if args.quick else 15, 100)
    rate, elapsed = bench_throughput(calls, 500)

    table = Table(title="lab/aws endpoint benchmark" + (" (quick)" if args.quick else ""))
    for column in ("measure", "value"):
        table.add_column(column)
    table.add_row(
        "start-to-ready, first AwsServer in the process (thread, incl. warm-up)",
        f"{startup['thread_first_s']:.3f} s",
    )
    table.add_row(
        "start-to-ready, further AwsServers (median)", f"{startup['thread_median_s']:.3f} s"
    )
    table.add_row(
        "start-to-ready, AwsProcess (child: interpreter, imports, warm-up)",
        f"{startup['process_s']:.3f} s",
    )
    console.print(table)

    _print_latency(console, samples, rounds)
    _print_proxy_cpu(console, cpu)
    wsgi_table = Table(title="in-process cost per call, no sockets/boto3 (us, median of rounds)")
    for column in ("app", "us per call", "vs moto"):
        wsgi_table.add_column(column, justify="right")
    for name, value in wsgi.items():
        if name != "validator-only":
            wsgi_table.add_row(name, f"{value:.0f}", f"{value / wsgi['moto']:.3f}")
    console.print(wsgi_table)
    in_process = wsgi["lab-full"] / wsgi["lab-noval"] - 1.0
    console.print(
        f"request validation in-process (lab-full vs lab-noval): {in_process * 100:+.1f}%; "
        f"the validator alone: {wsgi['validator-only']:.1f} us per call"
    )
    console.print(
        f"sustained DescribeSecurityGroups (1 of 500 groups by id), lab-full: "
        f"{calls} calls in {elapsed:.1f} s = {rate:.0f} calls/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
