"""Cloud config parsing: gcfg semantics, warnings for unknown keys, errors naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.aws.config import CloudConfigError, load_cloud_config


def test_global_keys_are_case_insensitive_and_typed() -> None:
    cfg, warnings = load_cloud_config(
        """
        ; comment
        [global]
        region = us-west-2
        VPC = vpc-123
        subnetid = subnet-9
        KubernetesClusterID = lab   # trailing comment
        DisableSecurityGroupIngress = yes
        ElbSecurityGroup = sg-shared
        NodeIPFamilies = ipv6
        NodeIPFamilies = ipv4
        """
    )
    assert warnings == []
    assert cfg.region == "us-west-2"
    assert cfg.vpc == "vpc-123"
    assert cfg.subnet_id == "subnet-9"
    assert cfg.kubernetes_cluster_id == "lab"
    assert cfg.disable_security_group_ingress is True
    assert cfg.elb_security_group == "sg-shared"
    assert cfg.node_ip_families == ("ipv6", "ipv4")
    assert cfg.uses_dummy_self_instance


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("on", True), ("1", True), ("No", False), ("off", False), ("0", False)],
)
def test_gcfg_booleans(raw: str, expected: bool) -> None:
    cfg, _ = load_cloud_config(f"[Global]\nDisableSecurityGroupIngress = {raw}\n")
    assert cfg.disable_security_group_ingress is expected


def test_blank_boolean_key_means_true() -> None:
    cfg, _ = load_cloud_config("[Global]\nDisableSecurityGroupIngress\n")
    assert cfg.disable_security_group_ingress is True


def test_unknown_keys_and_sections_are_warnings() -> None:
    cfg, warnings = load_cloud_config("[Global]\nElbSecurityGroups = sg-1\n[Other]\nx = 1\n")
    assert cfg.elb_security_group == ""
    assert any("elbsecuritygroups" in w for w in warnings)
    assert any("[other]" in w for w in warnings)


def test_invalid_boolean_names_key_and_value() -> None:
    with pytest.raises(CloudConfigError) as err:
        load_cloud_config("[Global]\nDisableSecurityGroupIngress = maybe\n", source="cc.ini")
    assert err.value.key == "DisableSecurityGroupIngress"
    assert err.value.value == "maybe"
    assert "cc.ini" in str(err.value)
    assert "maybe" in str(err.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[Global]\nNodeIPFamilies = ipv5\n", "NodeIPFamilies"),
        ("[Global]\nZone = nowhere\n", "Zone"),
        ("[Global]\nVPC = 123\n", "VPC"),
        ("[Global]\nElbSecurityGroup = shared\n", "ElbSecurityGroup"),
        (
            "[Global]\nClusterServiceLoadBalancerHealthProbeMode = Both\n",
            "ClusterServiceLoadBalancerHealthProbeMode",
        ),
        ("[Global]\nKubernetesClusterTag = a\nKubernetesClusterID = b\n", "KubernetesClusterID"),
        (
            "[Global]\nSupportedTopologyInstanceTypePattern = ^(p|trn\n",
            "SupportedTopologyInstanceTypePattern",
        ),
    ],
)
def test_invalid_values_are_rejected_with_their_key(text: str, key: str) -> None:
    with pytest.raises(CloudConfigError) as err:
        load_cloud_config(text)
    assert err.value.key == key


def test_zone_decides_the_region_before_region_and_metadata() -> None:
    """Upstream ``getRegionFromMetadata`` (what ``newAWSCloud`` uses): the region of ``Zone``
    whenever ``Zone`` is set, even beside a ``Region``; else ``Region``, else instance
    metadata. Before, ours took ``Region`` or metadata and never ``Zone``."""
    cfg, _ = load_cloud_config("[Global]\nZone = eu-west-1b\n")
    assert cfg.derived_region == "eu-west-1"
    cfg, _ = load_cloud_config("[Global]\nZone = eu-west-1b\nRegion = us-east-2\n")
    assert cfg.derived_region == "eu-west-1"
    cfg, _ = load_cloud_config("[Global]\nRegion = us-east-2\n")
    assert cfg.derived_region == "us-east-2"
    cfg, _ = load_cloud_config("[Global]\n")
    assert cfg.derived_region == ""  # ask instance metadata


def test_imds_override_applies_whatever_its_region() -> None:
    """Upstream ``GetIMDSEndpointOpts`` ignores the override's Region (the region may come
    from metadata itself); the last ``ec2imds`` override wins."""
    overrides = "".join(
        f'[ServiceOverride "{i}"]\nService = ec2imds\nRegion = {region}\n'
        f"URL = http://127.0.0.1:{port}\nSigningRegion = {region}\n"
        for i, (region, port) in enumerate((("us-west-2", 1), ("eu-west-1", 2)))
    )
    cfg, _ = load_cloud_config(overrides)
    assert cfg.derived_region == ""
    found = cfg.imds_override()
    assert found is not None
    assert found.url == "http://127.0.0.1:2"
    assert load_cloud_config("[Global]\nRegion = us-east-1\n")[0].imds_override() is None


def test_service_overrides_are_matched_by_any_service_name() -> None:
    cfg, _ = load_cloud_config(
        """
        [Global]
        Region = us-east-1
        [ServiceOverride "1"]
        Service = ec2
        Region = us-east-1
        URL = http://127.0.0.1:5000
        SigningRegion = us-east-1
        [ServiceOverride "2"]
        Service = Elastic Load Balancing
        Region = us-east-1
        URL = "http://127.0.0.1:5001"
        SigningRegion = us-east-1
        SigningMethod = v4
        """
    )
    ec2 = cfg.override_for("ec2", "us-east-1")
    elb = cfg.override_for("elb", "us-east-1")
    assert ec2 is not None
    assert ec2.url == "http://127.0.0.1:5000"
    assert elb is not None
    assert elb.url == "http://127.0.0.1:5001"
    assert elb.signing_method == "v4"
    assert cfg.override_for("ec2", "us-west-2") is None


def test_service_override_requires_fields_and_rejects_duplicates() -> None:
    with pytest.raises(CloudConfigError) as err:
        load_cloud_config('[ServiceOverride "1"]\nService = ec2\nRegion = r\nURL = http://x\n')
    assert "SigningRegion" in err.value.key
    dup = "\n".join(
        f'[ServiceOverride "{i}"]\nService = ec2\nRegion = r\nURL = http://x\nSigningRegion = r'
        for i in (1, 2)
    )
    with pytest.raises(CloudConfigError, match="duplicate"):
        load_cloud_config(dup)


def test_malformed_lines_name_the_line() -> None:
    with pytest.raises(CloudConfigError) as err:
        load_cloud_config("[Global]\n= value\n")
    assert err.value.key == "line 2"


class _Sent(Exception):
    pass


def test_signing_name_is_the_service_in_the_credential_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Upstream ``WithSigV4SigningName``: the override's ``SigningName`` signs the requests of
    the client it configures (EC2 and ELB here); before, ours parsed it and signed with the
    SDK's own name. Real botocore signing; the request is stopped before it is sent."""
    from controller.aws.clients import make_clients

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    cfg, _ = load_cloud_config(
        """
        [Global]
        Region = us-east-1
        [ServiceOverride "1"]
        Service = ec2
        Region = us-east-1
        URL = http://127.0.0.1:9
        SigningRegion = us-east-1
        SigningName = custom-ec2
        [ServiceOverride "2"]
        Service = elasticloadbalancing
        Region = us-east-1
        URL = http://127.0.0.1:9
        SigningRegion = eu-west-1
        """
    )
    clients = make_clients(cfg, "us-east-1")
    scopes: list[str] = []

    def capture(request: Any, **_: Any) -> None:
        auth = request.headers["Authorization"]
        auth = auth.decode() if isinstance(auth, bytes) else auth
        scopes.append(auth.split("Credential=")[1].split(",")[0].split("/", 2)[2])
        raise _Sent

    for client in (clients.ec2, clients.elb):
        client.meta.events.register("before-send", capture)
    with pytest.raises(_Sent):
        clients.ec2.describe_vpcs()
    with pytest.raises(_Sent):
        clients.elb.describe_load_balancers()
    assert scopes == [
        "us-east-1/custom-ec2/aws4_request",
        "eu-west-1/elasticloadbalancing/aws4_request",  # no SigningName: the SDK's name
    ]


