"""The endpoint's WSGI application: moto's server app wrapped by faults, fidelity and trail.

Role: one WSGI app serves three things on one port:

* ``/_lab/...``: the control plane (:mod:`lab.aws.control`), JSON over HTTP;
* ``/moto-api/...`` and ``/latest/...``: moto's own dashboard/API and metadata, passed through
  untouched and not trailed;
* given the lab's token (``token=``), ``/_lab/`` and ``/moto-api/`` answer only requests that
  carry it as ``Authorization: Bearer <token>`` (401 otherwise, nothing done): they reset and
  rewrite the world. AWS calls stay SigV4-signed as on AWS and ``/latest/`` stays open, since
  real clients make those (:mod:`lab.component.bearer`);
* everything else: AWS API calls, through the endpoint's composition of the request pipeline
  (:mod:`lab.aws.pipeline`; the stages only this endpoint has are in :mod:`lab.aws.motostages`):
  identify, route, faults, refuse, then under one lock the health models, validation, the
  fidelity layer and moto's ``DomainDispatcherApplication``, and the trail; faults and trail
  are the :class:`lab.aws.calls.CallRecorder` the recording proxy (:mod:`lab.aws.proxy`) uses
  too.

:class:`AwsLab` is the endpoint's state: settings, trail and faults, fidelity layer, validator,
the health models (``elb_health``, ``nlb_health``, wired here and advanced by
:meth:`AwsLab.advance`), reset, seed, checkpoint and restore (moto's process-global state
through :mod:`lab.aws.motostate`).

Design: AWS calls enter moto one at a time (:attr:`AwsLab.lock`). moto's backends are plain
dicts without their own locking, and the fidelity checks ("is this group still referenced?")
must see the same state the following delete acts on. Injected latency is slept outside the lock
so a slowed call does not stall others. moto's backends are process-global: two labs in one
process share AWS state (their trails, faults and switches stay separate). The account id is
forced per lab through moto's ``x-moto-account-id`` header.

Neighbours: served by :mod:`lab.aws.server` (thread) and :mod:`lab.aws.__main__` (CLI); moto's
patches in :mod:`lab.aws.motopatches`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.aws import motostate
from lab.aws.calls import CallRecorder
from lab.aws.control import LabControlRoutes, unauthorized
from lab.aws.exceptions import AwsControlError
from lab.aws.fidelity import FidelityLayer, MotoView
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.health.classic import ElbHealth
from lab.aws.health.network import NlbHealth
from lab.aws.health.schedule import Schedule
from lab.aws.motostages import (
    Fidelity,
    Health,
    MotoDispatch,
    Refuse,
    Route,
    Session,
    Validate,
)
from lab.aws.pipeline import Faults, Pipeline
from lab.aws.validation.validator import RequestValidator
from lab.clock import DEFAULT_SPEED, ScaledClock
from lab.component import InternalErrors
from lab.component.bearer import bearer_ok, refusal
from lab.settle import Progress

log = logging.getLogger(__name__)

DEFAULT_ACCOUNT = "123456789012"
StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class LabSettings:
    """What a lab is started with (and what :meth:`AwsLab.reset` returns to)."""

    region: str = "us-east-1"
    account: str = DEFAULT_ACCOUNT
    seed: int | None = None
    fidelity: FidelityConfig = field(default_factory=FidelityConfig)
    trail_path: Path | None = None
    trail_enabled: bool = True
    clock_speed: float = DEFAULT_SPEED
    """Lab seconds per real second of the ELB health checks' clock (``lab.clock``)."""


