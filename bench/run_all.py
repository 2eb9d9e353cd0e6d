"""Run every benchmark in turn (``make bench``); each prints its table and saves its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = (
    "bench_floor.py",
    "bench_run.py",
    "bench_cpu.py",
    "bench_http.py",
    "bench_humaneval.py",
    "bench_fleet.py",
    "bench_environments.py",
    "bench_episodes.py",
    "bench_console.py",
    "bench_sessions.py",
)


def main() -> int:
    here = Path(__file__).resolve().parent
    for name in BENCHMARKS:
        print(f"== {name}", flush=True)
        code = subprocess.call([sys.executable, str(here / name)])
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
