"""What ``invoke lab.status``, ``lab.trail``, ``lab.env`` and ``lab.traffic`` show: read-only views
of a running lab, from ``state.json`` and what answers now.

The other half of the front door, :mod:`lab.frontdoor`, changes labs (up, down, controller
restarts, node patches, debug sessions) and builds on the small checks here (lab names, ports,
the daemon being alive). Nothing in this module changes a lab; every view validates its input
first and reports a dead or unreachable component as such, in one line, never a traceback.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab.component import tail
from lab.controllerproc import aws_env, health_ok
from lab.daemon_client import DaemonClient, TrafficRequest
from lab.faultview import active_rules, render_rules
from lab.kubeclient import new_api_client
from lab.spec import Backend, read_spec, validate_name
from lab.state import LabError, LabState, load_state


def port_open(url: str) -> bool:
    """True while something listens at ``url``'s host and port.

    Read from the kernel's socket tables, never by connecting: debugpy's adapter takes any
    connection for a client session and would refuse the real debugger afterwards.
    """
    from lab.debug.launcher import port_is_listening

    parsed = urlparse(url)
    if not parsed.hostname or not parsed.port:
        return False
    return port_is_listening(parsed.hostname, parsed.port)


def owned_endpoints(state: LabState) -> list[tuple[str, str]]:
    """The endpoints this lab's own processes serve (a kind or existing API server is not)."""
    return [
        (label, url)
        for label, url in state.endpoints()
        if not (label == "Kubernetes" and state.backend != Backend.SIM)
    ]


def require_daemon(state: LabState) -> None:
    if state.daemon is None or not state.daemon.process.alive():
        pid = state.daemon.process.pid if state.daemon else "?"
        raise LabError(
            f"lab {state.name!r} is broken: its daemon (pid {pid}) is not running, so its "
            f"servers are gone; `invoke lab.down --name {state.name}` cleans up, then "
            "`invoke lab.up` starts a new one"
        )


def last_error(log_path: Path) -> str:
    """The most telling line of a controller log: its last error, else its last line."""
    lines = [ln.strip() for ln in tail(log_path, 80).splitlines() if ln.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "Error" in line:
            return line
    return lines[-1] if lines else "it wrote no log"


def core_api(state: LabState) -> Any:
    from kubernetes import client

    return client.CoreV1Api(new_api_client(state.kubeconfig))


def environment(*, name: str = "default", root: Path | None = None) -> list[tuple[str, str]]:
    """The variables a shell needs to use the lab with kubectl, the AWS CLI/SDKs and IMDS."""
    validate_name(name)
    state = load_state(name, root)
    return [
        ("KUBECONFIG", state.kubeconfig),
        ("AWS_ENDPOINT_URL", state.aws_endpoint),
        ("AWS_REGION", state.region),
        ("AWS_DEFAULT_REGION", state.region),
        *aws_env(state.aws_credentials).items(),
        # a real-account lab's key is long-term: empty tokens override one the shell has
        # (botocore reads the older AWS_SECURITY_TOKEN too, before AWS_SESSION_TOKEN)
        *([("AWS_SESSION_TOKEN", ""), ("AWS_SECURITY_TOKEN", "")] if state.aws_credentials else []),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", state.imds_endpoint),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv4"),
    ]


def render_environment(pairs: Sequence[tuple[str, str]]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in pairs)


