"""boto3 clients for the controller: region, custom endpoints, assumed role, retries.

Neighbours: :func:`controller.aws.new_cloud` builds one :class:`Clients` at start-up and hands
it to the load balancer and instances code; :mod:`controller.aws.config` supplies the
``[ServiceOverride]`` sections.

Design: endpoints come only from the cloud config's overrides or from what boto3 itself reads
(``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_EC2``, ``AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING``,
shared config files), so the same code talks to AWS or to any endpoint that speaks its
protocol. boto3's standard retry mode handles throttling inside one call; the service work
queue handles everything above that.

Call reporting: :func:`observe_calls` hooks botocore's per-attempt events
(``request-created`` stamps the start in the request context, ``response-received`` reports)
on each client and hands every HTTP attempt to a
:class:`~controller.runtime.metrics.CloudCallObserver`-shaped callback, so a call that boto3
retried after ``Throttling`` shows up as one ``Throttling`` and one ``success``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import boto3
import botocore.config
import botocore.session
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from controller.aws.config import CloudConfig
from controller.cloud import CloudError, RetryAfter

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elb import ElasticLoadBalancingClient
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client

log = logging.getLogger(__name__)

_CLIENT_CONFIG = botocore.config.Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=5,
    read_timeout=30,
    user_agent_extra="ccm-lab-controller",
)

#: every error an AWS call raises: AWS's answer (``ClientError``), no answer (``BotoCoreError``),
#: or an answer that is not AWS's (``ResponseParserError``, which botocore does not derive from
#: ``BotoCoreError``: e.g. a web server's HTML error page from an endpoint that lacks the call)
AWSError = (ClientError, BotoCoreError, ResponseParserError)
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "TooManyRequestsException",
        "SlowDown",
    }
)
THROTTLE_RETRY_SECONDS = 10.0

_F = TypeVar("_F", bound=Callable[..., Any])


class AWSAPIError(CloudError):
    """An AWS call failed; ``code`` is the AWS error code (``""`` for transport errors)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def translate(exc: ClientError | BotoCoreError | ResponseParserError) -> CloudError | RetryAfter:
    """SDK errors to the contract's vocabulary: throttling asks for a later retry."""
    code = error_code(exc)
    if code in THROTTLING_CODES:
        return RetryAfter(THROTTLE_RETRY_SECONDS, f"AWS throttled the request ({code}): {exc}")
    return AWSAPIError(code, f"AWS error{f' {code}' if code else ''}: {exc}")


def aws_errors(func: _F) -> _F:
    """Decorate a contract method so botocore exceptions never leave ``controller.aws``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AWSError as exc:
            raise translate(exc) from exc

    return cast(_F, wrapper)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ``ClientError`` (``""`` for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


@dataclass(frozen=True)
class Clients:
    ec2: EC2Client
    elb: ElasticLoadBalancingClient
    region: str
    elbv2: ElasticLoadBalancingv2Client | None = None  # NLBs; None only in hand-built tests

    @property
    def nlb(self) -> ElasticLoadBalancingv2Client:
        if self.elbv2 is None:
            raise CloudError("no ELBv2 client configured")
        return self.elbv2


def _client_kwargs(config: CloudConfig, service: str, region: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"region_name": region, "config": _CLIENT_CONFIG}
    override = config.override_for(service, region)
    if override is not None:
        kwargs["endpoint_url"] = override.url
        kwargs["region_name"] = override.signing_region or region
        log.info("using endpoint override %s for %s in %s", override.url, service, region)
    return kwargs


def _with_signing_name(client: Any, config: CloudConfig, service: str, region: str) -> Any:
    """Upstream ``WithSigV4SigningName``: an override's ``SigningName`` is the service name in
    the SigV4 credential scope of every request the client signs (an endpoint that fronts a
    service under another name). Without one, the SDK's own name is used."""
    override = config.override_for(service, region)
    if override is None or not override.signing_name:
        return client
    name = override.signing_name

    def sign_as(request: Any, **_: Any) -> None:
        request.context.setdefault("signing", {})["signing_name"] = name

    hyphenized = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"before-sign.{hyphenized}", sign_as)
    return client


_shared_lock = threading.Lock()


