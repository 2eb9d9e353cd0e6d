"""Compile + run latency of a hello-world per language and test-runner mode, through ``/run_code``.

Each language's program from the compatibility tests (it reads a name on stdin
and a number from a file, writes a file and greets the name) and each mode's
passing tests (``pytest``, ``junit``, ``go_test``, ``jest``, ``D_ut``) is sent
once to warm its image's pool, then ``--repeat`` times; the report gives, per
language, the median request time and the median compile and run times the
response carries.

    .venv/bin/python bench/bench_languages.py [--repeat 3] [--only ruby,scala,junit]
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Service, save_results
from sandbox.languages import LANGUAGES, get_language
from tests.api.test_compat_languages import MODES, PROGRAMS

# What every language's program reads and writes besides stdin.
FILES = {"files": {"data/in.txt": base64.b64encode(b"21\n").decode()}, "fetch_files": ["out.txt"]}


def programs() -> dict[str, tuple[str, dict[str, Any]]]:
    """Our language name -> its program and the request's other fields."""
    found = {get_language(name).name: (code, FILES) for name, code in PROGRAMS.items()}
    found |= {get_language(mode).name: (tests[0], {}) for mode, tests in MODES.items()}
    return {name: found[name] for name in LANGUAGES if name in found}


def measure(
    http: httpx.Client, language: str, code: str, fields: dict[str, Any], repeat: int
) -> dict[str, float]:
    body = {
        "code": code,
        "language": language,
        "stdin": "sandbox\n",
        "compile_timeout": 60,
        "run_timeout": 60,  # jest alone takes seconds on a loaded host
        **fields,
    }
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
            for language, (code, fields) in chosen.items():
                results[language] = measure(http, language, code, fields, args.repeat)
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
