"""The one lifecycle every lab component shares, in two flavours, and the helpers under it.

Components (the AWS endpoint, the metadata service, the API simulator, the controller, the
debug session) follow one contract (conventions.md, "Components are context managers"): bind
port 0 and read the real port back, ``start()`` returns the component and is idempotent,
readiness is awaited with an explicit timeout, a readiness failure raises
:class:`ComponentNotReady` carrying the component's recent log, ``stop()`` is idempotent.

* :class:`ServerComponent` (:mod:`.server`): an HTTP server in a background thread of this
  process; it also hands out the exceptions it caught while serving
  (``take_internal_errors()``), so a fixture can fail the test that caused one.
* :mod:`.transport`: how every lab server reads a request (``GuardedHandler``): deadlines for
  a request's head and body, the TLS handshake in the connection's thread, Go's strict
  framing, sizes at the door.
* :class:`ChildProcess` (:mod:`.child`): ``python -m <module> ...`` as a child, ready once it
  prints ``ccm-lab <what> ready at <URL>`` (:func:`serve_until_signal` is the ``__main__``
  skeleton that prints it); ``detach=True`` outlives the caller, named by a
  :class:`ProcessRef` (:mod:`.processes`).

This package is the bottom of the ``lab`` layers: it imports nothing else of the lab.
"""

from __future__ import annotations

from lab.component.base import (
    ComponentNotReady,
    InternalErrors,
    RecentLog,
    ready_line,
    tail,
    wait_until,
)
from lab.component.child import ChildProcess
from lab.component.processes import (
    ProcessRef,
    pid_alive,
    process_start_time,
    spawn_detached,
    wait_exit,
)
from lab.component.server import ServerComponent, serve_until_signal

__all__ = [
    "ChildProcess",
    "ComponentNotReady",
    "InternalErrors",
    "ProcessRef",
    "RecentLog",
    "ServerComponent",
    "pid_alive",
    "process_start_time",
    "ready_line",
    "serve_until_signal",
    "spawn_detached",
    "tail",
    "wait_exit",
    "wait_until",
]
