"""Agent steps and container starts: session ``exec``, start to ready, and pool refill.

Three measurements in one run, each ours side by side with its baselines (issue 17):

- ``exec``: one agent step, ``echo hi`` run by ``bash -c`` in an open session, at
  concurrency 1 and 8 (one session per client). Ours over HTTP
  (``POST /v1/sessions/{id}/exec``); ``runner``: the same exec through the backend's
  sandbox without the service; ``docker_exec``: ``docker exec`` into a running
  container (docker-py); ``floor``: inside one warm container, a loop spawning
  ``bash -c 'echo hi'`` and reading its output (no Docker call per step).
- ``start``: a container from nothing to ready, one at a time and at the pool's start
  concurrency. Ours: the backend's ``create`` (the pool's start path: the container
  with the policy's limits, its runner answering); ``docker_run``: ``docker run -d``
  of the same image, then a first ``docker exec true``. Reported as p50 and
  containers/s.
- ``refill``: ``POST /v1/run`` of ``print(1)`` at concurrency 8 on a pool whose
  containers serve one execution each (``max_uses: 1``), so every execution waits on a
  refill: executions/s here is the pool's refill rate in containers/s. Baseline:
  ``docker run --rm`` per execution at the same concurrency.

    .venv/bin/python bench/bench_sessions.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import docker
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_run import docker_run_call, measure_threads
from bench.common import (
    REPO,
    HttpConnection,
    Service,
    measure_http,
    report_table,
    save_results,
    summarise,
)
from sandbox.backends.docker import DockerBackend, DockerSandbox
from sandbox.core.execution import exec_limits, sandbox_env
from sandbox.core.pool import DEFAULT_START_CONCURRENCY
from sandbox.host.images import resolve_image
from sandbox.policy.loader import load_policy

STEP = "echo hi"
STEP_BODY = json.dumps({"command": STEP}).encode()
START_LEVELS = (1, DEFAULT_START_CONCURRENCY)

# Run with python3 -c inside the container: N spawns of bash -c 'echo hi' per worker,
# each read to its end and reaped; prints the latencies (seconds) and the elapsed time.
SPAWN_LOOP = r"""
import json, os, sys, time
n, workers = int(sys.argv[1]), int(sys.argv[2])
def loop(out):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        r, w = os.pipe()
        pid = os.posix_spawn("/bin/bash", ["bash", "-c", "echo hi"], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
        os.close(w)
        assert os.read(r, 16) == b"hi\n"
        os.close(r)
        os.waitpid(pid, 0)
        lat.append(time.perf_counter() - t)
    os.write(out, (json.dumps(lat) + "\n").encode())
pipes, children = [], []
start = time.perf_counter()
for _ in range(workers):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r); loop(w); os._exit(0)
    os.close(w); pipes.append(r); children.append(pid)
