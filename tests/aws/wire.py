"""Raw AWS query calls against the endpoint (what boto3 would refuse to send) and a state
snapshot (every EC2/ELB/ELBv2 resource as boto3 describes it) for "changed nothing" checks."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from lab.aws import AwsServer
from lab.aws.protocol import read_error

VERSIONS = {"ec2": "2016-11-15", "elb": "2012-06-01", "elbv2": "2015-12-01"}
SIGNING = {"ec2": "ec2", "elb": "elasticloadbalancing", "elbv2": "elasticloadbalancing"}


@dataclass(frozen=True)
class Answer:
    status: int
    code: str | None
    message: str | None
    body: str


def sigv4_header(service: str, region: str = "us-east-1") -> str:
    return (
        f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/{region}/{SIGNING[service]}/"
        "aws4_request, SignedHeaders=host;x-amz-date, Signature=0123abcd"
    )


def post(
    aws: AwsServer,
    body: str | bytes,
    *,
    headers: dict[str, str] | None = None,
    query: str = "",
) -> Answer:
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(
        aws.url + "/" + (f"?{query}" if query else ""),
        data=data if data else None,
        method="POST" if data else "GET",
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        | (headers or {}),
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        status, text = err.code, err.read().decode()
    code, message = read_error(text.encode()) if status >= 400 else (None, None)
    return Answer(status, code, message, text)


def call(aws: AwsServer, service: str, action: str, params: dict[str, str]) -> Answer:
    """One form-encoded, SigV4-headed query call with exactly ``params``."""
    body = urllib.parse.urlencode({"Action": action, "Version": VERSIONS[service], **params})
    return post(aws, body, headers={"Authorization": sigv4_header(service)})


def snapshot(aws: AwsServer) -> str:
    """Every EC2/ELB/ELBv2 resource the lab has, as boto3 describes it (stable JSON)."""
    ec2 = aws.client("ec2")
    elb = aws.client("elb")
    elbv2 = aws.client("elbv2")
    state: dict[str, Any] = {
        "vpcs": ec2.describe_vpcs()["Vpcs"],
        "subnets": ec2.describe_subnets()["Subnets"],
        "groups": ec2.describe_security_groups()["SecurityGroups"],
        "instances": ec2.describe_instances()["Reservations"],
        "tags": ec2.describe_tags()["Tags"],
        "elbs": elb.describe_load_balancers()["LoadBalancerDescriptions"],
        "albs": elbv2.describe_load_balancers()["LoadBalancers"],
        "target_groups": elbv2.describe_target_groups()["TargetGroups"],
    }
    for lb in state["elbs"]:
        name = lb["LoadBalancerName"]
        lb["attributes"] = elb.describe_load_balancer_attributes(LoadBalancerName=name)[
            "LoadBalancerAttributes"
        ]
        lb["policies"] = elb.describe_load_balancer_policies(LoadBalancerName=name)[
            "PolicyDescriptions"
        ]
    return json.dumps(state, sort_keys=True, default=str)
