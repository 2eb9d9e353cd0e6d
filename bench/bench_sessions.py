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
import functools
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import docker
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_floor import measure_in_container
from bench.bench_run import docker_exec_call, docker_run_call, measure_threads
from bench.common import (
    REPO,
    STEP,
    STEP_BODY,
    Service,
    measure_calls,
    measure_http,
    measure_posts,
    open_session,
    report_table,
    save_results,
    step_path,
)
from sandbox.backends.docker import DockerBackend, DockerSandbox
from sandbox.core.execution import exec_limits, sandbox_env
from sandbox.core.pool import DEFAULT_START_CONCURRENCY
from sandbox.host.images import resolve_image
from sandbox.policy.loader import load_policy
from sandbox.results import ExecResult

T = TypeVar("T")

START_LEVELS = (1, DEFAULT_START_CONCURRENCY)

# The body of an in-container loop (:func:`~bench.bench_floor.measure_in_container`):
# ``run_once()`` spawns bash -c 'echo hi', reads its output to the end and reaps it.
SPAWN_ONCE = r"""
def run_once():
    r, w = os.pipe()
    pid = os.posix_spawn("/bin/bash", ["bash", "-c", "echo hi"], os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
    os.close(w)
    assert os.read(r, 16) == b"hi\n"
    os.close(r)
    os.waitpid(pid, 0)
"""


async def measure_runner_exec(sandboxes: list[DockerSandbox], total: int) -> dict[str, float]:
    """The same step through the backend's sandbox: no service, no reset (a session's)."""
    policy = sandboxes[0].policy
    limits = exec_limits(policy, None)
    env = sandbox_env(policy, {})

    def check(ran: ExecResult) -> None:
        if ran.stdout != b"hi\n":
            raise RuntimeError(f"bad run: {ran.status} {ran.stdout!r}")

    calls = [
        functools.partial(sandbox.exec, ["bash", "-c", STEP], limits=limits, env=env)
        for sandbox in sandboxes
    ]
    return await measure_calls(calls, total, check)


async def measure_starts(
    start: Callable[[], Awaitable[T]],
    stop: Callable[[T], Awaitable[object]],
    concurrency: int,
    total: int,
) -> dict[str, float]:
    """``total`` starts, ``concurrency`` at a time, each stopped once all are timed."""
    started: list[T] = []
    figures = await measure_calls([start] * concurrency, total, started.append)
    for item in started:
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
    holder = None
    service = Service(warm=8)
    try:
        await asyncio.to_thread(service.wait_ready)
        async with httpx.AsyncClient(base_url=service.url, timeout=120) as http:
            session_ids = [await open_session(http) for _ in range(8)]
            sandboxes = [await backend.create(image, policy) for _ in range(8)]
            holder = client.containers.run(
                image, ["sleep", "infinity"], detach=True, network_disabled=True, remove=True
            )
            exec_paths = [step_path(session_id) for session_id in session_ids]
            await measure_posts(service.url, exec_paths, STEP_BODY, "hi\n", 32)  # warm-up
            await measure_runner_exec(sandboxes, 32)
            for concurrency in (1, 8):
                label = f"c{concurrency}"
                print(f"exec at concurrency {concurrency}...", file=sys.stderr)
                exec_results = results["exec"]
                exec_results["api"][label] = await measure_posts(
                    service.url, exec_paths[:concurrency], STEP_BODY, "hi\n", args.requests
                )
                exec_results["runner"][label] = await measure_runner_exec(
                    sandboxes[:concurrency], args.requests
                )
                exec_results["docker_exec"][label] = await asyncio.to_thread(
                    measure_threads,
                    docker_exec_call(client, str(holder.id), ("bash", "-c", STEP), b"hi"),
                    concurrency,
                    args.exec_requests,
                )
                exec_results["floor"][label] = await asyncio.to_thread(
                    measure_in_container,
                    client,
                    image,
                    SPAWN_ONCE,
                    min(concurrency, 2),
                    args.floor_requests,
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
