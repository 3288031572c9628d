"""Server-side Table printing (``meta.k8s.io/v1`` ``Table``) for the Kubernetes API simulator.

Role: when a client asks ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` (kubectl does
for ``get`` in every human-readable mode, including ``-w``), the router hands the objects it
would have returned to :func:`to_table`, which builds the same columns and cells a v1.32
kube-apiserver prints: ``kubectl get nodes`` shows STATUS/ROLES/AGE/VERSION, ``get svc`` shows
TYPE/CLUSTER-IP/EXTERNAL-IP/PORT(S)/AGE, and so on (``shared/docs/apiserver-spec.md`` §2).

Neighbours: ``resources.ResourceType`` identifies the kind; the router decides with
:func:`wants_table` / :func:`table_version` and passes ``?includeObject=``. For watches it calls
:func:`to_table` once per event, with ``column_definitions=False`` after the first event.

Design: one small printer per kind, each a pure function of the object and the clock, in a
registry keyed by (group, kind); kinds without a printer get the server's default table (Name,
Created At). Like the real server, every column is always filled, including the ``-o wide`` ones
(priority 1): kubectl hides those itself. Cell rules follow ``pkg/printers/internalversion`` in
kubernetes v1.32; the code is ours. The clock is injectable so the AGE cells are testable.
The module is longer than most because the printers and their column sets are one registry
that reads best in one place; each printer is a short pure function.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from lab.kube.discovery import parse_accept
from lab.kube.objects import Obj
from lab.kube.resources import ResourceType

JSONDict = dict[str, Any]

TABLE_GROUP: Final = "meta.k8s.io"
TABLE_VERSIONS: Final = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES: Final = ("None", "Metadata", "Object")
LOAD_BALANCER_WIDTH: Final = 16
MAX_LISTED: Final = 3


class TableRequestError(ValueError):
    """A Table request the server rejects; the router answers ``400 BadRequest`` with ``str(e)``."""

    reason = "BadRequest"
    code = 400


# --------------------------------------------------------------------------------------------
# Negotiation


def table_version(accept: str) -> str | None:
    """``"v1"``/``"v1beta1"`` if the first range we can serve asks for a Table, else ``None``."""
    for media in parse_accept(accept):
        if media.mime not in ("application/json", "application/*", "*/*"):
            continue  # protobuf tables are not served; JSON fallbacks follow in every client
        as_ = media.param("as")
        if as_ is None:
            return None
        if (
            media.mime == "application/json"
            and as_ == "Table"
            and media.param("g") == TABLE_GROUP
            and media.param("v") in TABLE_VERSIONS
        ):
            return media.param("v")
    return None


def wants_table(accept: str) -> bool:
    """True when the response to this ``Accept`` header should be a ``Table``."""
    return table_version(accept) is not None


# --------------------------------------------------------------------------------------------
# Small formatting helpers


def human_duration(seconds: float) -> str:
    """A duration as kubectl's AGE column shows it: ``45s``, ``3m20s``, ``5h``, ``2d3h``, ``3y``."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        rest = secs % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def parse_time(value: object) -> datetime | None:
    """RFC 3339 (``2024-01-02T03:04:05Z``, optional fraction or offset) to an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(value: object, now: datetime) -> str:
    """The AGE of a timestamp, ``<unknown>`` when it is absent or unreadable."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def _dig(obj: object, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _list(obj: object, *path: str) -> list[Any]:
    value = _dig(obj, *path)
    return value if isinstance(value, list) else []


def _str(obj: object, *path: str) -> str:
    value = _dig(obj, *path)
    return value if isinstance(value, str) else ""


def _int(obj: object, *path: str) -> int:
    value = _dig(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def format_labels(labels: object) -> str:
    """``a=1,b=2`` sorted by key, ``<none>`` when empty (labels.FormatLabels)."""
    if not isinstance(labels, Mapping) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: object) -> str:
    """A ``LabelSelector`` in selector syntax (``app=web,tier in (a,b),!gone``), sorted by key."""
    if not isinstance(selector, Mapping):
        return "<none>"
    parts: list[tuple[str, str]] = []
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        parts += [(str(k), f"{k}={v}") for k, v in match_labels.items()]
    for expr in _list(selector, "matchExpressions"):
        key, op = _str(expr, "key"), _str(expr, "operator")
        values = ",".join(sorted(str(v) for v in _list(expr, "values")))
        rendered = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, "<invalid>")
        parts.append((key, rendered))
    return ",".join(text for _, text in sorted(parts)) or "<none>"


