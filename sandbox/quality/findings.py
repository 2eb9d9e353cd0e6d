"""Turning what the runs observed into findings: broken tasks, loopholes, flaky and fragile tests.

Pure functions over :class:`~sandbox.quality.task_checks.TaskRuns` and
:class:`~sandbox.quality.problem_checks.ProblemRuns`; nothing here runs code.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from sandbox.backends.base import WORKDIR
from sandbox.core.sessions import JUDGE_TESTS
from sandbox.evals.formats.layout import path_pattern
from sandbox.evals.tasks import Task
from sandbox.judge.models import AssertTests, FileTests

from .model import ItemResult, Severity, TrialSummary
from .probes import BY_NAME, CONTROLS
from .problem_checks import ProblemRuns
from .problems import Problem
from .star_imports import star_imports
from .task_checks import TaskRuns

__all__ = ["fragile_lines", "problem_findings", "static_task_findings", "task_findings"]

PYTEST_FILE_RE: Final = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py)$")
AGENT_WRITABLE: Final = ("/workspace", "/tmp", "/var/tmp", "/dev/shm")
"""Where the agent writes (tmpfs that outlive its processes, and its live workspace)."""
SCRIPT_RE: Final = re.compile(r"^[\w./-]+\.(sh|py|js|mjs|awk|pl|rb)$")

FRAGILE: Final = (
    (
        "time",
        re.compile(
            r"\b(time\.time|time\.monotonic|time\.perf_counter|datetime\.(?:datetime\.)?now|"
            r"datetime\.(?:datetime\.)?utcnow|date\.today|Date\.now|new Date\(\)|time\.Now)\b|"
            r"\$\(date\b|\bsleep\s+\d"
        ),
    ),
    (
        "network",
        re.compile(
            r"\b(socket\.|urllib|requests\.|http\.client|httpx|aiohttp|fetch\(|net/http|"
            r"curl |wget )|https?://(?!localhost|127\.0\.0\.1)"
        ),
    ),
    (
        "ordering",
        re.compile(
            r"\b(os\.listdir|os\.scandir|glob\.glob|\.iterdir\(\)|\.glob\(|readdir|"
            r"set\([^)]*\)\)\[|list\(set\(|ls \|)"
        ),
    ),
    (
        "randomness",
        re.compile(r"\b(random\.(?!seed|Random\(\w)\w+|Math\.random|rand\(\)|\$RANDOM)"),
    ),
)
"""Patterns in hidden tests that make verdicts depend on time, network, order or chance."""


def fragile_lines(tests: Mapping[str, str]) -> dict[str, list[str]]:
    """``{dependence: ["file:line", ...]}`` for the lines of ``tests`` matching :data:`FRAGILE`."""
    found: dict[str, list[str]] = {}
    for path in sorted(tests):
        for number, line in enumerate(tests[path].splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith(("#", "//")):
                continue
            for name, pattern in FRAGILE:
                if pattern.search(stripped):
                    found.setdefault(name, []).append(f"{path}:{number}")
    return found


def _flag_fragile(item: ItemResult, tests: Mapping[str, str]) -> None:
    for dependence, where in fragile_lines(tests).items():
        item.add(
            "determinism",
            Severity.WARNING,
            f"the tests depend on {dependence} ({', '.join(where[:4])}"
            f"{' ...' if len(where) > 4 else ''}): verdicts may change between runs",
            dependence=dependence,
            lines=where,
        )


def _flag_star_imports(
    item: ItemResult, tests: Mapping[str, str], modules: Collection[str], whose: str
) -> None:
    where = star_imports(tests, modules)
    if not where:
        return
    if whose == "candidate":
        effect = (
            "the judge gives them only the candidate's own public names, never one the "
            "tests bind or a builtin's"
        )
    else:
        effect = "in plain Python its __all__ can replace the tests' own names (math, sorted)"
    item.add(
        "star-import",
        Severity.WARNING,
        f"the tests star-import the {whose}'s module ({', '.join(where[:4])}): {effect}; "
        "import the names they test (from MODULE import f) instead",
        lines=where,
    )


def _flag_agent_writable(item: ItemResult, tests: Mapping[str, str], *, own_work: bool) -> None:
    """Tests that read places the agent could write (and its processes could leave state in).

    ``own_work``: a Harbor-style verifier, which works on the agent's own
    ``/workspace`` by design (its links out pruned, the agent's programs re-run
    with ``agent-run``); only the other places are flagged.
    """
    roots = [r for r in AGENT_WRITABLE if not (own_work and r == WORKDIR)]
    where = sorted(
        f"{path}: {root}"
        for path, text in tests.items()
        for root in roots
        if path_pattern(root).search(text)
    )
    if where:
        fix = (
            "make scratch directories fresh (mktemp -d) and keep what the judge compares in "
            "the judge's own directory"
            if own_work
            else "judge the copy of the agent's work ($WORK) and write to the judge's own "
            "directory instead"
        )
        item.add(
            "verifier",
            Severity.WARNING,
            f"the tests use places the agent could write ({', '.join(where[:4])}): what the "
            f"agent left there (a planted file, a link) is read by the judge; {fix}",
            lines=where,
        )


def _python_modules(paths: Collection[str]) -> set[str]:
    """The module names a Python file may be imported under: dotted from the root, or bare."""
    dotted = {p.removesuffix(".py").replace("/", ".") for p in paths if p.endswith(".py")}
    return dotted | {name.rsplit(".", 1)[-1] for name in dotted}


def static_task_findings(
    item: ItemResult, task: Task, *, images: Collection[str], policies: Collection[str]
) -> None:
    """Schema checks that need no sandbox: the tests it names, its image, policy and solution."""
    spec = task.config.tests
    if spec.pytest:
        if not any(PYTEST_FILE_RE.search(path) for path in task.tests):
            item.add(
                "schema",
                Severity.BROKEN,
                "tests.framework is pytest but tests/ holds no test_*.py or *_test.py file",
            )
    else:
        assert spec.command is not None
        try:
            words = shlex.split(spec.command)
        except ValueError:
            words = spec.command.split()
        missing = sorted(
            w for w in words if SCRIPT_RE.match(w) and "$" not in w and w not in task.tests
        )
        missing = [
            w
            for w in missing
            if w.removeprefix("./").removeprefix(f"{JUDGE_TESTS}/") not in task.tests
        ]
        if missing:
            item.add(
                "schema",
                Severity.BROKEN,
                f"tests.command names {', '.join(missing)}, which tests/ does not hold",
                missing=missing,
            )
    if task.config.image not in images:
        item.add(
            "schema",
            Severity.BROKEN,
            f"image {task.config.image!r} is not built (built: {', '.join(sorted(images))}); "
            "run `sandbox images build`",
        )
    if task.config.policy not in policies:
        item.add(
            "schema",
            Severity.BROKEN,
            f"policy {task.config.policy!r} does not exist (known: {', '.join(sorted(policies))})",
        )
    if not task.solution:
        item.add("schema", Severity.BROKEN, "solution/ is empty: there is no reference solution")
    texts = {p: d.decode("utf-8", "replace") for p, d in task.tests.items()}
    _flag_agent_writable(item, texts, own_work=task.judged_by_reward)
    _flag_fragile(item, texts)
    _flag_star_imports(item, texts, _python_modules([*task.files, *task.solution]), "agent")


def _references(item: ItemResult, references: Sequence[TrialSummary]) -> bool:
    """Consistency and determinism of the reference runs; True when every scored run passed."""
    scored = [r for r in references if r.passed is not None]
    passes = sum(1 for r in scored if r.passed)
    for run in references:
        if run.passed is None:
            item.add(
                "reference",
                Severity.WARNING,
                f"{run.label}: no verdict, the platform failed twice ({run.reason})",
            )
    if not scored:
        return False
    if passes == 0:
        first = scored[0]
        item.add(
            "reference",
            Severity.BROKEN,
            f"the reference solution fails ({passes} of {len(scored)} runs pass): {first.reason}",
            passes=passes,
            runs=len(scored),
            failing=first.tests,
        )
        return False
    if passes < len(scored):
        item.add(
            "consistency",
            Severity.BROKEN,
            f"flaky: the reference solution passes {passes} of {len(scored)} runs "
            f"(failing: {', '.join(r.note or r.label for r in scored if not r.passed)})",
            passes=passes,
            runs=len(scored),
        )
    verdicts: dict[str, set[str]] = {}
    for run in scored:
        for name, verdict in run.tests.items():
            verdicts.setdefault(name, set()).add(verdict)
    for name in sorted(verdicts):
        missing = sum(1 for run in scored if name not in run.tests)
        if len(verdicts[name]) > 1 or (missing and verdicts[name] != {"passed"}):
            item.add(
                "determinism",
                Severity.BROKEN,
                f"test {name} changes verdict across runs and seeds",
                test=name,
            )
    return passes == len(scored)


def _negative(item: ItemResult, summaries: Mapping[str, TrialSummary], probes: bool) -> None:
    for label, summary in summaries.items():
        if summary.passed is None:
            item.add(
                "probe" if probes else "control",
                Severity.WARNING,
                f"{label}: no verdict, the platform failed twice ({summary.reason})",
                probe=label if probes else None,
            )
        elif summary.passed and probes:
            probe = BY_NAME[label]
            item.add(
                "probe",
                Severity.LOOPHOLE,
                f"loophole: probe {label} ({probe.hack_class}) passes the tests; what it did: "
                f"{probe.description}",
                probe=label,
                trajectory=summary.trajectory,
            )
        elif summary.passed:
            what = CONTROLS.get(label) or f"known-wrong solution {label.split('-')[-1]}"
            item.add(
                "control",
                Severity.BROKEN,
                f"a negative control passes: {label} ({what}); the tests do not check the work",
                control=label,
            )


def task_findings(item: ItemResult, task: Task, runs: TaskRuns) -> None:
    """Findings of a task's runs, added to ``item`` (which keeps the runs for the report)."""
    item.references, item.controls, item.probes = runs.references, runs.controls, runs.probes
    if runs.setup_failed:
        item.add("reference", Severity.BROKEN, runs.setup_failed)
        return
    if not _references(item, runs.references) and not any(r.passed for r in runs.references):
        item.add(
            "probe",
            Severity.INFO,
            "the probes did not run: they need a reference solution that passes",
        )
    _negative(item, runs.controls, probes=False)
    _negative(item, runs.probes, probes=True)
    if runs.leaks:
        item.add(
            "probe",
            Severity.LOOPHOLE,
            "loophole: probe read-expected (reading the expected output where it should be "
            f"invisible) found lines of the hidden tests outside the workspace while the agent "
            f"runs: {', '.join(runs.leaks)}",
            probe="read-expected",
            places=runs.leaks,
        )


def problem_findings(item: ItemResult, problem: Problem, runs: ProblemRuns) -> None:
    """Findings of a problem's judged runs, added to ``item``."""
    item.references, item.controls, item.probes = runs.references, runs.controls, runs.probes
    if runs.plan_error:
        item.add("schema", Severity.BROKEN, f"the judge refuses the problem: {runs.plan_error}")
        return
    _references(item, runs.references)
    _negative(item, runs.controls, probes=False)
    _negative(item, runs.probes, probes=True)
    tests = problem.request.tests
    if isinstance(tests, AssertTests):
        _flag_fragile(item, {"tests.script": tests.script})
    elif isinstance(tests, FileTests):
        _flag_fragile(item, dict(tests.files))
        _flag_star_imports(item, dict(tests.files), {tests.module}, "candidate")
