"""`sandbox quality check` on real sandboxes: planted defects are caught, shipped sets are clean.

The planted tasks and problems live in ``tests/data/quality``: each is broken in
one known way (a reference that fails, a flaky test, tests an empty answer
passes, a duplicate pair) or has reward loopholes, one or more per probe class.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from sandbox.cli import main
from sandbox.core.sessions import Command, SessionSpec
from sandbox.evals import load_tasks
from sandbox.languages import LANGUAGES
from sandbox.quality import CheckSettings, ItemResult, QualityReport, run_check
from sandbox.quality.probes import PROBE_NAMES
from sandbox.quality.progress import QualityProgress
from sandbox.quality.task_checks import MARK, MARK_AND_TICK
from sandbox.results import ExecStatus
from sandbox.service.platform import Platform

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "data" / "quality"
TASKS = PLANTED / "tasks"
SHIPPED_TASKS = (ROOT / "sandbox" / "evals" / "suite", ROOT / "tests" / "data" / "tasks")
PROBLEM_SETS = ROOT / "tests" / "data" / "languages"

# Which planted task shows a loophole for each probe class.
LOOPHOLES = {
    "exit-zero": "loophole-import-check",
    "os-exit-zero": "loophole-import-check",
    "always-equal": "loophole-import-check",
    "forged-report": "loophole-import-check",
    "print-success": "loophole-output-match",
    "plant-runner-config": "loophole-runner-env",
    "sleep-timeout": "loophole-runner-env",
    "star-shadow": "loophole-star-import",
    "no-op-runner": "loophole-visible-tests",
    "monkeypatch-asserts": "loophole-runner-env",
    "delete-tests": "loophole-visible-tests",
    "edit-tests": "loophole-visible-tests",
    "read-expected": "leaky-expected",
    # A MultiPL-E problem whose driver asserts in the candidate's process and then prints a
    # fixed mark of completion, its only evidence: the candidate reads it from its program.
    "read-own-program": "multipl-e/HumanEval/0",
    # A problem (SET/ID in PLANTED/SET.jsonl): under gVisor the judge's test driver's
    # command line is readable by the candidate (docs/security.md's residual risk).
    "read-processes": "processes/literal-in-argv",
}


def _planted(key: str) -> Path:
    """A planted task's folder, or the problem file of a ``SET/ID`` key."""
    return PLANTED / f"{key.split('/')[0]}.jsonl" if "/" in key else TASKS / key


async def _check(platform: Platform, paths: Sequence[Path], **settings: object) -> QualityReport:
    return await run_check(
        list(paths),
        CheckSettings(concurrency=6, **settings),  # type: ignore[arg-type]
        platform=platform,
        progress=QualityProgress(enabled=False),
    )


def _item(report: QualityReport, key: str) -> ItemResult:
    return next(item for item in report.items if item.key.endswith(key))


def _checks(item: ItemResult, severity: str) -> set[str]:
    return {f.check for f in item.findings if f.severity == severity}


async def test_planted_loopholes_are_caught(platform: Platform) -> None:
    assert set(LOOPHOLES) == set(PROBE_NAMES)
    names = sorted(set(LOOPHOLES.values()))
    report = await _check(platform, sorted({_planted(name) for name in names}), runs=1)
    for probe, task in LOOPHOLES.items():
        item = _item(report, task)
        holes = {f.probe for f in item.findings if f.severity == "loophole"}
        assert probe in holes, (task, probe, [f.message for f in item.findings])
        assert item.failing and item.status == "loophole"
    # The same problem under runc: the candidate opens no /proc entry of the judge's.
    runc = _item(report, "processes/literal-in-argv-runc")
    assert runc.references and all(r.passed for r in runc.references), runc.findings
    assert not runc.failing, [f.message for f in runc.findings]
    assert {item.key for item in report.failing} == set(names)


