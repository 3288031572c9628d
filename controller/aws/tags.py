"""Tags on AWS resources: the cluster's ownership tags, and the tagging controller's EC2 calls.

Every tag rule of the AWS provider is here. Neighbours: every module that creates or filters
AWS resources (security groups, load balancers, subnets, instances) reads and writes tags
through :func:`tag_map`, :func:`tag_list` and :class:`ClusterTags`;
:class:`controller.tagging.TaggingController` calls :class:`AWSInstanceTags` through
``controller.cloud.InstanceTags``, with the runtime's :class:`~controller.runtime.batcher.Batcher`
for the optional batching; :mod:`controller.aws.providerid` names the instance behind a Node.

Why two modules of tag logic, not one: the tagging *controller* (which Nodes to tag, when, the
work queue, the label) is generic and lives in :mod:`controller.tagging`, which the layers
contract forbids to import ``controller.aws``; everything that knows EC2's tag calls and the
cluster's tag names is AWS and lives here.

Ownership (upstream ``tags.go``): a resource is the cluster's when it carries the key
``kubernetes.io/cluster/<id>`` (any value) or, in legacy-tag mode, ``KubernetesCluster=<id>``;
it is *owned* (safe to delete) only with the value ``owned`` or the legacy tag. Everything the
controller creates gets the owned tag plus ``kubernetes.io/service-name`` so a restarted
controller can find it again. These rules are pure: tag lists in, booleans and tag lists out.

Node instance tags (kubernetes/cloud-provider-aws 63ec440c, same at v1.33.0): ``TagResource`` /
``UntagResource`` in ``pkg/providers/v1/tags.go`` send one ``CreateTags`` / ``DeleteTags``
naming the instance and every configured tag with its value; ``DeleteTags`` with a value
removes a tag only where the instance carries that value, so a tag someone changed since is
kept. ``UntagResource`` treats ``InvalidInstanceID.NotFound`` as done. With
``--tagging-controller-enable-batching`` (``create_tags_batch.go``, ``delete_tags_batch.go``)
requests with the same tag set are merged, 100 ms idle, 1 s at most, 50 instances, into one
call naming every instance; when that call fails each instance is tagged on its own, so one
bad id does not fail the others. The instance id comes from the providerID as for every node
path (``MapToAWSInstanceID``); Fargate nodes have no instance to tag (``variant``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.aws.clients import AWSError, error_code, translate
from controller.aws.providerid import FARGATE_PREFIX, parse_provider_id
from controller.cloud import InstanceID, InstanceNotFound, InvalidInstanceID
from controller.runtime.batcher import Batcher, Result

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

log = logging.getLogger(__name__)

# -- cluster ownership tags -----------------------------------------------------------------------

CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
LEGACY_CLUSTER_TAG = "KubernetesCluster"
SERVICE_NAME_TAG = "kubernetes.io/service-name"
OWNED = "owned"


def tag_map(tags: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    """EC2/ELB ``[{"Key": k, "Value": v}]`` to a dict; a missing key or value reads as ``""``
    (Go's ``aws.ToString`` of nil, as upstream reads tags)."""
    return {str(t.get("Key", "")): str(t.get("Value", "")) for t in tags or ()}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


@dataclass(frozen=True)
class ClusterTags:
    """Tag rules for one cluster id (``legacy``: KubernetesClusterTag was configured)."""

    cluster_id: str
    legacy: bool = False

    @property
    def key(self) -> str:
        return CLUSTER_TAG_PREFIX + self.cluster_id

    def has_cluster_tag(self, tags: Mapping[str, str]) -> bool:
        if not self.cluster_id:
            return True
        return self.key in tags or tags.get(LEGACY_CLUSTER_TAG) == self.cluster_id

    def is_owned(self, tags: Mapping[str, str]) -> bool:
        if not self.cluster_id:
            return False
        return tags.get(self.key) == OWNED or tags.get(LEGACY_CLUSTER_TAG) == self.cluster_id

    def tagged_for_other_cluster(self, tags: Mapping[str, str]) -> bool:
        """Carries some ``kubernetes.io/cluster/*`` key, but not ours."""
        return not self.has_cluster_tag(tags) and any(
            k.startswith(CLUSTER_TAG_PREFIX) for k in tags
        )

    def owned_tags(self, extra: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
        """Tags for a resource the controller creates: ``extra`` first, cluster tags win."""
        out = dict(extra)
        out[self.key] = OWNED
        if self.legacy:
            out[LEGACY_CLUSTER_TAG] = self.cluster_id
        return out


def find_cluster_ids(tags: Mapping[str, str]) -> list[str]:
    """Cluster ids named by ``kubernetes.io/cluster/<id>`` keys and ``KubernetesCluster``."""
    ids = [k[len(CLUSTER_TAG_PREFIX) :] for k in tags if k.startswith(CLUSTER_TAG_PREFIX)]
    legacy = tags.get(LEGACY_CLUSTER_TAG)
    if legacy and legacy not in ids:
        ids.append(legacy)
    return [i for i in ids if i]


# -- node instance tags (the tagging controller) --------------------------------------------------

NOT_FOUND = "InvalidInstanceID.NotFound"
INVALID_ID = "InvalidID"
#: upstream ``newCreateTagsBatcher`` / ``newDeleteTagsBatcher``
IDLE_SECONDS, MAX_WAIT_SECONDS, MAX_ITEMS = 0.1, 1.0, 50


@dataclass(frozen=True)
class _TagRequest:
    instance_id: str
    tags: tuple[tuple[str, str], ...]


def _tag_set(request: _TagRequest) -> frozenset[tuple[str, str]]:
    """Upstream's hasher: the tags as a set (``SlicesAsSets``)."""
    return frozenset(request.tags)


class AWSInstanceTags:
    """``controller.cloud.InstanceTags`` on EC2."""

    def __init__(self, ec2: EC2Client, *, batch_idle: float = IDLE_SECONDS) -> None:
        self.ec2 = ec2
        self._idle = batch_idle
        self._create = self._batcher("create_tags", ec2.create_tags)
        self._delete = self._batcher("delete_tags", ec2.delete_tags)

    def _batcher(self, name: str, call: Callable[..., Any]) -> Batcher[_TagRequest, bool]:
        def execute(requests: list[_TagRequest]) -> list[Result[bool]]:
            resources = list(dict.fromkeys(r.instance_id for r in requests))
            try:
                _send(call, resources, tags=requests[0].tags)
            except AWSError as exc:
                if len(resources) == 1:
                    return [Result(error=exc)] * len(requests)
                log.info(
                    "batched %s of %d instances failed (%s); one by one", name, len(resources), exc
                )
                return [self._one(call, r) for r in requests]
            return [Result(output=True)] * len(requests)

        return Batcher(
            name,
            execute,
            key=_tag_set,
            idle=self._idle,
            max_wait=MAX_WAIT_SECONDS,
            max_items=MAX_ITEMS,
        )

    @staticmethod
    def _one(call: Callable[..., Any], request: _TagRequest) -> Result[bool]:
        try:
            _send(call, [request.instance_id], tags=request.tags)
        except AWSError as exc:
            return Result(error=exc)
        return Result(output=True)

    def instance_id(self, provider_id: str) -> InstanceID | None:
        iid = parse_provider_id(provider_id)
        return None if iid.startswith(FARGATE_PREFIX) else iid

    def tag_instance(
        self, instance_id: InstanceID, tags: Mapping[str, str], *, batched: bool = False
    ) -> None:
        request = _TagRequest(instance_id, tuple(sorted(tags.items())))
        try:
            if batched:
                self._create.add(request)
            else:
                _send(self.ec2.create_tags, [instance_id], tags=request.tags)
        except AWSError as exc:
            raise _translate(instance_id, exc) from exc

    def untag_instance(
        self, instance_id: InstanceID, tags: Mapping[str, str], *, batched: bool = False
    ) -> None:
        request = _TagRequest(instance_id, tuple(sorted(tags.items())))
        try:
            if batched:
                self._delete.add(request)
            else:
                _send(self.ec2.delete_tags, [instance_id], tags=request.tags)
        except AWSError as exc:
            if error_code(exc) == NOT_FOUND:
                log.info("instance %s not found while untagging; nothing to remove", instance_id)
                return
            raise _translate(instance_id, exc) from exc


def _send(call: Callable[..., Any], ids: list[str], *, tags: tuple[tuple[str, str], ...]) -> None:
    """One ``CreateTags`` / ``DeleteTags`` naming ``ids`` and every tag with its value."""
    call(Resources=ids, Tags=tag_list(dict(tags)))


def _translate(instance_id: str, exc: Any) -> Exception:
    code = error_code(exc)
    if code == NOT_FOUND:
        return InstanceNotFound(f"EC2 instance {instance_id} does not exist ({code})")
    if code == INVALID_ID:
        return InvalidInstanceID(f"EC2 instance id {instance_id} is not valid ({code})")
    return translate(exc)
