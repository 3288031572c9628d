"""Errors of the lab's AWS endpoint and proxy: one class per AWS error code the lab answers.

Role: the lab answers some AWS calls itself instead of letting moto (or an upstream) do it:
request validation, the fidelity layer, fault injection, the proxy's caller check and run
guard. Each refusal is an instance of the class named after its AWS error code
(:class:`InvalidParameterValue`, :class:`InvalidGroupNotFound` for ``InvalidGroup.NotFound``,
...), which carries the code, the HTTP status the lab answers it with, and the message; the
``source`` the trail shows as ``answered_by`` (``"validation:<rule>"``, ``"fidelity:<rule>"``,
``"fault:<id>"``, ``"proxy:<part>"``) is given where it is raised. A few codes are answered
with another status by some callers (the caller check's 401 for EC2, 403 elsewhere): they pass
``status=``. :func:`lab.aws.protocol.error_response` is the one place that turns such an error
into bytes (EC2 and the ELB query services use different XML shapes, JSON-protocol calls
JSON), and the request pipeline (:mod:`lab.aws.pipeline`) the one place that calls it.

:class:`AwsControlError` is the error of the ``/_lab/`` control plane (JSON), shared by the
server side (:mod:`lab.aws.control`) and the typed client (:mod:`lab.aws.control_client`),
which raises :class:`AwsControlUnavailable` when it cannot reach the endpoint at all.

Neighbours: raised by :mod:`lab.aws.validation`, :mod:`lab.aws.fidelity`,
:mod:`lab.aws.faults`, :mod:`lab.aws.proxy`, :mod:`lab.aws.runproxy`; serialized by
:mod:`lab.aws.protocol`; re-raised client-side by :mod:`lab.aws.control_client`.
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


def not_allowed(service: str, message: str, *, source: str) -> AwsError:
    """403 for a call the caller may not make: EC2's :class:`UnauthorizedOperation`,
    :class:`AccessDenied` for every other service."""
    cls = UnauthorizedOperation if service == "ec2" else AccessDenied
    return cls(message, source=source)


class InternalError(AwsError):
    """A bug in the lab's own layers (the call's caller is not at fault)."""

    code = "InternalError"
    status = 500


class InternalFailure(AwsError):
    """The proxy's upstream broke off or answered something that is not HTTP."""

    code = "InternalFailure"
    status = 502


class ServiceUnavailable(AwsError):
    """The proxy's upstream cannot be reached (refused, DNS, connect timeout)."""

    code = "ServiceUnavailable"
    status = 503


class IncompleteSignature(AwsError):
    """A SigV4 signature without its parts, or with a malformed credential scope."""

    code = "IncompleteSignature"
    status = 400


class MalformedQueryString(AwsError):
    """A query string or form body that is not UTF-8 text (AWS's common error for a query
    string it cannot read)."""

    code = "MalformedQueryString"
    status = 400


class MissingParameter(AwsError):
    """EC2: a required parameter is absent (also a query call without ``Version``)."""

    code = "MissingParameter"
    status = 400


class InvalidParameterValue(AwsError):
    """EC2: a parameter's value is malformed or out of range."""

    code = "InvalidParameterValue"
    status = 400


class InvalidParameterCombination(AwsError):
    """EC2: two parameters that may not be given together."""

    code = "InvalidParameterCombination"
    status = 400


class ValidationError(AwsError):
    """ELB/ELBv2: AWS's validation framework refuses the call."""

    code = "ValidationError"
    status = 400


class InvalidAction(AwsError):
    """An ``Action`` the service does not have."""

    code = "InvalidAction"
    status = 400


class MissingAction(AwsError):
    """A call without an ``Action``."""

    code = "MissingAction"
    status = 400


class InvalidVpcIDNotFound(AwsError):
    """EC2: the VPC a call names does not exist."""

    code = "InvalidVpcID.NotFound"
    status = 400


class InvalidGroupNotFound(AwsError):
    """EC2: the security group a call names does not exist."""

    code = "InvalidGroup.NotFound"
    status = 400


class InvalidPrefixListIDNotFound(AwsError):
    """EC2: a permission names a prefix list that does not exist."""

    code = "InvalidPrefixListID.NotFound"
    status = 400


class NoSuchVersion(AwsError):
    """EC2: the ``Version`` names no API version of the service."""

    code = "NoSuchVersion"
    status = 400


class InvalidID(AwsError):
    """EC2: a resource id that is not well formed."""

    code = "InvalidID"
    status = 400


class InvalidInstanceIDNotFound(AwsError):
    """EC2: the instance a call names does not exist."""

    code = "InvalidInstanceID.NotFound"
    status = 400


class LoadBalancerNotFound(AwsError):
    """Classic ELB: the load balancer a call names does not exist."""

    code = "LoadBalancerNotFound"
    status = 400


class SubnetNotFound(AwsError):
    """ELB/ELBv2: a subnet a call names does not exist."""

    code = "SubnetNotFound"
    status = 400


class InvalidSecurityGroup(AwsError):
    """ELB/ELBv2: a security group a call names does not exist."""

    code = "InvalidSecurityGroup"
    status = 400


class InvalidTarget(AwsError):
    """ELBv2: a target that is not a valid instance."""

    code = "InvalidTarget"
    status = 400


class InvalidConfigurationRequest(AwsError):
    """ELBv2: a change the load balancer's configuration does not allow."""

    code = "InvalidConfigurationRequest"
    status = 400


class InvalidInstance(AwsError):
    """Classic ELB: an instance that does not exist or is terminated."""

    code = "InvalidInstance"
    status = 400


class CannotDelete(AwsError):
    """EC2: a VPC's ``default`` security group cannot be deleted."""

    code = "CannotDelete"
    status = 400


class DependencyViolation(AwsError):
    """A resource cannot be deleted while something depends on it (EC2, HTTP 400)."""

    code = "DependencyViolation"
    status = 400


class UnauthorizedOperation(AwsError):
    """EC2: the caller may not make this call (the run guard's refusal)."""

    code = "UnauthorizedOperation"
    status = 403


class AccessDenied(AwsError):
    """ELB/ELBv2/STS and other services: the caller may not make this call."""

    code = "AccessDenied"
    status = 403


class AuthFailure(AwsError):
    """EC2: the caller's credentials are not the ones the proxy accepts."""

    code = "AuthFailure"
    status = 401


class InvalidClientTokenId(AwsError):
    """Not EC2: the caller's key (or token) is not one the proxy accepts."""

    code = "InvalidClientTokenId"
    status = 403


class MissingAuthenticationToken(AwsError):
    """A call without any signature (EC2 answers it with 401)."""

    code = "MissingAuthenticationToken"
    status = 403


class RequestExpired(AwsError):
    """EC2: the signature's time is more than 15 minutes from the clock."""

    code = "RequestExpired"
    status = 400


class SignatureDoesNotMatch(AwsError):
    """Not EC2: the signature is not the one the proxy computes."""

    code = "SignatureDoesNotMatch"
    status = 403


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
