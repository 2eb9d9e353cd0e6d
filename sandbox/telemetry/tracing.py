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
from contextlib import AbstractContextManager
from typing import Any

from sandbox.errors import InvalidRequestError

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
SERVICE_NAME = "sandbox"

_tracer: Any = None
_provider: Any = None
_otel: Any = None  # the opentelemetry package, once tracing is configured


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
    """A live span, current while its ``with`` block runs; :meth:`set` adds attributes
    (None values are left out). An exception leaving the block marks it as an error."""

    __slots__ = ("_attributes", "_name", "_span", "_token")

    def __init__(self, name: str, attributes: dict[str, object]) -> None:
        self._name = name
        self._attributes = attributes

    def __enter__(self) -> _Span:
        self._span = _tracer.start_span(self._name)
        self.set(**self._attributes)
        self._token = _otel.context.attach(_otel.trace.set_span_in_context(self._span))
        return self

    def __exit__(self, _: object, error: BaseException | None, __: object) -> None:
        _otel.context.detach(self._token)
        if error is not None:
            self._span.record_exception(error)
            why = f"{type(error).__name__}: {error}"
            self._span.set_status(_otel.trace.Status(_otel.trace.StatusCode.ERROR, why))
        self._span.end()

    def set(self, **attributes: object) -> None:
        for key, value in attributes.items():
            if value is not None:
                plain = isinstance(value, bool | int | float)
                self._span.set_attribute(key, value if plain else str(value))


def configure(endpoint: str | None = None) -> bool:
    """Export spans to the OTLP/HTTP collector at ``endpoint`` (else ``$ENDPOINT_ENV``).

    Returns whether tracing is on. Without an endpoint, nothing is imported; without the
    ``otel`` extra, :class:`~sandbox.errors.InvalidRequestError` says how to install it.
    """
    global _tracer, _provider, _otel
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV)
    if not endpoint:
        return False
    try:
        import opentelemetry.context
        import opentelemetry.trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise InvalidRequestError(
            f"traces to {endpoint} need the OpenTelemetry SDK and its OTLP/HTTP exporter "
            f"({exc.name} is missing): install the otel extra (pip install -e '.[otel]'; "
            f"make setup does), or unset --otel-endpoint and ${ENDPOINT_ENV}"
        ) from None

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    traces = endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    _otel = opentelemetry
    _provider = provider
    _tracer = provider.get_tracer("sandbox")
    return True


def shutdown() -> None:
    """Flush the spans still batched and stop exporting; idempotent."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def span(name: str, **attributes: object) -> AbstractContextManager[_Span | _NoSpan]:
    """A span named ``name``, a child of the current one, as a context manager.

    ``with span("execution", policy=p) as s: ...; s.set(status=...)``. An exception
    leaving the block is recorded on the span and marks it as an error.
    """
    if _tracer is None:
        return _NO_SPAN
    return _Span(name, attributes)
