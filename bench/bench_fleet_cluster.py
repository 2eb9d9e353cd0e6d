"""The fleet on a real Ray cluster against the single-host service, in interleaved rounds.

Both services are up at once. This machine's two cores are shared with whatever else
runs, so the two are never measured one after the other: each round measures both (the
first of them alternating from round to round), so both see the same load, and the
figures are medians over the rounds with their spread (lowest and highest round).

* Routing overhead: ``/v1/run`` of ``print(1)`` through a fleet of one host against the
  single-host service (same policy, warm 4): per round, the p50 at concurrency 1 and the
  throughput at concurrency 8; the fleet's added p50 (the median of the per-round
  differences, and the difference of the medians) and the ratios of the medians.
* Contention: the same rounds with :data:`BUSY` CPU-bound ordinary processes running (a
  busy node: what a Ray worker's niceness does shows here).
* Scaling: throughput at concurrency 8 with 1, 2 and 3 hosts (nodes added to the running
  cluster; the router finds them), each in rounds interleaved with the single host. All
  hosts share this machine's cores, so expect it flat: the point is no loss from routing.

The 1-minute load average is taken at the start of every round and reported beside the
figures. ``bench/bench_fleet.py`` runs the scheduler-quality simulation (100 synthetic
hosts, no Docker) and then :func:`run_cluster`, side by side in one run.

    python bench/bench_fleet_cluster.py [--rounds 10] [--requests 200] [--busy-rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, measure_http, save_results
from sandbox.host.launcher import ServiceProcess

NODE: dict[str, Any] = {
    "num_cpus": 1,
    "resources": {"sandbox_host": 1},
    "node_ip_address": "127.0.0.1",
}
WARM = 4
BUSY = 3
SINGLE, FLEET = "single_host", "fleet"


def _policies(directory: Path) -> Path:
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    policy["pool"] = {"warm": WARM, "max": WARM, "max_uses": 100_000}
    (directory / "default.yaml").write_text(yaml.safe_dump(policy))
    return directory


def _wait_hosts(url: str, count: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while httpx.get(url + "/v1/fleet", timeout=10).json()["healthy"] < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the fleet did not reach {count} healthy hosts")
        time.sleep(0.5)


async def interleaved(
    urls: Mapping[str, str], rounds: int, requests: int, levels: Sequence[int]
) -> list[dict[str, Any]]:
    """``rounds`` rounds of ``requests`` requests per service and concurrency level.

    In a round each level is measured on every service in turn, the first service
    alternating between rounds; each round also records the 1-minute load average.
    """
    for url in urls.values():
        await measure_http(url, 8, 64)  # warm-up: every pool container used once
    names = list(urls)
    measured: list[dict[str, Any]] = []
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        figures: dict[str, Any] = {"load_1m": os.getloadavg()[0], **{n: {} for n in names}}
        for concurrency in levels:
            for name in order:
                level = await measure_http(urls[name], concurrency, requests)
                figures[name][f"c{concurrency}"] = level
        measured.append(figures)
        print(f"round {index + 1}/{rounds} (load {figures['load_1m']:.1f})", file=sys.stderr)
    return measured


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` CPU-bound processes at the default niceness for the block."""
    spinning = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def spread(values: Sequence[float]) -> dict[str, float]:
    """The median over rounds, and the lowest and highest round."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per service and level: p50, p99 and throughput over the rounds; the fleet against the
    single host: its added c1 p50 (per round) and the ratios of the medians."""

    def series(name: str, level: str, key: str) -> list[float]:
        return [r[name][level][key] for r in rounds]

    figures: dict[str, Any] = {"load_1m": spread([r["load_1m"] for r in rounds])}
    levels = list(rounds[0][SINGLE])
    for name in (SINGLE, FLEET):
        figures[name] = {
            level: {
                key: spread(series(name, level, key))
                for key in ("p50_ms", "p99_ms", "throughput_per_s")
            }
            for level in levels
        }
    if "c1" in levels:
        fleet, single = series(FLEET, "c1", "p50_ms"), series(SINGLE, "c1", "p50_ms")
        added = [f - s for f, s in zip(fleet, single, strict=True)]
        figures["c1_p50_added_ms"] = spread(added)
        fleet_p50, single_p50 = (figures[n]["c1"]["p50_ms"]["median"] for n in (FLEET, SINGLE))
        figures["c1_p50_medians_added_ms"] = fleet_p50 - single_p50
        figures["c1_p50_ratio"] = fleet_p50 / single_p50
    if "c8" in levels:
        figures["c8_throughput_ratio"] = (
            figures[FLEET]["c8"]["throughput_per_s"]["median"]
            / figures[SINGLE]["c8"]["throughput_per_s"]["median"]
        )
    return figures