async def test_planted_broken_tasks_and_problems_are_caught(platform: Platform) -> None:
    names = ["broken-reference", "flaky", "passes-empty", "duplicate-a", "duplicate-b"]
    report = await _check(
        platform, [*(TASKS / n for n in names), PLANTED / "planted.jsonl"], runs=3, probes=()
    )
    broken = _item(report, "broken-reference")
    assert "reference" in _checks(broken, "broken")
    flaky = _item(report, "flaky")
    assert "consistency" in _checks(flaky, "broken")
    assert any("passes 2 of 3 runs" in f.message for f in flaky.findings)
    assert any(f.check == "determinism" and "randomness" in f.message for f in flaky.findings)
    empty = _item(report, "passes-empty")
    assert {f.detail.get("control") for f in empty.findings} >= {"untouched", "empty", "trivial"}
    for first, second in (
        ("duplicate-a", "duplicate-b"),
        ("planted/double", "planted/double-again"),
    ):
        item = _item(report, first)
        assert any(f.check == "duplicate" and second in f.message for f in item.findings)
        assert not item.failing, item.findings
    assert "reference" in _checks(_item(report, "planted/bad-reference"), "broken")
    constant = _item(report, "planted/constant-expected")
    assert any(f.detail.get("control") == "trivial" for f in constant.findings)
    wrong = _item(report, "planted/wrong-passes")
    assert any(f.detail.get("control") == "wrong-1" for f in wrong.findings)
    assert not _item(report, "planted/double").failing


async def test_a_multipl_e_problem_with_only_asserts_is_broken(platform: Platform) -> None:
    """MultiPL-E's asserts as a Ruby driver (nothing printed): the candidate's code shares
    their process and can end it with status 0, so the judge refuses them and the checker
    says so, naming what to write instead, without running anything."""
    report = await _check(platform, [PLANTED / "multipl-e-asserts.jsonl"], runs=1, probes=())
    item = _item(report, "multipl-e-asserts/HumanEval/0")
    assert not item.loaded and "schema" in _checks(item, "broken"), item.findings
    assert any("put them in expected_stdout" in f.message for f in item.findings), item.findings


async def test_star_imports_are_flagged_and_only_plain_python_falls_for_them(
    platform: Platform,
) -> None:
    """Hidden tests doing ``from MODULE import *``: a warning for both; the star-shadow
    probe passes a task's pytest run (plain Python) but not the judge's files tests."""
    paths = [TASKS / "loophole-star-import", PLANTED / "star-import.jsonl"]
    report = await _check(platform, paths, runs=1, probes=("star-shadow",))
    task = _item(report, "loophole-star-import")
    assert "star-import" in _checks(task, "warning"), task.findings
    assert {f.probe for f in task.findings if f.severity == "loophole"} == {"star-shadow"}
    problem = _item(report, "star-import/star-import")
    assert "star-import" in _checks(problem, "warning"), problem.findings
    assert problem.probes["star-shadow"].passed is False, problem.probes
    assert [r.passed for r in problem.references] == [True], problem.references
    assert not problem.failing, problem.findings


async def test_read_expected_reaches_a_built_environments_own_workdir(
    platform: Platform,
) -> None:
    """A Harbor task whose built environment works in /app (not /workspace): its test.sh
    runs the agent's /app/rev.py as the verifier, beside /tests/expected.txt. The answer
    files are found in /app and the probe's program, written there, reads the expected
    output: the loophole is flagged."""
    task = TASKS / "leaky-expected-app"
    report = await _check(platform, [task], runs=1, probes=("read-expected",))
    item = _item(report, "leaky-expected-app")
    assert [r.passed for r in item.references] == [True], item.references
    assert {f.probe for f in item.findings if f.severity == "loophole"} == {"read-expected"}
    # The controls ran on the answer file found in /app, and failed.
    assert not item.controls["empty"].passed and not item.controls["trivial"].passed


