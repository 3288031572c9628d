"""Upstream's zone-cache tests, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/zones_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4: ``TestGetZoneIDByZoneName``,
``TestGetZoneDetailsByNames``. Upstream's EC2 mock lists three zones (``az1``..``az3``, ids
``az<n>-id``, type ``availability-zone``); run against ``controller.aws.zones.ZoneCache`` on
a stub EC2 answering the same and counting its calls.
"""

from __future__ import annotations

#: upstream's ``getCloudWithMockedDescribeAvailabilityZones``
ZONES = [
    {"ZoneName": f"az{i}", "ZoneId": f"az{i}-id", "ZoneType": "availability-zone"}
    for i in (1, 2, 3)
]

#: ``TestGetZoneIDByZoneName``: (case, zone name, expected id, an error expected)
GET_ZONE_ID_BY_ZONE_NAME: list[tuple[str, str, str, bool]] = [
    ("Should return requested zone ID", "az1", "az1-id", False),
    ("Should return error if AZ doesn't exist", "az4", "", True),
]

#: ``TestGetZoneDetailsByNames``: (case, zone names, expected {name: (id, type)}, the
#: DescribeAvailabilityZones calls after asking twice)
GET_ZONE_DETAILS_BY_NAMES: list[tuple[str, list[str], dict[str, tuple[str, str]], int]] = [
    ("Should return all requested zones when available", ["az1", "az2"],
     {"az1": ("az1-id", "availability-zone"), "az2": ("az2-id", "availability-zone")}, 1),
    ("Should refresh zones and handle zones not found", ["az1", "az4"],
     {"az1": ("az1-id", "availability-zone")}, 2),
    ("Should handle empty AZs", [], {}, 0),
]  # fmt: skip
