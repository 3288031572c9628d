"""Table printers of the core kinds (and EndpointSlice, Lease, events.k8s.io Events).

Role: one pure printer per kind, ``(object, now) -> cells``, with its column set, as
``pkg/printers/internalversion`` in kubernetes v1.32 prints Services, Nodes, Pods (STATUS and
RESTARTS derived as ``printPod`` does), Endpoints, EndpointSlices, Events and the simpler kinds.
Neighbours: built from ``tables_cells.py``; ``tables.py`` merges :data:`CORE_PRINTERS` with
``tables_apps.py``'s into its registry and views an ``events.k8s.io`` Event through
:func:`core_event_view` before printing it.
Design: split from ``tables.py`` by printer family (this one, and the workload, RBAC and
aggregation kinds in ``tables_apps.py``), so each module reads as one family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from lab.kube.objects import Obj
from lab.kube.tables_cells import (
    AGE,
    LOAD_BALANCER_WIDTH,
    NAME,
    Cells,
    Column,
    JSONDict,
    KindTable,
    count_keys,
    dig,
    dig_int,
    dig_list,
    dig_str,
    first_n,
    format_labels,
    human_duration,
    parse_time,
    simple,
    since,
    wide,
)


def _print_service(svc: Obj, now: datetime) -> Cells:
    spec = dig(svc, "spec") or {}
    svc_type = dig_str(spec, "type")
    cluster_ips = dig_list(spec, "clusterIPs")
    cluster_ip = cluster_ips[0] if cluster_ips else (dig_str(spec, "clusterIP") or "<none>")
    ports = []
    for port in dig_list(spec, "ports"):
        proto = dig_str(port, "protocol") or "TCP"
        node_port = dig_int(port, "nodePort")
        number = dig_int(port, "port")
        ports.append(f"{number}:{node_port}/{proto}" if node_port > 0 else f"{number}/{proto}")
    return [
        dig_str(svc, "metadata", "name"),
        svc_type,
        cluster_ip,
        # The server prints with Wide on (pkg/printers/storage), so ingress is never cut here.
        service_external_ip(svc, wide=True),
        ",".join(ports) or "<none>",
        since(dig(svc, "metadata", "creationTimestamp"), now),
        format_labels(dig(spec, "selector")),
    ]


def service_external_ip(svc: Obj, *, wide: bool) -> str:
    """The EXTERNAL-IP cell: external IPs, load-balancer ingress, ``<pending>`` or ``<none>``."""
    spec = dig(svc, "spec") or {}
    external_ips = [str(ip) for ip in dig_list(spec, "externalIPs")]
    svc_type = dig_str(spec, "type")
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external_ips) or "<none>"
    if svc_type == "LoadBalancer":
        ingress = sorted(
            {
                dig_str(i, "ip") or dig_str(i, "hostname")
                for i in dig_list(svc, "status", "loadBalancer", "ingress")
                if dig_str(i, "ip") or dig_str(i, "hostname")
            }
        )
        lb = ",".join(ingress)
        if not wide and len(lb) > LOAD_BALANCER_WIDTH:
            lb = lb[: LOAD_BALANCER_WIDTH - 3] + "..."
        if external_ips:
            return ",".join([*(lb.split(",") if lb else []), *external_ips])
        return lb or "<pending>"
    if svc_type == "ExternalName":
        return dig_str(spec, "externalName")
    return "<unknown>"


def _print_node(node: Obj, now: datetime) -> Cells:
    status: list[str] = []
    for cond in dig_list(node, "status", "conditions"):
        if dig_str(cond, "type") == "Ready":
            status = ["Ready" if dig_str(cond, "status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if dig(node, "spec", "unschedulable") is True:
        status.append("SchedulingDisabled")
    roles: set[str] = set()
    labels = dig(node, "metadata", "labels")
    for key, value in (labels or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))

    def address(kind: str) -> str:
        for entry in dig_list(node, "status", "addresses"):
            if dig_str(entry, "type") == kind:
                return dig_str(entry, "address")
        return "<none>"

    info = dig(node, "status", "nodeInfo") or {}
    return [
        dig_str(node, "metadata", "name"),
        ",".join(status),
        ",".join(sorted(roles)) or "<none>",
        since(dig(node, "metadata", "creationTimestamp"), now),
        dig_str(info, "kubeletVersion"),
        address("InternalIP"),
        address("ExternalIP"),
        dig_str(info, "osImage") or "<unknown>",
        dig_str(info, "kernelVersion") or "<unknown>",
        dig_str(info, "containerRuntimeVersion") or "<unknown>",
    ]


@dataclass
class _PodTally:
    """What ``printPod`` accumulates while it walks a pod's container statuses."""

    reason: str
    ready: int = 0
    restarts: int = 0
    last_restart: datetime | None = None
    # Restarts count init containers only while the pod is initializing; once it is running,
    # only sidecars (restartable init containers) and regular containers count.
    sidecar_restarts: int = 0
    sidecar_last_restart: datetime | None = None