def run_cluster(
    rounds: int = 10, requests: int = 200, scaling_rounds: int = 4, busy_rounds: int = 6
) -> dict[str, Any]:
    """Both services up at once: the routing-overhead rounds with a fleet of one host, quiet
    and busy, then c8 rounds with 2 and 3 hosts; every round's raw figures and summaries."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray.cluster_utils import Cluster

    results: dict[str, Any] = {
        "setup": {
            "rounds": rounds,
            "requests_per_round": requests,
            "warm_per_host": WARM,
            "busy_processes": BUSY,
        },
        "load_avg_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as scratch:
        root = Path(scratch)
        policies = _policies(root)
        cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
        env = {"RAY_ADDRESS": cluster.address, "SANDBOX_STATE_DIR": str(root / "state")}
        single = ServiceProcess(policies=policies, log_dir=root)
        fleet = ServiceProcess("--fleet", "auto", policies=policies, log_dir=root, env=env)
        try:
            single.wait_ready()
            fleet.wait_ready(timeout=300)
            urls = {SINGLE: single.url, FLEET: fleet.url}
            print("routing overhead: fleet of 1 host against the single host...", file=sys.stderr)
            overhead = asyncio.run(interleaved(urls, rounds, requests, (1, 8)))
            results["overhead"] = {"rounds": overhead, "summary": summary(overhead)}
            results["scaling"] = {"1": results["overhead"]["summary"]}
            if busy_rounds:
                print(f"the same with {BUSY} busy processes...", file=sys.stderr)
                with busy(BUSY):
                    loaded = asyncio.run(interleaved(urls, busy_rounds, requests // 2, (1, 8)))
                results["busy"] = {"rounds": loaded, "summary": summary(loaded)}
            for hosts in (2, 3):
                cluster.add_node(**NODE)
                _wait_hosts(fleet.url, hosts)
                print(f"scaling: fleet of {hosts} hosts...", file=sys.stderr)
                scaled = asyncio.run(interleaved(urls, scaling_rounds, requests, (8,)))
                results["scaling"][str(hosts)] = summary(scaled) | {"rounds": scaled}
        finally:
            fleet.stop()
            single.stop()
            cluster.shutdown()
    results["load_avg_end"] = os.getloadavg()
    return results


def _cell(figures: dict[str, float], digits: int) -> str:
    """``median (lowest-highest)``."""
    low, high = figures["min"], figures["max"]
    return f"{figures['median']:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def _overhead(title: str, measured: dict[str, Any]) -> list[str]:
    """A routing-overhead table: its heading, each system's row, the fleet's added p50."""
    over = measured["summary"]
    rows = [
        f"{title}: {len(measured['rounds'])} interleaved rounds, /v1/run print(1); medians over "
        f"rounds (lowest-highest round); load average (1 min) {_cell(over['load_1m'], 1)}",
        "| system | c1 p50 ms | c1 p99 ms | c8 per s |",
        "|---|---|---|---|",
    ]
    for name, label in ((SINGLE, "single host (`sandbox serve`)"), (FLEET, "fleet, 1 host")):
        c1, c8 = over[name]["c1"], over[name]["c8"]
        rows.append(
            f"| {label} | {_cell(c1['p50_ms'], 2)} | {_cell(c1['p99_ms'], 1)} | "
            f"{_cell(c8['throughput_per_s'], 0)} |"
        )
    added = over["c1_p50_added_ms"]
    return [
        *rows,
        "",
        f"fleet minus single host, c1 p50: median of the per-round differences "
        f"{added['median']:+.2f} ms ({added['min']:+.2f} to {added['max']:+.2f}), difference "
        f"of the medians {over['c1_p50_medians_added_ms']:+.2f} ms; ratio of medians: c1 p50 "
        f"{over['c1_p50_ratio']:.2f}, c8 throughput {over['c8_throughput_ratio']:.2f}",
        "",
    ]


def report(results: dict[str, Any]) -> str:
    setup = results["setup"]
    requests = setup["requests_per_round"]
    rows = _overhead(f"Routing overhead ({requests} requests a round)", results["overhead"])
    if "busy" in results:
        title = (
            f"Under contention ({setup['busy_processes']} busy processes, {requests // 2} a round)"
        )
        rows += _overhead(title, results["busy"])
    rows += [
        "Scaling: c8 throughput, each host count in rounds interleaved with the single host",
        "| fleet hosts | rounds | load avg | fleet c8 per s | single host c8 per s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for hosts, figures in results["scaling"].items():
        count = len(results["overhead"]["rounds"] if hosts == "1" else figures["rounds"])
        rows.append(
            f"| {hosts} | {count} | {figures['load_1m']['median']:.1f} | "
            f"{_cell(figures[FLEET]['c8']['throughput_per_s'], 0)} | "
            f"{_cell(figures[SINGLE]['c8']['throughput_per_s'], 0)} | "
            f"{figures['c8_throughput_ratio']:.2f} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="routing-overhead rounds")
    parser.add_argument("--requests", type=int, default=200, help="requests per round and level")
    parser.add_argument("--scaling-rounds", type=int, default=4, help="rounds with 2 and 3 hosts")
    parser.add_argument("--busy-rounds", type=int, default=6, help="rounds under contention")
    args = parser.parse_args()
    results = run_cluster(args.rounds, args.requests, args.scaling_rounds, args.busy_rounds)
    print(report(results))
    save_results("bench_fleet_cluster", {"benchmark": "fleet_cluster", "results": results})


if __name__ == "__main__":
    main()
