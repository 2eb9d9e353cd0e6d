"""Compile + run latency of a hello-world per language, through ``/run_code``.

Each language's greeting program (the ones the tests use: it reads a name on
stdin, or prints where the language reads none) is sent once to warm its image's
pool, then ``--repeat`` times; the report gives, per language, the median
request time and the median compile and run times the response carries.

    .venv/bin/python bench/bench_languages.py [--repeat 3] [--only ruby,scala]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, save_results
from sandbox.languages import LANGUAGES
from tests.api.test_compat_languages import HELLO as MORE_HELLO
from tests.api.test_compat_languages import PRINTED
from tests.integration.test_languages import HELLO


def programs() -> dict[str, str]:
    """Our language name -> its greeting program."""
    found = {**HELLO}
    for name, code in {**MORE_HELLO, **PRINTED}.items():
        found[name.lower()] = code
    return {name: found[name] for name in LANGUAGES if name in found}


def measure(http: httpx.Client, language: str, code: str, repeat: int) -> dict[str, float]:
    body = {"code": code, "language": language, "stdin": "sandbox\n", "compile_timeout": 60}
    times: list[float] = []
    compiles: list[float] = []
    runs: list[float] = []
    for attempt in range(1 + repeat):
        started = time.perf_counter()
        response = http.post("/run_code", json=body)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        answer = response.json()
        if attempt == 0:
            continue  # the image's first container (a cold toolchain may even time out)
        if answer["status"] != "Success":
            raise RuntimeError(f"{language}: {answer}")
        times.append(elapsed)
        if answer["compile_result"] is not None:
            compiles.append(answer["compile_result"]["execution_time"])
        runs.append(answer["run_result"]["execution_time"])
    return {
        "request_ms": statistics.median(times) * 1000,
        "compile_ms": statistics.median(compiles) * 1000 if compiles else 0.0,
        "run_ms": statistics.median(runs) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated language names")
    args = parser.parse_args()
    chosen = programs()
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    service = Service(warm=1, max_size=2)
    results: dict[str, dict[str, float]] = {}
    try:
        service.wait_ready()
        with httpx.Client(base_url=service.url, timeout=300) as http:
            for language, code in chosen.items():
                results[language] = measure(http, language, code, args.repeat)
                figures = results[language]
                print(
                    f"| {language} | {LANGUAGES[language].image} | {figures['compile_ms']:.0f} | "
                    f"{figures['run_ms']:.0f} | {figures['request_ms']:.0f} |",
                    flush=True,
                )
    finally:
        service.stop()
    save_results("languages", {"repeat": args.repeat, "results": results})


if __name__ == "__main__":
    main()