#: "loader": (data path, loader) whose service models were parsed before a fork
#: (:func:`preload_models`)
_preloaded: dict[str, tuple[object, Any]] = {}


def preload_models(services: Sequence[str] = ("ec2", "elb", "elbv2")) -> None:
    """Parse what creating these clients reads (service models, endpoint rules, partitions)
    into a loader later sessions reuse. For ``controller.preload``: a launcher that forks an
    interpreter which imported the controller already saves the parse (a third of a second
    for EC2) on every start. Nothing else is kept: the throwaway session's configuration and
    credentials are dropped, and a session whose data path differs loads its own models."""
    session = botocore.session.Session()
    for service in services:
        session.create_client(
            service,
            region_name="us-east-1",
            aws_access_key_id="preload",
            aws_secret_access_key="preload",
        )
    _preloaded["loader"] = (
        session.get_config_variable("data_path"),
        session.get_component("data_loader"),
    )


@functools.lru_cache(maxsize=1)
def _shared_botocore() -> botocore.session.Session:
    session = botocore.session.get_session()
    preloaded = _preloaded.get("loader")
    if preloaded is not None and session.get_config_variable("data_path") == preloaded[0]:
        session.register_component("data_loader", preloaded[1])
    return session


def _shared_session(region: str) -> boto3.Session:
    """A boto3 session over one process-wide botocore session, so service models are loaded
    once (creating an EC2 client from a fresh session costs about a second)."""
    with _shared_lock:
        return boto3.Session(botocore_session=_shared_botocore(), region_name=region)


def _session(config: CloudConfig, region: str) -> boto3.Session:
    if not config.role_arn:
        return _shared_session(region)
    base = boto3.Session(region_name=region)
    # Assume the configured role with refreshing credentials (upstream stscreds provider).
    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

    extra: dict[str, Any] = {"RoleSessionName": "ccm-lab-controller"}
    if config.source_arn:
        extra["SourceArn"] = config.source_arn  # sent as x-amz-source-arn by STS
    sts_kwargs = _client_kwargs(config, "sts", region)

    def create_client(service_name: str, **kwargs: Any) -> Any:
        kwargs.update({k: v for k, v in sts_kwargs.items() if k != "config"})
        client = base.client(service_name, **kwargs)  # type: ignore[call-overload]
        return _with_signing_name(client, config, "sts", region)

    fetcher = AssumeRoleCredentialFetcher(
        client_creator=create_client,
        source_credentials=base.get_credentials(),
        role_arn=config.role_arn,
        extra_args=extra,
    )
    creds = DeferredRefreshableCredentials(
        method="assume-role", refresh_using=fetcher.fetch_credentials
    )
    bc = base._session  # botocore session behind the boto3 one
    bc._credentials = creds  # type: ignore[attr-defined]  # no public setter for refreshables
    return boto3.Session(botocore_session=bc, region_name=region)


def make_clients(config: CloudConfig, region: str) -> Clients:
    session = _session(config, region)
    ec2 = session.client("ec2", **_client_kwargs(config, "ec2", region))
    elb = session.client("elb", **_client_kwargs(config, "elb", region))
    elbv2 = session.client("elbv2", **_client_kwargs(config, "elbv2", region))
    return Clients(
        ec2=_with_signing_name(ec2, config, "ec2", region),
        elb=_with_signing_name(elb, config, "elb", region),
        region=region,
        elbv2=_with_signing_name(elbv2, config, "elbv2", region),
    )


# ---------------------------------------------------------------------------------------
# Call reporting
# ---------------------------------------------------------------------------------------

REQUEST_ERROR = "RequestError"
_STARTED = "ccm_call_started"


class CallObserver(Protocol):
    """What :func:`observe_calls` reports to (``controller.runtime.metrics.Metrics`` is one)."""

    def observe_cloud_call(
        self, *, service: str, action: str, outcome: str, seconds: float
    ) -> None: ...


