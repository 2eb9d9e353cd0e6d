"""What the benchmarks share: a service to measure, the report table, the results file."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import yaml

from sandbox.host.launcher import ServiceProcess

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent


class Service(ServiceProcess):
    """``sandbox serve`` with a default policy sized for a benchmark."""

    def __init__(
        self,
        *args: str,
        warm: int,
        max_size: int | None = None,
        max_uses: int = 100_000,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``args``: extra ``sandbox serve`` flags; ``env``: extra environment."""
        self._policies = tempfile.TemporaryDirectory(prefix="bench-policies-")
        policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
        policy["pool"] = {"warm": warm, "max": max_size or warm, "max_uses": max_uses}
        Path(self._policies.name, "default.yaml").write_text(yaml.safe_dump(policy))
        directory = Path(self._policies.name)
        super().__init__(*args, policies=directory, log_dir=directory, env=env)

    def stop(self, timeout: float = 60.0) -> None:
        super().stop(timeout)
        self._policies.cleanup()


def report_table(
    results: dict[str, dict[str, dict[str, float]]], *, ours: str, baselines: tuple[str, ...]
) -> str:
    """A Markdown table: per level, each system's p50/p99/throughput and our ratio to it."""
    rows = [
        "| level | system | p50 ms | p99 ms | per s | p50 ratio (them/us) |",
        "|---|---|---|---|---|---|",
    ]
    for level, mine in results[ours].items():
        for system in (ours, *baselines):
            figures = results[system].get(level)
            if figures is None:
                continue
            ratio = figures["p50_ms"] / mine["p50_ms"]
            rows.append(
                f"| {level} | {system} | {figures['p50_ms']:.1f} | {figures['p99_ms']:.1f} | "
                f"{figures['throughput_per_s']:.0f} | {'' if system == ours else f'{ratio:.1f}x'} |"
            )
    return "\n".join(rows)


def save_results(name: str, outcome: dict[str, object]) -> Path:
    """Write the raw figures to bench/results/NAME-TIMESTAMP.json and return the path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(outcome, indent=2))
    print(f"raw figures: {path}", file=sys.stderr)
    return path