class AwsLab:
    """The state of one endpoint: settings, trail, faults, fidelity, and the request lock."""

    def __init__(self, settings: LabSettings) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self.calls = CallRecorder(
            trail_path=settings.trail_path, trail_enabled=settings.trail_enabled
        )
        """Fault rules and the trail (shared with the recording proxy)."""
        self.trail = self.calls.trail
        self.faults = self.calls.faults
        self.fidelity = FidelityLayer(settings.fidelity, account=settings.account)
        self.validator = RequestValidator()
        """Answers malformed calls like AWS before moto sees them (:mod:`lab.aws.validation`)."""
        self.seed: int | None = settings.seed
        self.moto: Any = motostate.moto_dispatcher()
        self.started = time.time()
        self.internal_errors = InternalErrors()
        """Exceptions raised inside the lab's own layers (a test should see none)."""
        schedule = Schedule(self, clock=ScaledClock(settings.clock_speed))
        self.elb_health = ElbHealth(self, schedule)
        """Classic ELB health checks and draining (its ``clock`` is the lab clock)."""
        self.nlb_health = NlbHealth(self, schedule)
        """NLB target health: the same clock, prober and ticker as :attr:`elb_health`."""
        self.generation = 0
        """Bumped by every call that may change AWS state (not Describe/List/Get) and by
        resets: in-process readers cache what they derive from moto's backends per value."""
        self._checkpoint: motostate.Checkpoint | None = None
        if self.seed is not None:
            self.apply_seed(self.seed)

    def apply_seed(self, seed: int) -> None:
        """Seed moto's id generator: the same calls then create the same resource ids."""
        from moto.moto_api._internal import mock_random

        with self.lock:
            self.seed = seed
            mock_random.seed(seed)

    def reset(self) -> None:
        """Wipe all moto state (process-wide), the trail, faults and fidelity state.

        Fidelity switches return to the lab's start-up settings; the seed, if any, is applied
        again so ids after a reset repeat.
        """
        with self.lock:
            motostate.reset_moto()
            self._forget()
            if self.seed is not None:
                self.apply_seed(self.seed)
        log.info("aws lab reset")

    def _forget(self) -> None:
        """What a reset and a restore both drop: the lab's own state beside moto's (trail,
        faults, fidelity switches and transitions, validator tokens, health models, errors)."""
        self.generation += 1
        self.calls.clear()
        self.fidelity.reset(self.settings.fidelity)
        self.validator.reset()
        self.elb_health.reset()
        self.nlb_health.reset()
        self.internal_errors.clear()

    def checkpoint(self) -> None:
        """Remember the whole AWS state as it is now, to :meth:`restore` it later.

        A lab takes one right after seeding its world, so that a reset is one restore instead
        of a wipe and ~30 seeding calls (half a second per test). Like a reset, it covers
        moto's state process-wide, plus moto's id generator, so the ids the next calls get
        after a restore repeat too. Refused (409) while an instance is between states (a
        pending transition of the fidelity layer is not part of moto's state).
        """
        from moto.moto_api._internal import mock_random

        with self.lock:
            pending = self.fidelity.lifecycle.pending()
            if pending:
                raise AwsControlError(
                    f"checkpoint: instances between states {pending}; wait until they settle",
                    status=409,
                )
            backends = motostate.copy_backends(motostate.live_backends())
            self._checkpoint = motostate.Checkpoint(backends, mock_random.getstate())
        log.info("aws lab checkpoint taken")

    def restore(self) -> None:
        """Back to the last :meth:`checkpoint` (moto's state, process-wide, and its id
        generator); the trail, faults, fidelity switches and health checks reset as with
        :meth:`reset`. 409 without a checkpoint."""
        from moto.moto_api._internal import mock_random

        with self.lock:
            saved = self._checkpoint
            if saved is None:
                raise AwsControlError(
                    "restore: no checkpoint taken (POST /_lab/checkpoint first)", status=409
                )
            motostate.reset_moto()
            motostate.install_backends(motostate.copy_backends(saved.backends))
            mock_random.setstate(saved.random_state)
            self._forget()
        log.info("aws lab restored to its checkpoint")

    def warm_up(self) -> None:
        """Load moto's EC2 and ELB backends and apps now instead of on the first call.

        The first EC2 call in a process costs 1-2 s (models, routes, ~1,300 default images);
        an endpoint that says "ready" should not stall its first client. Requests go straight
        to moto, so they leave no trail.
        """
        from werkzeug.test import EnvironBuilder

        region = self.settings.region
        calls = (
            ("ec2", "DescribeVpcs", "2016-11-15"),
            ("elasticloadbalancing", "DescribeLoadBalancers", "2012-06-01"),
            ("elasticloadbalancing", "DescribeLoadBalancers", "2015-12-01"),
        )
        with self.lock:
            for service, action, version in calls:
                auth = (
                    f"AWS4-HMAC-SHA256 Credential=warmup/20260101/{region}/{service}/aws4_request,"
                    " SignedHeaders=host, Signature=0"
                )
                environ = EnvironBuilder(
                    method="POST",
                    path="/",
                    data=f"Action={action}&Version={version}",
                    content_type="application/x-www-form-urlencoded; charset=utf-8",
                    headers=[
                        ("Authorization", auth),
                        ("X-Moto-Account-Id", self.settings.account),
                    ],
                ).get_environ()
                response = motostate.call_wsgi(self.moto, environ)
                if response.status != 200:
                    raise RuntimeError(f"warm-up {service} {action} failed: {response.body!r}")

    def advance(self) -> None:
        """Apply due time-based fidelity behaviour now (instance transitions, expiry).

        AWS calls do this on their own; in-process readers of moto's backends (e.g. a metadata
        service reading instance state) call it before they look.
        """
        with self.lock:
            self.fidelity.tick()
            self.elb_health.tick()
            self.nlb_health.tick()

    def progress(self) -> Progress:
        """The health models, for the settle barrier (``lab.settle``): checks due by now run
        first, as any question to the endpoint runs them (the ticker runs them at their lab
        time), so what is left is when the next one falls due."""
        with self.lock:
            self.advance()
            now = self.elb_health.clock.now()
        return Progress(
            "aws-health-checks", True, next_timer=self.elb_health.schedule.next_due(after=now)
        )

    def health(self) -> dict[str, Any]:
        """What ``GET /_lab/health`` answers (after applying due time-based behaviour)."""
        self.advance()
        return {
            "status": "ok",
            "region": self.settings.region,
            "account": self.settings.account,
            "seed": self.seed,
            "uptime_s": round(time.time() - self.started, 3),
            "trail_events": len(self.trail),
            "faults": len(self.faults),
            "internal_errors": self.internal_errors.peek(),
        }

    def close(self) -> None:
        self.elb_health.stop_ticker()
        self.calls.close()


