"""Errors of the instance metadata service, each carrying its wire status.

Neighbours: ``models`` and ``handlers`` raise these; ``routes.error_response`` is the one
place that turns them into HTTP responses (status, a small HTML body shaped like the real
IMDS error page, and an ``X-Ccm-Lab-Error`` header naming the class so tests and logs can
tell a lab-specific refusal from a plain "no such path").

Status codes follow the real service as far as the public documentation and botocore's
client code pin them down (``shared/docs/reference/peers.md`` §4.3): 400 for a bad token
request (botocore raises ``BadIMDSRequestError``), 401 for a missing/invalid/expired token,
403 for a token request carrying ``X-Forwarded-For`` (botocore falls back to IMDSv1), 404 for
an unknown path and 405 for a wrong method. The lab adds 503 for "this instance has no running
metadata service" (stopped, terminated, unknown or unmapped instance).
:class:`ImdsControlError` is what the typed control client (``control_client``) raises when
the control plane refuses a request.
"""

from __future__ import annotations

from typing import ClassVar


class ImdsError(Exception):
    """Base class: ``status`` is the HTTP status, ``code`` a stable machine-readable name."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "InternalError"
    title: ClassVar[str] = "Internal Server Error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ImdsError):
    status = 400
    code = "BadRequest"
    title = "Bad Request"


class Unauthorized(ImdsError):
    status = 401
    code = "Unauthorized"
    title = "Unauthorized"


class Forbidden(ImdsError):
    status = 403
    code = "Forbidden"
    title = "Forbidden"


class NotFound(ImdsError):
    status = 404
    code = "NotFound"
    title = "Not Found"


class MethodNotAllowed(ImdsError):
    status = 405
    code = "MethodNotAllowed"
    title = "Method Not Allowed"


class InstanceUnavailable(ImdsError):
    """The caller maps to no instance, or to one that is stopped, terminated or unknown."""

    status = 503
    code = "InstanceUnavailable"
    title = "Service Unavailable"


class InvalidControlRequest(ImdsError):
    """A ``/_lab/`` control request with a bad field; the message names the field and value."""

    status = 400
    code = "InvalidControlRequest"
    title = "Bad Request"


class ControlUnauthorized(ImdsError):
    """A ``/_lab/`` control request without the lab's bearer token (the data plane never
    asks for it); the message says where the token is."""

    status = 401
    code = "LabTokenRequired"
    title = "Unauthorized"


class Ec2Unreachable(ImdsError):
    """The AWS endpoint backing the metadata did not answer (not an AWS error reply)."""

    status = 502
    code = "Ec2Unreachable"
    title = "Bad Gateway"


class Ec2Error(ImdsError):
    """The AWS endpoint answered a read with an error (e.g. an injected throttling fault)."""

    status = 502
    code = "Ec2Error"
    title = "Bad Gateway"


class ImdsControlError(RuntimeError):
    """The control plane refused a request (client side): its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"imds control plane answered {status}: {message}")
        self.status = status
