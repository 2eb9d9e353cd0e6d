"""Which priority class a request runs in, and its turn for one of the fleet's execution slots.

The API resolves the class once per request (:meth:`Admission.bind`: the body's
``priority_class`` or the ``X-Priority-Class`` header, else the tenant's default, else
the default for the kind of request; 422 for an unknown class, 403 above the tenant's
``max_class``) into a context variable (:meth:`Admission.bound` for one call of a
:class:`~sandbox.fleet.Fleet` handle); every run or judgement the request makes, batch items
included (their tasks inherit the context), then waits for a slot of the
:class:`~sandbox.fleet.scheduler.Scheduler` in that class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from contextvars import ContextVar

from sandbox.fleet.config import FleetConfig, RequestKind
from sandbox.fleet.scheduler import Scheduler

HEADER = "X-Priority-Class"

_CLASS: ContextVar[str | None] = ContextVar("sandbox_fleet_class", default=None)


class Admission:
    """The fleet config's classes and the scheduler that orders work by them."""

    def __init__(self, config: FleetConfig, available: Callable[[], object]) -> None:
        self.config = config
        self.scheduler = Scheduler(config)
        self.available = available

    def bind(self, tenant: str, requested: str | None, kind: RequestKind) -> str:
        """Resolve and remember the class of the current request (422 / 403 when refused)."""
        klass = self.config.resolve_class(tenant, requested, kind)
        _CLASS.set(klass)
        return klass

    @contextmanager
    def bound(self, tenant: str, requested: str | None, kind: RequestKind) -> Iterator[str]:
        """:meth:`bind` for the block only (the class before it is back after it)."""
        token = _CLASS.set(self.config.resolve_class(tenant, requested, kind))
        try:
            yield _CLASS.get() or ""
        finally:
            _CLASS.reset(token)

    def slot(self, tenant: str) -> AbstractAsyncContextManager[float]:
        """Hold one execution slot in the request's class (a run's default without one):
        the scheduler's slot, entered with ``async with``.

        With no healthy host ``available`` raises at once (503) rather than queue for a slot.
        """
        self.available()
        klass = _CLASS.get() or self.config.resolve_class(tenant, None, "run")
        return self.scheduler.slot(tenant, klass)
