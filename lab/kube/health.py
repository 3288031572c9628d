"""``/healthz``, ``/livez`` and ``/readyz``, as kube-apiserver's healthz handlers answer them.

Format from ``k8s.io/apiserver/pkg/server/healthz`` (``handleRootHealth``): plain ``ok``, or with
``?verbose`` one ``[+]<check> ok`` line per check and ``<name> check passed``; ``?exclude=<check>``
marks a check ``excluded: ok`` (and warns about names that match none); a failing check makes
the answer 500 with every line, ``[-]<check> failed: reason withheld`` and ``<name> check
failed``; ``/<endpoint>/<check>`` answers one check. The simulator lists the checks it has a
counterpart for (named as upstream): its store stands for etcd, its seeding of namespaces and
the ``kubernetes`` Service for the post-start hooks that do that, and ``shutdown`` fails on
``/readyz`` once the server is stopping, as a real server's does during graceful termination.
A real server lists more post-start hooks; ``lab/kube/README.md`` says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

TEXT = "text/plain; charset=utf-8"
ENDPOINTS = ("/healthz", "/livez", "/readyz")

Check = tuple[str, Callable[[], bool]]


def _always() -> bool:
    return True


def checks(endpoint: str, stopping: threading.Event) -> list[Check]:
    common: list[Check] = [
        ("ping", _always),
        ("log", _always),
        ("etcd", _always),
        ("poststarthook/start-system-namespaces-controller", _always),
        ("poststarthook/bootstrap-controller", _always),
    ]
    if endpoint != "/readyz":
        return common
    return [
        *common[:3],
        ("etcd-readiness", _always),
        ("informer-sync", _always),
        *common[3:],
        ("shutdown", lambda: not stopping.is_set()),
    ]


def is_health_path(path: str) -> bool:
    return any(path == e or path.startswith(e + "/") for e in ENDPOINTS)


def answer(target: str, stopping: threading.Event) -> tuple[int, str] | None:
    """(status, text) for a health request, or None for a path that is not one (404)."""
    parts = urlsplit(target)
    path = parts.path
    endpoint = next(e for e in ENDPOINTS if path == e or path.startswith(e + "/"))
    listed = checks(endpoint, stopping)
    rest = path[len(endpoint) :].strip("/")
    if rest:
        for name, check in listed:
            if name == rest:
                return (200, "ok") if check() else (500, "internal server error: check failed\n")
        return None
    query = parse_qs(parts.query, keep_blank_values=True)
    excluded = set(query.get("exclude", []))
    lines = []
    failed = False
    for name, check in listed:
        if name in excluded:
            excluded.discard(name)
            lines.append(f"[+]{name} excluded: ok\n")
        elif check():
            lines.append(f"[+]{name} ok\n")
        else:
            failed = True
            lines.append(f"[-]{name} failed: reason withheld\n")
    if excluded:
        names = ",".join(f'"{x}"' for x in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
    label = endpoint.lstrip("/")
    if failed:
        return 500, "".join(lines) + f"{label} check failed\n"
    if "verbose" not in query:
        return 200, "ok"
    return 200, "".join(lines) + f"{label} check passed\n"
