"""What the health models need of the AWS endpoint: a Protocol, so they never import it.

Role: the health models (:mod:`lab.aws.health.model` and its two kinds), the views and the
security-group view read moto's backends under the endpoint's request lock, honour its
fidelity switches, report their own failures to its internal errors, cache per its
generation, and their ticker applies the endpoint's due time-based behaviour. That is all
they know of the endpoint; :class:`lab.aws.app.AwsLab` satisfies :class:`HealthLab`
structurally and builds the models.

Design: the endpoint owns the models (it calls them around every AWS call), so the models
cannot also import the endpoint without an import circle; a Protocol here turns the arrow
one way (:mod:`lab.aws.app` over :mod:`lab.aws.health`). Every member is a read-only
property so that ``AwsLab``'s plain attributes satisfy it.

Neighbours: every other module of the package; :mod:`lab.aws.fidelity` (``MotoView``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from lab.aws.fidelity import MotoView


class Where(Protocol):
    """The endpoint's account and default region."""

    @property
    def account(self) -> str: ...

    @property
    def region(self) -> str: ...


class Switches(Protocol):
    """The fidelity switches the health models honour."""

    @property
    def enabled(self) -> bool: ...

    @property
    def elb_health_checks(self) -> bool: ...

    @property
    def nlb_health_checks(self) -> bool: ...


class Fidelity(Protocol):
    """The endpoint's fidelity layer: its switches and its time-based behaviour."""

    @property
    def config(self) -> Switches: ...

    def tick(self) -> None:
        """Apply due instance transitions (a question sees instances as they are now)."""


class Errors(Protocol):
    """Where the lab's own failures go (a test fixture fails the test on any)."""

    def record(self, text: str) -> None: ...


class HealthLab(Protocol):
    """The endpoint as the health package sees it (``AwsLab`` satisfies it)."""

    @property
    def settings(self) -> Where: ...

    @property
    def lock(self) -> AbstractContextManager[object]:
        """The request lock: moto's backends are read and changed under it only."""

    @property
    def fidelity(self) -> Fidelity: ...

    @property
    def internal_errors(self) -> Errors: ...

    @property
    def generation(self) -> int:
        """Bumped by every call that may change AWS state (caches key on it)."""

    def advance(self) -> None:
        """Apply due time-based behaviour: instance transitions and every health check."""


def moto_view(aws: HealthLab, region: str | None = None) -> MotoView:
    """moto's backends of the endpoint's account in ``region`` (default: the endpoint's);
    ``KeyError`` for a region moto does not serve."""
    settings = aws.settings
    return MotoView(settings.account, region or settings.region)


__all__ = ["Errors", "Fidelity", "HealthLab", "Switches", "Where", "moto_view"]