def status(*, name: str = "default", root: Path | None = None) -> dict[str, Any]:
    """``state.json`` plus what is alive now; ``problems`` lists what is broken (empty when
    the lab is healthy)."""
    validate_name(name)
    state = load_state(name, root)
    problems: list[str] = []
    live: dict[str, Any] = {
        "processes": {label: ref.alive() for label, ref in state.processes()},
        "endpoints": {url: port_open(url) for _, url in state.endpoints()},
    }
    daemon_ok = state.daemon is not None and state.daemon.process.alive()
    if not daemon_ok:
        pid = state.daemon.process.pid if state.daemon else "?"
        problems.append(
            f"the lab daemon (pid {pid}) is not running: its AWS endpoint, metadata service "
            f"and cluster are gone; `invoke lab.down --name {name}` cleans up"
        )
    else:
        for label, url in owned_endpoints(state):
            if label in ("AWS", "metadata", "Kubernetes") and not live["endpoints"][url]:
                problems.append(f"the {label} endpoint {url} does not answer")
    ctl = state.controller
    live["controller_healthy"] = bool(ctl and ctl.health_url and health_ok(ctl.health_url))
    if ctl is not None and not ctl.process.alive():
        problems.append(
            f"the controller (pid {ctl.process.pid}) has exited: {last_error(Path(ctl.log))}; "
            f"`invoke lab.controller.restart --name {name}` starts it again"
        )
    live["debug_alive"] = bool(state.debug and state.debug.process.alive())
    live["nodes"], live["services"], live["pods"] = [], [], []
    if daemon_ok or state.backend != Backend.SIM:
        try:
            live["nodes"], live["services"], live["pods"] = _cluster_view(state)
        except Exception as exc:
            problems.append(f"the Kubernetes API does not answer ({_short(exc)})")
    problems += [
        f"Service {s['name']} is pending: {s['last_warning']}"
        for s in live["services"]
        if not s["hostname"] and s["last_warning"]
    ]
    if daemon_ok:
        _add_instance_health(state, live["services"])
        live["faults"] = _fault_rules(state)
    spec = read_spec(Path(state.directory))
    shown = {"spec": spec.to_json()} if spec is not None else {}
    return {**state.to_json(), **shown, "live": live, "problems": problems}


def _fault_rules(state: LabState) -> list[dict[str, Any]]:
    """The lab's fault rules (``lab.faultview``); none when a control plane does not answer
    (that endpoint is a problem of its own)."""
    try:
        return active_rules(state)
    except Exception:
        return []


def _add_instance_health(state: LabState, services: View) -> None:
    """Each provisioned ELB's instances as ``DescribeInstanceHealth`` reports them (the lab's
    AWS endpoint runs the health checks)."""
    from lab.aws import make_client

    elb = make_client("elb", state.aws_endpoint, state.region, credentials=state.aws_credentials)
    for svc in services:
        if not svc["hostname"]:
            continue
        try:
            answer = elb.describe_instance_health(LoadBalancerName=svc["elb"])
        except Exception as exc:
            svc["instances_error"] = _short(exc)
            continue
        svc["instances"] = [
            {
                "id": i.get("InstanceId", ""),
                "state": i.get("State", ""),
                "reason": i.get("ReasonCode", ""),
                "description": i.get("Description", ""),
            }
            for i in answer.get("InstanceStates", [])
        ]


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


View = list[dict[str, Any]]
MAX_PODS_SHOWN = 30


