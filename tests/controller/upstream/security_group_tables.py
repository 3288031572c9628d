"""Upstream's tests of the node security group an instance's rules go on, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/aws_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4: ``TestFindSecurityGroupForInstance``,
``TestFindSecurityGroupForInstanceMultipleTagged``, run against
``controller.aws.securitygroups.find_group_for_instance``.
"""

from __future__ import annotations

#: (upstream test, the instance's groups as (id, name), the cluster-tagged ids, the group
#: found or None, texts the error contains (empty: no error))
FIND_SECURITY_GROUP_FOR_INSTANCE: list[
    tuple[str, list[tuple[str, str]], list[str], str | None, list[str]]
] = [
    ("TestFindSecurityGroupForInstance", [("sg123", "my_group")], ["sg123"], "sg123", []),
    ("TestFindSecurityGroupForInstanceMultipleTagged",
     [("sg123", "my_group"), ("sg123", "another_group")], ["sg123"], None,
     ["sg123(my_group)", "sg123(another_group)"]),
]  # fmt: skip
