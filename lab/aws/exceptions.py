"""Errors of the lab's AWS endpoint, each carrying its wire identity.

Role: the fidelity layer and fault injection answer some AWS calls themselves instead of letting
moto do it; they raise an :class:`AwsError` subclass that names the AWS error code, the HTTP status
and the message. :mod:`lab.aws.protocol` is the one place that turns such an error into bytes (EC2
and the ELB query services use different XML shapes). :class:`AwsControlError` is the error of
the ``/_lab/`` control plane (JSON), shared by the server side (:mod:`lab.aws.control`) and the
typed client (:mod:`lab.aws.control_client`), which raises :class:`AwsControlUnavailable` when
it cannot reach the endpoint at all.

Neighbours: raised by :mod:`lab.aws.fidelity`, :mod:`lab.aws.faults`, :mod:`lab.aws.control`;
serialized by :mod:`lab.aws.protocol`; re-raised client-side by :mod:`lab.aws.control_client`.
"""

from __future__ import annotations


class AwsError(Exception):
    """An AWS API error answered by the lab (not by moto).

    ``code`` is the AWS error code boto3 exposes as ``ClientError.response["Error"]["Code"]``;
    ``status`` the HTTP status; ``source`` says which lab part produced it (``"fidelity:<rule>"``
    or ``"fault:<id>"``) and ends up in the trail.
    """

    code: str = "InternalError"
    status: int = 500

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        source: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.source = source

    @property
    def sender_fault(self) -> bool:
        """Whether the caller is at fault (4xx: ``Sender``) or AWS is (5xx: ``Receiver``)."""
        return self.status < 500


class DependencyViolation(AwsError):
    """A resource cannot be deleted while something depends on it (EC2, HTTP 400)."""

    code = "DependencyViolation"
    status = 400


class InjectedFault(AwsError):
    """An error injected on purpose by a fault rule (code and status chosen by the rule)."""


class AwsControlError(Exception):
    """A ``/_lab/`` control-plane request was refused (bad input or unknown resource).

    Carries the HTTP status and a message that names the offending field and value.
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class AwsControlUnavailable(Exception):
    """The control plane could not be reached (connection refused, timeout)."""
