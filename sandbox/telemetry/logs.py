"""Log records that carry the request: a filter adding the call's id and tenant, and a
formatter writing one JSON object per line (``sandbox serve --log-format json``)."""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, Literal

from . import context

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

TEXT_FORMAT = "%(asctime)s %(levelname).1s %(name)s: %(message)s"
TEXT_FORMAT_WITH_REQUEST = "%(asctime)s %(levelname).1s %(name)s [%(request_id)s]: %(message)s"

# What every LogRecord has; anything else on a record is an extra (``extra={...}``).
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "tenant",
    "taskName",
    "color_message",  # uvicorn's message with terminal colours
}


class CallFilter(logging.Filter):
    """Give each record the ``request_id`` and ``tenant`` of the call it was logged in.

    A record that already names them (``extra={"request_id": ...}``, as the runner
    channel's read loop does for the call it serves) keeps its own. ``-`` outside a call.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        call = context.current()
        if getattr(record, "request_id", None) is None:
            record.request_id = call.request_id if call is not None else "-"
        if getattr(record, "tenant", None) is None:
            record.tenant = (call.tenant if call is not None else None) or "-"
        return True


def _known(value: str | None) -> str | None:
    return None if value in (None, "-") else value


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message, request_id, tenant, extras.

    ``request_id`` and ``tenant`` are null outside a call (before the tenant is known).
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": _known(getattr(record, "request_id", None)),
            "tenant": _known(getattr(record, "tenant", None)),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, str | int | float | bool) else repr(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: int, log_format: LogFormat = "text", *, with_request: bool = False) -> None:
    """Log to stderr at ``level``: text (the request id in it ``with_request``) or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(CallFilter())
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        text = TEXT_FORMAT_WITH_REQUEST if with_request else TEXT_FORMAT
        handler.setFormatter(logging.Formatter(text, datefmt="%H:%M:%S"))
    logging.basicConfig(level=level, handlers=[handler])  # a no-op where logging is set up
    logging.captureWarnings(True)  # Python's warnings are log lines too (JSON ones in json)
