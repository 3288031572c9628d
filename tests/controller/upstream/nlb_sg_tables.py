"""Upstream's table tests of the managed NLB security-group mode, as data.

Source: kubernetes/cloud-provider-aws at commit 63ec440c3275321b55afa45480e2fdfd2b0e93c4
(2026-07-07), the mode added by PR #1158 (merge 5e18243e) and the BYO annotation by PR #1379
(merge 8f07b703): ``pkg/providers/v1/config/config_test.go``
``TestCloudConfig_IsNLBSecurityGroupModeManaged``, ``pkg/providers/v1/aws_test.go``
``TestEnsureNLBSecurityGroup`` and the NLB rows of ``TestEnsureLoadBalancer``. Inputs and
expected outputs only; the adapters that run them against ours (the lab's AWS endpoint) are in
``test_upstream_nlb_sg``.

Not ported, with the reason: ``TestEnsureNLBSecurityGroup`` "error describing load balancer"
(an error of ``describeLoadBalancerv2``, which ours calls before and outside the group logic;
the NLB tests cover a failing describe); ``TestCreateSecurityGroup`` (the empty-name guard of a
helper whose name ours always computes) and ``TestCreateSecurityGroupRules`` (a helper's
ICMP rule: ``test_nlb_managed_sg`` checks the group's rules end to end).
"""

from __future__ import annotations

#: ``TestCloudConfig_IsNLBSecurityGroupModeManaged``: (case, the ``NLBSecurityGroupMode``
#: value, managed, refused). Upstream errors only when the mode is read (at ensure time); ours
#: refuses the value when the cloud config is loaded. Values are set on upstream's struct, so
#: the adapter writes them quoted (gcfg trims unquoted whitespace).
NLB_SECURITY_GROUP_MODE: list[tuple[str, str, bool, bool]] = [
    ("managed mode returns true", "Managed", True, False),
    ("empty string returns false", "", False, False),
    ("lowercase managed returns false", "managed", False, True),
    ("uppercase managed returns false", "MANAGED", False, True),
    ("mixed case managed returns false", "MaNaGeD", False, True),
    ("disabled mode returns false", "Disabled", False, True),
    ("byo mode returns false", "BYO", False, True),
    ("random string returns false", "random-value", False, True),
    ("whitespace only returns false", "  ", False, True),
    ("managed with whitespace returns false", " Managed ", False, True),
    ("managed with prefix returns false", "prefix-Managed", False, True),
    ("managed with suffix returns false", "Managed-suffix", False, True),
]

MANAGED = "<managed>"
"""Stands for the managed group's id (created, or found by its name, during the case)."""

#: ``TestEnsureNLBSecurityGroup``: (case, annotations, managed mode, the existing NLB's groups
#: or None for no NLB, the managed group exists beforehand, fault on CreateSecurityGroup,
#: expected groups, expected error substring or "" (upstream's; the one case ours words
#: otherwise is in ``ERROR_TEXT_DEVIATIONS``), the EC2 calls upstream's mocks expect:
#: "describe" (the managed group looked up by name), "create" (CreateSecurityGroup of that
#: name), "" for none: upstream's mock fails any call it was not told to expect).
#: Upstream's Service is test-namespace/test-service; its fake group ids are kept where they
#: are inputs.
ENSURE_NLB_SECURITY_GROUP: list[
    tuple[str, dict[str, str], bool, list[str] | None, bool, bool, list[str], str, str]
] = [
    ("existing NLB with security groups - returns existing SGs", {}, True, [MANAGED], True,
     False, [MANAGED], "", "describe"),
    ("new NLB with managed mode - creates new SG", {}, True, None, False, False, [MANAGED], "",
     "describe+create"),
    ("new NLB with managed mode disabled - returns empty", {}, False, None, False, False, [], "",
     ""),
    ("existing NLB without security groups - returns empty", {}, True, [], False, False, [], "",
     ""),
    ("existing NLB without security groups + managed mode disabled - returns empty", {}, False,
     [], False, False, [], "", ""),
    ("existing NLB without SGs + managed mode disabled - returns empty", {}, False, [], False,
     False, [], "", ""),
    ("existing NLB without SGs + managed mode enabled - returns empty (no retrofit)", {}, True,
     [], False, False, [], "", ""),
    ("new NLB + managed mode disabled - returns empty", {}, False, None, False, False, [], "",
     ""),
    ("existing NLB with security groups + managed mode disabled - preserves existing SGs", {},
     False, ["sg-123456789"], False, False, ["sg-123456789"], "", ""),
    ("existing NLB with zero SGs + managed mode - returns empty", {}, True, [], False, False, [],
     "", ""),
    ("CreateSecurityGroup error - returns error", {}, True, None, False, True, [],
     "unable to create security group for NLB", "describe+create"),
    ("BYO SG with managed mode enabled - returns BYO SGs",
     {"service.beta.kubernetes.io/aws-load-balancer-security-groups": "sg-byosample"}, True,
     None, False, False, ["sg-byosample"], "", ""),
    ("BYO SG with managed mode disabled - returns empty (ignored)",
     {"service.beta.kubernetes.io/aws-load-balancer-security-groups": "sg-byosample"}, False,
     None, False, False, [], "", ""),
    ("BYO multiple SGs with managed mode enabled - returns all BYO SGs",
     {"service.beta.kubernetes.io/aws-load-balancer-security-groups": "sg-byosample,sg-another"},
     True, None, False, False, ["sg-byosample", "sg-another"], "", ""),
    ("BYO SG with whitespace - returns trimmed SGs",
     {"service.beta.kubernetes.io/aws-load-balancer-security-groups":
      " sg-byosample , sg-another "},
     True, None, False, False, ["sg-byosample", "sg-another"], "", ""),
    ("existing NLB with BYO SG (annotation removed) - creates managed SG", {}, True,
     ["sg-byo-unowned"], False, False, [MANAGED], "", "describe+create"),
]  # fmt: skip

#: Cases whose error ours words otherwise (``controller/DEVIATIONS.md``): case -> the text
#: ours carries instead
ERROR_TEXT_DEVIATIONS: dict[str, str] = {
    # ours reports AWS's error as it is (it names the operation); upstream wraps it
    "CreateSecurityGroup error - returns error": "CreateSecurityGroup",
}

#: ``TestEnsureLoadBalancer``, its NLB rows: (case, managed mode, groups on the NLB after
#: ``EnsureLoadBalancer``). The Classic row ("ensure CLB defaults") is the Classic tests'.
ENSURE_LOAD_BALANCER_NLB: list[tuple[str, bool, int]] = [
    ("ensure NLB defaults", False, 0),
    ("ensure NLB with managed security group", True, 1),
]

#: ``GetSecurityGroupNameForNLB``: the one name upstream's tests spell out, the group the
#: ``TestEnsureNLBSecurityGroup`` case "existing NLB with security groups" finds ("Matching the
#: name pattern"): (case, cluster name, namespace, name, UID, expected name).
SECURITY_GROUP_NAME_FOR_NLB: list[tuple[str, str, str, str, str, str]] = [
    ("TestEnsureNLBSecurityGroup fixture", "clusterid.test", "test-namespace", "test-service",
     "", "k8s-testname-testserv-45cd872285"),
]  # fmt: skip