def test_supported_topology_pattern_is_read() -> None:
    """Upstream's ``[Global] SupportedTopologyInstanceTypePattern`` (was ignored with a
    warning); an invalid expression is refused (upstream's ``MustCompile`` panics)."""
    cfg, warnings = load_cloud_config("[Global]\nSupportedTopologyInstanceTypePattern = t3.large\n")
    assert warnings == []
    assert cfg.supported_topology_instance_type_pattern == "t3.large"


def test_nlb_security_group_mode_is_read_and_a_bad_value_stops_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``NLBSecurityGroupMode``: ``Managed`` (exact case) or empty; anything else stops the
    controller before it talks to any API, naming the key and value (upstream: at the first
    NLB ensure, ``IsNLBSecurityGroupModeManaged``)."""
    cfg, warnings = load_cloud_config("[Global]\nnlbsecuritygroupmode = Managed\n")
    assert (cfg.nlb_security_group_mode, cfg.nlb_security_group_managed, warnings) == (
        "Managed",
        True,
        [],
    )
    assert not load_cloud_config("[Global]\n")[0].nlb_security_group_managed
    bad = tmp_path / "cloud.conf"
    bad.write_text("[Global]\nNLBSecurityGroupMode = managed\n")
    from controller.app import EXIT_USAGE, main

    assert main(["--cloud-config", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "NLBSecurityGroupMode" in err
    assert "'managed'" in err


def test_quoted_whitespace_is_kept_as_gcfg_keeps_it() -> None:
    """gcfg (git config syntax) drops whitespace around a value unless it is quoted."""
    cfg, _ = load_cloud_config('[Global]\nElbSecurityGroup = sg-1  ; note\nRoleARN = " a b "\n')
    assert cfg.elb_security_group == "sg-1"
    assert cfg.role_arn == " a b "
