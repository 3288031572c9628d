"""Node names and providerIDs to EC2 instance ids, and back: pure string rules, no AWS call.

Neighbours: :mod:`controller.aws.instances` (InstancesV2) finds a node's instance through
these; :mod:`controller.aws.tags` (the tagging controller's EC2 calls) reads the instance to tag
from the providerID the same way.

Design: one reading of ``spec.providerID`` for every node path, as upstream has one
(``KubernetesInstanceID.MapToAWSInstanceID``). It sits below both of its readers so that the
tag module, which :mod:`controller.aws.instances` itself imports for its tag rules, can read
providerIDs without an import circle.
"""

from __future__ import annotations

import re
import urllib.parse

from controller.cloud import CloudError, InstanceID, ProviderID

_INSTANCE_SEGMENT = re.compile(r"^(i-[^/]*|fargate-[^/]*)$")
FARGATE_PREFIX = "fargate-"


class InvalidProviderID(CloudError):
    """``spec.providerID`` is not an AWS instance provider id."""


def parse_provider_id(provider_id: str) -> InstanceID:
    """Upstream ``KubernetesInstanceID.MapToAWSInstanceID``: the last segment of the URL path
    (``aws:///<az>/i-…``, ``aws:////i-…``, Fargate's ``aws:///<az>/<profile>/fargate-…``; a
    bare value is read as ``aws:///<value>``), which must be ``i-…`` or ``fargate-…``."""
    raw = provider_id if provider_id.startswith("aws://") else "aws:///" + provider_id
    try:
        parts = urllib.parse.urlsplit(raw)
    except ValueError as exc:
        raise InvalidProviderID(f"invalid providerID {provider_id!r}: {exc}") from None
    if parts.scheme != "aws":
        raise InvalidProviderID(f"invalid providerID {provider_id!r}: not an aws:// provider id")
    candidate = parts.path.strip("/").split("/")[-1]
    if not _INSTANCE_SEGMENT.match(candidate):
        raise InvalidProviderID(
            f"invalid providerID {provider_id!r}: {candidate!r} is not an instance id (i-…)"
        )
    return InstanceID(candidate)


def build_provider_id(zone: str, instance_id: str) -> ProviderID:
    return ProviderID(f"aws:///{zone}/{instance_id}")


def instance_id_from_name(name: str) -> InstanceID | None:
    """Resource-based node names: ``i-0abc`` or ``i-0abc.<region>.compute.internal``."""
    if name.startswith("i-"):
        return InstanceID(name.split(".", 1)[0])
    return None
