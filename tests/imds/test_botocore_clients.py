"""botocore's own IMDS client code against the lab's metadata service.

``InstanceMetadataFetcher`` (the credential provider's client), ``InstanceMetadataRegionFetcher``
and ``IMDSRegionProvider`` are used unchanged, pointed at the IMDS through their constructor or
the ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` environment variable, exactly as a controller on a
node would reach 169.254.169.254.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.utils import (
    BadIMDSRequestError,
    IMDSRegionProvider,
    InstanceMetadataRegionFetcher,
)

from lab.imds import ImdsServer
from tests.imds.conftest import (
    CLIENT_TIMEOUT,
    HOLD,
    REGION,
    SeededInstance,
    World,
    botocore_credentials,
    botocore_region,
    run_node,
)


def _tokens_minted(imds: ImdsServer) -> int:
    return imds.control.state()["tokens"]


def test_credentials_via_imdsv2(imds: ImdsServer) -> None:
    creds = botocore_credentials(imds.url)
    assert creds["role_name"] == "ccm-lab-node"
    assert creds["access_key"].startswith("ASIA")
    assert creds["secret_key"]
    assert creds["token"]
    assert _tokens_minted(imds) == 1  # the fetcher went through PUT /latest/api/token


def test_region_from_availability_zone(imds: ImdsServer, node: SeededInstance) -> None:
    fetcher = InstanceMetadataRegionFetcher(base_url=imds.url, timeout=CLIENT_TIMEOUT)
    assert fetcher.retrieve_region() == REGION
    assert node.zone == "us-east-1b"  # the region is derived, not a constant zone "...a"


def test_session_credentials_from_env_endpoint(
    imds: ImdsServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The whole default credential chain ends at our IMDS, found through the env var."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    for var in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
    session = botocore.session.Session()
    creds = session.get_credentials()
    assert creds is not None
    assert creds.method == "iam-role"
    assert creds.get_frozen_credentials().access_key == "ASIACCMLABIMDS000000"
    assert IMDSRegionProvider(session).provide() == REGION


def test_v2_required_instance_still_serves_botocore(aws_url: str, world: World) -> None:
    node = run_node(world, http_tokens="required")
    with ImdsServer(aws_url, REGION, instance_id=node.instance_id, cache_ttl=0) as imds:
        fetcher = InstanceMetadataRegionFetcher(base_url=imds.url, timeout=CLIENT_TIMEOUT)
        assert fetcher.retrieve_region() == REGION


def test_v1_fallback_when_token_response_withheld(imds: ImdsServer) -> None:
    """Caller two hops away, hop limit 1: the PUT times out and botocore falls back to v1."""
    imds.control.set_client_hops(2)
    fetcher = InstanceMetadataRegionFetcher(base_url=imds.url, timeout=CLIENT_TIMEOUT)
    assert fetcher.retrieve_region() == REGION
    assert _tokens_minted(imds) == 0  # the region came over IMDSv1


def test_required_v2_refuses_v1_fallback(
    aws_url: str, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """The container-on-a-v2-only-instance failure: PUT times out, v1 GET gets 401."""
    caplog.set_level(logging.DEBUG, logger="botocore.utils")
    node = run_node(world, http_tokens="required")
    with ImdsServer(
        aws_url, REGION, instance_id=node.instance_id, cache_ttl=0, client_hops=2, hold_seconds=HOLD
    ) as imds:
        # a timed-out GET would also give None: the log check below proves it was a 401
        region = botocore_region(imds.url)
        creds = botocore_credentials(imds.url)
    assert region is None
    assert creds == {}
    assert caplog.text.count("status code of 401") == 2  # botocore saw the refusal, not a timeout


def test_hop_limit_two_lets_container_through(aws_url: str, world: World) -> None:
    node = run_node(world, http_tokens="required", hop_limit=2)
    with ImdsServer(
        aws_url, REGION, instance_id=node.instance_id, cache_ttl=0, client_hops=2, hold_seconds=HOLD
    ) as imds:
        assert botocore_region(imds.url) == REGION
        assert _tokens_minted(imds) == 1


def test_server_floor_requires_v2_on_optional_instance(
    imds: ImdsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="botocore.utils")
    imds.control.require_imdsv2()
    imds.control.set_client_hops(2)  # force the v1 path
    assert botocore_region(imds.url) is None
    assert "status code of 401" in caplog.text
    imds.control.set_client_hops(1)
    assert botocore_region(imds.url) == REGION


class _TtlFetcher(InstanceMetadataRegionFetcher):
    """botocore's fetcher asking for a TTL other than its fixed 21600."""

    _TOKEN_TTL = "21601"


def test_out_of_range_ttl_is_bad_request_for_botocore(imds: ImdsServer) -> None:
    with pytest.raises(BadIMDSRequestError):
        _TtlFetcher(base_url=imds.url, timeout=CLIENT_TIMEOUT).retrieve_region()


def test_v1_disabled_client_cannot_fall_back(imds: ImdsServer) -> None:
    from botocore.exceptions import MetadataRetrievalError

    imds.control.set_client_hops(2)
    fetcher = InstanceMetadataRegionFetcher(
        base_url=imds.url, timeout=CLIENT_TIMEOUT, config={"ec2_metadata_v1_disabled": True}
    )
    with pytest.raises(MetadataRetrievalError):
        fetcher.retrieve_region()


def test_stopped_instance_has_no_metadata(imds: ImdsServer, ec2: Any, node: SeededInstance) -> None:
    fetcher = InstanceMetadataRegionFetcher(base_url=imds.url, timeout=CLIENT_TIMEOUT)
    assert fetcher.retrieve_region() == REGION
    ec2.stop_instances(InstanceIds=[node.instance_id])
    assert fetcher.retrieve_region() is None
