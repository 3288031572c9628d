"""Upstream's ``TestGetNodeAddressesFromNodeIP`` (``node_address_tables``) run against ours."""

from __future__ import annotations

import pytest

from controller.cloud import NodeAddress
from controller.nodeutil import NodeIPError, addresses_for_node_ip
from tests.controller.upstream.node_address_tables import GET_NODE_ADDRESSES_FROM_NODE_IP


@pytest.mark.parametrize(
    ("node_ip", "cloud", "want"),
    [row[1:] for row in GET_NODE_ADDRESSES_FROM_NODE_IP],
    ids=[row[0] for row in GET_NODE_ADDRESSES_FROM_NODE_IP],
)
def test_get_node_addresses_from_node_ip(
    node_ip: str, cloud: list[tuple[str, str]], want: list[tuple[str, str]] | None
) -> None:
    addresses = [NodeAddress(type=t, address=a) for t, a in cloud]
    if want is None:
        with pytest.raises(NodeIPError):
            addresses_for_node_ip(addresses, node_ip)
        return
    got = addresses_for_node_ip(addresses, node_ip)
    assert [(a.type, a.address) for a in got] == want
