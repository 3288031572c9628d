"""The ``status`` a kubelet writes for a pod: conditions in the kubelet's order, container
statuses, and the write itself.

Role: the data half of the kubelet stand-in (``kubelet_pods``), as ``generateAPIPodStatus``
and the status manager shape it: conditions other components own come first (DisruptionTarget,
readiness gates; those the kubelet added itself are kept even before its cache shows them), then
the kubelet's own in its order (PodReadyToStartContainers from 1.29, Initialized, Ready,
ContainersReady, PodScheduled), the whole list written at once with a JSON merge patch and the
pod's UID as precondition. A terminal pod gets Ready/ContainersReady False with reason
``PodFailed``/``PodCompleted``, except on the releases with #108594 (the caller passes
``ready=None`` to leave them as they are). Container statuses carry containerd-shaped IDs and
the image reference containerd reports (``nginx`` -> ``docker.io/library/nginx:latest``).
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

from lab.dataplane.api import MERGE_PATCH, PODS, Api, meta, path
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, Invalid, NotFound
from lab.versions.dataplane import KubeletBehaviour

#: the conditions a kubelet owns (``PodConditionsByKubelet`` and the sandbox condition)
KUBELET_CONDITIONS = (
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
)


def full_image(image: str) -> str:
    """The image reference containerd reports (``nginx`` -> ``docker.io/library/nginx:latest``)."""
    name = image
    if "@" not in name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    return name


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def container_statuses(
    pod: Obj,
    *,
    state: str,
    ready: bool,
    started_at: str | None,
    finished_at: str | None = None,
    exit_code: int = 0,
    killed: bool = False,
) -> list[Obj]:
    """containerStatuses for every container in ``state`` waiting|running|terminated."""
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    out = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        name, image = str(container.get("name")), str(container.get("image") or "")
        status: Obj = {
            "name": name,
            "image": full_image(image),
            "imageID": "",
            "ready": ready and state == "running",
            "restartCount": 0,
            "started": state == "running",
            "lastState": {},
        }
        if state == "waiting":
            status["state"] = {"waiting": {"reason": "ContainerCreating"}}
        else:
            repo = full_image(image).rsplit(":", 1)[0]
            status["imageID"] = f"{repo}@sha256:{_digest(full_image(image))}"
            status["containerID"] = f"containerd://{_digest(uid + name)}"
        if state == "running":
            status["state"] = {"running": {"startedAt": started_at}}
        elif state == "terminated":
            status["state"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Error" if exit_code else "Completed",
                    "startedAt": started_at,
                    "finishedAt": finished_at,
                    "containerID": status["containerID"],
                }
            }
            if killed:
                status["state"]["terminated"]["signal"] = 9
        out.append(status)
    return out


def condition(
    pod: Obj,
    ctype: str,
    value: bool,
    now: str,
    *,
    reason: str | None = None,
    message: str | None = None,
) -> Obj:
    """A pod condition; ``lastTransitionTime`` kept from the pod when the status is unchanged."""
    status = "True" if value else "False"
    current = next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == ctype),
        None,
    )
    when = now
    if (
        current is not None
        and current.get("status") == status
        and current.get("lastTransitionTime")
    ):
        when = current["lastTransitionTime"]
    out: Obj = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": when}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def node_ip(node: Obj) -> str:
    """The node's InternalIP (the kubelet's own address: the pods' hostIP)."""
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    annotations = meta(node).get("annotations") or {}
    return str(annotations.get("alpha.kubernetes.io/provided-node-ip", ""))


def not_ready_message(pod: Obj) -> str:
    names = " ".join(str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or [])
    return f"containers with unready status: [{names}]"


def kubelet_conditions(
    pod: Obj,
    behaviour: KubeletBehaviour,
    *,
    phase: str | None,
    ready: bool,
    sandbox: bool,
    now: str,
) -> list[Obj]:
    """The conditions the kubelet owns, in its order."""
    terminal = phase in ("Failed", "Succeeded")
    if terminal:
        why = "PodFailed" if phase == "Failed" else "PodCompleted"
    else:
        why = "ContainersNotReady"
    msg = None if terminal or ready else not_ready_message(pod)
    out = []
    if behaviour.ready_to_start_condition:
        out.append(condition(pod, "PodReadyToStartContainers", sandbox, now))
    out.append(condition(pod, "Initialized", True, now))
    for ctype in ("Ready", "ContainersReady"):
        out.append(condition(pod, ctype, ready, now, reason=None if ready else why, message=msg))
    out.append(condition(pod, "PodScheduled", True, now))
    return out


def write_status(
    api: Api,
    behaviour: KubeletBehaviour,
    pod: Obj,
    *,
    now: str,
    phase: str | None,
    ready: bool | None = None,
    containers: str | None = None,
    sandbox: bool = False,
    started_at: str | None = None,
    own_conditions: list[Obj] | None = None,
    host_ip: str | None = None,
    exit_code: int = 0,
    killed: bool = False,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write the pod's status: ``phase`` (None: unchanged), the kubelet's conditions for
    ``ready`` (None: left as they are), container statuses in ``containers`` state
    (waiting/running/terminated; None: unchanged), ``extra`` fields. 404/409/422 (the pod was
    deleted or replaced meanwhile) are ignored."""
    status: Obj = dict(extra or {})
    if phase is not None:
        status["phase"] = phase
    if host_ip:
        status["hostIP"] = host_ip
    current = list((pod.get("status") or {}).get("conditions") or [])
    own = list(own_conditions or [])
    if ready is not None or own:
        added = {c["type"]: c for c in own}
        others = [
            added.pop(c.get("type"), c) for c in current if c.get("type") not in KUBELET_CONDITIONS
        ]
        conditions = [*others, *added.values()]
        if ready is None:
            conditions += [c for c in current if c.get("type") in KUBELET_CONDITIONS]
        else:
            conditions += kubelet_conditions(
                pod, behaviour, phase=phase, ready=ready, sandbox=sandbox, now=now
            )
        status["conditions"] = conditions
    if containers is not None:
        status["containerStatuses"] = container_statuses(
            pod,
            state=containers,
            ready=bool(ready),
            started_at=started_at,
            finished_at=now if containers == "terminated" else None,
            exit_code=exit_code,
            killed=killed,
        )
    ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
    with contextlib.suppress(NotFound, Conflict, Invalid):
        api.patch(
            path(PODS, ns, name, "status"),
            {"metadata": {"uid": meta(pod).get("uid")}, "status": status},
            content_type=MERGE_PATCH,
        )