def _later(current: datetime | None, container: object) -> datetime | None:
    """The later of ``current`` and the container's last termination."""
    finished = parse_time(dig(container, "lastState", "terminated", "finishedAt"))
    if finished and (current is None or finished > current):
        return finished
    return current


def _has_true_condition(status: object, kind: str) -> bool:
    return any(
        dig_str(c, "type") == kind and dig_str(c, "status") == "True"
        for c in dig_list(status, "conditions")
    )


def _init_reason(container: object, index: int, count: int) -> str:
    """The STATUS of a pod held up by its init container number ``index`` (of ``count``)."""
    terminated = dig(container, "state", "terminated")
    waiting_reason = dig_str(container, "state", "waiting", "reason")
    if isinstance(terminated, Mapping):
        if dig_str(terminated, "reason"):
            return "Init:" + dig_str(terminated, "reason")
        if dig_int(terminated, "signal"):
            return f"Init:Signal:{dig_int(terminated, 'signal')}"
        return f"Init:ExitCode:{dig_int(terminated, 'exitCode')}"
    if waiting_reason and waiting_reason != "PodInitializing":
        return "Init:" + waiting_reason
    return f"Init:{index}/{count}"


def _tally_init_containers(
    status: object, init_specs: list[object], sidecars: set[str], tally: _PodTally
) -> bool:
    """Walk the init containers; True when one still holds the pod up (its reason taken)."""
    for index, container in enumerate(dig_list(status, "initContainerStatuses")):
        tally.restarts += dig_int(container, "restartCount")
        tally.last_restart = _later(tally.last_restart, container)
        sidecar = dig_str(container, "name") in sidecars
        if sidecar:
            tally.sidecar_restarts += dig_int(container, "restartCount")
            tally.sidecar_last_restart = _later(tally.sidecar_last_restart, container)
        terminated = dig(container, "state", "terminated")
        if isinstance(terminated, Mapping) and dig_int(terminated, "exitCode") == 0:
            continue
        if sidecar and dig(container, "started") is True:
            tally.ready += 1 if dig(container, "ready") is True else 0
            continue
        tally.reason = _init_reason(container, index, len(init_specs))
        return True
    return False


def _tally_containers(status: object, tally: _PodTally) -> None:
    """Walk the regular containers (last first, so the first one's reason wins)."""
    tally.restarts, tally.last_restart = tally.sidecar_restarts, tally.sidecar_last_restart
    has_running = False
    for container in reversed(dig_list(status, "containerStatuses")):
        tally.restarts += dig_int(container, "restartCount")
        tally.last_restart = _later(tally.last_restart, container)
        waiting = dig_str(container, "state", "waiting", "reason")
        terminated = dig(container, "state", "terminated")
        if waiting:
            tally.reason = waiting
        elif isinstance(terminated, Mapping) and dig_str(terminated, "reason"):
            tally.reason = dig_str(terminated, "reason")
        elif isinstance(terminated, Mapping):
            signal = dig_int(terminated, "signal")
            code = dig_int(terminated, "exitCode")
            tally.reason = f"Signal:{signal}" if signal else f"ExitCode:{code}"
        elif dig(container, "ready") is True and dig(container, "state", "running"):
            has_running = True
            tally.ready += 1
    if tally.reason == "Completed" and has_running:
        tally.reason = "Running" if _has_true_condition(status, "Ready") else "NotReady"


