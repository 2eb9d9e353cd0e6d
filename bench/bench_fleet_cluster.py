"""The fleet on a real Ray cluster on this machine: routing overhead and scaling with hosts.

* Routing overhead: ``/v1/run`` of ``print(1)`` at concurrency 1, p50, through a
  fleet of one host against the plain single-host service (same policy, same pool).
* Scaling: throughput at concurrency 8 with 1, 2 and 3 hosts (nodes added to the
  running cluster; the router finds them). All hosts share this machine's cores,
  so expect it flat: the point is that routing loses nothing.

``bench/bench_fleet.py`` runs the scheduler-quality simulation (100 synthetic hosts, no
Docker) and then :func:`run_cluster`, side by side in one run.

    python bench/bench_fleet_cluster.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
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


async def _levels(url: str, requests: int) -> dict[str, dict[str, float]]:
    await measure_http(url, 8, 64)  # warm-up
    return {
        "c1": await measure_http(url, 1, requests),
        "c8": await measure_http(url, 8, requests),
    }


def run_cluster(requests: int = 500) -> dict[str, Any]:
    """Both measurements; the raw figures (p50/p99 ms, per s) by system and level."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray.cluster_utils import Cluster

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as scratch:
        root = Path(scratch)
        policies = _policies(root)
        single = ServiceProcess(policies=policies, log_dir=root)
        try:
            single.wait_ready()
            results["single_host"] = asyncio.run(_levels(single.url, requests))
        finally:
            single.stop()
        cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
        env = {"RAY_ADDRESS": cluster.address, "SANDBOX_STATE_DIR": str(root / "state")}
        fleet = ServiceProcess("--fleet", "auto", policies=policies, log_dir=root, env=env)
        try:
            fleet.wait_ready(timeout=300)
            for hosts in (1, 2, 3):
                if hosts > 1:
                    cluster.add_node(**NODE)
                    _wait_hosts(fleet.url, hosts)
                print(f"measuring the fleet with {hosts} host(s)...", file=sys.stderr)
                results[f"fleet_{hosts}_hosts"] = asyncio.run(_levels(fleet.url, requests))
        finally:
            fleet.stop()
            cluster.shutdown()
    single_p50 = results["single_host"]["c1"]["p50_ms"]
    results["routing_overhead_p50_ms"] = results["fleet_1_hosts"]["c1"]["p50_ms"] - single_p50
    return results


def report(results: dict[str, Any]) -> str:
    rows = ["| system | c1 p50 ms | c1 p99 ms | c8 per s |", "|---|---|---|---|"]
    for name, levels in results.items():
        if isinstance(levels, dict):
            rows.append(
                f"| {name} | {levels['c1']['p50_ms']:.2f} | {levels['c1']['p99_ms']:.2f} | "
                f"{levels['c8']['throughput_per_s']:.0f} |"
            )
    rows.append(f"\nrouting overhead (p50, 1 host): {results['routing_overhead_p50_ms']:+.2f} ms")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per level")
    args = parser.parse_args()
    results = run_cluster(args.requests)
    print(report(results))
    save_results("bench_fleet_cluster", {"benchmark": "fleet_cluster", "results": results})


if __name__ == "__main__":
    main()
