"""Table printers of the workload, RBAC and aggregation kinds.

Role: one pure printer per kind, ``(object, now) -> cells``, with its column set, as
``pkg/printers/internalversion`` in kubernetes v1.32 prints Deployments, ReplicaSets,
DaemonSets, StatefulSets, Jobs (STATUS as ``printJob`` picks it), CronJobs,
ReplicationControllers, RoleBindings and ClusterRoleBindings, and APIServices.
Neighbours: built from ``tables_cells.py``; ``tables.py`` merges :data:`APPS_PRINTERS` with
``tables_core.py``'s into its registry.
Design: split from ``tables.py`` by printer family (the core kinds are in ``tables_core.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from lab.kube.objects import Obj
from lab.kube.tables_cells import (
    AGE,
    NAME,
    Cells,
    Column,
    KindTable,
    dig,
    dig_int,
    dig_list,
    dig_str,
    format_label_selector,
    format_labels,
    human_duration,
    parse_time,
    since,
    wide,
)


def _containers_cells(obj: Obj) -> tuple[str, str]:
    containers = dig_list(obj, "spec", "template", "spec", "containers")
    return (
        ",".join(dig_str(c, "name") for c in containers),
        ",".join(dig_str(c, "image") for c in containers),
    )


def _print_deployment(dep: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(dep)
    replicas = dig(dep, "spec", "replicas")
    desired = replicas if isinstance(replicas, int) else 1
    return [
        dig_str(dep, "metadata", "name"),
        f"{dig_int(dep, 'status', 'readyReplicas')}/{desired}",
        dig_int(dep, "status", "updatedReplicas"),
        dig_int(dep, "status", "availableReplicas"),
        since(dig(dep, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(dig(dep, "spec", "selector")),
    ]


def _print_replica_set(rs: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(rs)
    replicas = dig(rs, "spec", "replicas")
    return [
        dig_str(rs, "metadata", "name"),
        replicas if isinstance(replicas, int) else 1,
        dig_int(rs, "status", "replicas"),
        dig_int(rs, "status", "readyReplicas"),
        since(dig(rs, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(dig(rs, "spec", "selector")),
    ]


def _print_daemon_set(ds: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(ds)
    node_selector = dig(ds, "spec", "template", "spec", "nodeSelector")
    return [
        dig_str(ds, "metadata", "name"),
        dig_int(ds, "status", "desiredNumberScheduled"),
        dig_int(ds, "status", "currentNumberScheduled"),
        dig_int(ds, "status", "numberReady"),
        dig_int(ds, "status", "updatedNumberScheduled"),
        dig_int(ds, "status", "numberAvailable"),
        format_labels(node_selector),
        since(dig(ds, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(dig(ds, "spec", "selector")),
    ]


def _print_stateful_set(sts: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(sts)
    replicas = dig(sts, "spec", "replicas")
    desired = replicas if isinstance(replicas, int) else 1
    return [
        dig_str(sts, "metadata", "name"),
        f"{dig_int(sts, 'status', 'readyReplicas')}/{desired}",
        since(dig(sts, "metadata", "creationTimestamp"), now),
        names,
        images,
    ]


def _job_status(job: Obj) -> str:
    """``printJob``'s Status column: the first true terminal condition, else Running."""
    if dig(job, "metadata", "deletionTimestamp"):
        return "Terminating"
    for cond in dig_list(job, "status", "conditions"):
        if dig_str(cond, "status") != "True":
            continue
        kind = dig_str(cond, "type")
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
    completions = dig(job, "spec", "completions")
    parallelism = dig(job, "spec", "parallelism")
    succeeded = dig_int(job, "status", "succeeded")
    if isinstance(completions, int):
        done = f"{succeeded}/{completions}"
    else:
        done = (
            f"{succeeded}/1 of {parallelism}"
            if isinstance(parallelism, int) and parallelism > 1
            else f"{succeeded}/1"
        )
    start = parse_time(dig(job, "status", "startTime"))
    end = parse_time(dig(job, "status", "completionTime"))
    duration = "" if start is None else human_duration(((end or now) - start).total_seconds())
    return [
        dig_str(job, "metadata", "name"),
        _job_status(job),
        done,
        duration,
        since(dig(job, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(dig(job, "spec", "selector")),
    ]


def _print_cron_job(cj: Obj, now: datetime) -> Cells:
    tmpl = dig(cj, "spec", "jobTemplate") or {}
    names, images = _containers_cells(tmpl)
    last = dig(cj, "status", "lastScheduleTime")
    suspend = dig(cj, "spec", "suspend")
    return [
        dig_str(cj, "metadata", "name"),
        dig_str(cj, "spec", "schedule"),
        dig_str(cj, "spec", "timeZone") or "<none>",
        "True" if suspend is True else "False",
        len(dig_list(cj, "status", "active")),
        since(last, now) if last else "<none>",
        since(dig(cj, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_label_selector(dig(tmpl, "spec", "selector")),
    ]


def _print_replication_controller(rc: Obj, now: datetime) -> Cells:
    names, images = _containers_cells(rc)
    replicas = dig(rc, "spec", "replicas")
    return [
        dig_str(rc, "metadata", "name"),
        replicas if isinstance(replicas, int) else 1,
        dig_int(rc, "status", "replicas"),
        dig_int(rc, "status", "readyReplicas"),
        since(dig(rc, "metadata", "creationTimestamp"), now),
        names,
        images,
        format_labels(dig(rc, "spec", "selector")),
    ]


def _print_binding(binding: Obj, now: datetime) -> Cells:
    subjects = dig_list(binding, "subjects")

    def of(kind: str) -> str:
        out = []
        for s in subjects:
            if dig_str(s, "kind") != kind:
                continue
            if kind == "ServiceAccount":
                out.append(f"{dig_str(s, 'namespace')}/{dig_str(s, 'name')}")
            else:
                out.append(dig_str(s, "name"))
        return ", ".join(out)

    return [
        dig_str(binding, "metadata", "name"),
        f"{dig_str(binding, 'roleRef', 'kind')}/{dig_str(binding, 'roleRef', 'name')}",
        since(dig(binding, "metadata", "creationTimestamp"), now),
        of("User"),
        of("Group"),
        of("ServiceAccount"),
    ]


def _print_api_service(svc: Obj, now: datetime) -> Cells:
    ref = dig(svc, "spec", "service")
    service = (
        f"{dig_str(ref, 'namespace')}/{dig_str(ref, 'name')}"
        if isinstance(ref, Mapping)
        else "Local"
    )
    available = "Unknown"
    for cond in dig_list(svc, "status", "conditions"):
        if dig_str(cond, "type") == "Available":
            available = dig_str(cond, "status")
            if available != "True":
                available = f"{available} ({dig_str(cond, 'reason')})"
    return [
        dig_str(svc, "metadata", "name"),
        service,
        available,
        since(dig(svc, "metadata", "creationTimestamp"), now),
    ]


_WORKLOAD_WIDE = (
    wide("Containers", "Names of the template's containers."),
    wide("Images", "Images of the template's containers."),
)


_BINDING_TABLE = KindTable(
    (
        NAME,
        Column("Role", "The role the binding grants, as kind/name."),
        AGE,
        wide("Users", "Users bound."),
        wide("Groups", "Groups bound."),
        wide("ServiceAccounts", "Service accounts bound, as namespace/name."),
    ),
    _print_binding,
)
#: the printers of the workload, RBAC and aggregation kinds, by (group, kind)
APPS_PRINTERS: Mapping[tuple[str, str], KindTable] = {
    ("apps", "Deployment"): KindTable(
        (
            NAME,
            Column("Ready", "Ready replicas over desired replicas."),
            Column("Up-to-date", "Replicas running the latest template."),
            Column("Available", "Replicas available to serve."),
            AGE,
            wide("Containers", "Names of the template's containers."),
            wide("Images", "Images of the template's containers."),
            wide("Selector", "Label selector of the deployment's pods."),
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
            wide("Containers", "Names of the template's containers."),
            wide("Images", "Images of the template's containers."),
            wide("Selector", "Label selector of the replica set's pods."),
        ),
        _print_replica_set,
    ),
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
            wide("Selector", "Label selector of the daemon set's pods."),
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
            wide("Selector", "Label selector of the job's pods."),
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
            wide("Selector", "Label selector of the jobs' pods."),
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
            wide("Selector", "Label selector of the controller's pods."),
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
