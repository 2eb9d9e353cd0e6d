"""The floor under ``print(1)``: what the hardware allows, the runner alone, and the service.

Three systems in one run, on the same image and program, side by side:

- ``floor``: inside one warm container, a pre-initialised Python process forks a child
  that compiles and runs ``print(1)`` (stdout a pipe) and exits, and reaps it (no
  runner, no Docker call per execution): the physical floor of "fork, run, collect" on these cores.
- ``runner``: our runner driven without the service: the backend's
  :class:`~sandbox.backends.docker.DockerSandbox` on the default policy, each
  execution an ``exec`` of ``python3 main.py`` (``reset_after``) and the reset collected
  before the next, as the pool does; one warm container per concurrent client.
- ``api``: ``POST /v1/run`` on a warm pool (the service, its HTTP, the pool, the audit log).

Every figure is reported as a multiple of the floor's median (issue 17: the ratios show
what stands above the floor).

    .venv/bin/python bench/bench_floor.py
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, Service, measure_calls, measure_http, save_results, summarise
from sandbox.backends.docker import DockerBackend, DockerSandbox
from sandbox.core.execution import exec_limits, sandbox_env
from sandbox.host.images import resolve_image
from sandbox.languages import get_language
from sandbox.policy.loader import load_policy
from sandbox.results import ExecResult

# The body of an in-container loop (:func:`measure_in_container`): ``run_once()`` forks a
# child that compiles and runs print(1) with its stdout on a pipe and exits, and reaps it.
FORK_ONCE = r"""
def run_once():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a pre-initialised interpreter runs the program and exits
        os.close(r); os.dup2(w, 1)
        exec(compile("print(1)", "main.py", "exec"), {"__name__": "__main__"})
        sys.stdout.flush(); os._exit(0)
    os.close(w)
    assert os.read(r, 16) == b"1\n"
    os.close(r)
    os.waitpid(pid, 0)
"""

# Run with python3 -c inside the container after a ``run_once`` definition: N calls per
# worker, timed one by one; prints the latencies (seconds) and the elapsed time.
LOOP_DRIVER = r"""
n, workers = int(sys.argv[1]), int(sys.argv[2])
def loop(out):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        run_once()
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


def measure_in_container(
    client: docker.DockerClient, image: str, run_once: str, workers: int, total: int
) -> dict[str, float]:
    """``total`` calls of ``run_once`` (Python source defining it) inside one container,
    ``workers`` loops at once: no runner, no service, no Docker call per call."""
    script = f"import json, os, sys, time\n{run_once}{LOOP_DRIVER}"
    output = client.containers.run(
        image,
        ["python3", "-c", script, str(total // workers), str(workers)],
        remove=True,
        network_disabled=True,
        user="10001",
    )
    figures = json.loads(output)
    return summarise(figures["latencies"], figures["elapsed"])


def measure_floor(
    client: docker.DockerClient, image: str, workers: int, total: int
) -> dict[str, float]:
    """The fork floor inside one container, ``workers`` forking loops at once."""
    return measure_in_container(client, image, FORK_ONCE, workers, total)


async def measure_runner(sandboxes: list[DockerSandbox], total: int) -> dict[str, float]:
    """``print(1)`` through the runner directly, one client per sandbox."""
    language = get_language("python")
    policy = sandboxes[0].policy
    limits = exec_limits(policy, None)
    env = {**sandbox_env(policy, {}), **language.env}
    files = {language.source_file: b"print(1)"}

    async def once(sandbox: DockerSandbox) -> tuple[ExecResult, list[str]]:
        ran = await sandbox.exec(
            list(language.run), limits=limits, env=env, files=files, reset_after=True
        )
        return ran, await sandbox.reset()

    def check(outcome: tuple[ExecResult, list[str]]) -> None:
        ran, problems = outcome
        if ran.stdout != b"1\n" or problems:
            raise RuntimeError(f"bad run: {ran.status} {ran.stdout!r} {problems}")

    return await measure_calls([functools.partial(once, s) for s in sandboxes], total, check)


async def run(args: argparse.Namespace) -> dict[str, object]:
    client = docker.from_env(timeout=300)
    image = resolve_image("python")
    policy = load_policy(REPO / "policies" / "default.yaml")
    results: dict[str, dict[str, dict[str, float]]] = {"floor": {}, "runner": {}, "api": {}}
    backend = DockerBackend()
    sandboxes = [await backend.create(image, policy) for _ in range(8)]
    service = Service(warm=8)
    try:
        await asyncio.to_thread(service.wait_ready)
        await measure_http(service.url, 8, 64)  # warm-up: every pool container used once
        await measure_runner(sandboxes, 16)
        for concurrency in (1, 8):
            label = f"c{concurrency}"
            print(f"measuring at concurrency {concurrency}...", file=sys.stderr)
            # The floor's forks need no more workers than cores to saturate them.
            workers = min(concurrency, 2)
            results["floor"][label] = await asyncio.to_thread(
                measure_floor, client, image, workers, args.floor_requests
            )
            results["runner"][label] = await measure_runner(sandboxes[:concurrency], args.requests)
            results["api"][label] = await measure_http(service.url, concurrency, args.requests)
    finally:
        service.stop()
        for sandbox in sandboxes:
            await sandbox.close()
        await backend.close()
    return {"benchmark": "floor_print1", "image": image, "results": results}


def floor_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """A Markdown table: per level, each system's figures and its multiple of the floor."""
    rows = [
        "| level | system | p50 ms | p99 ms | per s | p50 x floor | per s: floor / it |",
        "|---|---|---|---|---|---|---|",
    ]
    for level, floor in results["floor"].items():
        for system in ("floor", "runner", "api"):
            f = results[system][level]
            rows.append(
                f"| {level} | {system} | {f['p50_ms']:.2f} | {f['p99_ms']:.2f} | "
                f"{f['throughput_per_s']:.0f} | {f['p50_ms'] / floor['p50_ms']:.1f}x | "
                f"{floor['throughput_per_s'] / f['throughput_per_s']:.1f}x |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="runner and API executions")
    parser.add_argument("--floor-requests", type=int, default=4000, help="forks in the floor")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    results = outcome["results"]
    assert isinstance(results, dict)
    print(floor_table(results))
    save_results("bench_floor", outcome)


if __name__ == "__main__":
    main()