def _cluster_view(state: LabState) -> tuple[View, View, View]:
    # raw JSON through the lab's small REST wrapper: the generated CoreV1Api and its models
    # cost 2.5 s to import, most of what `lab.status` took
    from lab.dataplane.api import Api

    client = new_api_client(state.kubeconfig)
    client.configuration.retries = 0
    api = Api(client)

    def items(path: str, query: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        return list(api.request("GET", path, query=query, timeout=3).get("items") or [])

    try:
        nodes = [
            {
                "name": n["metadata"]["name"],
                "provider_id": (n.get("spec") or {}).get("providerID") or "",
                "taints": [
                    f"{t.get('key')}:{t.get('effect')}"
                    for t in (n.get("spec") or {}).get("taints") or []
                ],
                "ready": _condition(n, "Ready"),
                "zone": (n["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone", ""),
            }
            for n in items("/api/v1/nodes")
        ]
        services = []
        for svc in items("/api/v1/services"):
            if (svc.get("spec") or {}).get("type") != "LoadBalancer":
                continue
            m = svc["metadata"]
            lb = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
            ingress = ", ".join(i.get("hostname") or i.get("ip") or "" for i in lb)
            services.append(
                {
                    "name": f"{m['namespace']}/{m['name']}",
                    "elb": ("a" + str(m["uid"]).replace("-", ""))[:32],
                    "hostname": ingress,
                    "finalizers": list(m.get("finalizers") or []),
                    "last_warning": "" if ingress else _last_warning(items, m),
                    "endpoints": _endpoint_counts(items, m),
                }
            )
        pods = [
            {
                "name": f"{p['metadata']['namespace']}/{p['metadata']['name']}",
                "phase": (p.get("status") or {}).get("phase") or "Pending",
                "ready": _condition(p, "Ready"),
                "terminating": p["metadata"].get("deletionTimestamp") is not None,
                "ip": (p.get("status") or {}).get("podIP") or "",
                "node": (p.get("spec") or {}).get("nodeName") or "",
            }
            for p in items("/api/v1/pods")
        ]
        return nodes, services, pods
    finally:
        client.close()


_Items = Callable[..., list[dict[str, Any]]]


def _condition(obj: dict[str, Any], kind: str) -> str:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((str(c.get("status")) for c in conditions if c.get("type") == kind), "?")


def _endpoint_counts(items: _Items, svc: dict[str, Any]) -> dict[str, int]:
    """Endpoints of a Service by condition, from its EndpointSlices (what kube-proxy reads)."""
    counts = {"ready": 0, "serving": 0, "terminating": 0}
    slices = items(
        f"/apis/discovery.k8s.io/v1/namespaces/{svc['namespace']}/endpointslices",
        [("labelSelector", f"kubernetes.io/service-name={svc['name']}")],
    )
    for eps in slices:
        for ep in eps.get("endpoints") or []:
            cond = ep.get("conditions") or {}
            counts["ready"] += bool(cond.get("ready"))
            counts["serving"] += bool(cond.get("serving") and not cond.get("ready"))
            counts["terminating"] += bool(cond.get("terminating"))
    return counts


def _last_warning(items: _Items, svc: dict[str, Any]) -> str:
    mine = [
        e
        for e in items(f"/api/v1/namespaces/{svc['namespace']}/events")
        if e.get("type") == "Warning"
        and (e.get("involvedObject") or {}).get("kind") == "Service"
        and (e.get("involvedObject") or {}).get("name") == svc["name"]
    ]
    if not mine:
        return ""
    last = max(mine, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return f"{last.get('reason')}: {last.get('message')}"


def render_status(doc: dict[str, Any], console: Console | None = None) -> None:
    out = console or status_console()
    live = doc["live"]
    _render_header(out, doc)
    out.print(f"controller: {_controller_line(doc)}")
    _render_nodes(out, live["nodes"])
    _render_services(out, live["services"])
    _render_pods(out, live.get("pods") or [])
    _render_faults(out, doc["name"], live.get("faults") or [])
    eps = Table(title="endpoints", title_justify="left")
    for col in ("what", "url", "up"):
        eps.add_column(col)
    for label, url in _endpoint_rows(doc):
        eps.add_row(label, url, "[green]yes[/]" if live["endpoints"].get(url) else "[red]no[/]")
    out.print(eps)
    out.print(f"kubeconfig: {doc['kubeconfig']}")
    for problem in doc["problems"]:
        out.print(f"[red]✗[/] {escape(problem)}")


def _render_header(out: Console, doc: dict[str, Any]) -> None:
    out.print(
        f"[bold]lab {doc['name']}[/] · backend {doc['backend']} · Kubernetes "
        f"{doc['k8s_version']} · region {doc['region']} · cluster {doc['cluster_id']}"
    )
    if doc.get("aws", "moto") != "moto":
        out.print(
            f"AWS: {doc['aws']} at {doc.get('aws_upstream')}"
            + (
                f" (container {str(doc['localstack_container'])[:12]})"
                if doc.get("localstack_container")
                else ""
            )
            + f", through the lab's recording proxy {doc['aws_endpoint']}"
        )


def _controller_line(doc: dict[str, Any]) -> str:
    """The controller as one line: under the debugger, an image, stopped, exited, healthy."""
    live, ctl, dbg = doc["live"], doc.get("controller"), doc.get("debug")
    if dbg and live["debug_alive"]:
        controller = (
            f"[cyan]under the debugger[/] pid {dbg['process']['pid']} · attach at "
            f"{dbg['address']} · log {dbg['log']}"
        )
    elif ctl is None and doc.get("controller_image"):
        controller = f"in-cluster image {doc['controller_image']} (DaemonSet in kube-system)"
    elif ctl is None:
        controller = "[dim]not started[/] (`invoke lab.controller.restart` starts it)"
    elif not live["processes"].get("controller"):
        controller = f"[red]exited[/] (pid {ctl['process']['pid']}) · log {ctl['log']}"
    elif live["controller_healthy"]:
        controller = f"[green]healthy[/] pid {ctl['process']['pid']} · {ctl['health_url']}"
    else:
        controller = f"[yellow]running, not healthy[/] pid {ctl['process']['pid']}"
    if ctl and ctl.get("legacy_behavior"):
        controller += f" · legacy {', '.join(ctl['legacy_behavior'])}"
    if ctl and ctl.get("command"):
        controller += f" · build {ctl.get('command_name') or 'custom'}: {ctl['command'][0]}"
    return controller


def _render_faults(out: Console, name: str, rules: View) -> None:
    if not rules:
        return
    active = sum(r.get("count") is None or r.get("fired", 0) < r["count"] for r in rules)
    render_rules(out, rules, title=f"fault rules ({active} active)")
    flag = "" if name == "default" else f" --name {name}"
    out.print(f"[yellow]calls fail or slow down on purpose:[/] `invoke lab.fault.clear{flag}`")


def _render_nodes(out: Console, nodes: View) -> None:
    if not nodes:
        return
    table = Table(title="nodes", title_justify="left")
    for col in ("name", "ready", "zone", "providerID", "taints"):
        table.add_column(col)
    for n in nodes:
        table.add_row(
            n["name"],
            n["ready"],
            n["zone"],
            n["provider_id"] or "[dim]-[/]",
            "\n".join(n["taints"]) or "[dim]none[/]",
        )
    out.print(table)


def _render_services(out: Console, services: View) -> None:
    """The LoadBalancer Services with their ELBs, then why a pending one waits and which
    instance is out of service."""
    table = Table(title="LoadBalancer Services", title_justify="left")
    for col in ("service", "ELB name", "hostname", "endpoints", "instances", "finalizers"):
        table.add_column(col, overflow="fold")
    for s in services:
        table.add_row(
            s["name"],
            s["elb"],
            s["hostname"] or "[yellow]pending[/]",
            _render_endpoints(s.get("endpoints") or {}),
            _render_instances(s),
            ", ".join(s["finalizers"]) or "[dim]-[/]",
        )
    out.print(table if services else "[dim]no LoadBalancer Services[/]")
    for s in services:
        if not s["hostname"] and s["last_warning"]:
            out.print(
                f"[yellow]{s['name']} pending:[/] {escape(s['last_warning'])}", soft_wrap=True
            )
        for i in s.get("instances") or []:
            if i["state"] != "InService":
                out.print(
                    f"[yellow]{s['name']}: {i['id']} {i['state']}[/] ({i['reason']}): "
                    f"{escape(i['description'])}",
                    soft_wrap=True,
                )


def _render_instances(svc: dict[str, Any]) -> str:
    if svc.get("instances_error"):
        return f"[red]{escape(svc['instances_error'])}[/]"
    instances = svc.get("instances")
    if instances is None:
        return "[dim]-[/]"
    healthy = sum(i["state"] == "InService" for i in instances)
    colour = "green" if instances and healthy == len(instances) else "yellow"
    return f"[{colour}]{healthy}/{len(instances)} InService[/]"


def _render_endpoints(counts: dict[str, int]) -> str:
    ready = counts.get("ready", 0)
    text = f"[green]{ready} ready[/]" if ready else "[red]0 ready[/]"
    if counts.get("serving"):
        text += f", {counts['serving']} serving"
    if counts.get("terminating"):
        text += f", [yellow]{counts['terminating']} terminating[/]"
    return text


def _render_pods(out: Console, pods: View) -> None:
    if not pods:
        return
    table = Table(title=f"pods ({len(pods)})", title_justify="left")
    for col in ("pod", "phase", "ready", "IP", "node"):
        table.add_column(col, overflow="fold")
    for p in sorted(pods, key=lambda p: p["name"])[:MAX_PODS_SHOWN]:
        phase = p["phase"] + (" [yellow](terminating)[/]" if p["terminating"] else "")
        ready = "[green]yes[/]" if p["ready"] == "True" else "[red]no[/]"
        table.add_row(p["name"], phase, ready, p["ip"] or "[dim]-[/]", p["node"] or "[dim]-[/]")
    out.print(table)
    if len(pods) > MAX_PODS_SHOWN:
        out.print(
            f"[dim]… {len(pods) - MAX_PODS_SHOWN} more; `invoke lab.kubectl -- get pods -A -o wide`"
            " lists them all[/]"
        )


def _endpoint_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    state = LabState.from_json({k: v for k, v in doc.items() if k not in ("live", "problems")})
    return state.endpoints()


def status_console() -> Console:
    """A console that is not cut at 80 columns when piped (CI logs, ``| less``)."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=160)


def trail(
    *,
    name: str = "default",
    action: str | None = None,
    service: str | None = None,
    errors_only: bool = False,
    last: int = 50,
    root: Path | None = None,
    console: Console | None = None,
    as_json: bool = False,
) -> list[Any]:
    """The AWS call trail; ``action`` matches case-insensitively; JSON lines with ``as_json``."""
    from lab.aws import AwsControlClient
    from lab.aws.render import render_trail

    validate_name(name)
    if last < 0:
        raise LabError(f"--last {last}: give a number of calls (0 = all)")
    if service is not None and service not in ("ec2", "elb", "elbv2", "sts"):
        raise LabError(f"--service {service!r}: one of ec2, elb, elbv2, sts")
    state = load_state(name, root)
    require_daemon(state)
    everything = AwsControlClient(state.aws_endpoint, token=state.token).trail(
        None, service=service, ok=False if errors_only else None
    )
    events = everything
    if action:
        events = [e for e in everything if e.action.lower() == action.lower()]
        if not events:
            seen = sorted({e.action for e in everything})
            hint = ", ".join(seen) if seen else "none yet"
            raise LabError(f"--action {action}: no such calls in the trail; actions seen: {hint}")
    events = events[-last:] if last else events
    if as_json:
        for e in events:
            sys.stdout.write(e.to_json() + "\n")
    else:
        (console or status_console()).print(render_trail(events))
    return events


# --- traffic -----------------------------------------------------------------------------------


def traffic(
    service: str,
    *,
    name: str = "default",
    requests: int = 100,
    source: str | None = None,
    port: int | None = None,
    seed: int = 0,
    root: Path | None = None,
) -> dict[str, Any]:
    """Ask the lab daemon's traffic probe where ``requests`` requests to ``service`` go: modelled
    through the sim's data plane, or (real nodes: kind) really sent to the nodes, where the
    daemon says why when it cannot reach them."""
    validate_name(name)
    if not 1 <= requests <= 100_000:
        raise LabError(f"--requests {requests}: give 1 to 100000")
    if port is not None and not 1 <= port <= 65535:
        raise LabError(f"--port {port}: a TCP port is 1 to 65535")
    state = load_state(name, root)
    require_daemon(state)
    request = TrafficRequest(service, requests=requests, source=source, port=port, seed=seed)
    return DaemonClient.of(state).traffic(request).to_json()


def render_traffic(doc: dict[str, Any], console: Console | None = None) -> None:
    out = console or status_console()
    total = int(doc["requests"])
    answered = sum(doc["answered"].values())
    lb = doc.get("load_balancer") or "no load balancer"
    out.print(
        f"[bold]{escape(doc['service'])}[/] · {total} requests from {doc['source']} via "
        f"{escape(lb)} · seed {doc['seed']} · [green]{answered} answered[/]"
        + (f" · [red]{total - answered} dropped[/]" if answered < total else "")
    )
    if doc["answered"]:
        pods = Table(title="answered by", title_justify="left")
        pods.add_column("pod")
        pods.add_column("requests", justify="right")
        pods.add_column("share", justify="right")
        for pod, count in sorted(doc["answered"].items(), key=lambda kv: (-kv[1], kv[0])):
            pods.add_row(pod, str(count), f"{100 * count / total:.0f}%")
        out.print(pods)
    if doc["dropped"]:
        drops = Table(title="dropped", title_justify="left")
        for col in ("hop", "reason", "requests"):
            drops.add_column(col, overflow="fold")
        for d in doc["dropped"]:
            drops.add_row(d["hop"], escape(d["reason"]), str(d["count"]))
        out.print(drops)
    if doc.get("note"):
        out.print(f"[yellow]note:[/] {escape(str(doc['note']))}")
    if doc.get("instances"):
        out.print(
            "[dim]instances the load balancer chose: "
            + ", ".join(f"{i}: {n}" for i, n in doc["instances"].items())
            + "[/]"
        )
