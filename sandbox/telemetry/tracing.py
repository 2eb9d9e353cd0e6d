"""OpenTelemetry spans of a call: request, queue wait, lease, execution, reset, judge.

Off unless :func:`configure` is given an OTLP/HTTP endpoint (``sandbox serve
--otel-endpoint``, else ``$OTEL_EXPORTER_OTLP_ENDPOINT``): then spans are batched
and posted to ``ENDPOINT/v1/traces``. Off, :func:`span` returns one shared no-op
object and ``opentelemetry`` is never imported (the ``otel`` extra may be absent).

Attributes an operator filters by: ``tenant``, ``policy``, ``language``, ``status``
(and ``request_id`` on the request span).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
SERVICE_NAME = "sandbox"

_tracer: Any = None
_provider: Any = None


class _NoSpan:
    """What :func:`span` gives when tracing is off: enters, sets and exits doing nothing."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def set(self, **_: object) -> None:
        return None


_NO_SPAN = _NoSpan()


class _Span:
    """A live span: :meth:`set` adds attributes (None values are left out)."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, **attributes: object) -> None:
        for key, value in attributes.items():
            if value is not None:
                plain = isinstance(value, bool | int | float)
                self._span.set_attribute(key, value if plain else str(value))


def enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracer is not None


def configure(endpoint: str | None = None) -> bool:
    """Export spans to the OTLP/HTTP collector at ``endpoint`` (else ``$ENDPOINT_ENV``).

    Returns whether tracing is on. Without an endpoint, nothing is imported.
    """
    global _tracer, _provider
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV)
    if not endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    traces = endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    _provider = provider
    _tracer = provider.get_tracer("sandbox")
    return True


def shutdown() -> None:
    """Flush the spans still batched and stop exporting; idempotent."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


@contextmanager
def _live(name: str, attributes: dict[str, object]) -> Iterator[_Span]:
    with _tracer.start_as_current_span(name) as otel_span:
        live = _Span(otel_span)
        live.set(**attributes)
        yield live


def span(name: str, **attributes: object) -> AbstractContextManager[_Span | _NoSpan]:
    """A span named ``name``, a child of the current one, as a context manager.

    ``with span("execution", policy=p) as s: ...; s.set(status=...)``. An exception
    leaving the block is recorded on the span and marks it as an error.
    """
    if _tracer is None:
        return _NO_SPAN
    return _live(name, attributes)
