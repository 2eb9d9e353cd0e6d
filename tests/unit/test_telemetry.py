"""Request ids, the log filter and formatter, call classes, and tracing switched off.

What a real service does with them is tested in tests/api/test_observability.py;
here the pieces are checked one by one, for real (real records, a real asyncio
stream between the runner channel and a runner loop speaking the real framing).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import socket
import struct
import subprocess
import sys
from typing import Any

import pytest

from api.observe import call_class
from sandbox.backends.channel import RunnerChannel
from sandbox.evals.agents import TokenPrice, Tools
from sandbox.runner.protocol import HEADER, decode_body, encode_frame
from sandbox.telemetry import context, metrics, tracing
from sandbox.telemetry.logs import CallFilter, JsonFormatter


@pytest.mark.parametrize("safe", ["a", "req-1.2:3_x", "A" * 64])
def test_a_safe_request_id_is_kept(safe: str) -> None:
    assert context.accept_request_id(safe) == safe


@pytest.mark.parametrize("unsafe", [None, "", "A" * 65, "two words", "x\r\nSet-Cookie: a", "é"])
def test_an_unsafe_or_missing_request_id_is_replaced(unsafe: str | None) -> None:
    fresh = context.accept_request_id(unsafe)
    assert fresh != unsafe and len(fresh) == 32 and int(fresh, 16) >= 0


def test_the_most_severe_failure_of_a_call_wins() -> None:
    call, token = context.begin("r1")
    try:
        context.note_failure("user")
        context.note_failure("infra")
        context.note_failure("user")
    finally:
        context.end(token)
    assert call.failure == "infra"
    context.note_failure("infra")  # outside a call: nothing to note on
    assert context.current() is None


@pytest.mark.parametrize(
    ("status", "noted", "kind"),
    [
        (200, None, "ok"),
        (200, "user", "user"),
        (200, "infra", "infra"),
        (404, None, "refused"),
        (429, "user", "refused"),
        (503, None, "infra"),
        (500, "user", "infra"),
    ],
)
def test_call_classes(status: int, noted: context.FailureClass | None, kind: str) -> None:
    assert call_class(status, noted) == kind


def _json_logger(name: str = "test.telemetry.json") -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(CallFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(name)
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, out


def test_a_json_line_carries_the_call_and_the_extras() -> None:
    logger, out = _json_logger()
    logger.info("outside")
    _, token = context.begin("req-42")
    try:
        context.bind_tenant("team-a")
        logger.warning("inside %s", "it", extra={"sandbox": "abc123", "uses": 3})
        logger.info("own id", extra={"request_id": "other"})
    finally:
        context.end(token)
    outside, inside, own = (json.loads(line) for line in out.getvalue().splitlines())
    assert outside["request_id"] is None and outside["tenant"] is None
    assert {k: inside[k] for k in ("level", "logger", "message", "request_id", "tenant")} == {
        "level": "warning",
        "logger": "test.telemetry.json",
        "message": "inside it",
        "request_id": "req-42",
        "tenant": "team-a",
    }
    assert inside["sandbox"] == "abc123" and inside["uses"] == 3 and "ts" in inside
    assert own["request_id"] == "other" and own["tenant"] == "team-a"


def test_tracing_off_imports_no_opentelemetry_sdk() -> None:
    probe = (
        "import sys\n"
        "import sandbox.core.pool, sandbox.core.execution, sandbox.judge.judge\n"
        "core = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "from api.app import create_app\n"
        "from sandbox.telemetry import tracing\n"
        "create_app()\n"
        "assert not tracing.configure(None)\n"
        "with tracing.span('request', tenant='t') as s:\n"
        "    s.set(status=200)\n"
        "sdk = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))\n"
        "print(core, sdk)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != tracing.ENDPOINT_ENV}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[] []", out.stderr


_MUX = struct.Struct(">BxxxI")


async def test_the_channel_sends_the_request_id_and_logs_the_runners_lines_under_it() -> None:
    """A runner loop on the far end of a real socket pair reads each frame, writes a log
    line on its stderr stream and replies, multiplexed as Docker's attach stream is. The
    channel is made inside another call (as a container started for a request is): its
    runner's lines are never logged under that call's id."""
    seen: list[dict[str, object]] = []

    async def runner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
            request = decode_body(await reader.readexactly(size))
            seen.append(request)
            log = b"runner says hello\n"
            reply = encode_frame({"id": request["id"], "ok": True})
            writer.write(_MUX.pack(2, len(log)) + log + _MUX.pack(1, len(reply)) + reply)
            await writer.drain()

    logger, out = _json_logger("sandbox.backends.channel")
    here, there = socket.socketpair()
    far_reader, far_writer = await asyncio.open_connection(sock=there)
    serving = asyncio.create_task(runner(far_reader, far_writer))
    reader, writer = await asyncio.open_connection(sock=here)
    _, creating = context.begin("req-that-started-it")
    channel = RunnerChannel(reader, writer, "test")
    context.end(creating)
    try:
        await channel.call({"op": "ping"}, 5.0)  # outside a call: no id is sent
        _, token = context.begin("req-channel")
        try:
            await channel.call({"op": "ping"}, 5.0)
        finally:
            context.end(token)
        await asyncio.sleep(0.05)
    finally:
        await channel.close()
        serving.cancel()
        far_writer.close()
        logger.handlers = []
        logger.propagate = True
    assert "request_id" not in seen[0]
    assert seen[1]["request_id"] == "req-channel" and seen[1]["op"] == "ping"
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["request_id"] for e in lines if "hello" in e["message"]] == [None, "req-channel"]


def _sample(name: str, **labels: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return value or 0.0


def test_an_agents_model_call_is_counted_with_its_cost_in_the_metrics() -> None:
    # record_model_call touches neither the session manager nor the session.
    no_sessions: Any = None
    tools = Tools(no_sessions, "s", tenant="t", max_steps=5, timeout_s=60, command_wall_s=10)
    before = {
        "calls": _sample("sandbox_model_calls_total", source="eval"),
        "prompt": _sample("sandbox_model_tokens_total", source="eval", kind="prompt"),
        "completion": _sample("sandbox_model_tokens_total", source="eval", kind="completion"),
        "cost": _sample("sandbox_model_cost_total", source="eval"),
    }
    price = TokenPrice(prompt_per_1k=0.5, completion_per_1k=2.0)
    tools.record_model_call(
        usage={"prompt_tokens": 1000, "completion_tokens": 250}, duration_s=0.1, price=price
    )
    tools.record_model_call(usage=None, duration_s=0.1, price=price)  # no usage reported: 0
    assert _sample("sandbox_model_calls_total", source="eval") - before["calls"] == 2
    prompt = _sample("sandbox_model_tokens_total", source="eval", kind="prompt")
    completion = _sample("sandbox_model_tokens_total", source="eval", kind="completion")
    assert (prompt - before["prompt"], completion - before["completion"]) == (1000, 250)
    cost = _sample("sandbox_model_cost_total", source="eval") - before["cost"]
    assert cost == pytest.approx(0.5 + 0.5) and tools.usage.cost == pytest.approx(1.0)
    assert tools.usage.as_dict()["model_calls"] == 2