class AwsApp:
    """WSGI callable for one :class:`AwsLab` (see module docstring)."""

    def __init__(self, lab: AwsLab, *, token: str | None = None) -> None:
        self.lab = lab
        #: the lab's bearer token, required on ``/_lab/`` and ``/moto-api/`` (None: open)
        self.token = token
        self.control = LabControlRoutes(lab)
        account = lab.settings.account

        def config() -> FidelityConfig:
            return lab.fidelity.config

        def view(region: str) -> MotoView:
            return MotoView(account, region)

        def bump() -> None:
            lab.generation += 1

        self.pipeline = Pipeline(
            "endpoint",
            [
                Route(account=account, config=config),
                Faults(lab.calls),
                Refuse(),
                Session(lab.lock, tick=lab.fidelity.tick),
                Health([lab.elb_health, lab.nlb_health], poke=lab.elb_health.poke_ticker),
                Validate(lab.validator, config=config, view=view),
                Fidelity(lab.fidelity, on_write=bump),
                MotoDispatch(lab.moto),
            ],
            calls=lab.calls,
            internal_errors=lab.internal_errors,
            default_region=lab.settings.region,
            answered_by="moto",
            json_errors=False,
        )
        """The AWS calls' way through the endpoint (:mod:`lab.aws.pipeline`)."""

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        control = path.startswith("/_lab/") or path == "/_lab"
        if control or path.startswith("/moto-api"):
            authorization = environ.get("HTTP_AUTHORIZATION")
            if not bearer_ok(authorization, self.token):
                what = "the AWS endpoint's " + ("/_lab/" if control else "/moto-api/")
                return unauthorized(refusal(what, authorization), environ, start_response)
        if control:
            return self.control(environ, start_response)
        if path.startswith(("/moto-api", "/latest/")):
            passthrough: Iterable[bytes] = self.lab.moto(environ, start_response)
            return passthrough
        return self.pipeline.wsgi(environ, start_response)
