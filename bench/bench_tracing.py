"""The cost of tracing on ``/v1/run`` ``print(1)``: a service with tracing off vs one
exporting every span over OTLP/HTTP to a collector on loopback, side by side in one run.

Both services run at once with the same policy and pool; the rounds alternate
between them (off, on, off, on, ...) so that drift on the machine hits both.
The report gives each side's p50 (the median of the rounds' medians, and over
all requests), p99, and the ratio on/off; the collector's span count shows the
spans really went out.

    .venv/bin/python bench/bench_tracing.py [--rounds 8 --requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, measure_http, save_results
from tests.otlp_collector import collector

WARM = 2


def _collect(pipe: Connection) -> None:
    """The collector, in a process of its own (decoding spans must not slow the client)."""
    with collector() as (spans, endpoint):
        pipe.send(endpoint)
        pipe.recv()  # until the benchmark is done
        pipe.send(len(spans.spans))


async def run(args: argparse.Namespace) -> dict[str, object]:
    ours, theirs = multiprocessing.Pipe()
    collecting = multiprocessing.Process(target=_collect, args=(theirs,), daemon=True)
    collecting.start()
    endpoint = ours.recv()
    # The SDK's default batching (a batch every 5 s or every 512 spans), as in production.
    services = {"off": Service(warm=WARM), "on": Service("--otel-endpoint", endpoint, warm=WARM)}
    rounds: dict[str, list[dict[str, float]]] = {side: [] for side in services}
    try:
        for service in services.values():
            await asyncio.to_thread(service.wait_ready)
        for service in services.values():
            await measure_http(service.url, 1, 50)  # warm-up
        for number in range(args.rounds):
            print(f"round {number + 1}/{args.rounds}...", file=sys.stderr)
            for side, service in services.items():
                rounds[side].append(await measure_http(service.url, 1, args.requests))
    finally:
        for service in services.values():
            service.stop()  # flushes the spans still batched
    ours.send("done")
    exported = ours.recv()
    collecting.join(10)
    results: dict[str, dict[str, Any]] = {
        side: {
            "p50_ms": statistics.median(r["p50_ms"] for r in measured),
            "p99_ms": statistics.median(r["p99_ms"] for r in measured),
            "per_s": statistics.median(r["throughput_per_s"] for r in measured),
            "round_p50s_ms": [round(r["p50_ms"], 3) for r in measured],
        }
        for side, measured in rounds.items()
    }
    return {
        "benchmark": "tracing_overhead_run_print1",
        "rounds": args.rounds,
        "requests_per_round": args.requests,
        "spans_exported": exported,
        "results": results,
        "p50_ratio_on_off": results["on"]["p50_ms"] / results["off"]["p50_ms"],
    }


def report(outcome: dict[str, object]) -> str:
    results = outcome["results"]
    assert isinstance(results, dict)
    rows = ["| tracing | p50 ms | p99 ms | per s |", "|---|---|---|---|"]
    for side, label in (("off", "off"), ("on", "on (OTLP/HTTP to loopback)")):
        r = results[side]
        rows.append(f"| {label} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['per_s']:.0f} |")
    rows.append(
        f"\np50 ratio on/off: {outcome['p50_ratio_on_off']:.3f} "
        f"({outcome['rounds']} alternating rounds of {outcome['requests_per_round']} requests, "
        f"concurrency 1; {outcome['spans_exported']} spans exported)"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="alternating rounds per side")
    parser.add_argument("--requests", type=int, default=200, help="requests per round")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    print(report(outcome))
    save_results("bench_tracing", outcome)


if __name__ == "__main__":
    main()
