"""``pods/log``, ``exec``, ``attach`` and ``portforward`` for pods whose containers do not run.

No container runs in the simulator, so these answer as a real apiserver answers before any
container output could exist (``pkg/registry/core/pod/strategy.go`` ``LogLocation`` /
``streamLocation`` / ``PortForwardLocation`` and ``validateContainer``; ``rest/log.go`` with
``LocationStreamer``; the kubelet's ``validateContainerLogStatus`` for what it answers about a
container that is not running, which the apiserver passes on as 400 ``BadRequest``):

* an unknown pod: 404; a container the pod does not have: 400 ``container c is not valid for
  pod p``; no container named and several: 400 ``a container name must be specified for pod
  p, choose one of: [a b]``;
* ``log`` of a pod with no node: 204 and no body (the location streamer has nowhere to read);
  ``exec`` / ``attach`` / ``portforward``: 400 ``pod p does not have a host assigned``;
* ``log`` of a scheduled pod, from the container's status: waiting → 400 ``container "c" in
  pod "p" is waiting to start: <reason>`` (``image can't be pulled`` / ``trying and failing to
  pull image`` for ErrImagePull / ImagePullBackOff), terminated without a container id → ``is
  terminated``, no status → ``is not available``, ``previous`` without a terminated last state
  → ``previous terminated container "c" in pod "p" not found``; a running (or finished)
  container's log is empty (200, ``text/plain``): nothing wrote to it;
* ``exec`` / ``attach`` / ``portforward`` of a scheduled pod: 400 saying the simulator runs no
  containers (a real apiserver would upgrade the connection and proxy it to the kubelet).
"""

from __future__ import annotations

from typing import NoReturn

from lab.kube import exceptions as E
from lab.kube.objects import Obj
from lab.kube.store import Store


def _containers(pod: Obj) -> list[str]:
    spec = pod.get("spec") or {}
    names: list[str] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        names += [str(c.get("name", "")) for c in spec.get(key) or [] if isinstance(c, dict)]
    return names


def _container(pod: Obj, wanted: str) -> str:
    """``validateContainer``: the named container, or the only one."""
    name = pod["metadata"]["name"]
    if wanted:
        if wanted not in _containers(pod):
            raise E.bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    regular = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    if len(regular) == 1:
        return str(regular[0])
    if not regular:
        raise E.bad_request(f"a container name must be specified for pod {name}")
    listed = " ".join(_containers(pod))
    raise E.bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{listed}]"
    )


def _status_of(pod: Obj, container: str) -> Obj | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for entry in status.get(key) or []:
            if isinstance(entry, dict) and entry.get("name") == container:
                return entry
    return None


def log(store: Store, ns: str, name: str, query: dict[str, str]) -> tuple[int, bytes]:
    """(status, body) of ``GET pods/{name}/log``; errors raise :class:`ApiError`."""
    pod = store.get(store.rt("", "pods"), ns, name).obj
    container = _container(pod, query.get("container", ""))
    if not (pod.get("spec") or {}).get("nodeName"):
        return 204, b""
    previous = query.get("previous", "") in ("true", "1", "True")
    entry = _status_of(pod, container)
    who = f'container "{container}" in pod "{name}"'
    if entry is None:
        raise E.bad_request(f"{who} is not available")
    state = entry.get("state") or {}
    last = (entry.get("lastState") or {}).get("terminated")
    if previous:
        if not last or not last.get("containerID"):
            raise E.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        return 200, b""
    if state.get("running") is not None:
        return 200, b""
    terminated = state.get("terminated")
    if terminated is not None:
        if terminated.get("containerID") or (last and last.get("containerID")):
            return 200, b""
        raise E.bad_request(f"{who} is terminated")
    if last is not None:
        if not last.get("containerID"):
            raise E.bad_request(f"{who} is terminated")
        return 200, b""
    waiting = state.get("waiting")
    if waiting is not None:
        reason = waiting.get("reason", "")
        if reason == "ErrImagePull":
            raise E.bad_request(f"{who} is waiting to start: image can't be pulled")
        if reason == "ImagePullBackOff":
            raise E.bad_request(f"{who} is waiting to start: trying and failing to pull image")
        raise E.bad_request(f"{who} is waiting to start: {reason}")
    raise E.bad_request(f"{who} is waiting to start - no logs yet")


def connect(store: Store, ns: str, name: str, subresource: str, query: dict[str, str]) -> NoReturn:
    """``exec`` / ``attach`` / ``portforward``: always raises (see the module docstring)."""
    pod = store.get(store.rt("", "pods"), ns, name).obj
    if subresource != "portforward":
        _container(pod, query.get("container", ""))
    if not (pod.get("spec") or {}).get("nodeName"):
        raise E.bad_request(f"pod {name} does not have a host assigned")
    raise E.bad_request(
        f"pod {name}: the simulator runs no containers, so {subresource} has no kubelet to reach"
    )
