"""The tagging controller: tag each Node's instance with the configured tags, untag on delete.

Follows kubernetes/cloud-provider-aws ``pkg/controllers/tagging`` (63ec440c, same at
v1.33.0), off unless ``--controllers`` names ``tagging`` (upstream adds it to
``ControllersDisabledByDefault``), with its options (``pkg/controllers/options``):

* Node add enqueues ``ADD``; an update enqueues ``ADD`` only when the Node's label
  ``k8s.io/cloud-provider-aws`` is not the MD5 of the configured tags (sorted ``k=v``
  joined by ``,``); delete enqueues ``DELETE``. A work item is (name, providerID, action),
  so an ``ADD`` and a ``DELETE`` of one Node are two items.
* ``ADD``: the Node is read from the informer (gone: done), skipped when already labelled
  with the checksum, its instance tagged, then the Node labelled with the checksum. An
  instance EC2 does not know is retried while the Node is younger than five minutes
  (``CreateTags`` is eventually consistent after launch) and skipped after that; a malformed
  id (``InvalidID``, e.g. KWOK nodes) is skipped.
* ``DELETE``: the tags are removed from the instance where it still carries them with these
  values; a missing instance is done, a malformed id skipped.
* Fargate nodes are skipped; a providerID that cannot be read is logged and dropped.
* Failures are retried with per-item backoff (5 ms doubling to 1000 s, and no faster than a
  10 per second, burst 100, token bucket: client-go's default controller rate limiter) up to
  nine requeues, then dropped with an error log. With ``--tagging-controller-rate-limit`` and
  ``--tagging-controller-burst-limit`` both positive, that bucket replaces the default one and
  every enqueue goes through the limiter too (upstream's ``AddRateLimited`` in
  ``enqueueNode``), so it counts toward the nine as upstream's does.

Not ported: upstream's two Prometheus metrics (work item errors, initial tagging delay).
Only the ``instance`` resource exists upstream and here.

Neighbours: it calls the cloud through ``controller.cloud.InstanceTags``, which
:class:`controller.aws.tags.AWSInstanceTags` implements on EC2; :mod:`controller.app` builds
its options from the flags (:func:`tagging_options`). Tag logic sits in exactly two modules, by
layer: this generic one (which Nodes to tag and when, the work queue, the label, the flags'
rules) and :mod:`controller.aws.tags` (EC2's tag calls and every AWS tag name). They cannot be
one: the layers contract forbids a generic controller to import ``controller.aws``.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from controller.cloud import (
    Cloud,
    CloudError,
    InstanceID,
    InstanceNotFound,
    InstanceTags,
    InvalidInstanceID,
    Node,
)
from controller.nodeutil import update_node
from controller.runtime.clock import Clock, RealClock
from controller.runtime.informer import EventSource, Handlers, Store
from controller.runtime.kube import KubeClient, Obj
from controller.runtime.retry import PermanentError
from controller.runtime.workqueue import (
    ControllerMetrics,
    ExponentialBackoff,
    RateLimitingQueue,
    SyncResult,
    process_next,
    run_worker,
)

log = logging.getLogger(__name__)

CONTROLLER = "tagging"
TAGGING_LABEL = "k8s.io/cloud-provider-aws"
MAX_REQUEUES = 9
GRACE_PERIOD = 300.0  # newNodeEventualConsistencyGracePeriod
ADD, DELETE = "ADD", "DELETE"
RESOURCE_INSTANCE = "instance"
SUPPORTED_RESOURCES = (RESOURCE_INSTANCE,)
# AWS tag restrictions (EC2 user guide, "Tag your Amazon EC2 resources": tag restrictions)
MAX_TAGS, MAX_KEY_LENGTH, MAX_VALUE_LENGTH, RESERVED_PREFIX = 50, 128, 256, "aws:"


class TaggingOptionsError(ValueError):
    """A tagging controller option is invalid; the message names the flag and the value."""


def parse_tags(text: str, into: dict[str, str] | None = None) -> dict[str, str]:
    """One ``--tags`` value as spf13/pflag's ``stringToStringValue.Set``
    (``string_to_string.go``) reads it: no ``=`` is an error; exactly one makes the whole value
    one ``key=value`` pair (quotes trimmed, so ``a=1,b`` is ``{"a": "1,b"}``); more are a CSV
    record of pairs, each split at its first ``=``. Repeated flags merge. Raises
    :class:`TaggingOptionsError` naming the offending text. (Python's CSV reader is more
    lenient than Go's about bare quotes inside unquoted fields.)"""
    out = dict(into or {})
    if "=" not in text:
        raise TaggingOptionsError(f"--tags: {text!r} must be formatted as key=value")
    items = [text.strip('"')] if text.count("=") == 1 else next(csv.reader([text]))
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise TaggingOptionsError(f"--tags: {item!r} must be formatted as key=value")
        out[key] = value
    return out


@dataclass(frozen=True)
class TaggingOptions:
    """Upstream ``TaggingControllerOptions`` (flags of the same names)."""

    tags: Mapping[str, str] = field(default_factory=dict)
    resources: tuple[str, ...] = ()
    rate_limit: float = 0.0
    burst_limit: int = 0
    workers: int = 1
    batching: bool = False

    def validate(self) -> None:
        """Upstream ``Validate``, plus AWS's tag restrictions, which upstream leaves to
        ``CreateTags`` (it then fails every Node, nine retries each)."""
        if not self.tags:
            raise TaggingOptionsError("--tags must not be empty and must be a form of key=value")
        if not self.resources:
            raise TaggingOptionsError("--resources must not be empty")
        if self.rate_limit < 0:
            raise TaggingOptionsError(
                "--tagging-controller-rate-limit should not be less than zero, "
                f"got {self.rate_limit}"
            )
        if self.burst_limit < 0:
            raise TaggingOptionsError(
                f"--tagging-controller-burst-limit should not be less than zero, "
                f"got {self.burst_limit}"
            )
        if self.workers <= 0:
            raise TaggingOptionsError(
                f"--tagging-controller-concurrent-node-syncs must be a positive number, "
                f"got {self.workers}"
            )
        for r in self.resources:
            if r not in SUPPORTED_RESOURCES:
                raise TaggingOptionsError(
                    f"--resources: {r!r} is not a supported resource "
                    f"(supported: {', '.join(SUPPORTED_RESOURCES)})"
                )
        if len(self.tags) > MAX_TAGS:
            raise TaggingOptionsError(f"--tags: {len(self.tags)} tags, AWS allows {MAX_TAGS}")
        for key, value in self.tags.items():
            if not key:
                raise TaggingOptionsError(f"--tags: empty key in {key}={value!r}")
            if len(key) > MAX_KEY_LENGTH:
                raise TaggingOptionsError(
                    f"--tags: key {key!r} is longer than {MAX_KEY_LENGTH} characters"
                )
            if len(value) > MAX_VALUE_LENGTH:
                raise TaggingOptionsError(
                    f"--tags: value of {key!r} is longer than {MAX_VALUE_LENGTH} characters"
                )
            for what, text in (("key", key), ("value", value)):
                if text.lower().startswith(RESERVED_PREFIX):
                    raise TaggingOptionsError(
                        f"--tags: {what} {text!r} starts with {RESERVED_PREFIX!r}, "
                        "which AWS reserves"
                    )

    @property
    def rate_limited(self) -> bool:
        return self.rate_limit > 0 and self.burst_limit > 0


def tags_checksum(tags: Mapping[str, str]) -> str:
    """Upstream ``getChecksumOfTags``: MD5 of the sorted ``k=v`` items joined by ``,``."""
    joined = ",".join(sorted(f"{k}={v}" for k, v in tags.items()))
    return hashlib.md5(joined.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class WorkItem:
    name: str
    provider_id: str
    action: str

    def __str__(self) -> str:
        return f"[Node: {self.name}, Action: {self.action}]"


class TokenBucket:
    """golang.org/x/time/rate's reservation arithmetic: ``rate`` tokens a second, at most
    ``burst`` saved; :meth:`reserve` takes one and says how long its holder must wait."""

    def __init__(self, rate: float, burst: int, *, clock: Clock) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._tokens = float(burst)
        self._at = clock.monotonic()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        with self._lock:
            now = self.clock.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= 1
            return max(0.0, -self._tokens / self.rate)


class _MaxOfBackoff(ExponentialBackoff[WorkItem]):
    """Upstream ``NewTypedMaxOfRateLimiter(exponential, bucket)``: the longer of the two."""

    def __init__(self, bucket: TokenBucket) -> None:
        super().__init__(0.005, 1000.0)
        self.bucket = bucket

    def when(self, item: WorkItem) -> float:
        return max(super().when(item), self.bucket.reserve())


def _created(node: Node) -> datetime | None:
    try:
        return datetime.fromisoformat(node.creation_timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None


class TaggingController:
    def __init__(
        self,
        kube: KubeClient,
        cloud: Cloud,
        *,
        nodes: Store,
        options: TaggingOptions,
        clock: Clock | None = None,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        tags = cloud.instance_tags()
        if tags is None:
            raise ValueError(f"tagging controller does not support {cloud.provider_name} provider")
        self.kube = kube
        self.cloud_tags: InstanceTags = tags
        self.nodes = nodes
        self.options = options
        self.tags = dict(options.tags)
        self.checksum = tags_checksum(self.tags)
        self.clock: Clock = clock or RealClock()
        self._metrics = metrics
        # upstream: the configured bucket, else DefaultTypedControllerRateLimiter's 10 qps /
        # 100 burst (which then only paces retries: enqueues do not go through it)
        bucket = (
            TokenBucket(options.rate_limit, options.burst_limit, clock=self.clock)
            if options.rate_limited
            else TokenBucket(10.0, 100, clock=self.clock)
        )
        self.queue: RateLimitingQueue[WorkItem] = RateLimitingQueue(
            "tagging-controller", clock=self.clock, backoff=_MaxOfBackoff(bucket), metrics=metrics
        )

    # -- events ---------------------------------------------------------------------------
    def register(self, nodes: EventSource) -> None:
        nodes.add_handlers(
            Handlers(
                on_add=lambda obj: self.enqueue(obj, ADD),
                on_update=lambda _old, new: self._on_update(new),
                on_delete=lambda obj: self.enqueue(obj, DELETE),
            )
        )

    def _on_update(self, obj: Obj) -> None:
        if not self.tagging_required(Node.from_api(obj)):
            log.debug("skip queueing node %s: tagged earlier", obj["metadata"]["name"])
            return
        self.enqueue(obj, ADD)

    def enqueue(self, obj: Obj, action: str) -> None:
        node = Node.from_api(obj)
        item = WorkItem(node.name, node.provider_id, action)
        if self.options.rate_limited:
            self.queue.add_rate_limited(item)
            log.info("Added %s to the workqueue (rate-limited)", item)
        else:
            self.queue.add(item)
            log.info("Added %s to the workqueue (without any rate-limit)", item)

    def tagging_required(self, node: Node) -> bool:
        return node.labels.get(TAGGING_LABEL) != self.checksum

    # -- running --------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> list[threading.Thread]:
        threads = [
            threading.Thread(
                target=run_worker,
                args=(self.queue, self.sync, stop),
                kwargs={"metrics": self._metrics},
                name=f"tagging-worker-{i}",
                daemon=True,
            )
            for i in range(self.options.workers)
        ]
        for t in threads:
            t.start()
        return threads

    def shut_down(self) -> None:
        self.queue.shut_down()

    def drain(self, limit: int = 1000) -> list[SyncResult]:
        """Process what is ready now (tests)."""
        out: list[SyncResult] = []
        while len(out) < limit:
            r = process_next(self.queue, self.sync, block=False)
            if r is None:
                break
            out.append(r)
        return out

    # -- sync -----------------------------------------------------------------------------
    def sync(self, item: WorkItem) -> None:
        try:
            instance_id = self.cloud_tags.instance_id(item.provider_id)
        except CloudError as exc:
            log.error("error in getting instanceID for node %s, error: %s", item.name, exc)
            return
        if instance_id is None:
            # upstream names the providerID's instance segment and its variant
            log.info(
                "Skip processing the node %s since it is a fargate node",
                item.provider_id.rsplit("/", 1)[-1],
            )
            return
        try:
            if item.action == ADD:
                self._tag(item, instance_id)
            else:
                self._untag(item, instance_id)
        except Exception as exc:
            retries = self.queue.num_requeues(item)
            if retries < MAX_REQUEUES:
                # upstream's lines for a failed attempt that is requeued
                log.error(
                    "error processing work item '%s': %s, requeuing count %d", item, exc, retries
                )
                log.error("Error occurred while processing %s", item)
                raise
            log.error("error processing work item %s: %s, requeuing count exceeded", item, exc)
            raise PermanentError(f"{item}: {exc} (gave up after {retries} requeues)") from exc
        log.info("Finished processing %s", item)

    def _tag(self, item: WorkItem, instance_id: InstanceID) -> None:
        obj = self.nodes.get(item.name)
        if obj is None:
            return  # deleted since: nothing to tag
        node = Node.from_api(obj)
        if not self.tagging_required(node):
            log.info("Skip tagging node %s since it was already tagged earlier.", node.name)
            return
        try:
            self.cloud_tags.tag_instance(instance_id, self.tags, batched=self.options.batching)
        except InstanceNotFound:
            if self._within_grace(node):
                raise RuntimeError(
                    f"EC2 instance {instance_id} for node {node.name} does not exist, but node "
                    "is within eventual consistency grace period"
                ) from None
            log.info(
                "Skip tagging since EC2 instance %s for node %s does not exist",
                instance_id,
                node.name,
            )
            return
        except InvalidInstanceID:
            log.info(
                "Skip tagging since EC2 instance %s for node %s has an invalid instance ID",
                instance_id,
                node.name,
            )
            return
        except Exception as exc:
            log.error(
                "Error in tagging EC2 instance %s for node %s, error: %s",
                instance_id,
                node.name,
                exc,
            )
            raise
        log.info(
            "Successfully tagged %s with %s. "
            "Labeling the nodes with tagging controller labels now.",
            instance_id,
            self.tags,
        )

        def label(o: Obj) -> bool:
            labels = o.setdefault("metadata", {}).setdefault("labels", {}) or {}
            o["metadata"]["labels"] = labels
            if labels.get(TAGGING_LABEL) == self.checksum:
                return False
            labels[TAGGING_LABEL] = self.checksum
            return True

        update_node(self.kube, node.name, label)
        log.info("Successfully labeled node %s with %s.", node.name, {TAGGING_LABEL: self.checksum})

    def _untag(self, item: WorkItem, instance_id: InstanceID) -> None:
        try:
            self.cloud_tags.untag_instance(instance_id, self.tags, batched=self.options.batching)
        except InvalidInstanceID:
            log.info(
                "Skip untagging since EC2 instance %s for node %s has an invalid instance ID",
                instance_id,
                item.name,
            )
            return
        except Exception as exc:
            log.error(
                "Error in untagging EC2 instance %s for node %s, error: %s",
                instance_id,
                item.name,
                exc,
            )
            raise
        log.info("Successfully untagged %s with %s", instance_id, self.tags)

    def _within_grace(self, node: Node) -> bool:
        created = _created(node)
        return created is not None and (self.clock.now() - created).total_seconds() < GRACE_PERIOD


def tagging_options(
    tags: Sequence[str],
    resources: Sequence[str],
    *,
    rate_limit: float = 0.0,
    burst_limit: int = 0,
    workers: int = 1,
    batching: bool = False,
) -> TaggingOptions:
    """Options from the repeated ``--tags`` / ``--resources`` flag values."""
    merged: dict[str, str] = {}
    for text in tags:
        merged = parse_tags(text, merged)
    return TaggingOptions(
        tags=merged,
        resources=tuple(resources),
        rate_limit=rate_limit,
        burst_limit=burst_limit,
        workers=workers,
        batching=batching,
    )