def _first_n(items: Iterable[str], *, empty: str) -> str:
    """Up to three items joined by ``,``, then `` + N more...`` (the printers' list style)."""
    all_items = list(items)
    shown = ",".join(all_items[:MAX_LISTED])
    if len(all_items) > MAX_LISTED:
        return f"{shown} + {len(all_items) - MAX_LISTED} more..."
    return shown or empty


# --------------------------------------------------------------------------------------------
# Column sets and per-kind printers


@dataclass(frozen=True)
class Column:
    name: str
    description: str
    type: str = "string"
    format: str = ""
    priority: int = 0

    def definition(self) -> JSONDict:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


NAME = Column("Name", "Name of the object, unique within its namespace.", format="name")
AGE = Column("Age", "Time since the object was created (metadata.creationTimestamp).")
CREATED_AT = Column("Created At", "When the object was created.", type="date")


def _wide(name: str, description: str) -> Column:
    return Column(name, description, priority=1)


Cells = list[object]
Printer = Callable[[Obj, datetime], Cells]


def _print_service(svc: Obj, now: datetime) -> Cells:
    spec = _dig(svc, "spec") or {}
    svc_type = _str(spec, "type")
    cluster_ips = _list(spec, "clusterIPs")
    cluster_ip = cluster_ips[0] if cluster_ips else (_str(spec, "clusterIP") or "<none>")
    ports = []
    for port in _list(spec, "ports"):
        proto = _str(port, "protocol") or "TCP"
        node_port = _int(port, "nodePort")
        number = _int(port, "port")
        ports.append(f"{number}:{node_port}/{proto}" if node_port > 0 else f"{number}/{proto}")
    return [
        _str(svc, "metadata", "name"),
        svc_type,
        cluster_ip,
        # The server prints with Wide on (pkg/printers/storage), so ingress is never cut here.
        service_external_ip(svc, wide=True),
        ",".join(ports) or "<none>",
        since(_dig(svc, "metadata", "creationTimestamp"), now),
        format_labels(_dig(spec, "selector")),
    ]


def service_external_ip(svc: Obj, *, wide: bool) -> str:
    """The EXTERNAL-IP cell: external IPs, load-balancer ingress, ``<pending>`` or ``<none>``."""
    spec = _dig(svc, "spec") or {}
    external_ips = [str(ip) for ip in _list(spec, "externalIPs")]
    svc_type = _str(spec, "type")
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external_ips) or "<none>"
    if svc_type == "LoadBalancer":
        ingress = sorted(
            {
                _str(i, "ip") or _str(i, "hostname")
                for i in _list(svc, "status", "loadBalancer", "ingress")
                if _str(i, "ip") or _str(i, "hostname")
            }
        )
        lb = ",".join(ingress)
        if not wide and len(lb) > LOAD_BALANCER_WIDTH:
            lb = lb[: LOAD_BALANCER_WIDTH - 3] + "..."
        if external_ips:
            return ",".join([*(lb.split(",") if lb else []), *external_ips])
        return lb or "<pending>"
    if svc_type == "ExternalName":
        return _str(spec, "externalName")
    return "<unknown>"


