"""Multi-turn episodes: ours (``/v1/episodes``) against a container per episode (``docker run``
then ``docker exec`` per tool call), side by side, at 1 and at G x B concurrent episodes.

One episode is what an RL rollout of a small agentic task does: start from the
task (its files, then its set-up, which writes a 200,000-line data file), three
tool calls (read a value, write an answer, run a command), then the hidden test
(one command deciding the reward). Ours opens each episode as a copy of the
task's snapshot from the warm pool, runs the calls through the episode API and
judges with the evaluator's judging; the baseline, what a hand-rolled
environment does, runs a fresh container per episode, the same set-up and calls
with ``docker exec``, the check likewise, then removes the container. The
report gives episodes/s, tool calls/s and the p50/p99 episode time, with ratios.

    .venv/bin/python bench/bench_episodes.py [--groups 4 --group-size 8 --episodes 64]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, save_results
from sandbox.client import AsyncSandboxClient
from sandbox.host.images import resolve_image

SETUP = "seq 1 200000 > data.txt"
CHECK = '[ "$(cat answer.txt)" = "$(( $(cat value.txt) + 1 ))" ]'
TASK_YAML = f"""\
instruction: "value.txt holds a number; write that number plus one to answer.txt."
setup: "{SETUP}"
agent: {{timeout_s: 120, max_steps: 8}}
tests:
  command: '[ "$(agent-run cat answer.txt)" = "$(( $(cat value.txt) + 1 ))" ]'
  timeout_s: 60
"""
CALLS = 3  # tool calls per episode


def make_task(root: Path) -> Path:
    task = root / "plus-one"
    for folder in ("files", "tests"):
        (task / folder).mkdir(parents=True)
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "files" / "value.txt").write_text("41\n")
    (task / "tests" / "value.txt").write_text("41\n")
    return task


async def ours(client: AsyncSandboxClient, task: str) -> None:
    episode = await client.open_episode(task)
    try:
        seen = await client.episode_step(episode.id, "shell", {"command": "cat value.txt"})
        answer = str(int(seen.observation.splitlines()[2]) + 1)
        await client.episode_step(
            episode.id, "write_file", {"path": "answer.txt", "content": answer}
        )
        await client.episode_step(episode.id, "shell", {"command": "wc -l < data.txt"})
        result = await client.judge_episode(episode.id)
        if result.reward != 1.0:
            raise RuntimeError(f"our episode was not rewarded: {result}")
    finally:
        await client.close_episode(episode.id)


def baseline(engine: docker.DockerClient, image: str) -> None:
    container = engine.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        network_disabled=True,
        user="10001",
        working_dir="/tmp",
        mem_limit="512m",
        nano_cpus=1_000_000_000,
        pids_limit=256,
    )
    try:

        def sh(command: str) -> bytes:
            code, output = container.exec_run(["bash", "-c", command], user="10001", workdir="/tmp")
            if code != 0:
                raise RuntimeError(f"docker exec {command!r} exited {code}: {output!r}")
            return bytes(output)

        sh(f"echo 41 > value.txt && {SETUP}")  # the task's files, then its set-up
        answer = int(sh("cat value.txt").strip()) + 1
        sh(f"echo {answer} > answer.txt")
        sh("wc -l < data.txt")
        sh(CHECK)  # the hidden test
    finally:
        container.remove(force=True)


async def measure(
    episode: Callable[[], Awaitable[None]], concurrency: int, total: int
) -> dict[str, float]:
    latencies: list[float] = []
    queue = list(range(total))

    async def worker() -> None:
        while queue:
            queue.pop()
            started = time.perf_counter()
            await episode()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "episodes_per_s": len(ordered) / elapsed,
        "tool_calls_per_s": len(ordered) * CALLS / elapsed,
    }


async def run(args: argparse.Namespace) -> dict[str, dict[str, dict[str, float]]]:
    wide = args.groups * args.group_size
    engine = docker.from_env(timeout=300)
    image = resolve_image("python")
    results: dict[str, dict[str, dict[str, float]]] = {"ours": {}, "docker": {}}
    service = Service(warm=min(wide, 16), max_size=wide + 2)
    try:
        service.wait_ready(timeout=600)
        with tempfile.TemporaryDirectory() as tmp:
            async with AsyncSandboxClient(service.url, timeout=600) as client:
                task = (await client.upload_task(make_task(Path(tmp)))).task
                await ours(client, task)  # the snapshot is made once, before measuring
                for label, concurrency, total in (
                    ("c1", 1, args.serial_episodes),
                    (f"c{wide} (B={args.groups} x G={args.group_size})", wide, args.episodes),
                ):
                    results["ours"][label] = await measure(
                        lambda: ours(client, task), concurrency, total
                    )
                    results["docker"][label] = await measure(
                        lambda: asyncio.to_thread(baseline, engine, image),
                        concurrency,
                        max(concurrency, total // args.baseline_divisor),
                    )
                    print(f"{label}: done", file=sys.stderr, flush=True)
    finally:
        service.stop()
    return results


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    rows = [
        "| level | system | episodes/s | tool calls/s | p50 ms | p99 ms | episodes/s ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for level, mine in results["ours"].items():
        for system in ("ours", "docker"):
            f = results[system][level]
            ratio = mine["episodes_per_s"] / f["episodes_per_s"]
            rows.append(
                f"| {level} | {system} | {f['episodes_per_s']:.1f} | {f['tool_calls_per_s']:.1f} "
                f"| {f['p50_ms']:.0f} | {f['p99_ms']:.0f} | "
                f"{'' if system == 'ours' else f'{ratio:.1f}x (ours/them)'} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=4, help="B: prompts per step")
    parser.add_argument("--group-size", type=int, default=8, help="G: episodes per prompt")
    parser.add_argument("--episodes", type=int, default=128, help="ours, at G x B")
    parser.add_argument("--serial-episodes", type=int, default=20, help="ours, at 1")
    parser.add_argument(
        "--baseline-divisor", type=int, default=2, help="the baseline runs total/this episodes"
    )
    args = parser.parse_args()
    results = asyncio.run(run(args))
    print(table(results))
    save_results("episodes", {"args": vars(args), "results": results})


if __name__ == "__main__":
    main()