lat = []
for r in pipes:
    data = b""
    while chunk := os.read(r, 1 << 20):
        data += chunk
    lat += json.loads(data)
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps({"latencies": lat, "elapsed": time.perf_counter() - start}))
"""


async def measure_session_exec(url: str, session_ids: list[str], total: int) -> dict[str, float]:
    """``total`` steps over one keep-alive connection per session."""
    host, _, port = url.removeprefix("http://").partition(":")
    connections = [await HttpConnection.open(host, int(port)) for _ in session_ids]
    latencies: list[float] = []
    remaining = total

    async def worker(conn: HttpConnection, session_id: str) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            status, payload = await conn.post(f"/v1/sessions/{session_id}/exec", STEP_BODY)
            latencies.append(time.perf_counter() - started)
            if status != 200 or json.loads(payload).get("stdout") != "hi\n":
                raise RuntimeError(f"bad answer {status}: {payload[:300]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(c, s) for c, s in zip(connections, session_ids, strict=True)))
    elapsed = time.perf_counter() - started
    for conn in connections:
        conn.close()
    return summarise(latencies, elapsed)


async def measure_runner_exec(sandboxes: list[DockerSandbox], total: int) -> dict[str, float]:
    """The same step through the backend's sandbox: no service, no reset (a session's)."""
    policy = sandboxes[0].policy
    limits = exec_limits(policy, None)
    env = sandbox_env(policy, {})
    latencies: list[float] = []
    remaining = total

    async def worker(sandbox: DockerSandbox) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            ran = await sandbox.exec(["bash", "-c", STEP], limits=limits, env=env)
            latencies.append(time.perf_counter() - started)
            if ran.stdout != b"hi\n":
                raise RuntimeError(f"bad run: {ran.status} {ran.stdout!r}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(s) for s in sandboxes))
    return summarise(latencies, time.perf_counter() - started)


def docker_exec_step(client: docker.DockerClient, container_id: str) -> Any:
    def call() -> None:
        exec_id = client.api.exec_create(container_id, ["bash", "-c", STEP], user="10001")
        output = client.api.exec_start(exec_id)
        if output != b"hi\n":
            raise RuntimeError(f"docker exec printed {output!r}")

    return call


def measure_spawn_floor(
    client: docker.DockerClient, image: str, workers: int, total: int
) -> dict[str, float]:
    output = client.containers.run(
        image,
        ["python3", "-c", SPAWN_LOOP, str(total // workers), str(workers)],
        remove=True,
        network_disabled=True,
        user="10001",
    )
    figures = json.loads(output)
    return summarise(figures["latencies"], figures["elapsed"])


async def measure_starts(start: Any, stop: Any, concurrency: int, total: int) -> dict[str, float]:
    """``total`` starts, ``concurrency`` at a time, each stopped once all are timed."""
    latencies: list[float] = []
    started_ones: list[Any] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            began = time.perf_counter()
            started_ones.append(await start())
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    figures = summarise(latencies, time.perf_counter() - began)
    for item in started_ones:
        await stop(item)
    return figures


def docker_run_ready(client: docker.DockerClient, image: str) -> Any:
    def call() -> str:
        container = client.containers.run(
            image, ["sleep", "infinity"], detach=True, network_disabled=True, user="10001"
        )
        exec_id = client.api.exec_create(container.id, ["true"], user="10001")
        client.api.exec_start(exec_id)
        return str(container.id)

    return call


async def run(args: argparse.Namespace) -> dict[str, object]:
    client = docker.from_env(timeout=300)
    image = resolve_image("python")
    policy = load_policy(REPO / "policies" / "default.yaml")
    backend = DockerBackend()
    results: dict[str, dict[str, dict[str, dict[str, float]]]] = {
        "exec": {s: {} for s in ("api", "runner", "docker_exec", "floor")},
        "start": {s: {} for s in ("ours", "docker_run")},
        "refill": {s: {} for s in ("api", "docker_run")},
    }
    sandboxes: list[DockerSandbox] = []
    session_ids: list[str] = []
    holder = None
    service = Service(warm=8)
    try:
        await asyncio.to_thread(service.wait_ready)
        async with httpx.AsyncClient(base_url=service.url, timeout=120) as http:
            for _ in range(8):
                created = await http.post("/v1/sessions", json={})
                created.raise_for_status()
                session_ids.append(created.json()["id"])
            sandboxes = [await backend.create(image, policy) for _ in range(8)]
            holder = client.containers.run(
                image, ["sleep", "infinity"], detach=True, network_disabled=True, remove=True
            )
            await measure_session_exec(service.url, session_ids, 32)  # warm-up
            await measure_runner_exec(sandboxes, 32)
            for concurrency in (1, 8):
                label = f"c{concurrency}"
                print(f"exec at concurrency {concurrency}...", file=sys.stderr)
                exec_results = results["exec"]
                exec_results["api"][label] = await measure_session_exec(
                    service.url, session_ids[:concurrency], args.requests
                )
                exec_results["runner"][label] = await measure_runner_exec(
                    sandboxes[:concurrency], args.requests
                )
                exec_results["docker_exec"][label] = await asyncio.to_thread(
                    measure_threads,
                    docker_exec_step(client, str(holder.id)),
                    concurrency,
                    args.exec_requests,
                )
                exec_results["floor"][label] = await asyncio.to_thread(
                    measure_spawn_floor, client, image, min(concurrency, 2), args.floor_requests
                )
            for session_id in session_ids:
                await http.delete(f"/v1/sessions/{session_id}")
    finally:
        if holder is not None:
            holder.kill()
        for sandbox in sandboxes:
            await sandbox.close()
        service.stop()

    def stop_container(container_id: str) -> None:
        client.api.remove_container(container_id, force=True)

    try:
        for concurrency in START_LEVELS:
            label = f"c{concurrency}"
            print(f"starts at concurrency {concurrency}...", file=sys.stderr)
            results["start"]["ours"][label] = await measure_starts(
                lambda: backend.create(image, policy),
                lambda sandbox: sandbox.close(),
                concurrency,
                args.starts,
            )
            results["start"]["docker_run"][label] = await measure_starts(
                lambda: asyncio.to_thread(docker_run_ready(client, image)),
                lambda cid: asyncio.to_thread(stop_container, cid),
                concurrency,
                args.starts,
            )
    finally:
        await backend.close()

    print("refill at concurrency 8...", file=sys.stderr)
    refilling = Service(warm=8, max_uses=1)
    try:
        await asyncio.to_thread(refilling.wait_ready)
        results["refill"]["api"]["c8"] = await measure_http(refilling.url, 8, args.refills)
    finally:
        refilling.stop()
    results["refill"]["docker_run"]["c8"] = await asyncio.to_thread(
        measure_threads, docker_run_call(client, image), 8, args.refills
    )
    return {"benchmark": "sessions_and_starts", "image": image, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="session steps per level")
    parser.add_argument("--exec-requests", type=int, default=200, help="docker exec steps")
    parser.add_argument("--floor-requests", type=int, default=2000, help="spawns in the floor")
    parser.add_argument("--starts", type=int, default=24, help="container starts per level")
    parser.add_argument("--refills", type=int, default=160, help="executions on max_uses 1")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    results = outcome["results"]
    assert isinstance(results, dict)
    print("One agent step (`echo hi` in a session):")
    print(
        report_table(
            results["exec"], ours="api", baselines=("runner", "docker_exec", "floor"), floor="floor"
        )
    )
    print("\nA container from nothing to ready:")
    print(report_table(results["start"], ours="ours", baselines=("docker_run",)))
    print("\nPool refill (every execution on a fresh container; per s = containers/s):")
    print(report_table(results["refill"], ours="api", baselines=("docker_run",)))
    save_results("bench_sessions", outcome)


if __name__ == "__main__":
    main()
