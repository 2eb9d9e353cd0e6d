"""Every platform failure is a :class:`SandboxError`.

A non-zero exit, a timeout or an out-of-memory kill of *user code* is data in
an :class:`~sandbox.results.ExecResult`, never an exception. The exceptions
below are about the platform, the request or the configuration, and each also
subclasses the builtin it resembles so callers can catch either::

    SandboxError
    ├── PolicyError(ValueError)           a policy file or value is refused
    ├── LimitError(ValueError)            a request asks for more than its policy allows
    ├── InvalidRequestError(ValueError)   a request is malformed (unknown language, bad path, ...)
    │   └── PayloadTooLargeError          too many files, or too many bytes of them
    ├── NotFoundError(LookupError)        a named policy, image or object does not exist
    │   └── SessionLostError              the session's host left the fleet (410)
    ├── AuthenticationError(PermissionError)  no API key, or an unknown one
    ├── ForbiddenError(PermissionError)   the key may not use this policy or object
    ├── CapacityError                     the pool is saturated; retry after ``retry_after`` s
    │   └── QuotaError                    the tenant is over its concurrency or rate quota
    ├── SandboxTimeoutError(TimeoutError) the platform itself did not answer in time
    └── InfrastructureError(RuntimeError) the engine or a container failed
        ├── EngineError                   the Docker engine refused or is unreachable
        ├── ContainerLostError            a container died or its runner stopped answering
        ├── FleetUnavailableError         no healthy host in the fleet can take the request
        └── ServiceUnreachableError(ConnectionError)  the client cannot reach the service

Messages say what to change.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Root of every error raised by the sandbox platform."""


class PolicyError(SandboxError, ValueError):
    """A policy file or value is refused.

    ``source`` names the file (or ``<request>``), ``key`` the dotted key path.
    """

    def __init__(self, message: str, *, source: str = "<policy>", key: str = "") -> None:
        self.source = source
        self.key = key
        self.reason = message
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + message)


class LimitError(SandboxError, ValueError):
    """A request asks for a limit above what its policy allows."""


class InvalidRequestError(SandboxError, ValueError):
    """A request is malformed: unknown language, bad file path, bad argument."""


class PayloadTooLargeError(InvalidRequestError):
    """A request carries more files, or more bytes, than a request may."""


class NotFoundError(SandboxError, LookupError):
    """A named policy, image or object does not exist."""


class SessionLostError(NotFoundError):
    """The host that held the session left the fleet (died or drained): start a new session."""


class CapacityError(SandboxError):
    """The pool is saturated and the wait queue is full."""

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class AuthenticationError(SandboxError, PermissionError):
    """No API key was presented, or an unknown one."""


class ForbiddenError(SandboxError, PermissionError):
    """The caller's key does not allow this policy or object."""


class QuotaError(CapacityError):
    """The tenant is over its concurrency quota or rate limit."""


class SandboxTimeoutError(SandboxError, TimeoutError):
    """The platform itself (engine, runner) did not answer in time."""


class UnsupportedError(SandboxError, NotImplementedError):
    """This kind of service does not offer the operation (a fleet and task environments)."""


class InfrastructureError(SandboxError, RuntimeError):
    """The engine or a container failed; never the fault of the user's code."""


class EngineError(InfrastructureError):
    """The Docker engine refused a request or cannot be reached."""


class ContainerLostError(InfrastructureError):
    """A container died, or its runner stopped answering, during an operation."""


class FleetUnavailableError(InfrastructureError):
    """No healthy host of the fleet can take the request; the message names the hosts down."""


class ServiceUnreachableError(InfrastructureError, ConnectionError):
    """The SDK could not reach the service, or the connection broke."""


# The wire contract: each error type has one HTTP status and one stable code.
# Most specific first: the first matching row wins. The API answers with it and
# the SDK turns a code back into the same exception type.
ERROR_CODES: tuple[tuple[type[SandboxError], int, str], ...] = (
    (PolicyError, 422, "policy_invalid"),
    (LimitError, 422, "limit_exceeded"),
    (PayloadTooLargeError, 413, "payload_too_large"),
    (InvalidRequestError, 422, "invalid_request"),
    (SessionLostError, 410, "session_lost"),
    (NotFoundError, 404, "not_found"),
    (AuthenticationError, 401, "unauthenticated"),
    (ForbiddenError, 403, "forbidden"),
    (QuotaError, 429, "quota_exceeded"),
    (CapacityError, 429, "capacity_exhausted"),
    (SandboxTimeoutError, 504, "platform_timeout"),
    (UnsupportedError, 501, "not_implemented"),
    (EngineError, 503, "engine_unavailable"),
    (ContainerLostError, 503, "container_lost"),
    (FleetUnavailableError, 503, "fleet_unavailable"),
    (InfrastructureError, 503, "infrastructure_error"),
    (SandboxError, 500, "sandbox_error"),
)


def status_and_code(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and stable code for ``exc`` (500 ``internal_error`` if not ours)."""
    for kind, status, code in ERROR_CODES:
        if isinstance(exc, kind):
            return status, code
    return 500, "internal_error"


def error_for_code(code: str) -> type[SandboxError]:
    """The exception type the API's error ``code`` stands for."""
    for kind, _, known in ERROR_CODES:
        if known == code:
            return kind
    return SandboxError
