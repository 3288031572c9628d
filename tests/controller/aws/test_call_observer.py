"""Every AWS request the cloud makes is reported to the manager's call observer.

``AWSCloud.set_call_observer`` hooks botocore's per-attempt events; the manager hands it its
:class:`~controller.runtime.metrics.Metrics`, which exposes
``ccm_cloud_api_calls_total{service,action,outcome}``. Checked twice: in process against the
lab's AWS endpoint with a recording observer (outcomes of a throttled-then-retried call, an
unanswered call, swapping the observer), and end to end on the controller process's
``/metrics`` after it ensured a Service's ELB under injected throttling.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any

import botocore.config
import pytest
from botocore.exceptions import EndpointConnectionError

from controller.aws.clients import Clients, observe_calls
from e2e.support import create_service, describe_elb, elb_name, lb_service, wait_hostname
from lab.aws import AwsServer
from lab.compose import Lab
from tests.controller.aws.conftest import MakeCloud


@dataclass(frozen=True)
class Call:
    service: str
    action: str
    outcome: str
    seconds: float


class Recorder:
    """A ``CloudCallObserver`` that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def observe_cloud_call(
        self, *, service: str, action: str, outcome: str, seconds: float
    ) -> None:
        with self._lock:
            self.calls.append(Call(service, action, outcome, seconds))

    def outcomes(self, action: str) -> list[str]:
        return [c.outcome for c in self.calls if c.action == action]


def test_each_attempt_reported_with_its_outcome(aws: AwsServer, make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    seen = Recorder()
    cloud.set_call_observer(seen)
    ec2, elb = cloud.context.clients.ec2, cloud.context.clients.elb

    aws.control.add_fault(action="DescribeSecurityGroups", code="Throttling", count=1)
    ec2.describe_security_groups()  # boto3's standard retry mode retries the throttle
    assert seen.outcomes("DescribeSecurityGroups") == ["Throttling", "success"]

    aws.control.add_fault(action="DescribeLoadBalancers", code="InternalError", count=50)
    with pytest.raises(Exception, match="InternalError"):
        elb.describe_load_balancers()
    aws.control.clear_faults()
    attempts = [e.error_code for e in aws.trail.calls("DescribeLoadBalancers")]
    assert len(attempts) > 1, "boto3 retried the 500s"
    assert seen.outcomes("DescribeLoadBalancers") == attempts, "one report per attempt"
    assert set(attempts) == {"InternalError"}

    with pytest.raises(Exception, match=r"InvalidGroup\.NotFound"):  # moto's own answer
        ec2.delete_security_group(GroupId="sg-12345678")
    assert seen.outcomes("DeleteSecurityGroup") == ["InvalidGroup.NotFound"]

    services = {(c.service, c.action) for c in seen.calls}
    assert ("ec2", "DescribeSecurityGroups") in services
    assert ("elb", "DescribeLoadBalancers") in services
    assert all(c.seconds >= 0 for c in seen.calls)

    # Swapping the observer moves the reports; registering twice does not double them.
    other = Recorder()
    cloud.set_call_observer(other)
    cloud.set_call_observer(other)
    ec2.describe_vpcs()
    assert other.outcomes("DescribeVpcs") == ["success"]
    assert seen.outcomes("DescribeVpcs") == []
    cloud.set_call_observer(None)
    ec2.describe_vpcs()
    assert other.outcomes("DescribeVpcs") == ["success"]


def test_unanswered_call_is_a_request_error(aws: AwsServer, make_cloud: MakeCloud) -> None:
    """Nothing listens on the endpoint: each attempt is reported as ``RequestError``."""
    cloud = make_cloud()
    one_try = botocore.config.Config(retries={"mode": "standard", "total_max_attempts": 1})
    dead = "http://127.0.0.1:9"
    ec2 = _client_like(cloud.context.clients.ec2, "ec2", dead, one_try)
    elb = _client_like(cloud.context.clients.elb, "elb", dead, one_try)
    seen = Recorder()
    observe_calls(Clients(ec2=ec2, elb=elb, region=cloud.region), seen)
    with pytest.raises(EndpointConnectionError):
        ec2.describe_vpcs()
    assert seen.outcomes("DescribeVpcs") == ["RequestError"]


def _client_like(client: Any, service: str, url: str, config: botocore.config.Config) -> Any:
    import boto3

    creds = client._request_signer._credentials
    make: Any = boto3.client  # service chosen at run time: no Literal overload applies
    return make(
        service,
        region_name=client.meta.region_name,
        endpoint_url=url,
        aws_access_key_id=creds.access_key,
        aws_secret_access_key=creds.secret_key,
        config=config,
    )


# --- end to end: the controller process's /metrics ---------------------------------------------

_SAMPLE = re.compile(r"^ccm_cloud_api_calls_total\{([^}]*)\}\s+([0-9.e+]+)$", re.M)


def cloud_call_counts(metrics_text: str) -> dict[tuple[str, str, str], float]:
    """``{(service, action, outcome): count}`` from a Prometheus exposition."""
    out: dict[tuple[str, str, str], float] = {}
    for labels, value in _SAMPLE.findall(metrics_text):
        kv = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[(kv["service"], kv["action"], kv["outcome"])] = float(value)
    return out


def scrape(base_url: str) -> str:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as resp:
        return bytes(resp.read()).decode()


def test_controller_metrics_count_calls_and_throttles(
    lab: Lab, core_v1: Any, elb: Any, trail: Any
) -> None:
    ctl = lab.start_controller()
    assert ctl.url
    aws = lab.aws
    assert aws is not None
    aws.control.add_fault(action="CreateLoadBalancer", code="Throttling", count=1)
    svc = create_service(core_v1, lb_service("metered"))
    wait_hostname(core_v1, "metered", timeout=60)
    assert describe_elb(elb, elb_name(svc)) is not None
    assert trail.count("CreateLoadBalancer", error_code="Throttling") == 1

    counts = cloud_call_counts(scrape(ctl.url))
    assert counts.get(("elb", "CreateLoadBalancer", "success")) == 1.0, counts
    assert counts.get(("elb", "CreateLoadBalancer", "Throttling")) == 1.0, counts
    assert counts.get(("ec2", "CreateSecurityGroup", "success")) == 1.0, counts
    # The metric agrees with the endpoint's own record of the controller's calls.
    ok_describes = trail.count("DescribeInstances", ok=True)
    assert counts.get(("ec2", "DescribeInstances", "success"), 0) >= 1
    assert counts.get(("ec2", "DescribeInstances", "success"), 0) <= ok_describes
