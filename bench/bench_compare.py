"""Two builds side by side: each source tree's ``sandbox serve`` at once, rounds interleaved.

The machine is shared and noisy, so a before/after figure taken minutes apart means
little. Here both services run at the same time, on the same policy and pool size,
each from its own tree (``PYTHONPATH``; a tree's runner uses the images built for its
sources: ``sandbox images build`` from that tree), and every round measures one then
the other, in alternating order:

- ``run_c1`` / ``run_c8``: ``POST /v1/run`` ``print(1)`` at concurrency 1 and 8;
- ``evaluate``: one ``POST /v1/evaluate`` of 1,024 small submissions with an I/O test
  (``--batch``), ``concurrency`` 8;
- ``evaluate_cases``: the same number of I/O tests, as a tenth as many submissions with
  ten tests each: tests judged per second; ``evaluate_cases_early_stop`` the same with
  ``early_stop`` (every test passes, so every one runs);
- ``session_c1``: one agent step (``bash -c 'echo hi'``) in an open session, one at a time.

The report gives each side's median over the rounds (and the rounds' spread) and the
ratio new/old, with the load average.

    .venv/bin/python bench/bench_compare.py OLD_TREE NEW_TREE [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.common import (
    STEP_BODY,
    Service,
    evaluate,
    measure_http,
    measure_posts,
    open_session,
    save_results,
    small_batch,
    step_path,
)

WARM = 8


def judged_per_second(url: str, count: int, cases: int = 1, early_stop: bool = False) -> float:
    """One ``/v1/evaluate`` of :func:`small_batch` ``count`` (``cases`` tests each),
    concurrency 8; all must pass. Tests judged per second."""
    elapsed, lines = evaluate(url, small_batch(count, cases), 8, early_stop=early_stop)
    passed = sum(1 for line in lines[:-1] if (line.get("result") or {}).get("reward") == 1.0)
    if passed != count:
        raise RuntimeError(f"{count - passed} items did not pass: {lines[:2]}")
    return count * cases / elapsed


async def session_steps(url: str) -> str:
    """A session on ``url``'s default policy; the path its steps are posted to."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        return step_path(await open_session(http))


async def measure_round(
    service: Service, session: str, args: argparse.Namespace
) -> dict[str, float]:
    c1 = await measure_http(service.url, 1, args.requests)
    c8 = await measure_http(service.url, 8, args.requests)
    batch = await asyncio.to_thread(judged_per_second, service.url, args.batch)
    cases = await asyncio.to_thread(judged_per_second, service.url, args.batch // 10, 10)
    stopping = await asyncio.to_thread(
        judged_per_second, service.url, args.batch // 10, 10, early_stop=True
    )
    step = await measure_posts(service.url, [session], STEP_BODY, "hi\n", args.requests)
    return {
        "run_c1_p50_ms": c1["p50_ms"],
        "run_c1_per_s": c1["throughput_per_s"],
        "run_c8_p50_ms": c8["p50_ms"],
        "run_c8_per_s": c8["throughput_per_s"],
        "evaluate_per_s": batch,
        "evaluate_cases_per_s": cases,
        "evaluate_cases_early_stop_per_s": stopping,
        "session_c1_p50_ms": step["p50_ms"],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    services = {
        side: Service(warm=WARM, env={"PYTHONPATH": str(tree)}) for side, tree in trees.items()
    }
    rounds: dict[str, list[dict[str, float]]] = {side: [] for side in services}
    loads = []
    try:
        for service in services.values():
            await asyncio.to_thread(service.wait_ready)
        sessions = {side: await session_steps(services[side].url) for side in services}
        for side, service in services.items():  # warm-up: every pool container used once
            await measure_http(service.url, 8, 64)
            await asyncio.to_thread(judged_per_second, service.url, 64)
            await measure_posts(service.url, [sessions[side]], STEP_BODY, "hi\n", 32)
        for number in range(args.rounds):
            order = list(services) if number % 2 == 0 else list(reversed(services))
            print(f"round {number + 1}/{args.rounds} ({', '.join(order)})...", file=sys.stderr)
            for side in order:
                rounds[side].append(await measure_round(services[side], sessions[side], args))
            loads.append(os.getloadavg()[0])
    finally:
        for service in services.values():
            service.stop()
    metrics = list(rounds["old"][0])
    summary = {
        metric: {
            side: {
                "median": statistics.median(r[metric] for r in measured),
                "min": min(r[metric] for r in measured),
                "max": max(r[metric] for r in measured),
            }
            for side, measured in rounds.items()
        }
        for metric in metrics
    }
    return {
        "benchmark": "compare",
        "trees": {side: str(tree) for side, tree in trees.items()},
        "rounds": rounds,
        "summary": summary,
        "load_average_1m": loads,
    }


def table(outcome: dict[str, Any]) -> str:
    """A Markdown table: each metric's median (min-max) per side and the ratio new/old."""
    rows = ["| metric | old | new | new/old |", "|---|---|---|---|"]
    for metric, sides in outcome["summary"].items():
        old, new = sides["old"], sides["new"]
        rows.append(
            f"| {metric} | {old['median']:.1f} ({old['min']:.1f}-{old['max']:.1f}) | "
            f"{new['median']:.1f} ({new['min']:.1f}-{new['max']:.1f}) | "
            f"{new['median'] / old['median']:.2f} |"
        )
    loads = outcome["load_average_1m"]
    rows.append(f"\nload average (1 min) over the rounds: {min(loads):.1f} to {max(loads):.1f}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the source tree of the build before")
    parser.add_argument("new", type=Path, help="the source tree of the build after")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each side once a round")
    parser.add_argument("--requests", type=int, default=300, help="/v1/run calls per level")
    parser.add_argument("--batch", type=int, default=1024, help="submissions per /v1/evaluate")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    print(table(outcome))
    save_results("bench_compare", outcome)


if __name__ == "__main__":
    main()
