"""Upstream's table test of the provided node IP filter, as data.

Source: kubernetes/cloud-provider ``node/helpers/address_test.go`` at commit
46666112f47d004d76fb91406104f94e6a504b2f: ``TestGetNodeAddressesFromNodeIP`` (used by the
cloud node controller for the ``alpha.kubernetes.io/provided-node-ip`` annotation). Each case
is (name, node IP, cloud addresses, expected addresses or None for an error); an address is
(type, address), ``IN``/``EX`` are InternalIP/ExternalIP and ``H`` stands for upstream's
``testKubeletHostname``.
"""

from __future__ import annotations

H = ("Hostname", "hostname")
IN, EX = "InternalIP", "ExternalIP"

Addr = tuple[str, str]

GET_NODE_ADDRESSES_FROM_NODE_IP: list[tuple[str, str, list[Addr], list[Addr] | None]] = [
    ("A single InternalIP", "10.1.1.1",
     [(IN, "10.1.1.1"), H],
     [(IN, "10.1.1.1"), H]),
    ("NodeIP is external", "55.55.55.55",
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"), H],
     [(EX, "55.55.55.55"), (IN, "10.1.1.1"), H]),
    ("InternalIP and ExternalIP are the same", "55.55.55.55",
     [(IN, "44.44.44.44"), (EX, "44.44.44.44"), (IN, "55.55.55.55"), (EX, "55.55.55.55"), H],
     [(IN, "55.55.55.55"), (EX, "55.55.55.55"), H]),
    ("An Internal/ExternalIP, an Internal/ExternalDNS", "10.1.1.1",
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"),
      ("InternalDNS", "ip-10-1-1-1.us-west-2.compute.internal"),
      ("ExternalDNS", "ec2-55-55-55-55.us-west-2.compute.amazonaws.com"), H],
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"),
      ("InternalDNS", "ip-10-1-1-1.us-west-2.compute.internal"),
      ("ExternalDNS", "ec2-55-55-55-55.us-west-2.compute.amazonaws.com"), H]),
    ("An Internal with multiple internal IPs", "10.1.1.1",
     [(IN, "10.1.1.1"), (IN, "10.2.2.2"), (IN, "10.3.3.3"), (EX, "55.55.55.55"), H],
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"), H]),
    ("An InternalIP that isn't valid: should error", "10.2.2.2",
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"), H],
     None),
    ("Dual-stack cloud, with nodeIP, different IPv6 formats", "2600:1f14:1d4:d101::ba3d",
     [(IN, "10.1.1.1"), (IN, "2600:1f14:1d4:d101:0:0:0:ba3d"), H],
     [(IN, "2600:1f14:1d4:d101:0:0:0:ba3d"), H]),
    ("Single-stack cloud, dual-stack request", "10.1.1.1,fc01:1234::5678",
     [(IN, "10.1.1.1"), H],
     None),
    ("Dual-stack cloud, IPv4 first, IPv4-primary request", "10.1.1.1,fc01:1234::5678",
     [(IN, "10.1.1.1"), (IN, "fc01:1234::5678"), H],
     [(IN, "10.1.1.1"), (IN, "fc01:1234::5678"), H]),
    ("Dual-stack cloud, IPv6 first, IPv4-primary request", "10.1.1.1,fc01:1234::5678",
     [(IN, "fc01:1234::5678"), (IN, "10.1.1.1"), H],
     [(IN, "10.1.1.1"), (IN, "fc01:1234::5678"), H]),
    ("Dual-stack cloud, dual-stack request, multiple IPs", "10.1.1.1,fc01:1234::5678",
     [(IN, "10.1.1.1"), (IN, "10.1.1.2"), (IN, "fc01:1234::1234"), (IN, "fc01:1234::5678"), H],
     [(IN, "10.1.1.1"), (IN, "fc01:1234::5678"), H]),
    ("Dual-stack cloud, dual-stack request, extra ExternalIP", "10.1.1.1,fc01:1234::5678",
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"), (IN, "fc01:1234::1234"), (IN, "fc01:1234::5678"), H],
     [(IN, "10.1.1.1"), (IN, "fc01:1234::5678"), (EX, "55.55.55.55"), H]),
    ("Dual-stack cloud, dual-stack request, multiple ExternalIPs", "fc01:1234::5678,10.1.1.1",
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"), (IN, "fc01:1234::5678"), (EX, "2001:db1::1"), H],
     [(IN, "fc01:1234::5678"), (IN, "10.1.1.1"), (EX, "55.55.55.55"), (EX, "2001:db1::1"), H]),
    ("Dual-stack cloud, dual-stack request, mixed InternalIP/ExternalIP match",
     "55.55.55.55,fc01:1234::5678",
     [(IN, "10.1.1.1"), (EX, "55.55.55.55"), (IN, "fc01:1234::5678"), (EX, "2001:db1::1"), H],
     [(EX, "55.55.55.55"), (IN, "fc01:1234::5678"), H]),
]  # fmt: skip
