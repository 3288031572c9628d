"""Classic ELB health evaluation and security-group evaluation rates (issue 12, AWS data plane).

One in-process endpoint. A node group with the rules a cluster's controller writes (itself, the
node-port range from each load balancer's group; ``--lbs`` load balancers), one load balancer
with ``N`` registered nodes and a TCP health check. Prints, in one run:

* health evaluations per second and the cost per instance, for 10 and 100 instances (every
  instance due at every round: the manual lab clock moves one Interval per round); the ratio of
  the per-instance cost at 100 vs 10 says whether it scales linearly;
* ``DescribeInstanceHealth`` through boto3 with the health model on vs moto's stock answer
  (switch off), same endpoint, same instances: what the fidelity costs on the wire;
* a mutating AWS call (``CreateTags`` on one instance) with the model on vs off: what the
  checks run before every call that may change state cost (all 110 instances due at every
  call); reads run none;
* the checks of 100 more load balancers over 50 nodes (a cluster with many Services): checks
  per second and the share of a core they take at the lab's default clock;
* security-group evaluations per second on the model (allowed: the last rule matches; denied:
  every rule of the destination's groups scanned) and a remembered verdict, vs rebuilding the
  model from moto's state (the baseline the cache avoids).

    .venv/bin/python -m benchmarks.elbhealth [--quick] [--lbs 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from lab.aws import AwsServer
from lab.aws.fidelity import MotoView
from lab.aws.health.sgview import SecurityGroupView, read_model
from lab.aws.sgeval import Flow
from lab.clock import ManualClock

AMI = "ami-12c6146b"


def per_second(fn: Callable[[], Any], *, seconds: float) -> float:
    """Calls of ``fn`` per second over about ``seconds`` (after one warm-up call)."""
    fn()
    count, t0 = 0, time.perf_counter()
    while True:
        fn()
        count += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return count / elapsed


def median_ms(fn: Callable[[], Any], *, count: int) -> float:
    fn()
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


class World:
    def __init__(self, aws: AwsServer, lbs: int) -> None:
        self.aws = aws
        self.ec2, self.elb = aws.client("ec2"), aws.client("elb")
        vpc = self.ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
        self.subnet = self.ec2.describe_subnets()["Subnets"][0]["SubnetId"]

        def group(name: str) -> str:
            return self.ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)[
                "GroupId"
            ]

        self.node = group("node")
        self.ec2.authorize_security_group_ingress(
            GroupId=self.node,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": self.node}]}],
        )
        self.lb_groups = [group(f"k8s-elb-{i}") for i in range(lbs)]
        for lb_group in self.lb_groups:
            self.ec2.authorize_security_group_ingress(
                GroupId=self.node,
                IpPermissions=[
                    {
                        "IpProtocol": "tcp",
                        "FromPort": 30000,
                        "ToPort": 32767,
                        "UserIdGroupPairs": [{"GroupId": lb_group}],
                    }
                ],
            )
        self.instances: list[str] = []

    def nodes(self, count: int) -> list[str]:
        while len(self.instances) < count:
            batch = min(50, count - len(self.instances))
            out = self.ec2.run_instances(
                ImageId=AMI,
                MinCount=batch,
                MaxCount=batch,
                SecurityGroupIds=[self.node],
                SubnetId=self.subnet,
            )
            self.instances += [i["InstanceId"] for i in out["Instances"]]
        return self.instances[:count]

    def load_balancer(self, name: str, count: int) -> None:
        self.elb.create_load_balancer(
            LoadBalancerName=name,
            Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}],
            Subnets=[self.subnet],
            SecurityGroups=[self.lb_groups[-1]],  # the last group: the node group's last rule
        )
        self.elb.configure_health_check(
            LoadBalancerName=name,
            HealthCheck={
                "Target": "TCP:30080",
                "Interval": 10,
                "Timeout": 5,
                "UnhealthyThreshold": 2,
                "HealthyThreshold": 2,
            },
        )
        self.elb.register_instances_with_load_balancer(
            LoadBalancerName=name, Instances=[{"InstanceId": i} for i in self.nodes(count)]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--lbs", type=int, default=30, help="load-balancer groups (rules)")
    args = parser.parse_args()
    secs = 0.5 if args.quick else 2.0
    rows: list[tuple[str, str]] = []
    with AwsServer(region="us-east-1") as aws:
        health = aws.lab.elb_health
        clock = ManualClock()
        health.clock = clock
        world = World(aws, args.lbs)

        # -- health evaluations: every instance due at every round -----------------------
        cost_us: dict[int, float] = {}
        for size in (10, 100):
            name = f"lb{size}"
            world.load_balancer(name, size)

            def round_() -> None:
                clock.advance(10)
                health.tick()

            rounds = per_second(round_, seconds=secs)
            # every load balancer created so far is checked in a round
            evaluations = rounds * sum(n for n in (10, 100) if n <= size)
            cost_us[size] = 1e6 / evaluations
            rows.append(
                (
                    f"health evaluations, {size} instances",
                    f"{evaluations:,.0f}/s ({cost_us[size]:.1f} µs per instance check)",
                )
            )
        states = {h.state for h in health.state("lb100")}
        rows.append(("health of lb100 after the rounds", ", ".join(sorted(states))))
        rows.append(
            (
                "per-instance cost, 100 vs 10 (ratio)",
                f"{cost_us[100] / cost_us[10]:.2f}x",
            )
        )

        # -- the wire: DescribeInstanceHealth, model vs moto's answer --------------------
        def describe() -> None:
            world.elb.describe_instance_health(LoadBalancerName="lb100")

        one = world.instances[0]

        def other_call() -> None:
            clock.advance(10)  # every instance due before the call
            world.ec2.create_tags(Resources=[one], Tags=[{"Key": "k", "Value": "v"}])

        on_describe = median_ms(describe, count=30 if args.quick else 100)
        on_other = median_ms(other_call, count=30 if args.quick else 100)
        aws.control.set_fidelity(elb_health_checks=False)
        off_describe = median_ms(describe, count=30 if args.quick else 100)
        off_other = median_ms(other_call, count=30 if args.quick else 100)
        aws.control.set_fidelity(elb_health_checks=True)
        rows.append(
            (
                "DescribeInstanceHealth (100 instances), boto3",
                f"model {on_describe:.2f} ms vs moto {off_describe:.2f} ms: "
                f"{on_describe / off_describe:.2f}x",
            )
        )
        rows.append(
            (
                "CreateTags (a mutating call), 110 checks due before it",
                f"model on {on_other:.2f} ms vs off {off_other:.2f} ms: "
                f"{on_other / off_other:.2f}x",
            )
        )

        # -- scale: many load balancers over the same nodes --------------------------------
        many = 10 if args.quick else 100
        for i in range(many):
            world.load_balancer(f"svc{i}", 50)
        records = 110 + many * 50

        def everything_due() -> None:
            clock.advance(10)
            health.tick()

        rounds = per_second(everything_due, seconds=secs)
        # at speed 10 and a 10 s interval every check is due once per real second
        share = 100.0 / rounds
        rows.append(
            (
                f"{many} more load balancers x 50 instances ({records} checks per round)",
                f"{rounds * records:,.0f} checks/s; at the default 10x clock and 10 s interval "
                f"that is {share:.0f}% of one core",
            )
        )

        # -- security-group evaluation ---------------------------------------------------
        view = SecurityGroupView(aws.lab)
        last_lb = world.lb_groups[-1]
        model = view.model()
        allowed_flow = Flow.of("tcp", 30080, source_groups=[last_lb])
        denied_flow = Flow.of("udp", 30080, source_groups=["sg-x"], source_ip="198.51.100.7")

        def allowed() -> None:
            model.ingress([world.node], allowed_flow)

        def denied() -> None:
            model.ingress([world.node], denied_flow)

        def remembered() -> None:
            view.ingress(
                dest_groups=[world.node], protocol="tcp", port=30080, source_groups=[last_lb]
            )

        settings = aws.lab.settings

        def rebuild() -> None:
            with aws.lab.lock:
                read_model(MotoView(settings.account, settings.region))

        ok_rate = per_second(allowed, seconds=secs)
        deny_rate = per_second(denied, seconds=secs)
        memo_rate = per_second(remembered, seconds=secs)
        rebuild_rate = per_second(rebuild, seconds=secs)
        rules = len(model.groups[world.node].ingress)
        rows.append(
            (
                f"SG evaluations, node group with {rules} rules, {len(model.groups)} groups",
                f"allowed (last rule) {ok_rate:,.0f}/s, denied (all rules) {deny_rate:,.0f}/s, "
                f"remembered verdict {memo_rate:,.0f}/s",
            )
        )
        rows.append(
            (
                "baseline: model rebuilt from moto",
                f"{rebuild_rate:,.0f}/s; an evaluation on the cached model is "
                f"{ok_rate / rebuild_rate:,.0f}x faster",
            )
        )
        errors = aws.take_internal_errors()
        rows.append(("endpoint internal errors", str(len(errors))))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
