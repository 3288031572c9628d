"""The collector around a lab process's start and end: paused while it starts, skipped at exit.

Role: a lab's start allocates millions of objects that live as long as the process (moto's
models and catalogues, botocore's service models, the Kubernetes client's models); Python's
cyclic collector, run every 700 allocations, walks the growing heap again and again meanwhile
(about a third of a lab start's CPU, measured: ``benchmarks/lab.py``). And a process ending
normally tears its heap down object by object (seconds for a lab daemon) although nothing of
it is needed any more. Here:

* :func:`collector_paused`: no collection inside the block (the previous setting restored
  after); nothing is freed later than it would be by reference counting, only cycles wait;
  with ``keep``, what is alive afterwards stays out of the collector's sight until
  :func:`thaw` (a lab's start: its objects live until its stop);
* :func:`settle_heap`: one collection, then what survived is kept out of the collector's sight
  (``gc.freeze``; what a long-lived server does once its start is over) and collection resumes;
* :func:`exit_now`: end the process once its work is done and its threads are joined, running
  the ``atexit`` handlers and flushing logging and the standard streams first, without the
  teardown (``os._exit``).

Neighbours: ``lab.compose.lab`` (a lab's start), ``lab.daemon`` (the daemon process),
``lab.component.forkserver`` (its preload). A bottom-layer module: nothing of the lab.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn


@contextlib.contextmanager
def collector_paused(*, keep: bool = False) -> Iterator[None]:
    """No cyclic garbage collection inside the block; afterwards the collector is as before.

    ``keep``: when the block ends without an error, every object alive is moved out of the
    collector's sight (``gc.freeze``) instead of being walked, all at once, by the next
    collection; :func:`thaw` gives them back (what a lab's ``stop()`` does)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()


def thaw() -> None:
    """What :func:`collector_paused` kept (or :func:`settle_heap` froze) is collected again."""
    gc.unfreeze()


def settle_heap() -> None:
    """Collect once, keep every object alive now out of later collections' sight, and
    collect from now on (for a process whose start is over and whose heap now stays)."""
    gc.collect()
    gc.freeze()
    gc.enable()


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` (call it from the main thread): what a normal exit does
    first is done (executors told to finish, non-daemon threads joined, ``atexit`` handlers
    run, logging and the standard streams flushed); the heap is not torn down."""
    try:
        # the interpreter's own first step at exit (thread-pool workers told to end, then
        # every non-daemon thread joined); private, but what Py_Finalize calls
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os._exit(code)
