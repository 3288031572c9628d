"""Upstream's own table tests of the AWS provider's small parsers, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/aws_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4 (2026-07-07): ``TestGetKeyValuePropertiesFromAnnotation``
(the additional-tags annotation) and ``TestAzToRegion``.
"""

from __future__ import annotations

#: (annotation value, expected tags); None: the annotation is absent
KEY_VALUE_PROPERTIES: list[tuple[str | None, dict[str, str]]] = [
    ("Key=Val", {"Key": "Val"}),
    ("Key1=Val1, Key2=Val2", {"Key1": "Val1", "Key2": "Val2"}),
    ("Key1=, Key2=Val2", {"Key1": "", "Key2": "Val2"}),
    (None, {}),
    (
        "K=V K1=V2,Key1========, =====, ======Val, =Val, , 234,",
        {"K": "V K1", "Key1": "", "234": ""},
    ),
]

#: (availability zone, region)
AZ_TO_REGION: list[tuple[str, str]] = [
    ("us-west-2a", "us-west-2"),
    ("us-west-2-lax-1a", "us-west-2"),
    ("ap-northeast-2a", "ap-northeast-2"),
    ("us-gov-east-1a", "us-gov-east-1"),
    ("us-iso-east-1a", "us-iso-east-1"),
    ("us-isob-east-1a", "us-isob-east-1"),
]

#: ``pkg/providers/v1/instances_test.go`` ``TestMapToAWSInstanceIDs``: (providerID, instance id
#: or None for an error)
MAP_TO_AWS_INSTANCE_IDS: list[tuple[str, str | None]] = [
    ("aws:///us-east-1a/i-12345678", "i-12345678"),
    ("aws:////i-12345678", "i-12345678"),
    ("i-12345678", "i-12345678"),
    ("aws:///us-east-1a/i-12345678abcdef01", "i-12345678abcdef01"),
    ("aws:////i-12345678abcdef01", "i-12345678abcdef01"),
    ("i-12345678abcdef01", "i-12345678abcdef01"),
    ("vol-123456789", None),
    ("aws:///us-east-1a/vol-12345678abcdef01", None),
    ("aws://accountid/us-east-1a/vol-12345678abcdef01", None),
    ("aws:///us-east-1a/vol-12345678abcdef01/suffix", None),
    ("", None),
    ("aws:///us-west-2c/1abc-2def/fargate-ip-192-168-164-88.internal",
     "fargate-ip-192-168-164-88.internal"),
    ("aws:///us-west-2c/1abc-2def/fargate-192.168.164.88", "fargate-192.168.164.88"),
]  # fmt: skip
