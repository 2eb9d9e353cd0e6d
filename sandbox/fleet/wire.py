"""What crosses between a host agent and the router: platform errors as data, never tracebacks.

An agent answers every call with :class:`Reply`: the value, or the stable error
code, message and ``retry_after`` of the :class:`~sandbox.errors.SandboxError`
it raised. The router raises the same error type again, so a 404 on a host is
a 404 through the fleet, and Ray's remote tracebacks never reach a client.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sandbox.errors import (
    CapacityError,
    InfrastructureError,
    PolicyError,
    SandboxError,
    error_for_code,
    status_and_code,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reply:
    """A value, or the error (``code``, ``message``, ``retry_after``) that stood for it."""

    value: Any = None
    code: str | None = None
    message: str = ""
    retry_after: float | None = None

    @classmethod
    def failure(cls, exc: BaseException, host: str) -> Reply:
        """The reply for ``exc``: ours keep their code; anything else is an infra error."""
        if isinstance(exc, SandboxError):
            _, code = status_and_code(exc)
            return cls(code=code, message=str(exc), retry_after=getattr(exc, "retry_after", None))
        logger.exception("host %s: unexpected error", host, exc_info=exc)
        return cls(code="infrastructure_error", message=f"host {host} failed: {type(exc).__name__}")

    def unwrap(self) -> Any:
        """The value, or the error raised again as its own type."""
        if self.code is None:
            return self.value
        kind = error_for_code(self.code)
        if kind is SandboxError:  # a code this side does not know: still not the code's fault
            kind = InfrastructureError
        exc = kind.__new__(kind)
        Exception.__init__(exc, self.message)
        if isinstance(exc, CapacityError):
            exc.retry_after = self.retry_after or 1.0
        if isinstance(exc, PolicyError):
            exc.source, exc.key, exc.reason = "<host>", "", self.message
        raise exc