def _print_node(node: Obj, now: datetime) -> Cells:
    status: list[str] = []
    for cond in _list(node, "status", "conditions"):
        if _str(cond, "type") == "Ready":
            status = ["Ready" if _str(cond, "status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if _dig(node, "spec", "unschedulable") is True:
        status.append("SchedulingDisabled")
    roles: set[str] = set()
    labels = _dig(node, "metadata", "labels")
    for key, value in (labels or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))

    def address(kind: str) -> str:
        for entry in _list(node, "status", "addresses"):
            if _str(entry, "type") == kind:
                return _str(entry, "address")
        return "<none>"

    info = _dig(node, "status", "nodeInfo") or {}
    return [
        _str(node, "metadata", "name"),
        ",".join(status),
        ",".join(sorted(roles)) or "<none>",
        since(_dig(node, "metadata", "creationTimestamp"), now),
        _str(info, "kubeletVersion"),
        address("InternalIP"),
        address("ExternalIP"),
        _str(info, "osImage") or "<unknown>",
        _str(info, "kernelVersion") or "<unknown>",
        _str(info, "containerRuntimeVersion") or "<unknown>",
    ]


def _pod_status_and_counts(pod: Obj, now: datetime) -> tuple[str, int, int, str]:
    """(STATUS, ready containers, total containers, RESTARTS) the way ``printPod`` derives them."""
    status = _dig(pod, "status") or {}
    reason = _str(status, "reason") or _str(status, "phase")
    for cond in _list(status, "conditions"):
        if _str(cond, "type") == "PodScheduled" and _str(cond, "reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = _list(pod, "spec", "initContainers")
    sidecars = {_str(c, "name") for c in init_specs if _str(c, "restartPolicy") == "Always"}
    total = len(_list(pod, "spec", "containers")) + len(sidecars)
    ready = 0
    # Restarts count init containers only while the pod is initializing; once it is running,
    # only sidecars (restartable init containers) and regular containers count.
    restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    sidecar_last_restart: datetime | None = None

    def later(current: datetime | None, container: object) -> datetime | None:
        finished = parse_time(_dig(container, "lastState", "terminated", "finishedAt"))
        if finished and (current is None or finished > current):
            return finished
        return current

    initializing = False
    for index, container in enumerate(_list(status, "initContainerStatuses")):
        restarts += _int(container, "restartCount")
        last_restart = later(last_restart, container)
        if _str(container, "name") in sidecars:
            sidecar_restarts += _int(container, "restartCount")
            sidecar_last_restart = later(sidecar_last_restart, container)
        terminated = _dig(container, "state", "terminated")
        waiting_reason = _str(container, "state", "waiting", "reason")
        if isinstance(terminated, Mapping) and _int(terminated, "exitCode") == 0:
            continue
        if _str(container, "name") in sidecars and _dig(container, "started") is True:
            ready += 1 if _dig(container, "ready") is True else 0
            continue
        if isinstance(terminated, Mapping):
            if _str(terminated, "reason"):
                reason = "Init:" + _str(terminated, "reason")
            elif _int(terminated, "signal"):
                reason = f"Init:Signal:{_int(terminated, 'signal')}"
            else:
                reason = f"Init:ExitCode:{_int(terminated, 'exitCode')}"
        elif waiting_reason and waiting_reason != "PodInitializing":
            reason = "Init:" + waiting_reason
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(
        _str(c, "type") == "Initialized" and _str(c, "status") == "True"
        for c in _list(status, "conditions")
    )
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        has_running = False
        for container in reversed(_list(status, "containerStatuses")):
            restarts += _int(container, "restartCount")
            last_restart = later(last_restart, container)
            waiting = _str(container, "state", "waiting", "reason")
            terminated = _dig(container, "state", "terminated")
            if waiting:
                reason = waiting
            elif isinstance(terminated, Mapping) and _str(terminated, "reason"):
                reason = _str(terminated, "reason")
            elif isinstance(terminated, Mapping):
                signal = _int(terminated, "signal")
                code = _int(terminated, "exitCode")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{code}"
            elif _dig(container, "ready") is True and _dig(container, "state", "running"):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(
                _str(c, "type") == "Ready" and _str(c, "status") == "True"
                for c in _list(status, "conditions")
            )
            reason = "Running" if pod_ready else "NotReady"

    phase = _str(status, "phase")
    if _dig(pod, "metadata", "deletionTimestamp"):
        if _str(status, "reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return reason, ready, total, restarts_cell


def _print_pod(pod: Obj, now: datetime) -> Cells:
    reason, ready, total, restarts = _pod_status_and_counts(pod, now)
    pod_ips = _list(pod, "status", "podIPs")
    pod_ip = (_str(pod_ips[0], "ip") if pod_ips else "") or _str(pod, "status", "podIP")
    gates = _list(pod, "spec", "readinessGates")
    gates_cell = "<none>"
    if gates:
        conditions = {
            _str(c, "type"): _str(c, "status") for c in _list(pod, "status", "conditions")
        }
        true_count = sum(1 for g in gates if conditions.get(_str(g, "conditionType")) == "True")
        gates_cell = f"{true_count}/{len(gates)}"
    return [
        _str(pod, "metadata", "name"),
        f"{ready}/{total}",
        reason,
        restarts,
        since(_dig(pod, "metadata", "creationTimestamp"), now),
        pod_ip or "<none>",
        _str(pod, "spec", "nodeName") or "<none>",
        _str(pod, "status", "nominatedNodeName") or "<none>",
        gates_cell,
    ]


def _pod_row_conditions(pod: Obj) -> list[JSONDict] | None:
    phase = _str(pod, "status", "phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return None
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


def _print_endpoints(ep: Obj, now: datetime) -> Cells:
    entries: list[str] = []
    subsets = _list(ep, "subsets")
    for subset in subsets:
        ips = [_str(a, "ip") for a in _list(subset, "addresses")]
        ports = _list(subset, "ports")
        if not ports:
            entries += ips
        for port in ports:
            number = _int(port, "port")
            entries += [f"[{ip}]:{number}" if ":" in ip else f"{ip}:{number}" for ip in ips]
    cell = _first_n(entries, empty="") if subsets else "<none>"
    return [
        _str(ep, "metadata", "name"),
        cell,
        since(_dig(ep, "metadata", "creationTimestamp"), now),
    ]


def _print_endpoint_slice(eps: Obj, now: datetime) -> Cells:
    ports = []
    for port in _list(eps, "ports"):
        number = _dig(port, "port")
        ports.append(str(number) if isinstance(number, int) else (_str(port, "name") or "*"))
    addresses = [str(a) for e in _list(eps, "endpoints") for a in _list(e, "addresses")]
    return [
        _str(eps, "metadata", "name"),
        _str(eps, "addressType"),
        _first_n(ports, empty="<unset>"),
        _first_n(addresses, empty="<unset>"),
        since(_dig(eps, "metadata", "creationTimestamp"), now),
    ]


def _core_event_view(event: Obj, group: str) -> Obj:
    """An ``events.k8s.io/v1`` Event seen through the core/v1 field names the printer reads."""
    if group != "events.k8s.io":
        return event
    return {
        "metadata": _dig(event, "metadata") or {},
        "involvedObject": _dig(event, "regarding") or {},
        "message": _dig(event, "note"),
        "reason": _dig(event, "reason"),
        "type": _dig(event, "type"),
        "source": _dig(event, "deprecatedSource") or {},
        "firstTimestamp": _dig(event, "deprecatedFirstTimestamp"),
        "lastTimestamp": _dig(event, "deprecatedLastTimestamp"),
        "count": _dig(event, "deprecatedCount"),
        "eventTime": _dig(event, "eventTime"),
        "series": _dig(event, "series"),
        "reportingComponent": _dig(event, "reportingController"),
        "reportingInstance": _dig(event, "reportingInstance"),
    }


def _print_event(event: Obj, now: datetime) -> Cells:
    first = since(_dig(event, "firstTimestamp"), now)
    if parse_time(_dig(event, "firstTimestamp")) is None:
        first = since(_dig(event, "eventTime"), now)
    last = since(_dig(event, "lastTimestamp"), now)
    if parse_time(_dig(event, "lastTimestamp")) is None:
        last = first
    count = _int(event, "count")
    series = _dig(event, "series")
    if isinstance(series, Mapping):
        last = since(series.get("lastObservedTime"), now)
        count = _int(series, "count")
    elif count == 0:
        count = 1  # singleton events from the new API carry no count
    kind = _str(event, "involvedObject", "kind").lower()
    name = _str(event, "involvedObject", "name")
    component = _str(event, "source", "component") or _str(event, "reportingComponent")
    host = _str(event, "source", "host") or _str(event, "reportingInstance")
    return [
        last,
        _str(event, "type"),
        _str(event, "reason"),
        f"{kind}/{name}" if name else kind,
        _str(event, "involvedObject", "fieldPath"),
        f"{component}, {host}" if host else component,
        _str(event, "message").strip(),
        first,
        count,
        _str(event, "metadata", "name"),
    ]


def _containers_cells(obj: Obj) -> tuple[str, str]:
    containers = _list(obj, "spec", "template", "spec", "containers")
    return (
        ",".join(_str(c, "name") for c in containers),
        ",".join(_str(c, "image") for c in containers),
    )


def _print_deployment(dep: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(dep)
    replicas = _dig(dep, "spec", "replicas")
    desired = replicas if isinstance(replicas, int) else 1
    return [
        _str(dep, "metadata", "name"),
        f"{_int(dep, 'status', 'readyReplicas')}/{desired}",
        _int(dep, "status", "updatedReplicas"),
        _int(dep, "status", "availableReplicas"),
        since(_dig(dep, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(_dig(dep, "spec", "selector")),
    ]


def _print_replica_set(rs: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(rs)
    replicas = _dig(rs, "spec", "replicas")
    return [
        _str(rs, "metadata", "name"),
        replicas if isinstance(replicas, int) else 1,
        _int(rs, "status", "replicas"),
        _int(rs, "status", "readyReplicas"),
        since(_dig(rs, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(_dig(rs, "spec", "selector")),
    ]


def _print_daemon_set(ds: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(ds)
    node_selector = _dig(ds, "spec", "template", "spec", "nodeSelector")
    return [
        _str(ds, "metadata", "name"),
        _int(ds, "status", "desiredNumberScheduled"),
        _int(ds, "status", "currentNumberScheduled"),
        _int(ds, "status", "numberReady"),
        _int(ds, "status", "updatedNumberScheduled"),
        _int(ds, "status", "numberAvailable"),
        format_labels(node_selector),
        since(_dig(ds, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(_dig(ds, "spec", "selector")),
    ]


def _print_stateful_set(sts: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(sts)
    replicas = _dig(sts, "spec", "replicas")
    desired = replicas if isinstance(replicas, int) else 1
    return [
        _str(sts, "metadata", "name"),
        f"{_int(sts, 'status', 'readyReplicas')}/{desired}",
        since(_dig(sts, "metadata", "creationTimestamp"), now),
        names,
        images,
    ]


def _job_status(job: Obj) -> str:
    """``printJob``'s Status column: the first true terminal condition, else Running."""
    if _dig(job, "metadata", "deletionTimestamp"):
        return "Terminating"
    for cond in _list(job, "status", "conditions"):
        if _str(cond, "status") != "True":
            continue
        kind = _str(cond, "type")
        if kind == "Complete":
            return "Complete"
        if kind == "Failed":
            return "Failed"
        if kind == "Suspended":
            return "Suspended"
        if kind in ("FailureTarget", "SuccessCriteriaMet"):
            return "FailureTarget" if kind == "FailureTarget" else "SuccessCriteriaMet"
    return "Running"


def _print_job(job: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(job)
    completions = _dig(job, "spec", "completions")
    parallelism = _dig(job, "spec", "parallelism")
    succeeded = _int(job, "status", "succeeded")
    if isinstance(completions, int):
        done = f"{succeeded}/{completions}"
    else:
        done = (
            f"{succeeded}/1 of {parallelism}"
            if isinstance(parallelism, int) and parallelism > 1
            else f"{succeeded}/1"
        )
    start = parse_time(_dig(job, "status", "startTime"))
    end = parse_time(_dig(job, "status", "completionTime"))
    duration = "" if start is None else human_duration(((end or now) - start).total_seconds())
    return [
        _str(job, "metadata", "name"),
        _job_status(job),
        done,
        duration,
        since(_dig(job, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(_dig(job, "spec", "selector")),
    ]


def _print_cron_job(cj: Obj, now: datetime) -> Cells:
    tmpl = _dig(cj, "spec", "jobTemplate") or {}
    names, images = _containers_cells(tmpl)
    last = _dig(cj, "status", "lastScheduleTime")
    suspend = _dig(cj, "spec", "suspend")
    return [
        _str(cj, "metadata", "name"),
        _str(cj, "spec", "schedule"),
        _str(cj, "spec", "timeZone") or "<none>",
        "True" if suspend is True else "False",
        len(_list(cj, "status", "active")),
        since(last, now) if last else "<none>",
        since(_dig(cj, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(_dig(tmpl, "spec", "selector")),
    ]


def _print_replication_controller(rc: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(rc)
    replicas = _dig(rc, "spec", "replicas")
    return [
        _str(rc, "metadata", "name"),
        replicas if isinstance(replicas, int) else 1,
        _int(rc, "status", "replicas"),
        _int(rc, "status", "readyReplicas"),
        since(_dig(rc, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_labels(_dig(rc, "spec", "selector")),
    ]


def _print_binding(binding: Obj, now: datetime) -> Cells:
    subjects = _list(binding, "subjects")

    def of(kind: str) -> str:
        out = []
        for s in subjects:
            if _str(s, "kind") != kind:
                continue
            if kind == "ServiceAccount":
                out.append(f"{_str(s, 'namespace')}/{_str(s, 'name')}")
            else:
                out.append(_str(s, "name"))
        return ", ".join(out)

    return [
        _str(binding, "metadata", "name"),
        f"{_str(binding, 'roleRef', 'kind')}/{_str(binding, 'roleRef', 'name')}",
        since(_dig(binding, "metadata", "creationTimestamp"), now),
        of("User"),
        of("Group"),
        of("ServiceAccount"),
    ]


def _print_api_service(svc: Obj, now: datetime) -> Cells:
    ref = _dig(svc, "spec", "service")
    service = (
        f"{_str(ref, 'namespace')}/{_str(ref, 'name')}" if isinstance(ref, Mapping) else "Local"
    )
    available = "Unknown"
    for cond in _list(svc, "status", "conditions"):
        if _str(cond, "type") == "Available":
            available = _str(cond, "status")
            if available != "True":
                available = f"{available} ({_str(cond, 'reason')})"
    return [
        _str(svc, "metadata", "name"),
        service,
        available,
        since(_dig(svc, "metadata", "creationTimestamp"), now),
    ]


def _count_keys(*maps: object) -> int:
    return sum(len(m) for m in maps if isinstance(m, Mapping))


def _simple(*cells: Callable[[Obj], object]) -> Printer:
    """A printer whose cells are Name, ``cells``..., Age."""

    def printer(obj: Obj, now: datetime) -> Cells:
        return [
            _str(obj, "metadata", "name"),
            *(cell(obj) for cell in cells),
            since(_dig(obj, "metadata", "creationTimestamp"), now),
        ]

    return printer


@dataclass(frozen=True)
class KindTable:
    columns: tuple[Column, ...]
    printer: Printer
    row_conditions: Callable[[Obj], list[JSONDict] | None] | None = None


_EVENT_TABLE = KindTable(
    (
        Column("Last Seen", "When the event was last observed."),
        Column("Type", "Event type (Normal, Warning)."),
        Column("Reason", "Short machine-readable reason for the event."),
        Column("Object", "The object the event is about, as kind/name."),
        _wide("Subobject", "Field path inside the object, if any."),
        _wide("Source", "Component (and host) that reported the event."),
        Column("Message", "Human-readable description of the event."),
        _wide("First Seen", "When the event was first observed."),
        _wide("Count", "How many times the event has occurred."),
        Column("Name", "Name of the Event object.", format="name", priority=1),
    ),
    _print_event,
)

PRINTERS: Mapping[tuple[str, str], KindTable] = {
    ("", "Service"): KindTable(
        (
            NAME,
            Column("Type", "How the service is exposed (ClusterIP, NodePort, LoadBalancer, ...)."),
            Column("Cluster-IP", "The service's cluster IP (spec.clusterIP)."),
            Column("External-IP", "External IPs or load-balancer ingress addresses."),
            Column("Port(s)", "Service ports as port[:nodePort]/protocol."),
            AGE,
            _wide("Selector", "Label selector of the pods backing the service."),
        ),
        _print_service,
    ),
    ("", "Node"): KindTable(
        (
            NAME,
            Column("Status", "Readiness of the node, from its Ready condition."),
            Column("Roles", "Roles from node-role.kubernetes.io/* labels."),
            AGE,
            Column("Version", "Kubelet version the node reports."),
            _wide("Internal-IP", "First InternalIP address of the node."),
            _wide("External-IP", "First ExternalIP address of the node."),
            _wide("OS-Image", "Operating system image the node reports."),
            _wide("Kernel-Version", "Kernel version the node reports."),
            _wide("Container-Runtime", "Container runtime and version the node reports."),
        ),
        _print_node,
    ),
    ("", "Pod"): KindTable(
        (
            NAME,
            Column("Ready", "Ready containers over all containers."),
            Column("Status", "Aggregate status of the pod's containers."),
            Column("Restarts", "Container restarts, with the time of the last one."),
            AGE,
            _wide("IP", "The pod's first IP address."),
            _wide("Node", "Node the pod is bound to."),
            _wide("Nominated Node", "Node nominated by preemption, if any."),
            _wide("Readiness Gates", "Readiness gates that are true, over all gates."),
        ),
        _print_pod,
        _pod_row_conditions,
    ),
    ("", "Namespace"): KindTable(
        (NAME, Column("Status", "Lifecycle phase of the namespace."), AGE),
        _simple(lambda o: _str(o, "status", "phase")),
    ),
    ("", "Endpoints"): KindTable(
        (NAME, Column("Endpoints", "Up to three address:port pairs."), AGE),
        _print_endpoints,
    ),
    ("", "Event"): _EVENT_TABLE,
    ("events.k8s.io", "Event"): _EVENT_TABLE,
    ("", "ConfigMap"): KindTable(
        (NAME, Column("Data", "Number of data and binaryData keys."), AGE),
        _simple(lambda o: _count_keys(_dig(o, "data"), _dig(o, "binaryData"))),
    ),
    ("", "Secret"): KindTable(
        (
            NAME,
            Column("Type", "Secret type."),
            Column("Data", "Number of data keys."),
            AGE,
        ),
        _simple(lambda o: _str(o, "type"), lambda o: _count_keys(_dig(o, "data"))),
    ),
    ("", "ServiceAccount"): KindTable(
        (NAME, Column("Secrets", "Number of secrets listed on the account."), AGE),
        _simple(lambda o: len(_list(o, "secrets"))),
    ),
    ("discovery.k8s.io", "EndpointSlice"): KindTable(
        (
            NAME,
            Column("AddressType", "Address family of the slice's endpoints."),
            Column("Ports", "Up to three port numbers."),
            Column("Endpoints", "Up to three endpoint addresses."),
            AGE,
        ),
        _print_endpoint_slice,
    ),
    ("coordination.k8s.io", "Lease"): KindTable(
        (NAME, Column("Holder", "Current holder of the lease."), AGE),
        _simple(lambda o: _str(o, "spec", "holderIdentity")),
    ),
    ("apps", "Deployment"): KindTable(
        (
            NAME,
            Column("Ready", "Ready replicas over desired replicas."),
            Column("Up-to-date", "Replicas running the latest template."),
            Column("Available", "Replicas available to serve."),
            AGE,
            _wide("Containers", "Names of the template's containers."),
            _wide("Images", "Images of the template's containers."),
            _wide("Selector", "Label selector of the deployment's pods."),
        ),
        _print_deployment,
    ),
    ("apps", "ReplicaSet"): KindTable(
        (
            NAME,
            Column("Desired", "Number of desired pods.", type="integer"),
            Column("Current", "Number of pods created.", type="integer"),
            Column("Ready", "Number of pods ready.", type="integer"),
            AGE,
            _wide("Containers", "Names of the template's containers."),
            _wide("Images", "Images of the template's containers."),
            _wide("Selector", "Label selector of the replica set's pods."),
        ),
        _print_replica_set,
    ),
}

_WORKLOAD_WIDE = (
    _wide("Containers", "Names of the template's containers."),
    _wide("Images", "Images of the template's containers."),
)
_BINDING_TABLE = KindTable(
    (
        NAME,
        Column("Role", "The role the binding grants, as kind/name."),
        AGE,
        _wide("Users", "Users bound."),
        _wide("Groups", "Groups bound."),
        _wide("ServiceAccounts", "Service accounts bound, as namespace/name."),
    ),
    _print_binding,
)
PRINTERS = {
    **PRINTERS,
    ("apps", "DaemonSet"): KindTable(
        (
            NAME,
            Column("Desired", "Number of nodes that should run the daemon pod.", type="integer"),
            Column("Current", "Number of nodes running at least one daemon pod.", type="integer"),
            Column("Ready", "Number of nodes with a ready daemon pod.", type="integer"),
            Column("Up-to-date", "Number of nodes running the updated pod.", type="integer"),
            Column("Available", "Number of nodes with an available daemon pod.", type="integer"),
            Column("Node Selector", "The template's node selector."),
            AGE,
            *_WORKLOAD_WIDE,
            _wide("Selector", "Label selector of the daemon set's pods."),
        ),
        _print_daemon_set,
    ),
    ("apps", "StatefulSet"): KindTable(
        (NAME, Column("Ready", "Ready replicas over desired replicas."), AGE, *_WORKLOAD_WIDE),
        _print_stateful_set,
    ),
    ("batch", "Job"): KindTable(
        (
            NAME,
            Column("Status", "Status of the job."),
            Column("Completions", "Succeeded pods over desired completions."),
            Column("Duration", "Time the job took (or has taken) to complete."),
            AGE,
            *_WORKLOAD_WIDE,
            _wide("Selector", "Label selector of the job's pods."),
        ),
        _print_job,
    ),
    ("batch", "CronJob"): KindTable(
        (
            NAME,
            Column("Schedule", "The cron schedule."),
            Column("Timezone", "The schedule's time zone."),
            Column("Suspend", "Whether scheduling is suspended.", type="boolean"),
            Column("Active", "Number of running jobs.", type="integer"),
            Column("Last Schedule", "When a job was last scheduled."),
            AGE,
            *_WORKLOAD_WIDE,
            _wide("Selector", "Label selector of the jobs' pods."),
        ),
        _print_cron_job,
    ),
    ("", "ReplicationController"): KindTable(
        (
            NAME,
            Column("Desired", "Number of desired pods.", type="integer"),
            Column("Current", "Number of pods created.", type="integer"),
            Column("Ready", "Number of pods ready.", type="integer"),
            AGE,
            *_WORKLOAD_WIDE,
            _wide("Selector", "Label selector of the controller's pods."),
        ),
        _print_replication_controller,
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): _BINDING_TABLE,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _BINDING_TABLE,
    ("apiregistration.k8s.io", "APIService"): KindTable(
        (
            NAME,
            Column("Service", "The service serving the group version, or Local."),
            Column("Available", "Whether the APIService is available."),
            AGE,
        ),
        _print_api_service,
    ),
}

_DEFAULT_TABLE = KindTable(
    (NAME, CREATED_AT),
    lambda obj, _now: [
        _str(obj, "metadata", "name"),
        _str(obj, "metadata", "creationTimestamp"),
    ],
)


def columns_for(rt: ResourceType) -> list[JSONDict]:
    """The ``columnDefinitions`` of ``rt``'s table (the default Name/Created At if no printer)."""
    return [c.definition() for c in PRINTERS.get((rt.group, rt.kind), _DEFAULT_TABLE).columns]


# --------------------------------------------------------------------------------------------
# Table assembly


def _row_object(rt: ResourceType, obj: Obj, include_object: str, version: str) -> JSONDict | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        full = dict(obj)
        full.setdefault("apiVersion", rt.api_version)
        full.setdefault("kind", rt.kind)
        return full
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": dict(_dig(obj, "metadata") or {}),
    }


def to_table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    *,
    list_meta: dict[str, Any] | None,
    include_object: str,
    now: datetime | None = None,
    version: str = "v1",
    column_definitions: bool = True,
) -> dict[str, Any]:
    """Render ``objects`` (all of kind ``rt``) as a ``meta.k8s.io`` Table.

    ``list_meta`` is the list's ``metadata`` (``resourceVersion``, ``continue``,
    ``remainingItemCount``) or ``None`` for a single object or a watch event, whose table then
    carries that object's ``resourceVersion``. ``include_object`` is the ``?includeObject=``
    value: ``Metadata`` (also ``""``, the default) embeds a ``PartialObjectMetadata`` per row,
    ``Object`` the full object, ``None`` nothing; anything else raises
    :class:`TableRequestError`. ``column_definitions=False`` leaves the columns empty, as the
    server does for watch events after the first. ``now`` defaults to the current UTC time.
    """
    mode = include_object or "Metadata"
    if mode not in INCLUDE_OBJECT_VALUES:
        raise TableRequestError(f"unrecognized includeObject value: {json.dumps(include_object)}")
    if version not in TABLE_VERSIONS:
        raise TableRequestError(f"unsupported Table version: {json.dumps(version)}")
    clock = now or datetime.now(UTC)
    spec = PRINTERS.get((rt.group, rt.kind), _DEFAULT_TABLE)
    rows: list[JSONDict] = []
    for obj in objects:
        view = _core_event_view(obj, rt.group) if rt.kind == "Event" else obj
        row: JSONDict = {"cells": spec.printer(view, clock)}
        conditions = spec.row_conditions(obj) if spec.row_conditions else None
        if conditions:
            row["conditions"] = conditions
        embedded = _row_object(rt, obj, mode, version)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: JSONDict = {}
    if list_meta is not None:
        for key in ("resourceVersion", "continue", "remainingItemCount"):
            if list_meta.get(key) not in (None, ""):
                metadata[key] = list_meta[key]
    elif len(objects) == 1 and _str(objects[0], "metadata", "resourceVersion"):
        metadata["resourceVersion"] = _str(objects[0], "metadata", "resourceVersion")
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": metadata,
        "columnDefinitions": [c.definition() for c in spec.columns] if column_definitions else [],
        "rows": rows,
    }
