"""The retry vocabulary: what a sync may say about its own failure.

Controllers and cloud implementations raise; only
:func:`controller.runtime.workqueue.process_next` interprets (upstream's
``processNextWorkItem``/``handleErr`` pattern, kept in one place so no controller requeues
itself):

* :class:`RetryAfter` is temporary with a delay the raiser knows (AWS throttling): the item is
  parked for exactly that long instead of the exponential backoff;
* :class:`PermanentError` is an error retrying cannot fix until the object itself changes: the
  error hook records it (a Warning event) and the item's backoff is forgotten, but it is not
  requeued; the informer's next add or update for the object enqueues it again;
* any other exception is temporary: requeued with per-item exponential backoff (5 s to 300 s).

The vocabulary lives in the runtime, not in the cloud contract (``controller.cloud``
re-exports :class:`RetryAfter` for implementations), so the work queue depends on nothing of
the domain. The upstream controllers this project follows (service, cloud-node,
cloud-node-lifecycle) retry every error, invalid Service annotations included, so none of them
raises :class:`PermanentError`; it is here for a controller whose failures are final.
"""

from __future__ import annotations

from typing import Literal

# What the work queue did with one sync (``SyncResult.outcome``, the ``outcome`` metric label).
Outcome = Literal["success", "retry-after", "error", "permanent"]


class RetryAfter(Exception):
    """Temporary: ask the work queue to retry after ``delay`` seconds, not the backoff."""

    def __init__(self, delay: float, message: str) -> None:
        if delay < 0:
            raise ValueError(f"RetryAfter: delay must be >= 0 seconds, got {delay}")
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Retrying cannot help until the object changes: report it, forget it, do not requeue."""
