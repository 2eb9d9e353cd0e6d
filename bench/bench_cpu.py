"""Where the CPU of one ``print(1)`` goes: CPU seconds per execution, by process.

A warm service (8 containers) answers ``POST /v1/run`` at concurrency 1 and 8 while
psutil reads the CPU time of every process that takes part: the service (and its
children), ``dockerd``, ``containerd``, the shims of the service's sandbox containers,
and everything inside them, apart: the runner (with docker-init), its zygote, and the
programs it forks (a process that exited is counted in its reaper's children times).
The client, this script, runs on
the same cores and is reported too; ``whole machine`` is every CPU's busy time.

    .venv/bin/python bench/bench_cpu.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import docker
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, measure_http, save_results
from sandbox.host.labels import LABEL_MANAGED

GROUPS = ("service", "dockerd", "containerd", "shims", "runner", "zygote", "programs", "client")


def _times(process: psutil.Process) -> tuple[float, float]:
    """(own CPU seconds, reaped children's CPU seconds) of a process; 0 once it is gone."""
    try:
        times = process.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0, 0.0
    return times.user + times.system, times.children_user + times.children_system


def _cpu(process: psutil.Process) -> float:
    return sum(_times(process))


def _tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _by_depth(process: psutil.Process, depth: int = 0) -> list[tuple[int, psutil.Process]]:
    try:
        children = process.children()
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        found += [(depth + 1, child), *_by_depth(child, depth + 1)]
    return found


def add_container(totals: dict[str, float], shim: psutil.Process) -> None:
    """A sandbox container's CPU: docker-init and the runner, the zygote, the programs.

    The tree is shim -> docker-init -> runner -> zygote -> the spares it forks, each of
    which becomes one program; the zygote reaps them, so its children times are theirs.
    """
    for depth, process in _by_depth(shim):
        own, reaped = _times(process)
        if depth <= 2:
            totals["runner"] += own + reaped
        elif depth == 3:
            totals["zygote"] += own
            totals["programs"] += reaped
        else:
            totals["programs"] += own + reaped


def _shim_container(process: psutil.Process) -> str | None:
    try:
        argv = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return argv[argv.index("-id") + 1] if "-id" in argv[:-1] else None


def cpu_by_group(service_pid: int, containers: set[str]) -> dict[str, float]:
    """CPU seconds so far of each group of processes (see the module docstring).

    ``containers``: the ids of the service's sandbox containers; other containers'
    shims and processes are left out."""
    totals = dict.fromkeys(GROUPS, 0.0)
    totals["service"] = sum(_cpu(p) for p in _tree(psutil.Process(service_pid)))
    totals["client"] = _cpu(psutil.Process(os.getpid()))
    for process in psutil.process_iter(["name"]):
        name = process.info["name"] or ""
        if name == "dockerd":
            totals["dockerd"] += _cpu(process)
        elif name == "containerd":
            totals["containerd"] += _cpu(process)
        elif name.startswith("containerd-shim") and _shim_container(process) in containers:
            totals["shims"] += _cpu(process)
            add_container(totals, process)
    return totals


def machine_busy() -> float:
    times = psutil.cpu_times()
    return times.user + times.system + times.nice + times.irq + times.softirq


async def measure(
    url: str, pid: int, containers: set[str], concurrency: int, total: int
) -> dict[str, float]:
    before, busy = cpu_by_group(pid, containers), machine_busy()
    figures = await measure_http(url, concurrency, total)
    after, busy_after = cpu_by_group(pid, containers), machine_busy()
    per_exec = {g: (after[g] - before[g]) / total * 1000 for g in GROUPS}
    per_exec["whole machine"] = (busy_after - busy) / total * 1000
    return {**figures, **{f"cpu_ms {g}": v for g, v in per_exec.items()}}


async def run(args: argparse.Namespace) -> dict[str, object]:
    client = docker.from_env()
    others = {c.id for c in client.containers.list()}
    service = Service(warm=8)
    results: dict[str, dict[str, float]] = {}
    try:
        await asyncio.to_thread(service.wait_ready)
        await measure_http(service.url, 8, 64)  # warm-up: every pool container used once
        time.sleep(1)
        managed = client.containers.list(filters={"label": LABEL_MANAGED})
        containers = {c.id for c in managed} - others
        for concurrency in (1, 8):
            print(f"measuring at concurrency {concurrency}...", file=sys.stderr)
            results[f"c{concurrency}"] = await measure(
                service.url, service.process.pid, containers, concurrency, args.requests
            )
    finally:
        service.stop()
    return {"benchmark": "cpu_print1", "results": results}


def table(results: dict[str, dict[str, float]]) -> str:
    """A Markdown table: CPU ms per execution by process group, per level."""
    levels = list(results)
    rows = [
        "| CPU ms per execution | " + " | ".join(levels) + " |",
        "|---|" + "---|" * len(levels),
    ]
    for group in (*GROUPS, "whole machine"):
        cells = " | ".join(f"{results[level][f'cpu_ms {group}']:.2f}" for level in levels)
        rows.append(f"| {group} | {cells} |")
    cells = " | ".join(f"{results[level]['throughput_per_s']:.0f}" for level in levels)
    rows.append(f"| (executions/s) | {cells} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="executions per level")
    args = parser.parse_args()
    outcome = asyncio.run(run(args))
    results = outcome["results"]
    assert isinstance(results, dict)
    print(table(results))
    save_results("bench_cpu", outcome)


if __name__ == "__main__":
    main()
