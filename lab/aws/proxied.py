"""The lab's AWS side when the endpoint is not the lab's moto: the recording proxy in front of it.

Role: ``--aws localstack`` and ``--aws real`` give the lab an AWS endpoint it does not own. The
lab still needs its trail and fault injection, so every call goes through
:class:`lab.aws.proxy.AwsProxyServer` in front of that endpoint (for a real account signing
each call again with the account's credentials and asking the run's guard first,
:mod:`lab.aws.runproxy`); :class:`ProxiedAws` is that proxy with the face of
:class:`lab.aws.server.AwsServer` (``url``, typed ``client()``, ``control``, ``trail``,
``take_internal_errors()``) plus what the upstream cannot do, so the composed lab
(:mod:`lab.compose`) and the fixtures ask it rather than the backend's name.

What an upstream lacks is said per **AWS feature** of the lab (:data:`FEATURES`): an AWS API
(``elb``, ``elbv2``) the upstream does not serve, and the parts of the lab that live inside
its own moto endpoint and cannot sit in front of another: the **fidelity layer**
(``DependencyViolation`` on deleting a referenced group, ELB security-group ordering,
eventual consistency ...) and the **ELB model** (health checks against the cluster's nodes,
security-group evaluation: ``lab.traffic``, ELB instance health). A scenario declares the
features it needs (``e2e/catalog.py``; the ``aws_needs`` marker) and is skipped with the
reason where they are lacking.

Neighbours: :mod:`lab.aws.localstack` (finding and checking a LocalStack; which services its
health report lists), :mod:`lab.aws.localstack_docker` (starting one), :mod:`lab.aws.proxy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, overload

from lab.aws.proxy.server import AwsProxyServer, CredentialsLike
from lab.aws.proxy.stages import RequestGuard

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elb import ElasticLoadBalancingClient
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_sts import STSClient

    from lab.aws.app import AwsLab

#: The lab's AWS features a scenario may need, and what each is.
FEATURES: Mapping[str, str] = MappingProxyType(
    {
        "elb": "the Classic ELB API",
        "elbv2": "the ELBv2 (ALB/NLB) API",
        "fidelity": "the lab's fidelity layer (AWS behaviour moto lacks, e.g. DependencyViolation "
        "on deleting a security group still referenced)",
        "elb-model": "the lab's ELB model (health checks against the nodes, security-group "
        "evaluation: lab.traffic and ELB instance health)",
    }
)

#: Features that live inside the lab's moto endpoint (``lab.aws.app``): no other upstream has them.
MOTO_ONLY = ("fidelity", "elb-model")


class FeatureUnavailable(RuntimeError):
    """A part of the lab's AWS side was asked for that this endpoint does not have."""


def unknown_features(needed: tuple[str, ...]) -> list[str]:
    """The names in ``needed`` that are not lab AWS features (a usage error to report)."""
    return [name for name in needed if name not in FEATURES]


class ProxiedAws(AwsProxyServer):
    """The recording proxy in front of ``upstream``, shaped like the lab's ``AwsServer``.

    ``lacks`` maps each :data:`FEATURES` name this upstream lacks to the reason (said when a
    scenario that needs it is skipped); ``describe`` names the upstream in messages
    (``LocalStack 4.14.0 (community) at http://...``). ``credentials`` re-sign each call for
    an upstream that checks signatures (a real account); ``guard`` is asked first
    (:mod:`lab.aws.runproxy`); ``caller_credentials`` is the lab's own key pair every call
    must be signed with (a real account: the proxy holds the user's credentials, so it signs
    for nobody else; :mod:`lab.aws.proxy.callerauth`). In front of LocalStack there is none:
    that endpoint holds nothing of the user's, and checks no signature itself.
    """

    def __init__(
        self,
        upstream: str,
        *,
        lacks: Mapping[str, str],
        describe: str,
        region: str = "us-east-1",
        host: str = "127.0.0.1",
        token: str | None = None,
        ready_timeout: float = 30.0,
        credentials: CredentialsLike | None = None,
        guard: RequestGuard | None = None,
        caller_credentials: tuple[str, str] | None = None,
    ) -> None:
        bad = unknown_features(tuple(lacks))
        if bad:
            raise ValueError(f"lacks: unknown features {bad}; known: {', '.join(FEATURES)}")
        # without credentials calls are forwarded as their callers signed them (LocalStack
        # checks no signature); with them (a real account) each is signed again
        super().__init__(
            upstream,
            credentials=credentials,
            guard=guard,
            caller_credentials=caller_credentials,
            region=region,
            host=host,
            token=token,
            ready_timeout=ready_timeout,
        )
        self.lacks: Mapping[str, str] = MappingProxyType(dict(lacks))
        self.describe = describe
        self.upstream = upstream

    def missing(self, needed: tuple[str, ...]) -> dict[str, str]:
        """Which of ``needed`` this upstream lacks, with the reasons."""
        return {name: self.lacks[name] for name in needed if name in self.lacks}

    @property
    def lab(self) -> AwsLab:
        """The lab's moto state (fidelity, ELB model) does not exist in front of another
        endpoint: a clear error naming the upstream."""
        self._refuse("elb-model")

    def _refuse(self, feature: str) -> NoReturn:
        raise FeatureUnavailable(
            f"{FEATURES[feature]} lives in the lab's moto endpoint; this lab's AWS is "
            f"{self.describe} ({self.lacks.get(feature, 'not available here')})"
        )

    @overload
    def client(self, service: Literal["ec2"], *, max_attempts: int = 1) -> EC2Client: ...
    @overload
    def client(
        self, service: Literal["elb"], *, max_attempts: int = 1
    ) -> ElasticLoadBalancingClient: ...
    @overload
    def client(
        self, service: Literal["elbv2"], *, max_attempts: int = 1
    ) -> ElasticLoadBalancingv2Client: ...
    @overload
    def client(self, service: Literal["sts"], *, max_attempts: int = 1) -> STSClient: ...
    @overload
    def client(self, service: str, *, max_attempts: int = 1) -> Any: ...
    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client pointed at the proxy (this region; the lab's caller key when the
        proxy checks one, else dummy credentials), cached."""
        return super().client(service, max_attempts=max_attempts)