def _pod_status_and_counts(pod: Obj, now: datetime) -> tuple[str, int, int, str]:
    """(STATUS, ready containers, total containers, RESTARTS) the way ``printPod`` derives them."""
    status = dig(pod, "status") or {}
    tally = _PodTally(dig_str(status, "reason") or dig_str(status, "phase"))
    for cond in dig_list(status, "conditions"):
        if dig_str(cond, "type") == "PodScheduled" and dig_str(cond, "reason") == "SchedulingGated":
            tally.reason = "SchedulingGated"
    init_specs = dig_list(pod, "spec", "initContainers")
    sidecars = {dig_str(c, "name") for c in init_specs if dig_str(c, "restartPolicy") == "Always"}
    total = len(dig_list(pod, "spec", "containers")) + len(sidecars)
    initializing = _tally_init_containers(status, init_specs, sidecars, tally)
    if not initializing or _has_true_condition(status, "Initialized"):
        _tally_containers(status, tally)
    if dig(pod, "metadata", "deletionTimestamp"):
        if dig_str(status, "reason") == "NodeLost":
            tally.reason = "Unknown"
        elif dig_str(status, "phase") not in ("Succeeded", "Failed"):
            tally.reason = "Terminating"
    restarts_cell = str(tally.restarts)
    if tally.restarts and tally.last_restart is not None:
        ago = human_duration((now - tally.last_restart).total_seconds())
        restarts_cell = f"{tally.restarts} ({ago} ago)"
    return tally.reason, tally.ready, total, restarts_cell


def _print_pod(pod: Obj, now: datetime) -> Cells:
    reason, ready, total, restarts = _pod_status_and_counts(pod, now)
    pod_ips = dig_list(pod, "status", "podIPs")
    pod_ip = (dig_str(pod_ips[0], "ip") if pod_ips else "") or dig_str(pod, "status", "podIP")
    gates = dig_list(pod, "spec", "readinessGates")
    gates_cell = "<none>"
    if gates:
        conditions = {
            dig_str(c, "type"): dig_str(c, "status") for c in dig_list(pod, "status", "conditions")
        }
        true_count = sum(1 for g in gates if conditions.get(dig_str(g, "conditionType")) == "True")
        gates_cell = f"{true_count}/{len(gates)}"
    return [
        dig_str(pod, "metadata", "name"),
        f"{ready}/{total}",
        reason,
        restarts,
        since(dig(pod, "metadata", "creationTimestamp"), now),
        pod_ip or "<none>",
        dig_str(pod, "spec", "nodeName") or "<none>",
        dig_str(pod, "status", "nominatedNodeName") or "<none>",
        gates_cell,
    ]


