"""Test runners' reports read on the trusted side: JUnit XML, ``go test -json``, TAP and
jest's ``--json`` report.

Used by the judge's ``command`` tests. Every parser is bounded (report size, line
length, number of tests) and says why a report is not complete evidence of a run
rather than guessing.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any

from sandbox.judge.models import MAX_CASES, MESSAGE_CHARS, TestResult, TestVerdict

MAX_REPORT_BYTES = 4 << 20
MAX_LINE_CHARS = 4096


@dataclass
class ParsedReport:
    """Per-test results read from a report, or why the report cannot be used."""

    tests: list[TestResult] = field(default_factory=list)
    problem: str | None = None
    build_failed: bool = False


def parse_report(report_format: str, data: bytes) -> ParsedReport:
    """Read a test runner's report (``junit``, ``go-json``, ``tap`` or ``jest-json``) here.

    Bounded: at most :data:`MAX_REPORT_BYTES` and :data:`MAX_CASES` tests; XML with a
    DTD or entities is refused before parsing. ``problem`` says why a report is not
    complete evidence (garbled, truncated, counts that do not add up).
    """
    if len(data) > MAX_REPORT_BYTES:
        return ParsedReport(problem=f"it is larger than {MAX_REPORT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ParsedReport(problem="it is not UTF-8")
    if report_format == "junit":
        parsed = _parse_junit(text)
    elif report_format == "go-json":
        parsed = _parse_go_json(text)
    elif report_format == "jest-json":
        parsed = _parse_jest_json(text)
    else:
        parsed = _parse_tap(text)
    if len(parsed.tests) > MAX_CASES:
        return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
    return parsed


def _parse_junit(text: str) -> ParsedReport:
    if re.search(r"<!(DOCTYPE|ENTITY)", text, re.IGNORECASE):
        return ParsedReport(problem="JUnit reports with a DTD or entities are refused")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        return ParsedReport(problem=f"it is not well-formed XML ({exc})")
    if root.tag not in ("testsuites", "testsuite"):
        return ParsedReport(problem=f"its root is <{root.tag}>, not <testsuites> or <testsuite>")
    problem = _junit_counts(root)
    if problem is not None:
        return ParsedReport(problem=problem)
    cases = list(root.iter("testcase"))
    if len(cases) > MAX_CASES:
        return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
    results = []
    for case in cases:
        name = case.get("name") or "?"
        classname = case.get("classname")
        verdict, message = TestVerdict.PASSED, None
        for tag, outcome in (
            ("failure", TestVerdict.WRONG_ANSWER),
            ("error", TestVerdict.RUNTIME_ERROR),
            ("skipped", TestVerdict.SKIPPED),
        ):
            found = case.find(tag)
            if found is not None:
                verdict = outcome
                message = (found.get("message") or found.text or tag)[:MESSAGE_CHARS]
                break
        results.append(
            TestResult(
                name=f"{classname}::{name}" if classname else name,
                verdict=verdict,
                time_s=_float(case.get("time")),
                message=message,
            )
        )
    return ParsedReport(tests=results)


def _junit_counts(root: ElementTree.Element) -> str | None:
    """Whether every suite holds as many test cases (its own and its nested suites')
    as its ``tests`` attribute says. Iterative: a report nested 100,000 deep is fine."""
    suites = [e for e in root.iter() if e.tag in ("testsuites", "testsuite")]
    counts: dict[int, int] = {}
    for suite in reversed(suites):  # nested suites before the suites holding them
        count = sum(
            1 if child.tag == "testcase" else counts.get(id(child), 0)
            for child in suite
            if child.tag in ("testcase", "testsuite")
        )
        counts[id(suite)] = count
        declared = suite.get("tests")
        if declared is not None and declared.strip() != str(count):
            return (
                f"<{suite.tag} name={suite.get('name', '')[:80]!r}> declares "
                f"tests={declared[:20]!r} but holds {count} test cases (an incomplete report)"
            )
    return None


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


_GO_BUILD_FAILED = re.compile(r"^FAIL\s.*\[(build|setup) failed\]\s*$")


def _parse_go_json(text: str) -> ParsedReport:
    """``go test -json``: top-level tests (subtests count through their parent), and
    a final pass/fail/skip event for every package, or the run did not finish."""
    order: list[tuple[str, str]] = []
    outcome: dict[tuple[str, str], tuple[str, float | None]] = {}
    output: dict[tuple[str, str], str] = {}
    packages: list[str] = []
    finished: set[str] = set()
    seen: set[tuple[str, str]] = set()
    build_failed = False
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:  # go test prints build failures as text, not events
            build_failed = build_failed or bool(_GO_BUILD_FAILED.match(line[:MAX_LINE_CHARS]))
            continue
        if not isinstance(event, dict):
            return ParsedReport(problem=f"a line is not an event: {line[:80]!r}")
        package, test, action = event.get("Package"), event.get("Test"), event.get("Action")
        if not isinstance(package, str) or not isinstance(action, str):
            return ParsedReport(problem=f"an event without Package or Action: {line[:80]!r}")
        if test is not None and not isinstance(test, str):
            return ParsedReport(problem=f"an event whose Test is not a name: {line[:80]!r}")
        if package not in packages:
            packages.append(package)
        if test is None:
            if action in ("pass", "fail", "skip"):
                finished.add(package)
            elif action == "output" and "[build failed]" in str(event.get("Output")):
                build_failed = True
            continue
        key = (package, test.split("/")[0])
        if key not in seen:
            seen.add(key)
            order.append(key)
            if len(order) > MAX_CASES:
                return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
        if action == "output" and len(output.get(key, "")) < 4 * MESSAGE_CHARS:
            output[key] = output.get(key, "") + str(event.get("Output"))
        elif action in ("pass", "fail", "skip") and "/" not in test:
            outcome[key] = (action, _float(event.get("Elapsed")))
    if build_failed and not order:
        return ParsedReport(build_failed=True)
    if not packages:
        return ParsedReport(problem="it holds no go test events")
    unfinished = [p for p in packages if p not in finished]
    if unfinished:
        return ParsedReport(problem=f"package {unfinished[0]} has no final event (cut short)")
    several = len(packages) > 1
    results = []
    for key in order:
        package, test = key
        action, elapsed = outcome.get(key, ("", None))
        text_out = output.get(key, "")
        if action == "pass":
            verdict, message = TestVerdict.PASSED, None
        elif action == "skip":
            verdict, message = TestVerdict.SKIPPED, None
        elif action == "fail":
            panicked = "panic:" in text_out
            verdict = TestVerdict.RUNTIME_ERROR if panicked else TestVerdict.WRONG_ANSWER
            message = text_out[-MESSAGE_CHARS:]
        else:
            verdict, message = (
                TestVerdict.RUNTIME_ERROR,
                "no outcome: the test binary stopped in it",
            )
        name = f"{package}.{test}" if several else test
        results.append(TestResult(name=name, verdict=verdict, time_s=elapsed, message=message))
    return ParsedReport(tests=results)


_TAP_PLAN = re.compile(r"^1\.\.(\d+)\s*(#.*)?$")
_TAP_POINT = re.compile(r"^(not )?ok\b(?:\s+(\d+))?\s*(?:-\s*)?(.*)$")
_TAP_DIRECTIVE = re.compile(r"^(.*?)\s*(?<!\\)#\s*(skip|todo)\b.*$", re.IGNORECASE)


def _parse_tap(text: str) -> ParsedReport:
    """TAP (12/13/14): the top-level test points (indented subtests count through their
    parent), exactly one plan ``1..N`` matching them, numbers 1..N in order if given,
    no ``Bail out!``. ``# SKIP`` and ``# TODO`` are skipped."""
    results: list[TestResult] = []
    plans: list[int] = []
    numbers: list[int | None] = []
    detail: list[str] = []
    collecting = False  # in the indented block right after a failed test point
    for whole in text.splitlines():
        line = whole[:MAX_LINE_CHARS]  # bounded work per line for the regular expressions
        if line[:1].isspace():  # subtests, and the YAML block after a test point
            if collecting:
                detail.append(line.strip())
            continue
        collecting = False
        if detail:
            _tap_detail(results, detail)
        if line.startswith("Bail out!"):
            return ParsedReport(problem=f"the run bailed out: {line[:200]!r}")
        plan = _TAP_PLAN.match(line)
        if plan is not None:
            plans.append(int(plan.group(1)))
            continue
        point = _TAP_POINT.match(line)
        if point is None:
            continue  # comments, "TAP version", anything else a consumer ignores
        failed, number, description = point.group(1), point.group(2), point.group(3)
        directive = _TAP_DIRECTIVE.match(description)
        if directive is not None:
            verdict, description = TestVerdict.SKIPPED, directive.group(1)
        else:
            verdict = TestVerdict.WRONG_ANSWER if failed else TestVerdict.PASSED
        numbers.append(int(number) if number is not None else None)
        name = description.strip() or f"test {len(results) + 1}"
        results.append(TestResult(name=name[:MESSAGE_CHARS], verdict=verdict))
        if len(results) > MAX_CASES:
            return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
        collecting = verdict is TestVerdict.WRONG_ANSWER
    if detail:
        _tap_detail(results, detail)
    if not plans:
        return ParsedReport(problem="it has no plan line (1..N): the run did not finish")
    if len(plans) > 1:
        return ParsedReport(problem=f"it has {len(plans)} plan lines")
    if plans[0] != len(results):
        return ParsedReport(
            problem=f"its plan announces {plans[0]} tests but it has {len(results)} test points"
        )
    if any(n is not None and n != i for i, n in enumerate(numbers, start=1)):
        return ParsedReport(problem="its test numbers are out of order or repeated")
    return ParsedReport(tests=results)


def _tap_detail(results: list[TestResult], detail: list[str]) -> None:
    """The indented lines after a failed test point become its message."""
    text = "\n".join(line for line in detail if line not in ("---", "..."))
    results[-1] = results[-1].model_copy(update={"message": text[:MESSAGE_CHARS] or None})
    detail.clear()


_JEST_VERDICT = {
    "passed": TestVerdict.PASSED,
    "failed": TestVerdict.WRONG_ANSWER,
    "pending": TestVerdict.SKIPPED,
    "skipped": TestVerdict.SKIPPED,
    "todo": TestVerdict.SKIPPED,
    "disabled": TestVerdict.SKIPPED,
}


def _parse_jest_json(text: str) -> ParsedReport:
    """jest's ``--json`` report: every test file's assertions, counts that add up, and a
    file that failed to run (a syntax error, a throw at import) as a failed test."""
    try:
        report = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return ParsedReport(problem=f"it is not JSON ({exc})")
    if not isinstance(report, dict) or not isinstance(report.get("testResults"), list):
        return ParsedReport(problem="it is not a jest report (no testResults list)")
    results: list[TestResult] = []
    for suite in report["testResults"]:
        if not isinstance(suite, dict) or not isinstance(suite.get("assertionResults"), list):
            return ParsedReport(problem="a test file's entry has no assertionResults list")
        assertions = suite["assertionResults"]
        if suite.get("status") == "failed" and not assertions:
            message = str(suite.get("message") or "the test file failed to run")
            results.append(
                TestResult(
                    name=str(suite.get("name") or "?")[:MESSAGE_CHARS],
                    verdict=TestVerdict.RUNTIME_ERROR,
                    message=message[:MESSAGE_CHARS],
                )
            )
        for entry in assertions:
            if not isinstance(entry, dict) or entry.get("status") not in _JEST_VERDICT:
                return ParsedReport(problem=f"an assertion with no known status: {entry!r:.80}")
            failures = entry.get("failureMessages") or []
            name = entry.get("fullName") or entry.get("title") or "?"
            duration = _float(entry.get("duration"))
            results.append(
                TestResult(
                    name=str(name)[:MESSAGE_CHARS],
                    verdict=_JEST_VERDICT[entry["status"]],
                    time_s=duration / 1000 if duration is not None else None,
                    message="\n".join(map(str, failures))[:MESSAGE_CHARS] or None,
                )
            )
        if len(results) > MAX_CASES:
            return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
    counted = sum(1 for suite in report["testResults"] for _ in suite["assertionResults"])
    total = report.get("numTotalTests")
    if not isinstance(total, int) or total != counted:
        return ParsedReport(
            problem=f"numTotalTests={total!r} but it lists {counted} tests (an incomplete report)"
        )
    return ParsedReport(tests=results)
