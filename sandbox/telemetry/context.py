"""The call being served: its request id, tenant and failure class, carried by a contextvar.

The HTTP layer opens a :class:`Call` per request (:func:`begin`); everything the
request reaches (the pool, the backend, background tasks spawned meanwhile, which
copy the context) sees the same object through :func:`current`, so a tenant bound
or a failure noted deep down is seen by the layer that opened it.
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Literal

MAX_REQUEST_ID_CHARS = 64
_SAFE_REQUEST_ID = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_REQUEST_ID_CHARS}}}")

FailureClass = Literal["user", "infra", "refused"]


@dataclass
class Call:
    """One request: its id, the tenant once known, and the worst failure noted so far."""

    request_id: str
    tenant: str | None = None
    failure: FailureClass | None = None


_CALL: ContextVar[Call | None] = ContextVar("sandbox_call", default=None)


def new_request_id() -> str:
    """A fresh request id: 32 hex digits."""
    return uuid.uuid4().hex


def accept_request_id(presented: str | None) -> str:
    """``presented`` if it is a safe id (1-64 of ``A-Za-z0-9._:-``), else a fresh one."""
    if presented and _SAFE_REQUEST_ID.fullmatch(presented):
        return presented
    return new_request_id()


def begin(request_id: str) -> tuple[Call, Token[Call | None]]:
    """Open a call in the current context; :func:`end` it with the token."""
    call = Call(request_id)
    return call, _CALL.set(call)


def end(token: Token[Call | None]) -> None:
    """Close the call :func:`begin` opened."""
    _CALL.reset(token)


def current() -> Call | None:
    """The call being served, if any (None outside a request)."""
    return _CALL.get()


def request_id() -> str | None:
    """The current request's id, if any."""
    call = _CALL.get()
    return call.request_id if call is not None else None


def bind_tenant(name: str) -> None:
    """Record the tenant of the current call (a no-op outside one)."""
    call = _CALL.get()
    if call is not None:
        call.tenant = name


_SEVERITY = {None: 0, "user": 1, "refused": 2, "infra": 3}


def note_failure(kind: FailureClass) -> None:
    """Record a failure of the current call; the most severe one noted wins (infra first)."""
    call = _CALL.get()
    if call is not None and _SEVERITY[kind] > _SEVERITY[call.failure]:
        call.failure = kind