def _pod_row_conditions(pod: Obj) -> list[JSONDict] | None:
    phase = dig_str(pod, "status", "phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return None
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


def _print_endpoints(ep: Obj, now: datetime) -> Cells:
    entries: list[str] = []
    subsets = dig_list(ep, "subsets")
    for subset in subsets:
        ips = [dig_str(a, "ip") for a in dig_list(subset, "addresses")]
        ports = dig_list(subset, "ports")
        if not ports:
            entries += ips
        for port in ports:
            number = dig_int(port, "port")
            entries += [f"[{ip}]:{number}" if ":" in ip else f"{ip}:{number}" for ip in ips]
    cell = first_n(entries, empty="") if subsets else "<none>"
    return [
        dig_str(ep, "metadata", "name"),
        cell,
        since(dig(ep, "metadata", "creationTimestamp"), now),
    ]


def _print_endpoint_slice(eps: Obj, now: datetime) -> Cells:
    ports = []
    for port in dig_list(eps, "ports"):
        number = dig(port, "port")
        ports.append(str(number) if isinstance(number, int) else (dig_str(port, "name") or "*"))
    addresses = [str(a) for e in dig_list(eps, "endpoints") for a in dig_list(e, "addresses")]
    return [
        dig_str(eps, "metadata", "name"),
        dig_str(eps, "addressType"),
        first_n(ports, empty="<unset>"),
        first_n(addresses, empty="<unset>"),
        since(dig(eps, "metadata", "creationTimestamp"), now),
    ]


def core_event_view(event: Obj, group: str) -> Obj:
    """An ``events.k8s.io/v1`` Event seen through the core/v1 field names the printer reads."""
    if group != "events.k8s.io":
        return event
    return {
        "metadata": dig(event, "metadata") or {},
        "involvedObject": dig(event, "regarding") or {},
        "message": dig(event, "note"),
        "reason": dig(event, "reason"),
        "type": dig(event, "type"),
        "source": dig(event, "deprecatedSource") or {},
        "firstTimestamp": dig(event, "deprecatedFirstTimestamp"),
        "lastTimestamp": dig(event, "deprecatedLastTimestamp"),
        "count": dig(event, "deprecatedCount"),
        "eventTime": dig(event, "eventTime"),
        "series": dig(event, "series"),
        "reportingComponent": dig(event, "reportingController"),
        "reportingInstance": dig(event, "reportingInstance"),
    }


def _print_event(event: Obj, now: datetime) -> Cells:
    first = since(dig(event, "firstTimestamp"), now)
    if parse_time(dig(event, "firstTimestamp")) is None:
        first = since(dig(event, "eventTime"), now)
    last = since(dig(event, "lastTimestamp"), now)
    if parse_time(dig(event, "lastTimestamp")) is None:
        last = first
    count = dig_int(event, "count")
    series = dig(event, "series")
    if isinstance(series, Mapping):
        last = since(series.get("lastObservedTime"), now)
        count = dig_int(series, "count")
    elif count == 0:
        count = 1  # singleton events from the new API carry no count
    kind = dig_str(event, "involvedObject", "kind").lower()
    name = dig_str(event, "involvedObject", "name")
    component = dig_str(event, "source", "component") or dig_str(event, "reportingComponent")
    host = dig_str(event, "source", "host") or dig_str(event, "reportingInstance")
    return [
        last,
        dig_str(event, "type"),
        dig_str(event, "reason"),
        f"{kind}/{name}" if name else kind,
        dig_str(event, "involvedObject", "fieldPath"),
        f"{component}, {host}" if host else component,
        dig_str(event, "message").strip(),
        first,
        count,
        dig_str(event, "metadata", "name"),
    ]


EVENT_TABLE = KindTable(
    (
        Column("Last Seen", "When the event was last observed."),
        Column("Type", "Event type (Normal, Warning)."),
        Column("Reason", "Short machine-readable reason for the event."),
        Column("Object", "The object the event is about, as kind/name."),
        wide("Subobject", "Field path inside the object, if any."),
        wide("Source", "Component (and host) that reported the event."),
        Column("Message", "Human-readable description of the event."),
        wide("First Seen", "When the event was first observed."),
        wide("Count", "How many times the event has occurred."),
        Column("Name", "Name of the Event object.", format="name", priority=1),
    ),
    _print_event,
)

#: the printers of the core, discovery, coordination and events kinds, by (group, kind)
CORE_PRINTERS: Mapping[tuple[str, str], KindTable] = {
    ("", "Service"): KindTable(
        (
            NAME,
            Column("Type", "How the service is exposed (ClusterIP, NodePort, LoadBalancer, ...)."),
            Column("Cluster-IP", "The service's cluster IP (spec.clusterIP)."),
            Column("External-IP", "External IPs or load-balancer ingress addresses."),
            Column("Port(s)", "Service ports as port[:nodePort]/protocol."),
            AGE,
            wide("Selector", "Label selector of the pods backing the service."),
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
            wide("Internal-IP", "First InternalIP address of the node."),
            wide("External-IP", "First ExternalIP address of the node."),
            wide("OS-Image", "Operating system image the node reports."),
            wide("Kernel-Version", "Kernel version the node reports."),
            wide("Container-Runtime", "Container runtime and version the node reports."),
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
            wide("IP", "The pod's first IP address."),
            wide("Node", "Node the pod is bound to."),
            wide("Nominated Node", "Node nominated by preemption, if any."),
            wide("Readiness Gates", "Readiness gates that are true, over all gates."),
        ),
        _print_pod,
        _pod_row_conditions,
    ),
    ("", "Namespace"): KindTable(
        (NAME, Column("Status", "Lifecycle phase of the namespace."), AGE),
        simple(lambda o: dig_str(o, "status", "phase")),
    ),
    ("", "Endpoints"): KindTable(
        (NAME, Column("Endpoints", "Up to three address:port pairs."), AGE),
        _print_endpoints,
    ),
    ("", "Event"): EVENT_TABLE,
    ("events.k8s.io", "Event"): EVENT_TABLE,
    ("", "ConfigMap"): KindTable(
        (NAME, Column("Data", "Number of data and binaryData keys."), AGE),
        simple(lambda o: count_keys(dig(o, "data"), dig(o, "binaryData"))),
    ),
    ("", "Secret"): KindTable(
        (
            NAME,
            Column("Type", "Secret type."),
            Column("Data", "Number of data keys."),
            AGE,
        ),
        simple(lambda o: dig_str(o, "type"), lambda o: count_keys(dig(o, "data"))),
    ),
    ("", "ServiceAccount"): KindTable(
        (NAME, Column("Secrets", "Number of secrets listed on the account."), AGE),
        simple(lambda o: len(dig_list(o, "secrets"))),
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
        simple(lambda o: dig_str(o, "spec", "holderIdentity")),
    ),
}
