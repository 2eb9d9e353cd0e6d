"""What the benchmarks share: a service to measure, the report table, the results file."""

from __future__ import annotations

import asyncio
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from sandbox.host.launcher import ServiceProcess
from sandbox.service.platform import STATE_DIR_ENV

T = TypeVar("T")

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent

# The program most benchmarks run: Python ``print(1)``, as a ``POST /v1/run`` body.
PROGRAM = "print(1)"
RUN_BODY = json.dumps({"language": "python", "code": PROGRAM}).encode()


# One agent step in a session: ``bash -c 'echo hi'`` (bench_sessions, bench_compare).
STEP = "echo hi"
STEP_BODY = json.dumps({"command": STEP}).encode()


async def open_session(http: httpx.AsyncClient) -> str:
    """A new session on the service's default policy; its id."""
    created = await http.post("/v1/sessions", json={})
    created.raise_for_status()
    return str(created.json()["id"])


def step_path(session_id: str) -> str:
    """Where a session's steps are posted."""
    return f"/v1/sessions/{session_id}/exec"


class Service(ServiceProcess):
    """``sandbox serve`` with a default policy sized for a benchmark, and state of its own
    (its audit log starts empty, shared with no other service on the machine)."""

    def __init__(
        self,
        *args: str,
        warm: int,
        max_size: int | None = None,
        max_uses: int = 100_000,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``args``: extra ``sandbox serve`` flags; ``env``: extra environment."""
        self._policies = tempfile.TemporaryDirectory(prefix="bench-policies-")
        policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
        policy["pool"] = {"warm": warm, "max": max_size or warm, "max_uses": max_uses}
        Path(self._policies.name, "default.yaml").write_text(yaml.safe_dump(policy))
        directory = Path(self._policies.name)
        env = {STATE_DIR_ENV: str(directory / "state"), **(env or {})}
        super().__init__(*args, policies=directory, log_dir=directory, env=env)

    def stop(self, timeout: float = 60.0) -> None:
        super().stop(timeout)
        self._policies.cleanup()


def report_table(
    results: dict[str, dict[str, dict[str, float]]],
    *,
    ours: str,
    baselines: tuple[str, ...],
    floor: str | None = None,
) -> str:
    """A Markdown table: per level, each system's p50/p99/throughput and our ratio to it
    (and, given the ``floor`` system, each p50 as a multiple of the floor's)."""
    rows = [
        "| level | system | p50 ms | p99 ms | per s | p50 ratio (them/us) |"
        + (" p50 x floor |" if floor else ""),
        "|---|---|---|---|---|---|" + ("---|" if floor else ""),
    ]
    for level, mine in results[ours].items():
        for system in (ours, *baselines):
            figures = results[system].get(level)
            if figures is None:
                continue
            ratio = figures["p50_ms"] / mine["p50_ms"]
            row = (
                f"| {level} | {system} | {figures['p50_ms']:.1f} | {figures['p99_ms']:.1f} | "
                f"{figures['throughput_per_s']:.0f} | {'' if system == ours else f'{ratio:.1f}x'} |"
            )
            if floor:
                row += f" {figures['p50_ms'] / results[floor][level]['p50_ms']:.1f}x |"
            rows.append(row)
    return "\n".join(rows)


def save_results(name: str, outcome: dict[str, object]) -> Path:
    """Write the raw figures to bench/results/NAME-TIMESTAMP.json and return the path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(outcome, indent=2))
    print(f"raw figures: {path}", file=sys.stderr)
    return path


class HttpConnection:
    """One keep-alive HTTP/1.1 connection that POSTs the same JSON body."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return int(status_line.split()[1]), payload

    def close(self) -> None:
        self.writer.close()


async def measure_calls(
    calls: Sequence[Callable[[], Awaitable[T]]],
    total: int,
    check: Callable[[T], None] | None = None,
) -> dict[str, float]:
    """``total`` calls in a closed loop, one worker per entry of ``calls`` (its concurrency),
    each call timed alone; ``check`` looks at each result outside the timing."""
    latencies: list[float] = []
    remaining = total

    async def worker(call: Callable[[], Awaitable[T]]) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            result = await call()
            latencies.append(time.perf_counter() - started)
            if check is not None:
                check(result)

    started = time.perf_counter()
    await asyncio.gather(*(worker(call) for call in calls))
    return summarise(latencies, time.perf_counter() - started)


async def measure_posts(
    url: str, paths: Sequence[str], body: bytes, expected_stdout: str, total: int
) -> dict[str, float]:
    """``total`` POSTs of ``body``, one keep-alive connection per entry of ``paths`` (its
    concurrency), each answer a 200 whose ``stdout`` is ``expected_stdout``.

    The load generator speaks HTTP/1.1 over raw asyncio streams so that the client's own
    cost stays small: the machine has two cores and whatever the client burns, the
    service loses."""
    host, _, port = url.removeprefix("http://").partition(":")
    connections = [await HttpConnection.open(host, int(port)) for _ in paths]

    def check(answer: tuple[int, bytes]) -> None:
        status, payload = answer
        if status != 200 or json.loads(payload).get("stdout") != expected_stdout:
            raise RuntimeError(f"bad answer {status}: {payload[:300]!r}")

    try:
        return await measure_calls(
            [
                functools.partial(conn.post, path, body)
                for conn, path in zip(connections, paths, strict=True)
            ],
            total,
            check,
        )
    finally:
        for conn in connections:
            conn.close()


async def measure_http(url: str, concurrency: int, total: int) -> dict[str, float]:
    """``total`` ``POST /v1/run`` of ``print(1)`` over ``concurrency`` keep-alive connections."""
    return await measure_posts(url, ["/v1/run"] * concurrency, RUN_BODY, "1\n", total)


def summarise(latencies: list[float], elapsed: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "throughput_per_s": len(ordered) / elapsed,
    }


def small_batch(count: int, cases: int = 1) -> list[dict[str, Any]]:
    """``count`` small ``/v1/evaluate`` items: read a number, print it plus the index, with
    ``cases`` I/O tests each (stdin 1, 2, ...)."""
    return [
        {
            "code": f"print({i} + int(input()))",
            "tests": {
                "kind": "io",
                "cases": [
                    {"stdin": str(j), "expected_stdout": str(i + j)} for j in range(1, cases + 1)
                ],
            },
        }
        for i in range(count)
    ]


def evaluate(
    url: str, items: list[dict[str, Any]], concurrency: int, *, early_stop: bool = False
) -> tuple[float, list[dict[str, Any]]]:
    """One ``POST /v1/evaluate`` batch: its seconds and its NDJSON lines (summary last)."""
    started = time.perf_counter()
    body = {"items": items, "concurrency": concurrency, "early_stop": early_stop}
    with httpx.stream("POST", url + "/v1/evaluate", json=body, timeout=600) as response:
        response.raise_for_status()
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    return time.perf_counter() - started, lines