def call_outcome(parsed: Any, exception: BaseException | None) -> str:
    """``"success"``, the AWS error code, or ``"RequestError"`` when no answer came back."""
    if exception is not None or not isinstance(parsed, dict):
        return REQUEST_ERROR
    status = int(parsed.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    code = str(parsed.get("Error", {}).get("Code", "") or "")
    if code:
        return code
    if 200 <= status < 300:
        return "success"
    return f"HTTP{status}" if status else REQUEST_ERROR


class _CallHooks:
    """botocore event handlers for one client; ``observer`` may be swapped or cleared."""

    def __init__(
        self, service: str, observer: CallObserver | None, clock: Callable[[], float]
    ) -> None:
        self.service = service
        self.observer = observer
        self.clock = clock

    def started(self, request: Any = None, **_: Any) -> None:
        context = getattr(request, "context", None)
        if isinstance(context, dict):
            context[_STARTED] = self.clock()

    def received(
        self,
        *,
        event_name: str = "",
        parsed_response: Any = None,
        context: Any = None,
        exception: BaseException | None = None,
        **_: Any,
    ) -> None:
        observer = self.observer
        if observer is None:
            return
        started = context.get(_STARTED) if isinstance(context, dict) else None
        seconds = self.clock() - started if isinstance(started, float) else 0.0
        action = event_name.rsplit(".", 1)[-1]
        try:
            observer.observe_cloud_call(
                service=self.service,
                action=action,
                outcome=call_outcome(parsed_response, exception),
                seconds=seconds,
            )
        except Exception:  # a metrics failure must never fail an AWS call
            log.exception("cloud call observer failed for %s %s", self.service, action)


_HOOKS_ATTR = "_ccm_call_hooks"


def observe_calls(
    clients: Clients,
    observer: CallObserver | None,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Report every HTTP attempt of ``clients`` to ``observer`` (``None`` stops reporting).

    Idempotent: calling it again swaps the observer without registering handlers twice.
    """
    pairs: list[tuple[str, Any]] = [("ec2", clients.ec2), ("elb", clients.elb)]
    if clients.elbv2 is not None:
        pairs.append(("elbv2", clients.elbv2))
    for service, client in pairs:
        hooks = getattr(client, _HOOKS_ATTR, None)
        if isinstance(hooks, _CallHooks):
            hooks.observer = observer
            continue
        hooks = _CallHooks(service, observer, clock)
        setattr(client, _HOOKS_ATTR, hooks)
        events = client.meta.events
        events.register("request-created.*.*", hooks.started, unique_id=f"ccm-start-{service}")
        events.register("response-received.*.*", hooks.received, unique_id=f"ccm-report-{service}")


_SDK_V1_LOCK = threading.Lock()


def revoke_as_sdk_v1(ec2: EC2Client, group_id: str, permissions: Sequence[dict[str, Any]]) -> None:
    """``RevokeSecurityGroupIngress`` on the wire as aws-sdk-go v1 sent it: an empty list
    member (``IpRanges``, ``Ipv6Ranges``, ``UserIdGroupPairs``, ``PrefixListIds``) goes out
    as ``IpPermissions.N.<Name>=`` (aws-sdk-go ``private/protocol/query/queryutil``
    ``parseList``: "If it's empty, generate an empty value"), where botocore leaves it out.

    Only the legacy ``k8s-57568`` path uses it, to send the request upstream v1.9.0 sent;
    a ``before-sign`` handler adds the empty members, so the signature covers them.
    """
    wire = {"IpRanges": "IpRanges", "Ipv6Ranges": "Ipv6Ranges"}
    wire |= {"UserIdGroupPairs": "Groups", "PrefixListIds": "PrefixListIds"}
    empty = {
        f"IpPermissions.{i}.{wire[key]}"
        for i, perm in enumerate(permissions, 1)
        for key in wire
        if key in perm and not perm[key]
    }

    def add_empty_members(request: Any, **_: Any) -> None:
        if isinstance(request.data, dict) and request.data.get("GroupId") == group_id:
            request.data.update(dict.fromkeys(empty, ""))

    sent = [{k: v for k, v in p.items() if v != []} for p in permissions]
    event = "before-sign.ec2.RevokeSecurityGroupIngress"
    events = ec2.meta.events
    with _SDK_V1_LOCK:
        events.register_first(event, add_empty_members, unique_id="ccm-sdk-v1-empty-lists")
        try:
            ec2.revoke_security_group_ingress(GroupId=group_id, IpPermissions=cast(Any, sent))
        finally:
            events.unregister(event, unique_id="ccm-sdk-v1-empty-lists")
