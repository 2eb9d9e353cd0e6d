"""Console page load time: each ``/ui`` page in Debian's chromium, against a service this
script starts (no keys, loopback), with 50 executions recorded first.

A load is the browser's navigation timing, from the request's start to the end of the
``load`` event (the page's script and stylesheet fetched and run). The baseline is the
floor of any page from this service: ``/healthz``, one small JSON document, loaded the
same way in the same browser. Medians and p99 are printed; raw figures go to bench/results/.

    .venv/bin/python bench/bench_console.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save_results
from sandbox.host.launcher import ServiceProcess
from tests.ui.browser import chromium

LOADS = 20
EXECUTIONS = 50
PAGES = {
    "baseline: /healthz": "/healthz",
    "overview": "/ui",
    "executions": "/ui/executions",
    "execution detail": "/ui/executions/1",
    "tenants": "/ui/tenants",
    "policies + diff": "/ui/policies?a=default&b=strict",
    "audit": "/ui/audit",
    "fleet": "/ui/fleet",
}
LOAD_MS = (
    "(() => { const n = performance.getEntriesByType('navigation')[0];"
    " return n.loadEventEnd - n.startTime; })()"
)


def main() -> int:
    service = ServiceProcess()
    try:
        service.wait_ready()
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
                    page.goto(service.url + path, wait_until="load")
                    samples.append(float(page.evaluate(LOAD_MS)))
                samples.sort()
                figures[name] = {
                    "p50_ms": statistics.median(samples),
                    "p99_ms": samples[min(len(samples) - 1, round(0.99 * len(samples)))],
                }
    finally:
        service.stop()
    floor = figures["baseline: /healthz"]["p50_ms"]
    print("| page | p50 ms | p99 ms | p50 vs /healthz |\n|---|---|---|---|")
    for name, f in figures.items():
        print(f"| {name} | {f['p50_ms']:.1f} | {f['p99_ms']:.1f} | {f['p50_ms'] / floor:.1f}x |")
    save_results("console", {"loads": LOADS, "executions": EXECUTIONS, "pages": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
