"""Console page load time: every page of the console's navigation (``api.ui.render.PAGES``)
and the detail pages behind them, in Debian's chromium, against a service this script
starts (no keys, loopback, a fresh state directory) with 50 executions recorded first and
``--runs-dir`` holding what the console's tests use: two real evaluation runs, a real
quality report and a training log.

A load is the browser's navigation timing, from the request's start to the end of the
``load`` event (the page's script and stylesheet fetched and run). The baseline is the
floor of any page from this service: ``/healthz``, one small JSON document, loaded the
same way in the same browser. Medians and p99 are printed with the machine's load
average before and after; raw figures go to bench/results/.

    .venv/bin/python bench/bench_console.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.ui.render import PAGES as CONSOLE_PAGES
from bench.common import save_results
from sandbox.host.launcher import ServiceProcess
from sandbox.service.platform import STATE_DIR_ENV
from tests.ui.browser import chromium
from tests.ui.conftest import console_runs

LOADS = 20
EXECUTIONS = 50
PAGES = {
    "baseline: /healthz": "/healthz",
    **dict(CONSOLE_PAGES),
    "execution detail": "/ui/executions/1",
    "policies + a diff": "/ui/policies?a=default&b=strict",
    "evaluation report": "/ui/evaluations/report?run=evals/oracle",
    "evaluation compare": "/ui/evaluations/compare?baseline=evals/oracle&candidate=evals/null",
}
LOAD_MS = (
    "(() => { const n = performance.getEntriesByType('navigation')[0];"
    " return n.loadEventEnd - n.startTime; })()"
)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-console-") as temp:
        root = Path(temp)
        runs = console_runs(root)
        load_before = os.getloadavg()
        with ServiceProcess(
            "--runs-dir", str(runs), log_dir=root, env={STATE_DIR_ENV: str(root / "state")}
        ) as service:
            with httpx.Client(base_url=service.url, timeout=60) as http:
                for i in range(EXECUTIONS):
                    http.post("/v1/run", json={"code": f"print({i})"}).raise_for_status()
            figures: dict[str, dict[str, float]] = {}
            with chromium() as browser:
                page = browser.new_page()
                for name, path in PAGES.items():
                    page.goto(service.url + path)  # a first load, not counted (caches warm)
                    samples = []
                    for _ in range(LOADS):
                        response = page.goto(service.url + path, wait_until="load")
                        assert response is not None and response.ok, (path, response)
                        samples.append(float(page.evaluate(LOAD_MS)))
                    samples.sort()
                    figures[name] = {
                        "p50_ms": statistics.median(samples),
                        "p99_ms": samples[min(len(samples) - 1, round(0.99 * len(samples)))],
                    }
        load_after = os.getloadavg()
    floor = figures["baseline: /healthz"]["p50_ms"]
    print("| page | p50 ms | p99 ms | p50 vs /healthz |\n|---|---|---|---|")
    for name, f in figures.items():
        print(f"| {name} | {f['p50_ms']:.1f} | {f['p99_ms']:.1f} | {f['p50_ms'] / floor:.1f}x |")
    loads = ", ".join(f"{a:.1f} / {b:.1f}" for a, b in zip(load_before, load_after, strict=True))
    print(f"load average (1, 5, 15 min) before / after: {loads}")
    save_results(
        "console",
        {
            "loads": LOADS,
            "executions": EXECUTIONS,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "pages": figures,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
