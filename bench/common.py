"""What the benchmarks share: a service to measure, the report table, the results file."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SANDBOX_BIN = Path(sys.executable).with_name("sandbox")
REPO = Path(__file__).resolve().parent.parent


class Service:
    """``sandbox serve`` on a free loopback port with a default policy of ``warm`` containers."""

    def __init__(self, *, warm: int, max_size: int | None = None, max_uses: int = 100_000) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._policies = tempfile.TemporaryDirectory(prefix="bench-policies-")
        policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
        policy["pool"] = {"warm": warm, "max": max_size or warm, "max_uses": max_uses}
        Path(self._policies.name, "default.yaml").write_text(yaml.safe_dump(policy))
        self.log_path = Path(self._policies.name, "serve.log")
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                str(SANDBOX_BIN),
                "serve",
                "--port",
                str(self.port),
                "--policies",
                self._policies.name,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"service exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"service not ready: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        self._log.close()
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