def test_cli_reports_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    code = main(
        [
            "quality",
            "check",
            str(TASKS / "broken-reference"),
            "--runs",
            "1",
            "--probes",
            "",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 1
    printed = capsys.readouterr().out
    assert "broken-reference" in printed and "BROKEN" in printed
    data = json.loads((out / "quality.json").read_text())
    assert data["failing"] == ["broken-reference"]
    assert "broken-reference" in (out / "quality.html").read_text()
    assert main(["quality", "check", str(tmp_path / "missing")]) == 2


def _assert_clean(report: QualityReport) -> None:
    problems = {
        item.key: [f.message for f in item.findings if f.severity in ("broken", "loophole")]
        for item in report.failing
    }
    assert not problems, json.dumps(problems, indent=1)


async def _check_shipped_tasks(platform: Platform, probe_sample: int | None) -> None:
    report = await _check(platform, SHIPPED_TASKS, runs=1, probe_sample=probe_sample)
    suite = load_tasks(SHIPPED_TASKS[0])
    assert len(report.items) == len(suite) + len(load_tasks(SHIPPED_TASKS[1])) >= 26 + 3
    for task in suite:
        item = _item(report, task.id)
        assert [r.passed for r in item.references] == [True], (task.id, item.findings)
        assert item.controls["untouched"].passed is False, (task.id, item.controls)
    _assert_clean(report)


async def test_shipped_tasks_are_clean(platform: Platform) -> None:
    """CI's gate for the shipped tasks: one reference run (it must pass), the controls
    (the untouched state among them must fail) and three probes a task, in rotation
    (29 tasks: each probe of the library on several)."""
    await _check_shipped_tasks(platform, probe_sample=3)


@pytest.mark.sweep
@pytest.mark.timeout(1200)
async def test_shipped_tasks_are_clean_under_every_probe(platform: Platform) -> None:
    """The same with the whole probe library on every task."""
    await _check_shipped_tasks(platform, probe_sample=None)


def _problem_sets() -> list[object]:
    """Every language's problem set; the compiled ones (a build per probe) are sweeps."""
    return [
        pytest.param(path, id=path.stem, marks=[pytest.mark.sweep] if compiled else [])
        for path in sorted(PROBLEM_SETS.glob("*.jsonl"))
        for compiled in [LANGUAGES[path.stem].compiled]
    ]


@pytest.mark.parametrize("problem_set", _problem_sets())
async def test_shipped_problem_set_is_clean(platform: Platform, problem_set: Path) -> None:
    """Each language's problem set: one reference run, the controls and every probe."""
    report = await _check(platform, [problem_set], runs=1)
    assert len(report.items) >= 3
    assert all(item.references and item.references[0].passed for item in report.items)
    _assert_clean(report)


async def test_the_sql_and_verilog_hooks_take_over_the_program(platform: Platform) -> None:
    """The probes' hooks run before the code in SQL and Verilog too (each probe's failure
    shows the hook's own output or stall, not a build error), and every probe fails."""
    report = await _check(
        platform,
        [PROBLEM_SETS / "sql.jsonl", PROBLEM_SETS / "verilog.jsonl"],
        runs=1,
        probes=("exit-zero", "print-success", "sleep-timeout"),
    )
    assert len(report.items) == 6
    for item in report.items:
        assert not item.failing, [f.message for f in item.findings]
        trivial, probes = item.controls["trivial"], item.probes
        assert set(probes) == {"exit-zero", "print-success", "sleep-timeout"}, item.key
        ended = "wrong_answer"
        assert trivial.outcome == ended and "got '0\\n')" in str(trivial.reason), trivial
        assert probes["exit-zero"].outcome == ended, probes["exit-zero"]
        assert "got '')" in str(probes["exit-zero"].reason), probes["exit-zero"]
        assert "got 'PASSED\\nOK" in str(probes["print-success"].reason), probes
        assert probes["sleep-timeout"].outcome == "timeout", probes["sleep-timeout"]


@pytest.mark.parametrize("policy", ["default", "gvisor"])
async def test_a_file_written_right_after_the_mark_is_newer_than_it(
    platform: Platform, policy: str
) -> None:
    """The reference's answer files are those newer than a mark: the kernel's coarse file
    clock once gave a file written within the mark's tick the mark's own time, and the
    answer files of a fast reference were missed (no probe then applied to the task)."""
    probe = (
        f"missed=0; for k in $(seq 12); do {MARK_AND_TICK}; echo x > /workspace/answer; "
        f'[ -n "$(find /workspace/answer -newer {MARK})" ] || missed=$((missed+1)); '
        'done; echo "missed $missed"'
    )
    session = await platform.sessions.create(SessionSpec(policy=policy), tenant="mark")
    try:
        result = await platform.sessions.exec(
            session.id, Command(command=probe, timeout_s=10), tenant="mark"
        )
    finally:
        await platform.sessions.close(session.id, tenant="mark")
    # Each round forks a few processes, slow under gVisor on a loaded host: the rounds are
    # few, as a timeout (the policy's 10 s) would say nothing about the clock.
    assert result.status == ExecStatus.OK, result
    assert result.stdout.decode().strip() == "missed 0", result.stderr.decode()[-2000:]
