"""botocore's data files are read once per process: every session shares one loader."""

from __future__ import annotations

from pathlib import Path

import boto3
import botocore.session
import pytest

from lab.aws import botodata
from lab.aws.motostate import moto_dispatcher


def test_the_moto_endpoint_has_every_later_session_share_one_loader() -> None:
    moto_dispatcher()  # what an endpoint's start does first
    first, second = botocore.session.Session(), botocore.session.Session()
    loader = first.get_component("data_loader")
    assert second.get_component("data_loader") is loader
    model = first.get_service_data("ec2")
    assert second.get_service_data("ec2") is model  # parsed once


def test_a_session_reads_what_its_own_loader_would() -> None:
    botodata.share_loader()
    shared = botocore.session.Session()
    own = botocore.session.Session()
    own._components.lazy_register_component(  # botocore's own, as before the patch
        "data_loader", lambda: botocore.loaders.create_loader(None)
    )
    assert own.get_component("data_loader") is not shared.get_component("data_loader")
    assert shared.get_service_data("elb") == own.get_service_data("elb")
    assert shared.get_available_regions("ec2") == own.get_available_regions("ec2")


def test_boto3_sessions_do_not_grow_the_shared_search_path() -> None:
    botodata.share_loader()
    paths = list(boto3.Session()._loader.search_paths)
    for _ in range(3):
        boto3.Session()
    assert boto3.Session()._loader.search_paths == paths
    assert len(set(paths)) == len(paths)


def test_each_data_path_has_its_own_loader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    botodata.share_loader()
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    elsewhere = botocore.session.Session().get_component("data_loader")
    monkeypatch.delenv("AWS_DATA_PATH")
    here = botocore.session.Session().get_component("data_loader")
    assert elsewhere is not here
    assert str(tmp_path) in elsewhere.search_paths


def test_moto_reads_its_service_models_through_the_shared_loader() -> None:
    import moto.core.utils as moto_utils

    moto_dispatcher()
    shared = botodata.shared_loader(None)
    assert moto_utils.create_loader() is shared
    model = moto_utils._load_service_model("elb", "service-2")
    assert shared.load_service_model("elb", "service-2") is model
