"""What the HTTP layer costs a request: ours refusing one against a bare ASGI app on uvicorn.

Both servers run at once on this machine's loopback, on the same uvicorn (uvloop,
httptools), and get the same request over one keep-alive connection, rounds
alternating: ``POST /v1/run`` with a body that lacks ``code``. Ours refuses it at
validation (a 422 that has been through the middleware, routing, the tenant's key,
rate and slot, and the error handler; no sandbox is touched); the bare app answers
every request with a fixed 422 of the same shape. Reported per system: the p50
round trip and the server process's CPU per request (psutil), medians over rounds,
and ours as a multiple of the bare app's.

    .venv/bin/python bench/bench_http.py [--rounds 5] [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import HttpConnection, Service, measure_calls, save_results
from sandbox.host.launcher import free_port

REFUSED_BODY = b'{"language": "python"}'
# A bare ASGI app: drain the body, answer a fixed 422 of the shape ours sends.
BARE_APP = """
import json, sys, uvicorn

BODY = json.dumps({"code": "invalid_request", "message": "body.code: Field required"}).encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 422, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


async def wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return


async def measure(port: int, process: psutil.Process, requests: int) -> dict[str, float]:
    """``requests`` refused POSTs in a closed loop: p50 ms and the server's CPU ms each."""
    connection = await HttpConnection.open("127.0.0.1", port)

    def refused(answer: tuple[int, bytes]) -> None:
        if answer[0] != 422:
            raise RuntimeError(f"expected a 422, got {answer[0]}: {answer[1][:300]!r}")

    def post() -> Awaitable[tuple[int, bytes]]:
        return connection.post("/v1/run", REFUSED_BODY)

    try:
        await measure_calls([post], 100, refused)  # warm-up
        before = sum(process.cpu_times()[:2])  # user + system
        figures = await measure_calls([post], requests, refused)
        cpu = sum(process.cpu_times()[:2]) - before
    finally:
        connection.close()
    return {"p50_ms": figures["p50_ms"], "server_cpu_ms": cpu / requests * 1000}


async def run(args: argparse.Namespace) -> dict[str, object]:
    port = free_port()
    bare = subprocess.Popen([sys.executable, "-c", BARE_APP, str(port)])
    service = Service(warm=1)
    rounds: dict[str, list[dict[str, float]]] = {"ours": [], "bare uvicorn": []}
    try:
        await asyncio.to_thread(service.wait_ready)
        await wait_listening(port)
        ours_port = int(service.url.rsplit(":", 1)[1])
        systems = {
            "ours": (ours_port, psutil.Process(service.process.pid)),
            "bare uvicorn": (port, psutil.Process(bare.pid)),
        }
        for index in range(args.rounds):
            order = list(systems) if index % 2 == 0 else list(reversed(systems))
            for name in order:
                print(f"round {index + 1}/{args.rounds}: {name}...", file=sys.stderr)
                rounds[name].append(await measure(*systems[name], args.requests))
    finally:
        service.stop()
        bare.terminate()
        bare.wait(10)
    medians = {
        name: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for name, results in rounds.items()
    }
    return {"benchmark": "http_refused", "medians": medians, "rounds": rounds}


def table(medians: dict[str, dict[str, float]]) -> str:
    bare = medians["bare uvicorn"]
    rows = [
        "| system | p50 ms | server CPU ms a request | p50 x bare | CPU x bare |",
        "|---|---|---|---|---|",
    ]
    for name, figures in medians.items():
        rows.append(
            f"| {name} | {figures['p50_ms']:.3f} | {figures['server_cpu_ms']:.3f} | "
            f"{figures['p50_ms'] / bare['p50_ms']:.1f}x | "
            f"{figures['server_cpu_ms'] / bare['server_cpu_ms']:.1f}x |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each system once a round")
    parser.add_argument("--requests", type=int, default=3000, help="requests per round")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    print(table(outcome["medians"]))  # type: ignore[arg-type]
    save_results("bench_http", outcome)


if __name__ == "__main__":
    main()
