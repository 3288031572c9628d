"""DescribeInstances by id, batched across callers as upstream batches it.

Neighbours: :class:`controller.aws.instances.AWSInstances` looks every node's instance up by
id through :class:`DescribeInstanceBatcher`; the window itself is the runtime's generic
:class:`~controller.runtime.batcher.Batcher`.

Upstream (kubernetes/cloud-provider-aws ``pkg/providers/v1/describe_instance_batch.go``,
63ec440c, same at v1.33.0; PR #1388): ``InstanceExistsByProviderID``,
``InstanceShutdownByProviderID`` and ``getInstanceByID`` (``InstanceMetadata``) send one id
each into a batcher with a 100 ms idle window, a 1 s longest wait and at most 500 requests,
grouped by their filters (none on these paths). The batch is one ``DescribeInstances`` naming
every id; its instances go back to the caller whose id they carry, and an id the answer lacks
gets no instance and no error. When the batched call fails, every request is sent again on
its own, so the callers whose ids exist still get their instances and only the caller of a
missing id gets ``InvalidInstanceID.NotFound`` (EC2 fails the whole call when any one id
does not exist or is malformed).

Differences, none in what a caller gets: ids asked twice in one window (an existence and a
shutdown check of one node) are named once in the batched call; a batch of a single id whose
call failed is not sent a second time (upstream repeats the identical call); the one-by-one
calls after a failed batch run on at most :data:`FALLBACK_WORKERS` threads (upstream: one
goroutine each).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from controller.aws.clients import AWSError
from controller.runtime.batcher import Batcher, Result

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import InstanceTypeDef

log = logging.getLogger(__name__)

#: upstream ``newdescribeInstanceBatcher``: IdleTimeout, MaxTimeout, MaxItems
IDLE_SECONDS = 0.1
MAX_WAIT_SECONDS = 1.0
MAX_ITEMS = 500
FALLBACK_WORKERS = 10


def _describe(ec2: EC2Client, ids: list[str]) -> dict[str, InstanceTypeDef]:
    """One ``DescribeInstances`` naming ``ids`` (following ``NextToken`` if EC2 pages it)."""
    found: dict[str, InstanceTypeDef] = {}
    kwargs: dict[str, Any] = {"InstanceIds": ids}
    while True:
        resp = ec2.describe_instances(**kwargs)
        for res in resp.get("Reservations", []):
            for inst in res.get("Instances", []):
                found.setdefault(inst.get("InstanceId", ""), inst)
        token = resp.get("NextToken")
        if not token:
            return found
        kwargs["NextToken"] = token


class DescribeInstanceBatcher:
    """Instances by id, one ``DescribeInstances`` per window for all concurrent callers."""

    def __init__(
        self,
        ec2: EC2Client,
        *,
        idle: float = IDLE_SECONDS,
        max_wait: float = MAX_WAIT_SECONDS,
        max_items: int = MAX_ITEMS,
    ) -> None:
        self.ec2 = ec2
        self._batcher: Batcher[str, InstanceTypeDef] = Batcher(
            "describe_instance",
            self._execute,
            idle=idle,
            max_wait=max_wait,
            max_items=max_items,
        )

    def get(self, instance_id: str) -> InstanceTypeDef | None:
        """The instance, ``None`` when EC2's answer lacks it; raises the call's error
        (``InvalidInstanceID.NotFound`` as a ``ClientError`` when it does not exist)."""
        return self._batcher.add(instance_id)

    def _execute(self, ids: list[str]) -> list[Result[InstanceTypeDef]]:
        unique = list(dict.fromkeys(ids))
        try:
            found = _describe(self.ec2, unique)
        except AWSError as exc:
            if len(unique) == 1:
                return [Result(error=exc)] * len(ids)
            log.info(
                "batched DescribeInstances of %d ids failed (%s); asking for each on its own",
                len(unique),
                exc,
            )
            with ThreadPoolExecutor(min(FALLBACK_WORKERS, len(unique))) as pool:
                singles = dict(zip(unique, pool.map(self._one, unique), strict=True))
            return [singles[i] for i in ids]
        return [Result(output=found.get(i)) for i in ids]

    def _one(self, instance_id: str) -> Result[InstanceTypeDef]:
        try:
            return Result(output=_describe(self.ec2, [instance_id]).get(instance_id))
        except AWSError as exc:
            return Result(error=exc)
