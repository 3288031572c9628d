"""moto's process-global state as the lab handles it: the dispatcher, reset, checkpoint copies.

Role: moto keeps every backend in module-level dicts (``BackendDict``), shared by every
endpoint in the process. This module is the lab's one handle on them: :func:`moto_dispatcher`
(moto's WSGI dispatcher, built once per process, with :mod:`lab.aws.motopatches` applied
first), :func:`reset_moto` (drop every backend), :func:`live_backends` /
:func:`copy_backends` / :func:`install_backends` (what a checkpoint takes and a restore puts
back, :class:`Checkpoint`), and :func:`call_wsgi` (run moto's app for one request and keep
its answer).

Design: dropping and copying backends directly is several times faster than moto's own reset
(which rebuilds each backend's default AMIs only to throw them away); the default AMI
catalogue is copied the cheap way :mod:`lab.aws.motopatches` shares it. Nothing here knows a
request: :class:`lab.aws.app.AwsLab` owns the lock these run under.

Neighbours: used by :mod:`lab.aws.app` (reset, checkpoint, restore, warm-up) and the moto
dispatch stage (:mod:`lab.aws.motodispatch`); patches from :mod:`lab.aws.motopatches`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lab.aws import botodata, motopatches
from lab.aws.protocol import WireResponse

_DISPATCHER_LOCK = threading.Lock()
_DISPATCHER: list[Any] = []


def moto_dispatcher() -> Any:
    """moto's ``DomainDispatcherApplication``, one per process.

    moto's state is process-global anyway; sharing the dispatcher also shares its per-service
    Flask apps, which take a second or so to build, so a second endpoint starts fast.
    botocore's data is read once per process (:mod:`lab.aws.botodata`), before moto loads.
    """
    botodata.share_loader()
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    with _DISPATCHER_LOCK:
        if not _DISPATCHER:
            motopatches.apply()
            botodata.share_with_moto()
            _DISPATCHER.append(DomainDispatcherApplication(create_backend_app))
        return _DISPATCHER[0]


#: where moto keeps each service the endpoint serves (module, backend dict)
_BACKENDS = {
    "ec2": ("moto.ec2.models", "ec2_backends"),
    "elb": ("moto.elb.models", "elb_backends"),
    "elbv2": ("moto.elbv2.models", "elbv2_backends"),
    "sts": ("moto.sts.models", "sts_backends"),
}


def served_services() -> frozenset[str]:
    """The services the moto endpoint answers (``elb``/``elbv2``: ``elasticloadbalancing``)."""
    return frozenset(_BACKENDS)


def serves_region(service: str, account: str, region: str) -> bool:
    """Whether moto has ``region`` for ``service`` (a region of botocore's partitions; moto
    keeps STS per partition, so its regions are EC2's)."""
    import importlib

    where = _BACKENDS.get("ec2" if service == "sts" else service)
    if where is None:
        return False
    backends = getattr(importlib.import_module(where[0]), where[1])
    return region in backends[account].regions


@dataclass(frozen=True)
class Checkpoint:
    """A private copy of moto's backends (``(backend dict, account, region, backend)``) and
    of its id generator's state; restored by copying again, so it stays as taken."""

    backends: list[tuple[Any, str, str, Any]]
    random_state: Any


def live_backends() -> list[tuple[Any, str, str, Any]]:
    """Every region backend moto has built in this process, with where it lives."""
    from moto.core.base_backend import BackendDict, backend_lock

    with backend_lock:
        return [
            (backends, account, region, backend)
            for backends in list(vars(BackendDict)["_instances"])
            for account, per_region in list(dict.items(backends))
            for region, backend in list(dict.items(per_region))
        ]


def copy_backends(items: list[tuple[Any, str, str, Any]]) -> list[tuple[Any, str, str, Any]]:
    """A deep copy of region backends, made in one pass so references between them hold.

    The default AMI catalogue (``motopatches.share_default_amis``) is most of an EC2 backend:
    its images and their snapshots are copied the cheap way that function uses (the object, then its
    mutable parts), each pointed at the copied backend; everything else is ``copy.deepcopy``
    (~10 ms for a seeded lab, against ~0.5 s with the catalogue deep-copied).
    """
    import copy

    memo: dict[int, Any] = {}
    cheap: list[tuple[Any, Any]] = []  # (copy, the backend it belongs to)
    for _backends, _account, _region, backend in items:
        for ami, snapshot in motopatches.catalogue_of(backend):
            twin, snap = motopatches.twin(ami, snapshot)
            memo[id(ami)], memo[id(snapshot)] = twin, snap
            cheap += [(twin, backend), (snap, backend)]
    copies = copy.deepcopy([backend for *_, backend in items], memo)
    for twin, backend in cheap:
        twin.ec2_backend = memo[id(backend)]
    return [(b, a, r, c) for (b, a, r, _), c in zip(items, copies, strict=True)]


def install_backends(items: list[tuple[Any, str, str, Any]]) -> None:
    """Put region backends in place (after :func:`reset_moto`), as moto's lazy creation would."""
    from moto.core.base_backend import backend_lock

    for backends, account, region, backend in items:
        per_region = backends[account]  # builds the account's dict and registers ``backends``
        with backend_lock:
            dict.__setitem__(per_region, region, backend)


def reset_moto() -> None:
    """Drop every moto backend of every service (what ``POST /moto-api/reset`` does).

    moto's own reset first re-initialises each region backend (loading ~1,300 default AMIs per
    EC2 region) and then throws them away; dropping the dicts is equivalent and several times
    faster. Backends are created again lazily on the next call.
    """
    from moto.core.base_backend import BackendDict, backend_lock
    from moto.core.model_instances import reset_model_data

    instances: list[Any] = vars(BackendDict)["_instances"]
    with backend_lock:
        for backend in instances:
            backend.clear()
        instances.clear()
    reset_model_data()


def call_wsgi(app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> WireResponse:
    """Run a WSGI app to completion and capture its response."""
    captured: dict[str, Any] = {}
    chunks: list[bytes] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = list(headers)
        return chunks.append

    result = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return WireResponse(captured["status"], captured["headers"], b"".join(chunks))
