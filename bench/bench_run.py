"""Python ``print(1)``: ours vs ``docker exec``, ``docker run``, llm-sandbox and the floor.

In one run, side by side, at concurrency 1 and 8, on the same image and program:

- ``api``: our ``POST /v1/run`` on a warm pool (every execution reset and verified);
- ``docker_exec``: ``docker exec`` into one running container (docker-py);
- ``docker_run``: ``docker run --rm`` per execution;
- ``llm_sandbox``: PyPI's llm-sandbox (its docker backend), one open session (a warm
  container) per concurrent client, on our python image. It runs code with ``python``,
  which our image names ``python3``, so it gets a copy of our image with that link
  (built here, offline); its environment set-up (a venv, pip upgraded from PyPI) is
  skipped, and it never pulls: the image is local. Between two runs it resets nothing.
- ``floor``: a pre-initialised interpreter in a warm container forking a child per
  ``print(1)`` (:mod:`bench.bench_floor`): no runner, no service, no Docker call.

The report gives p50, p99, throughput, the ratios to ours and each p50 as a multiple
of the floor's.

    .venv/bin/python bench/bench_run.py            # starts its own service
    .venv/bin/python bench/bench_run.py --url URL  # or measures a running one
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_floor import measure_floor
from bench.common import PROGRAM, Service, measure_http, report_table, save_results, summarise
from sandbox.host.images import resolve_image

SYSTEMS = ("api", "docker_exec", "docker_run", "llm_sandbox", "floor")


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


def docker_exec_call(
    client: docker.DockerClient,
    container_id: str,
    argv: tuple[str, ...] = ("python3", "-c", PROGRAM),
    expected: bytes = b"1",
) -> Callable[[], None]:
    """One ``docker exec`` of ``argv`` as the sandbox uid, its output ``expected`` (stripped)."""

    def call() -> None:
        exec_id = client.api.exec_create(container_id, list(argv), user="10001")
        output = client.api.exec_start(exec_id)
        if output.strip() != expected:
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


def llm_sandbox_image(client: docker.DockerClient, image: str) -> str:
    """Our ``image`` with the ``python`` command llm-sandbox runs code with (built once)."""
    name, _, tag = image.partition(":")
    derived = f"bench-llm-sandbox-{name}:{tag}"
    try:
        client.images.get(derived)
    except docker.errors.ImageNotFound:
        dockerfile = f"FROM {image}\nRUN ln -s python3 /usr/bin/python\n"
        client.images.build(
            fileobj=io.BytesIO(dockerfile.encode()), tag=derived, pull=False, network_mode="none"
        )
    return derived


def open_llm_sandboxes(client: docker.DockerClient, image: str, count: int) -> list[Any]:
    """``count`` open llm-sandbox sessions (warm containers, no network) on ``image``."""
    from llm_sandbox import SandboxSession

    sessions = []
    for _ in range(count):
        session = SandboxSession(
            backend="docker",
            client=client,
            lang="python",
            image=image,
            keep_template=True,  # never remove our image
            skip_environment_setup=True,  # no venv, no pip upgrade from PyPI
            runtime_configs={"network_mode": "none"},
        )
        session.open()
        sessions.append(session)
    return sessions


def measure_llm_sandbox(sessions: list[Any], total: int) -> dict[str, float]:
    """``print(1)`` through llm-sandbox's ``session.run``, one thread per open session."""
    latencies: list[float] = []
    remaining = total

    def worker(session: Any) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            output = session.run(PROGRAM)
            latencies.append(time.perf_counter() - started)
            if output.stdout.strip() != "1":
                raise RuntimeError(f"llm-sandbox printed {output.stdout!r} {output.stderr!r}")

    started = time.perf_counter()
    with ThreadPoolExecutor(len(sessions)) as executor:
        for future in [executor.submit(worker, s) for s in sessions]:
            future.result()
    return summarise(latencies, time.perf_counter() - started)


async def run(args: argparse.Namespace) -> dict[str, object]:
    client = docker.from_env(timeout=300)
    image = resolve_image("python")
    results: dict[str, dict[str, dict[str, float]]] = {system: {} for system in SYSTEMS}
    service = None if args.url else Service(warm=8)
    url = args.url or service.url  # type: ignore[union-attr]
    sessions: list[Any] = []
    holder = None
    try:
        if service is not None:
            await asyncio.to_thread(service.wait_ready)
        await measure_http(url, 8, 64)  # warm-up: every pool container used once
        holder = client.containers.run(
            image, ["sleep", "infinity"], detach=True, network_disabled=True, remove=True
        )
        sessions = await asyncio.to_thread(
            open_llm_sandboxes, client, llm_sandbox_image(client, image), 8
        )
        await asyncio.to_thread(measure_llm_sandbox, sessions, 8)  # warm-up
        for concurrency in (1, 8):
            label = f"c{concurrency}"
            print(f"measuring at concurrency {concurrency}...", file=sys.stderr)
            results["api"][label] = await measure_http(url, concurrency, args.requests)
            results["docker_exec"][label] = await asyncio.to_thread(
                measure_threads,
                docker_exec_call(client, str(holder.id)),
                concurrency,
                args.exec_requests,
            )
            results["docker_run"][label] = await asyncio.to_thread(
                measure_threads, docker_run_call(client, image), concurrency, args.run_requests
            )
            results["llm_sandbox"][label] = await asyncio.to_thread(
                measure_llm_sandbox, sessions[:concurrency], args.exec_requests
            )
            # The floor's forks need no more workers than cores to saturate them.
            results["floor"][label] = await asyncio.to_thread(
                measure_floor, client, image, min(concurrency, 2), args.floor_requests
            )
    finally:
        for session in sessions:
            session.close()
        if holder is not None:
            holder.kill()
        if service is not None:
            service.stop()
    return {"benchmark": "run_print1", "image": image, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="measure this running service instead of starting one")
    parser.add_argument("--requests", type=int, default=1000, help="API requests per level")
    parser.add_argument(
        "--exec-requests", type=int, default=200, help="docker exec and llm-sandbox runs"
    )
    parser.add_argument("--run-requests", type=int, default=40, help="docker run calls")
    parser.add_argument("--floor-requests", type=int, default=4000, help="forks in the floor")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    results = outcome["results"]
    assert isinstance(results, dict)
    print(report_table(results, ours="api", baselines=SYSTEMS[1:], floor="floor"))
    save_results("bench_run", outcome)


if __name__ == "__main__":
    main()
