"""``sandbox quality check PATH...``: the command line of the quality check.

Exit status: 0 when nothing is broken and no probe passes, 1 when an item is
broken or has a loophole, 2 when the command itself is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .model import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PROBE_TIMEOUT_S,
    DEFAULT_RUNS,
    DEFAULT_TOO_EASY,
    DEFAULT_TOO_HARD,
    CheckSettings,
    QualityInputError,
)
from .probes import PROBE_NAMES

__all__ = ["register"]


def _check(args: argparse.Namespace, agent_factory: Callable[[argparse.Namespace], Any]) -> int:
    from sandbox.service.platform import Platform, PlatformSettings

    from .check import run_check
    from .progress import QualityProgress
    from .report import render_table, write_reports

    probes = None
    if args.probes is not None:
        probes = tuple(name for name in args.probes.split(",") if name)
    settings = CheckSettings(
        runs=args.runs,
        seed=args.seed,
        concurrency=args.concurrency,
        probes=probes,
        probe_sample=args.probe_sample,
        probe_timeout_s=args.probe_timeout,
        history=tuple(args.history),
        agent_k=args.k if args.agent else 0,
        too_easy=args.too_easy,
        too_hard=args.too_hard,
        keep=args.keep,
    )
    settings.validate()
    if args.agent and args.k < 1:
        raise QualityInputError("--agent needs --k 1 or more (trials per task)")
    agent = agent_factory(args) if args.agent else None

    async def run() -> Any:
        platform = Platform(PlatformSettings(warm=[], policies_dir=args.policies))
        await platform.start()
        try:
            return await run_check(
                args.paths,
                settings,
                platform=platform,
                progress=QualityProgress(enabled=not args.no_progress),
                agent=agent,
            )
        finally:
            if agent is not None:
                await agent.aclose()
            await platform.close()

    report = asyncio.run(run())
    write_reports(report, json_path=args.out / "quality.json", html_path=args.out / "quality.html")
    sys.stdout.write(render_table(report) + "\n")
    sys.stdout.write(f"report: {args.out / 'quality.html'} and {args.out / 'quality.json'}\n")
    return 1 if report.failing else 0


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    agent_factory: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``quality check``; ``agent_factory`` builds the agent of ``--agent`` (as eval run)."""
    from sandbox.service.platform import DEFAULT_POLICIES_DIR

    quality = commands.add_parser(
        "quality", help="find broken tasks and reward loopholes in task and problem sets"
    )
    sub = quality.add_subparsers(dest="quality_command", metavar="ACTION", required=True)
    check = sub.add_parser(
        "check",
        help="check task directories and JSONL problem sets (exit 1 if any is broken or "
        "has a loophole)",
        description="For every task or problem: schema, the reference solution N times with "
        "different seeds, negative controls (untouched, empty, trivial), the library of "
        "reward-loophole probes, determinism, near-duplicates and observed difficulty. "
        "Prints a table and writes quality.json and quality.html to --out.",
    )
    check.add_argument("paths", type=Path, nargs="+", help="task dirs, task sets, .jsonl sets")
    check.add_argument("--out", type=Path, default=Path("quality-report"), help="report dir")
    check.add_argument(
        "--runs", type=int, default=DEFAULT_RUNS, help="reference runs (default %(default)s)"
    )
    check.add_argument("--seed", type=int, default=1, help="seed of the first run")
    check.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    check.add_argument(
        "--probes", help=f"comma-separated probes (default all: {', '.join(PROBE_NAMES)})"
    )
    check.add_argument(
        "--probe-sample",
        type=int,
        metavar="N",
        help="only N probes per item, in rotation over the library from --seed (for CI)",
    )
    check.add_argument(
        "--probe-timeout",
        type=float,
        default=DEFAULT_PROBE_TIMEOUT_S,
        help="time limit of a task's hidden tests under controls and probes (seconds)",
    )
    check.add_argument(
        "--history",
        type=Path,
        action="append",
        default=[],
        help="past runs for the difficulty check: eval run dirs, results.jsonl, judge "
        "results JSONL (repeatable)",
    )
    check.add_argument("--agent", help="run this agent --k times per task (as `eval run`)")
    check.add_argument("--k", type=int, default=0, help="trials per task with --agent")
    check.add_argument("--model", help="model name (openai agent)")
    check.add_argument("--base-url", help="endpoint base URL (openai agent)")
    check.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR")
    check.add_argument("--temperature", type=float, default=0.0)
    check.add_argument("--too-easy", type=float, default=DEFAULT_TOO_EASY)
    check.add_argument("--too-hard", type=float, default=DEFAULT_TOO_HARD)
    check.add_argument("--keep", type=Path, help="keep every trial's run directory here")
    check.add_argument("--policies", type=Path, default=DEFAULT_POLICIES_DIR)
    check.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    check.set_defaults(handler=lambda args: _check(args, agent_factory))
