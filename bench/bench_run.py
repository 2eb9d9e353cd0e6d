"""Python ``print(1)``: our HTTP API on a warm pool vs ``docker exec`` vs ``docker run --rm``.

All three run the same image and the same program, in one run, side by side,
at concurrency 1 and 8; the report gives p50, p99, throughput and the ratios.

    .venv/bin/python bench/bench_run.py            # starts its own service
    .venv/bin/python bench/bench_run.py --url URL  # or measures a running one

The load generator speaks HTTP/1.1 over raw asyncio streams (keep-alive, one
connection per concurrent client) so that the client's own cost stays small:
the machine has two cores and whatever the client burns, the service loses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, report_table, save_results
from sandbox.host.images import resolve_image

PROGRAM = "print(1)"
BODY = json.dumps({"language": "python", "code": PROGRAM}).encode()


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


async def measure_http(url: str, concurrency: int, total: int) -> dict[str, float]:
    host, _, port = url.removeprefix("http://").partition(":")
    connections = [await HttpConnection.open(host, int(port)) for _ in range(concurrency)]
    latencies: list[float] = []
    remaining = total

    async def worker(conn: HttpConnection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            status, payload = await conn.post("/v1/run", BODY)
            latencies.append(time.perf_counter() - started)
            result = json.loads(payload)
            if status != 200 or result.get("stdout") != "1\n":
                raise RuntimeError(f"bad answer {status}: {payload[:300]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    elapsed = time.perf_counter() - started
    for conn in connections:
        conn.close()
    return summarise(latencies, elapsed)


def measure_threads(call: Callable[[], None], concurrency: int, total: int) -> dict[str, float]:
    latencies: list[float] = []

    def timed() -> None:
        started = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as executor:
        for future in [executor.submit(timed) for _ in range(total)]:
            future.result()
    return summarise(latencies, time.perf_counter() - started)


def summarise(latencies: list[float], elapsed: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "throughput_per_s": len(ordered) / elapsed,
    }


def docker_exec_call(client: docker.DockerClient, container_id: str) -> Callable[[], None]:
    def call() -> None:
        exec_id = client.api.exec_create(container_id, ["python3", "-c", PROGRAM], user="10001")
        output = client.api.exec_start(exec_id)
        if output.strip() != b"1":
            raise RuntimeError(f"docker exec printed {output!r}")

    return call


def docker_run_call(client: docker.DockerClient, image: str) -> Callable[[], None]:
    def call() -> None:
        output = client.containers.run(
            image, ["python3", "-c", PROGRAM], remove=True, network_disabled=True, user="10001"
        )
        if output.strip() != b"1":
            raise RuntimeError(f"docker run printed {output!r}")

    return call


async def run(args: argparse.Namespace) -> dict[str, object]:
    client = docker.from_env(timeout=300)
    image = resolve_image("python")
    results: dict[str, dict[str, dict[str, float]]] = {
        "api": {},
        "docker_exec": {},
        "docker_run": {},
    }
    service = None if args.url else Service(warm=8)
    url = args.url or service.url  # type: ignore[union-attr]
    try:
        if service is not None:
            await asyncio.to_thread(service.wait_ready)
        await measure_http(url, 8, 64)  # warm-up: every pool container used once
        holder = client.containers.run(
            image, ["sleep", "infinity"], detach=True, network_disabled=True, remove=True
        )
        try:
            for concurrency in (1, 8):
                label = f"c{concurrency}"
                print(f"measuring at concurrency {concurrency}...", file=sys.stderr)
                results["api"][label] = await measure_http(url, concurrency, args.requests)
                results["docker_exec"][label] = await asyncio.to_thread(
                    measure_threads,
                    docker_exec_call(client, holder.id),
                    concurrency,
                    args.exec_requests,
                )
                results["docker_run"][label] = await asyncio.to_thread(
                    measure_threads,
                    docker_run_call(client, image),
                    concurrency,
                    args.run_requests,
                )
        finally:
            holder.kill()
    finally:
        if service is not None:
            service.stop()
    return {"benchmark": "run_print1", "image": image, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="measure this running service instead of starting one")
    parser.add_argument("--requests", type=int, default=1000, help="API requests per level")
    parser.add_argument("--exec-requests", type=int, default=200, help="docker exec calls")
    parser.add_argument("--run-requests", type=int, default=40, help="docker run calls")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    results = outcome["results"]
    assert isinstance(results, dict)
    print(report_table(results, ours="api", baselines=("docker_exec", "docker_run")))
    save_results("bench_run", outcome)


if __name__ == "__main__":
    main()
