"""Verdicts of SandboxFusion's test-runner modes (``pytest``, ``junit``, ``go_test``, ``jest``).

In these modes the code is a test file. SandboxFusion calls a run ``Success``
when the runner exits 0; here it also takes the runner's own report, read on
the trusted side (as the judge's ``command`` tests do): pytest's outcomes on the
runner's nonce-checked channel (``runner/harness/pytest_channel.py``), JUnit's
XML files and jest's JSON file (fetched by the runner, as root, after every
process of the run is dead), ``go test``'s events through ``test2json``. A run
passes only with a complete report that lists a test that ran and none that
failed. An exit status of 0 without it (``os._exit(0)`` in a test, a runner
killed before it wrote its report) is ``Failed``, with the reason in the
response's ``message``.

What this does not guarantee: the tests run in the runner's own process, so
code written against that very runner can still forge its report (see
:meth:`sandbox.judge.judge.Judge._command`); ``D_ut`` has no report at all,
its verdict is the exit status of D's unittest runner, as in SandboxFusion.
"""

from __future__ import annotations

from sandbox.evals.judging import judge_report
from sandbox.judge.models import TestResult, TestVerdict
from sandbox.judge.report_parsers import parse_report
from sandbox.languages import Language
from sandbox.results import ExecResult, ExecStatus

MAX_NAMED = 5


def report_problem(language: Language, ran: ExecResult) -> str | None:
    """Why the run of a test-runner mode is not a pass; None when its report shows one."""
    if language.report is None:
        return None
    if ran.status is not ExecStatus.OK:
        return f"the {language.name} run ended with {ran.status.value}" + (
            f" (exit status {ran.exit_code})" if ran.exit_code is not None else ""
        )
    if language.report == "pytest":
        _, problem = judge_report(ran.channel)
        return f"pytest's report: {problem}" if problem is not None else None
    if language.report == "go-json":
        reports = [("its test2json events", ran.stdout)]
    else:
        reports = [(path, ran.files[path]) for path in language.report_paths if path in ran.files]
        if not reports:
            missing = ", ".join(
                f"{path} ({ran.file_errors.get(path, 'not found')})"
                for path in language.report_paths
            )
            return f"the test runner wrote no report: {missing}"
    tests: list[TestResult] = []
    for where, data in reports:
        parsed = parse_report(language.report, data)
        if parsed.problem is not None:
            return f"the {language.report} report in {where} is not usable: {parsed.problem}"
        if parsed.build_failed:
            return "the tests did not build"
        tests.extend(parsed.tests)
    ran_tests = [t for t in tests if t.verdict is not TestVerdict.SKIPPED]
    if not ran_tests:
        return f"the report lists no test that ran ({len(tests)} skipped)"
    failed = [t for t in ran_tests if t.verdict is not TestVerdict.PASSED]
    if failed:
        names = ", ".join(t.name for t in failed[:MAX_NAMED])
        more = f" and {len(failed) - MAX_NAMED} more" if len(failed) > MAX_NAMED else ""
        return f"{len(failed)} of {len(ran_tests)} tests failed: {names}{more}"
    return None
