"""Hidden tests, verdicts and rewards an RL trainer can trust.

Four kinds of tests, all run inside one leased sandbox per submission:

- ``io``: stdin to expected stdout. The program runs once per case; the
  expected output never enters the container and is compared here, by the
  trusted side (exact, trailing-whitespace, token-wise or float-tolerant).
  A ``driver`` appended to the candidate's code (a ``main`` calling its
  function and printing the result) makes function-style tests in any language.
  The driver runs in the candidate's process, so only what it prints is evidence
  (compared here); a driver that prints nothing runs in the judge's process in
  Python and is refused elsewhere (:mod:`sandbox.judge.drivers`).
- ``function`` (Python): an entry point, argument lists and expected values.
  The candidate runs in its own process as the sandbox uid; a harness running
  as the judge uid calls it across a socket and reports the *plain values* it
  returned; they are compared here. Objects with a rigged ``__eq__`` cannot
  cross the boundary as values.
- ``assert`` (Python: HumanEval's ``check(candidate)``, MBPP asserts): the test
  script runs in the judge process against stand-ins of the candidate, each
  assert-bearing statement a test. Other languages are refused: appended to
  the candidate's source, the tests (and any proof of completion) would be
  readable from inside the candidate's own process.
- ``files`` (Python): hidden pytest files run in the judge process, with the
  candidate's module imported through the same boundary.
- ``command`` (any language): hidden test files and a command (``go test
  -json``, ``node --test``, ``pytest --junitxml``, a script printing TAP) run as
  the judge uid on a copy of the candidate's workspace in ``/judge``; the
  per-test results are read here from the report the command wrote (JUnit XML,
  ``go test -json`` or TAP), with size caps. See :meth:`Judge._command` for
  what that does and does not guarantee.

A pass needs positive evidence written after the last test: the judge's
report with ``"complete": true`` (or matching outputs), never the candidate's exit
status or what it printed. An infrastructure failure gives reward ``None`` and
``error_class: "infra"``, never 0.

The request and result models are in :mod:`sandbox.judge.models`; the parsers of
test runners' reports in :mod:`sandbox.judge.report_parsers`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from typing import Any

from sandbox.backends.base import HARNESS_DIR, JUDGE_DIR, WORKDIR, Sandbox
from sandbox.core.argv import path_arg
from sandbox.core.execution import (
    BASE_ENV,
    ExecutionService,
    build,
    compile_timeout_note,
    exec_limits,
    sandbox_env,
)
from sandbox.errors import InfrastructureError, InvalidRequestError, SandboxTimeoutError
from sandbox.judge.drivers import (
    case_names,
    case_results,
    check_driver,
    driven_program,
    judge_side_tests,
    runs_in_judge,
    without_placeholder,
)
from sandbox.judge.models import (
    MESSAGE_CHARS,
    AssertTests,
    CommandTests,
    FileTests,
    FunctionTests,
    IOCase,
    IOTests,
    JudgeRequest,
    JudgeResult,
    TestResult,
    TestVerdict,
)
from sandbox.judge.report_parsers import MAX_REPORT_BYTES, parse_report
from sandbox.languages import DRIVER_DONE, Language, get_language
from sandbox.policy import Policy
from sandbox.results import ExecLimits, ExecResult, ExecStatus
from sandbox.runner.harness import wire
from sandbox.telemetry import context, metrics, tracing
from sandbox.telemetry.audit import code_hash

logger = logging.getLogger(__name__)

CANDIDATE_FILE = "solution.py"
DEFAULT_TEST_TIMEOUT_S = 5.0
LOAD_TIMEOUT_S = 10.0
COMPILE_OUTPUT_CHARS = 8000
# ``command`` tests: where they run (the judge's copy of the candidate's workspace),
# where their files wait while it is made, and what a report may be.
COMMAND_DIR = f"{JUDGE_DIR}/run"
STAGING = "staged-tests"
COMMAND_STAGING = f"{JUDGE_DIR}/{STAGING}"
COMMAND_SETUP_ISOLATED = (
    f"rm -rf {COMMAND_DIR} && mkdir -m 0700 {COMMAND_DIR} && "
    f"cp -R {COMMAND_STAGING}/. {COMMAND_DIR}/ && rm -rf {COMMAND_STAGING}"
)
RUN_CANDIDATE = f"python3 -I {HARNESS_DIR}/run_candidate.py"
# A shell command runs from this file (the judge uid's alone), never from a command line:
# another uid may read any process's /proc/PID/cmdline (gVisor: its environment too).
COMMAND_SCRIPT = ".command.sh"
COMMAND_SETUP = (
    f"rm -rf {COMMAND_DIR} && "
    f"python3 -I {HARNESS_DIR}/workspace_copy.py {WORKDIR} {COMMAND_DIR} && "
    f"cp -R {COMMAND_STAGING}/. {COMMAND_DIR}/ && rm -rf {COMMAND_STAGING}"
)
# The judge's own output has caps of its own, never the candidate's: its report
# (stdout: every case with the value it returned) and its log (stderr: pytest's
# summary of each failure) grow with the tests, not with what the candidate printed.
# A policy's higher caps still apply.
JUDGE_REPORT_BYTES = 32 << 20
JUDGE_LOG_BYTES = 4 << 20


# ------------------------------------------------------------------------ comparisons


def compare_output(actual: str, expected: str, tests: IOTests) -> bool:
    """The trusted comparison of a program's stdout with the expected one."""
    if tests.compare == "exact":
        return actual == expected
    if tests.compare == "rstrip":
        return _rstrip_lines(actual) == _rstrip_lines(expected)
    got, want = actual.split(), expected.split()
    if tests.compare == "tokens":
        return got == want
    return len(got) == len(want) and all(
        _same_token(a, b, tests.float_rel_tol, tests.float_abs_tol)
        for a, b in zip(got, want, strict=True)
    )


def _rstrip_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", re.IGNORECASE)


def _same_token(actual: str, expected: str, rel: float, abs_: float) -> bool:
    if actual == expected:
        return True
    if _NUMBER.fullmatch(actual) and _NUMBER.fullmatch(expected):
        return math.isclose(float(actual), float(expected), rel_tol=rel, abs_tol=abs_)
    return False


def from_json(value: Any) -> Any:
    """A test value given in JSON: plain JSON, with wire tags (``{"$tuple": [...]}``) allowed.

    Raises :class:`InvalidRequestError` for a malformed tag.
    """
    if isinstance(value, list):
        return [from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and next(iter(value)).startswith("$"):
        ((tag, body),) = value.items()
        try:
            if tag in ("$tuple", "$set", "$frozenset") and isinstance(body, list):
                items = [from_json(item) for item in body]
                return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
            if tag == "$dict" and isinstance(body, list):
                return {from_json(k): from_json(v) for k, v in body}
            return wire.decode(value)
        except (wire.WireError, TypeError, ValueError) as exc:
            raise InvalidRequestError(f"bad test value {str(value)[:80]}: {exc}") from None
    return {key: from_json(item) for key, item in value.items()}


def same_value(actual: Any, expected: Any, rel: float, abs_: float) -> bool:
    """Equality of plain values: floats within tolerance, lists and tuples interchangeable
    (JSON has no tuples), bools never equal to numbers."""
    if type(actual) is bool or type(expected) is bool:
        return type(actual) is type(expected) and actual == expected
    numbers = (int, float)
    if type(actual) in numbers and type(expected) in numbers:
        if type(actual) is int and type(expected) is int:
            return bool(actual == expected)
        try:
            got, want = float(actual), float(expected)
        except OverflowError:  # an int too large for any float cannot be close to one
            return False
        if math.isnan(got) or math.isnan(want):
            return math.isnan(got) and math.isnan(want)
        return math.isclose(got, want, rel_tol=rel, abs_tol=abs_)
    sequences = (list, tuple)
    if type(actual) in sequences and type(expected) in sequences:
        return len(actual) == len(expected) and all(
            same_value(a, e, rel, abs_) for a, e in zip(actual, expected, strict=True)
        )
    if type(actual) is dict and type(expected) is dict:
        return actual.keys() == expected.keys() and all(
            same_value(actual[k], expected[k], rel, abs_) for k in expected
        )
    return type(actual) is type(expected) and bool(actual == expected)


# ------------------------------------------------------------------------ scoring


def score(
    request: JudgeRequest,
    tests: list[TestResult],
    *,
    compile_output: str | None = None,
    message: str | None = None,
    started: float,
) -> JudgeResult:
    """passed/total, reward under the requested shape, and the error class."""
    if request.early_stop:
        tests = _stop_after_first_failure(tests)
    counted = [t for t in tests if t.verdict is not TestVerdict.SKIPPED or request.early_stop]
    passed = sum(1 for t in counted if t.verdict is TestVerdict.PASSED)
    total = len(counted)
    failures = [t for t in counted if t.verdict is not TestVerdict.PASSED]
    infra = any(t.verdict is TestVerdict.INFRA_ERROR for t in counted)
    reward: float | None
    error_class: str | None
    if infra:
        reward, error_class = None, "infra"
    else:
        error_class = failures[0].verdict.value if failures else None
        if request.reward == "binary":
            reward = 1.0 if total and passed == total else 0.0
        elif request.reward == "fraction":
            reward = passed / total if total else 0.0
        else:
            weight = sum(t.weight for t in counted)
            reward = sum(t.weight for t in counted if t.verdict is TestVerdict.PASSED) / weight
    return JudgeResult(
        id=request.id,
        passed=passed,
        total=total,
        reward=reward,
        error_class=error_class,
        tests=tests,
        compile_output=compile_output,
        message=message,
        duration_s=round(time.perf_counter() - started, 6),
    )


def _stop_after_first_failure(tests: list[TestResult]) -> list[TestResult]:
    """With early stop, nothing after the first failure counts as passed (function cases
    are compared here, after they all ran)."""
    out: list[TestResult] = []
    failed = False
    for test in tests:
        if failed and test.verdict is TestVerdict.PASSED:
            test = test.model_copy(update={"verdict": TestVerdict.SKIPPED, "message": "not run"})
        failed = failed or test.verdict not in (TestVerdict.PASSED, TestVerdict.SKIPPED)
        out.append(test)
    return out


def note_verdict(result: JudgeResult) -> None:
    """Note on the current call how a judgement ended: ``infra`` or ``user`` unless it passed."""
    if result.error_class is not None:
        context.note_failure("infra" if result.error_class == "infra" else "user")


def unjudged(
    request: JudgeRequest, message: str, started: float, error_class: str = "infra"
) -> JudgeResult:
    """No verdict about the code (the platform failed, or time ran out): no reward, never 0."""
    return JudgeResult(
        id=request.id,
        passed=0,
        total=0,
        reward=None,
        error_class=error_class,
        tests=[],
        message=message,
        duration_s=round(time.perf_counter() - started, 6),
    )


_STATUS_VERDICT = {
    ExecStatus.TIMEOUT: TestVerdict.TIMEOUT,
    ExecStatus.MEMORY_LIMIT: TestVerdict.MEMORY_LIMIT,
    ExecStatus.OUTPUT_LIMIT: TestVerdict.OUTPUT_LIMIT,
    ExecStatus.NONZERO_EXIT: TestVerdict.RUNTIME_ERROR,
    ExecStatus.SIGNAL: TestVerdict.RUNTIME_ERROR,
}


def judge_limits(limits: ExecLimits, report_bytes: int = JUDGE_REPORT_BYTES) -> ExecLimits:
    """``limits`` for a process of the judge: its report and log capped on their own."""
    return limits.model_copy(
        update={
            "stdout_bytes": max(limits.stdout_bytes, report_bytes),
            "stderr_bytes": max(limits.stderr_bytes, JUDGE_LOG_BYTES),
        }
    )


def _short(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[-MESSAGE_CHARS:]


def _compile_output(failure: ExecResult, limits: ExecLimits) -> str:
    """A failed build's output; one stopped by its time limit says so first."""
    stderr, note = failure.stderr, b""
    if failure.status is ExecStatus.TIMEOUT:
        note = compile_timeout_note(limits)
        stderr = stderr.removesuffix(note)  # build() ends its stderr with the note
    return note.decode() + _head_and_tail(stderr + failure.stdout)


def _head_and_tail(data: bytes) -> str:
    """A compiler's output, kept whole when short, else its start (the first error) and end."""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= COMPILE_OUTPUT_CHARS:
        return text
    head, tail = COMPILE_OUTPUT_CHARS * 3 // 4, COMPILE_OUTPUT_CHARS // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters ...]\n{text[-tail:]}"


# ------------------------------------------------------------------------ the judge


class Judge:
    """Runs submissions against their hidden tests, on the execution service's pool."""

    def __init__(self, execution: ExecutionService) -> None:
        self.execution = execution
        self.pool = execution.pool

    def plan(self, request: JudgeRequest) -> tuple[Language, Policy, ExecLimits, float, str]:
        """Validate a request before anything runs: language, policy, limits, image."""
        language = get_language(request.language)
        kind = request.tests.kind
        if kind not in ("io", "command") and language.name != "python":
            raise InvalidRequestError(
                f"{kind} tests are for Python, where the tests run in a process the candidate "
                f"cannot reach; for {language.name} use io tests, with a `driver` that calls "
                "the candidate's function and prints what it returned, or command tests"
            )
        if language.report is not None:
            raise InvalidRequestError(
                f"{language.name!r} is a test-runner mode (the code is the tests), for "
                "/run_code; judge a solution in its language with io or command tests"
            )
        if isinstance(request.tests, CommandTests):
            self._check_command_paths(request.tests, language.for_code(request.code))
        if isinstance(request.tests, IOTests):
            check_driver(request.tests, language)
        if isinstance(request.tests, FunctionTests):
            for case in request.tests.cases:
                from_json(case.args)
                from_json(case.kwargs)
                from_json(case.expected)
        policy = self.execution.policy(request.policy)
        limits = exec_limits(policy, request.limits)
        test_timeout = min(request.test_timeout_s or DEFAULT_TEST_TIMEOUT_S, limits.wall_s)
        image = self.execution.resolve_image(
            "python" if language.name == "python" else language.image
        )
        return language, policy, limits, test_timeout, image

    @staticmethod
    def _check_command_paths(tests: CommandTests, language: Language) -> None:
        for path in tests.files:
            if path == language.source_file or path.split("/")[0] == language.source_file:
                raise InvalidRequestError(
                    f"test file {path!r} would replace the candidate's code "
                    f"({language.source_file!r} in {language.name}); rename it"
                )
        report = tests.report_path
        if report is not None and (report in tests.files or report == language.source_file):
            raise InvalidRequestError(
                f"report_path {report!r} names a file given before the run; "
                "the report must be written by the command"
            )

    async def judge(self, request: JudgeRequest, *, tenant: str) -> JudgeResult:
        """Judge one submission; infrastructure failures come back as reward None."""
        started = time.perf_counter()
        language, policy, limits, test_timeout, image = self.plan(request)
        with tracing.span(
            "judge", tenant=tenant, policy=policy.name, language=language.name
        ) as span:
            try:
                async with self.pool.lease(image, policy, tenant) as lease:
                    result = await self._run(
                        lease.sandbox, request, language, policy, limits, test_timeout, started
                    )
                    if result.error_class == "infra":
                        lease.retire(result.message or "infrastructure error")
            except (InfrastructureError, SandboxTimeoutError) as exc:
                logger.warning("judging failed for infrastructure reasons: %s", exc)
                result = unjudged(request, str(exc), started)
            span.set(status=result.error_class or "passed")
        note_verdict(result)
        metrics.record_judgement(language.name, policy.name, result.error_class)
        if self.execution.audit is not None:
            self.execution.audit.record(
                tenant=tenant,
                kind="judge",
                policy=policy.name,
                image=image,
                language=language.name,
                code_sha256=code_hash(request.code),
                verdict=result.error_class or "passed",
                duration_s=result.duration_s,
                detail=f"{result.passed}/{result.total} reward={result.reward}",
            )
        return result

    async def _run(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        language: Language,
        policy: Policy,
        limits: ExecLimits,
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        env = {**sandbox_env(policy, {}), **language.env}
        tests = request.tests
        if isinstance(tests, IOTests):
            return await self._io(
                sandbox, request, tests, language, limits, env, test_timeout, started
            )
        if isinstance(tests, CommandTests):
            return await self._command(
                sandbox, request, tests, language, limits, env, test_timeout, started
            )
        return await self._pair(sandbox, request, limits, env, test_timeout, started)

    async def _compile(
        self,
        sandbox: Sandbox,
        language: Language,
        source: str,
        limits: ExecLimits,
        env: dict[str, str],
    ) -> ExecResult | None:
        """Build the source; the compiler's result when it failed, else None."""
        result = await build(sandbox, language, language.files(source), limits, env)
        return None if result.status is ExecStatus.OK else result

    async def _io(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        tests: IOTests,
        language: Language,
        limits: ExecLimits,
        env: dict[str, str],
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        if runs_in_judge(tests, language):
            judged = request.model_copy(update={"tests": judge_side_tests(tests)})
            result = await self._pair(sandbox, judged, limits, env, test_timeout, started)
            return score(
                request, case_results(result.tests, tests), message=result.message, started=started
            )
        names = case_names(tests)
        source = driven_program(request.code, tests.driver)
        language = language.for_code(source)
        if language.compiled:
            failure = await self._compile(sandbox, language, source, limits, env)
            if failure is not None:
                return self._compile_error(request, names, tests, failure, limits, started)
        case_limits = limits.model_copy(update={"wall_s": test_timeout})
        results: list[TestResult] = []
        files: dict[str, bytes] | None = None if language.compiled else language.files(source)
        # One call runs every case (the backend sends them a few at a time); with early
        # stop, calls of 1, 2, 4, ... cases, each ended at its first run that fails to exit
        # 0, so that at most the cases of one call run past a wrong answer, and none past a
        # crash or a timeout.
        size = 1 if request.early_stop else len(tests.cases)
        stopped = False
        while len(results) < len(tests.cases) and not stopped:
            first = len(results)
            part = tests.cases[first : first + size]
            runs = await sandbox.exec_cases(
                list(language.run),
                [case.stdin.encode() for case in part],
                limits=case_limits,
                env=env,
                files=files,
                reset_after=first + len(part) == len(tests.cases),  # the lease's reset starts now
                stop_on_failure=request.early_stop,
            )
            files = None  # written once; the same files serve every case
            for name, case, run in zip(names[first:], part, runs, strict=False):
                results.append(self._io_verdict(name, case, run, tests))
                stopped = request.early_stop and results[-1].verdict is not TestVerdict.PASSED
                if stopped:
                    break
            size *= 2
        results += [
            TestResult(name=name, verdict=TestVerdict.SKIPPED, weight=case.weight)
            for name, case in zip(names[len(results) :], tests.cases[len(results) :], strict=True)
        ]
        return score(request, results, started=started)

    @staticmethod
    def _io_verdict(name: str, case: IOCase, run: ExecResult, tests: IOTests) -> TestResult:
        time_s = run.usage.wall_s
        if run.status is ExecStatus.OK:
            actual = run.stdout.decode("utf-8", errors="replace")
            if tests.driver is not None and DRIVER_DONE in tests.driver:
                actual = without_placeholder(actual)
            if compare_output(actual, case.expected_stdout, tests):
                return TestResult(
                    name=name, verdict=TestVerdict.PASSED, time_s=time_s, weight=case.weight
                )
            return TestResult(
                name=name,
                verdict=TestVerdict.WRONG_ANSWER,
                time_s=time_s,
                weight=case.weight,
                message=f"got {actual[:200]!r}",
            )
        verdict = _STATUS_VERDICT.get(run.status, TestVerdict.RUNTIME_ERROR)
        return TestResult(
            name=name,
            verdict=verdict,
            time_s=time_s,
            weight=case.weight,
            message=_short(run.stderr) or run.reason,
        )

    def _compile_error(
        self,
        request: JudgeRequest,
        names: list[str],
        tests: IOTests,
        failure: ExecResult,
        limits: ExecLimits,
        started: float,
    ) -> JudgeResult:
        results = [
            TestResult(name=name, verdict=TestVerdict.COMPILE_ERROR, weight=case.weight)
            for name, case in zip(names, tests.cases, strict=True)
        ]
        output = _compile_output(failure, limits)
        return score(request, results, compile_output=output, started=started)

    async def _command(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        tests: CommandTests,
        language: Language,
        limits: ExecLimits,
        env: dict[str, str],
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        """Hidden test files and a command, run as the judge uid on a copy of the candidate's work.

        1. The candidate's code is written to ``/workspace`` as the sandbox uid.
        2. As the judge uid, the workspace is copied to ``/judge/run`` (mode 0700, the
           candidate's uid cannot read it) by ``runner/harness/workspace_copy.py`` (links
           leading out of the copy dropped), and the hidden test files are put in it.
        3. ``build``, if given, runs there as the judge uid under the compile limits;
           failing is a ``compile_error``.
        4. The command runs there as the judge uid, within ``timeout_s``. Its report (stdout,
           or ``report_path``, removed first and read back by the runner, as root and
           without following links, once every process of the run is dead) is parsed
           here, by the service, never by code in the container, and capped in size.

        A pass needs the command to exit 0 *and* a complete report (a JUnit file whose
        counts add up, ``go test -json`` events ending each package, a TAP stream whose
        plan matches its test points) listing at least one test that ran, none failed.
        Anything else (no report, a garbled or truncated one, a timeout, a report that
        says "all passed" from a command that exited 1) fails with ``report_error`` or
        the run's own verdict; a ``go test`` build failure is a ``compile_error``.

        What this guarantees, and what it does not: the tests are never readable by
        the candidate's uid, and nothing the candidate leaves in its workspace is taken
        for a report. But the command runs the candidate's code *as the judge uid*: a
        runner that loads the candidate into its own process (``go test``, ``node
        --test``, pytest importing it) can be made to write a forged report, and any
        candidate code the command runs, in-process or as a program it starts, can read
        the hidden test files while it runs. The report is evidence from the test
        runner, not proof against code written to attack that runner; use ``io`` (or
        Python's ``function``/``assert``/``files``) tests where that matters, or:

        With ``isolate_candidate`` the candidate's code is never run by the judge's
        command. It is built (compiled languages) as the sandbox uid in ``/workspace``
        (failing is a ``compile_error``); ``/judge/run`` holds only the test files;
        and the command runs with a peer, ``runner/harness/program_server.py``, as the
        sandbox uid, which runs the candidate's program (the language's run command
        plus arguments) each time the command calls ``$RUN_CANDIDATE`` (that is,
        ``runner/harness/run_candidate.py``), ``test_timeout_s`` per run. The
        candidate then cannot read the tests, signal or trace the test processes, or
        write the report: what it prints is data the tests check. The command must
        keep it that way (never echo the program's output as report lines). Nor can
        it read the test processes' ``/proc`` entries: a shell ``command`` runs from
        a file (``COMMAND_SCRIPT``), never from a command line, and the runner
        confines the peer (``runner/landlock.py``; runc only, see docs/security.md
        for what gVisor still shows).
        """
        judge_env = {
            **env,
            "HOME": JUDGE_DIR,
            "TMPDIR": JUDGE_DIR,
            "USER": "judge",
            "LOGNAME": "judge",
        }
        for name in ("GOCACHE", "GOPATH"):  # the toolchain's caches, the judge's own
            if name in judge_env:
                judge_env[name] = f"{JUDGE_DIR}/.{name.lower()}"
        language = language.for_code(request.code)
        code = language.files(request.code)
        isolated = tests.isolate_candidate
        if isolated and language.compiled:  # built where it runs: by and as the candidate
            failure = await self._compile(sandbox, language, request.code, limits, env)
            if failure is not None:
                output = _compile_output(failure, limits)
                return _command_failure(
                    request, TestVerdict.COMPILE_ERROR, "the build failed", started, output
                )
        else:
            written = await sandbox.exec(["true"], limits=limits, env=env, files=code)
            if written.status is not ExecStatus.OK:
                message = f"could not write the candidate's code: {written.reason}"
                return unjudged(request, message, started)
        staged = {f"{STAGING}/{path}": text.encode() for path, text in tests.files.items()}
        if isinstance(tests.command, str):
            staged[COMMAND_SCRIPT] = tests.command.encode()
        setup = await sandbox.exec(
            ["bash", "-c", COMMAND_SETUP_ISOLATED if isolated else COMMAND_SETUP],
            limits=limits,
            cwd=JUDGE_DIR,
            env=judge_env,
            files=staged,
            role="judge",
        )
        if setup.status is not ExecStatus.OK:
            return unjudged(
                request, f"could not prepare the judge's copy: {_short(setup.stderr)}", started
            )
        if tests.build is not None:
            compile_limits = limits.model_copy(
                update={"wall_s": limits.compile_s, "cpu_s": limits.compile_s, "memory_bytes": None}
            )
            built = await sandbox.exec(
                _argv(tests.build),
                limits=compile_limits,
                cwd=COMMAND_DIR,
                env=judge_env,
                role="judge",
            )
            if built.status is not ExecStatus.OK:
                output = _head_and_tail(built.stderr + built.stdout)
                if built.status is ExecStatus.TIMEOUT:
                    output = (
                        f"the build exceeded its time limit of {limits.compile_s:g} s\n{output}"
                    )
                return _command_failure(
                    request, TestVerdict.COMPILE_ERROR, "the build failed", started, output
                )
        timeout = min(tests.timeout_s or limits.wall_s, limits.wall_s)
        argv = (
            ["bash", f"{JUDGE_DIR}/{COMMAND_SCRIPT}"]
            if isinstance(tests.command, str)
            else list(tests.command)
        )
        if tests.report_path is not None:  # whatever is there was not written by this run
            argv = ["bash", "-c", 'rm -f -- "$0" && exec "$@"', path_arg(tests.report_path), *argv]
        peer: dict[str, Any] | None = None
        if isolated:
            judge_env["RUN_CANDIDATE"] = RUN_CANDIDATE
            server = ["python3", "-I", f"{HARNESS_DIR}/program_server.py"]
            peer = {
                "argv": [*server, json.dumps(list(language.run)), str(test_timeout)],
                "cwd": WORKDIR,
                "env": env,
                "files": {},
            }
        run = await sandbox.exec(
            argv,
            limits=judge_limits(limits, MAX_REPORT_BYTES).model_copy(
                update={"wall_s": timeout, "cpu_s": min(limits.cpu_s, timeout)}
            ),
            cwd=COMMAND_DIR,
            env=judge_env,
            fetch=[tests.report_path] if tests.report_path is not None else (),
            role="judge",
            peer=peer,
            reset_after=True,
        )
        return self._from_command(request, tests, run, started)

    @staticmethod
    def _from_command(
        request: JudgeRequest, tests: CommandTests, run: ExecResult, started: float
    ) -> JudgeResult:
        """The verdict from a command's run and report, decided here."""
        output = _short(run.stderr).strip()
        if run.status not in (ExecStatus.OK, ExecStatus.NONZERO_EXIT):
            verdict = _STATUS_VERDICT.get(run.status, TestVerdict.RUNTIME_ERROR)
            why = f"the test command ended with {run.status.value} ({run.reason or run.signal})"
            return _command_failure(request, verdict, f"{why}: {output}".strip(": "), started)
        where = "its stdout" if tests.report_path is None else tests.report_path
        data = run.stdout if tests.report_path is None else run.files.get(tests.report_path)
        if data is None:
            error = run.file_errors.get(str(tests.report_path), "not found")
            return _command_failure(
                request,
                TestVerdict.REPORT_ERROR,
                f"no report at {where} ({error}); the command exited {run.exit_code}: {output}",
                started,
            )
        parsed = parse_report(tests.report, data)
        if parsed.build_failed:
            return _command_failure(
                request,
                TestVerdict.COMPILE_ERROR,
                "the tests did not build",
                started,
                _head_and_tail(run.stderr + run.stdout),
            )
        problem = parsed.problem
        ran = [t for t in parsed.tests if t.verdict is not TestVerdict.SKIPPED]
        if problem is None and not parsed.tests:
            problem = "it lists no test"
        elif problem is None and not ran:
            problem = f"every test in it ({len(parsed.tests)}) was skipped"
        elif (
            problem is None
            and run.exit_code != 0
            and all(t.verdict is TestVerdict.PASSED for t in ran)
        ):
            problem = f"the command exited {run.exit_code} although it shows no failure"
        if problem is not None:
            return _command_failure(
                request,
                TestVerdict.REPORT_ERROR,
                f"the {tests.report} report in {where} is not usable: {problem}"
                + (f"; the command exited {run.exit_code}: {output}" if run.exit_code else ""),
                started,
            )
        results = _against_expected(parsed.tests, tests.expected_tests)
        message = None if run.exit_code == 0 else f"the test command exited {run.exit_code}"
        return score(request, results, message=message, started=started)

    async def _pair(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        limits: ExecLimits,
        env: dict[str, str],
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        """Python function/assert/files tests: judge process + candidate process."""
        tests = request.tests
        spec: dict[str, Any] = {
            "call_timeout_s": test_timeout,
            "load_timeout_s": LOAD_TIMEOUT_S,
            "early_stop": request.early_stop,
        }
        judge_files: dict[str, bytes] = {}
        if isinstance(tests, FunctionTests):
            program = "judge_function.py"
            spec["entry_point"] = tests.entry_point
            spec["cases"] = [
                {
                    "args": [wire.encode(from_json(a)) for a in case.args],
                    "kwargs": {k: wire.encode(from_json(v)) for k, v in case.kwargs.items()},
                }
                for case in tests.cases
            ]
        elif isinstance(tests, AssertTests):
            program = "judge_assert.py"
            judge_files["test.py"] = tests.script.encode()
            spec |= {"test": f"{JUDGE_DIR}/test.py", "entry_point": tests.entry_point}
            if tests.prelude is not None:
                judge_files["prelude.py"] = tests.prelude.encode()
                spec["prelude"] = f"{JUDGE_DIR}/prelude.py"
        else:
            assert isinstance(tests, FileTests)
            program = "judge_pytest.py"
            for path, text in tests.files.items():
                judge_files[f"tests/{path}"] = text.encode()
            spec |= {"tests_dir": f"{JUDGE_DIR}/tests", "module": tests.module}
        judge_files["spec.json"] = json.dumps(spec).encode()
        module = tests.module if isinstance(tests, FileTests) else "solution"
        run = await sandbox.exec(
            ["python3", f"{HARNESS_DIR}/{program}", f"{JUDGE_DIR}/spec.json"],
            limits=judge_limits(limits),
            cwd=JUDGE_DIR,
            env={**BASE_ENV, "HOME": JUDGE_DIR, "TMPDIR": JUDGE_DIR},
            files=judge_files,
            peer={
                "argv": [
                    "python3",
                    f"{HARNESS_DIR}/candidate.py",
                    f"{WORKDIR}/{CANDIDATE_FILE}",
                    module,
                ],
                "cwd": WORKDIR,
                "env": env,
                "files": {CANDIDATE_FILE: request.code.encode()},
            },
            reset_after=True,
        )
        return self._from_report(request, tests, run, started)

    def _from_report(
        self, request: JudgeRequest, tests: Any, run: ExecResult, started: float
    ) -> JudgeResult:
        report = _parse_report(run.stdout)
        peer = run.peer or {}
        crash = _crash_verdict(run, peer)
        if report is None:
            # No evidence: the judge never finished (killed for time, memory or output).
            verdict = _STATUS_VERDICT.get(run.status, TestVerdict.RUNTIME_ERROR)
            names = self._expected_names(tests, None)
            return score(
                request,
                [TestResult(name=n, verdict=verdict, weight=w) for n, w in names],
                message=_short(run.stderr) or run.reason or "the judge produced no report",
                started=started,
            )
        if not report.get("loaded"):
            error = report.get("load_error") or {}
            names = self._expected_names(tests, report)
            message = f"the candidate failed to load: {error.get('type')}: {error.get('message')}"
            return score(
                request,
                [TestResult(name=n, verdict=crash, weight=w, message=message) for n, w in names],
                message=message,
                started=started,
            )
        results = [self._test_result(entry, tests, crash) for entry in report["tests"]]
        if isinstance(tests, FunctionTests):
            results = [
                self._check_value(result, entry.get("returned"), tests)
                for result, entry in zip(results, report["tests"], strict=True)
            ]
        seen = {r.name for r in results}
        for name, weight in self._expected_names(tests, report):
            if name not in seen:
                results.append(
                    TestResult(
                        name=name,
                        verdict=TestVerdict.RUNTIME_ERROR,
                        weight=weight,
                        message="not reached",
                    )
                )
        if not results:
            results = [
                TestResult(name="tests", verdict=TestVerdict.RUNTIME_ERROR, message="no test ran")
            ]
        return score(request, results, started=started)

    @staticmethod
    def _expected_names(tests: Any, report: dict[str, Any] | None) -> list[tuple[str, float]]:
        if isinstance(tests, FunctionTests):
            return [(f"case {i}", c.weight) for i, c in enumerate(tests.cases)]
        if report is not None and report.get("expected"):
            return [(str(name), 1.0) for name in report["expected"]]
        if isinstance(tests, AssertTests):
            return [("assert script", 1.0)]
        return [("test files", 1.0)]

    @staticmethod
    def _test_result(entry: dict[str, Any], tests: Any, crash: TestVerdict) -> TestResult:
        verdict_text = str(entry.get("verdict"))
        if verdict_text == "crashed":
            verdict = crash
        else:
            try:
                verdict = TestVerdict(verdict_text)
            except ValueError:
                verdict = TestVerdict.RUNTIME_ERROR
        weight = 1.0
        if isinstance(tests, FunctionTests):
            index = int(str(entry.get("name", "case 0")).split()[-1])
            weight = tests.cases[index].weight if index < len(tests.cases) else 1.0
        return TestResult(
            name=str(entry.get("name")),
            verdict=verdict,
            time_s=entry.get("time_s"),
            weight=weight,
            message=entry.get("message"),
        )

    @staticmethod
    def _check_value(result: TestResult, returned: Any, tests: FunctionTests) -> TestResult:
        """Compare what a call returned with the expected value, here on the trusted side."""
        if result.verdict is not TestVerdict.PASSED:
            return result
        index = int(result.name.split()[-1])
        case = tests.cases[index]
        try:
            actual = wire.decode(returned)
        except (wire.WireError, TypeError, ValueError):
            return result.model_copy(
                update={
                    "verdict": TestVerdict.WRONG_ANSWER,
                    "message": "returned something that is not plain data",
                }
            )
        expected = from_json(case.expected)
        if same_value(actual, expected, tests.float_rel_tol, tests.float_abs_tol):
            return result
        return result.model_copy(
            update={"verdict": TestVerdict.WRONG_ANSWER, "message": f"returned {actual!r}"[:200]}
        )


def _parse_report(stdout: bytes) -> dict[str, Any] | None:
    """The judge's report, only if it is complete: the evidence a pass needs."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(report, dict) or report.get("complete") is not True:
        return None
    if not isinstance(report.get("tests"), list):
        return None
    return report


def _crash_verdict(run: ExecResult, peer: dict[str, Any]) -> TestVerdict:
    """Why the candidate's process stopped answering, from what the kernel reported."""
    if run.oom_killed:
        return TestVerdict.MEMORY_LIMIT
    return TestVerdict.RUNTIME_ERROR


# ------------------------------------------------------------------------ command reports


def _argv(command: list[str] | str) -> list[str]:
    return ["bash", "-c", command] if isinstance(command, str) else list(command)


def _command_failure(
    request: JudgeRequest,
    verdict: TestVerdict,
    message: str,
    started: float,
    compile_output: str | None = None,
) -> JudgeResult:
    """A command run that gave no per-test evidence: one failed entry, reward 0."""
    message = message[-MESSAGE_CHARS * 2 :]
    return score(
        request,
        [TestResult(name="command", verdict=verdict, message=message)],
        compile_output=compile_output,
        message=message,
        started=started,
    )


def _against_expected(tests: list[TestResult], expected: list[str] | None) -> list[TestResult]:
    """With ``expected``, exactly those tests earn credit, in that order: one the report
    lacks is a runtime error, one it holds twice takes its worse entry; any other test
    in the report can only fail the submission (a passing one is left out)."""
    if expected is None:
        return tests
    by_name: dict[str, TestResult] = {}
    for test in tests:
        earlier = by_name.get(test.name)
        if earlier is None or earlier.verdict is TestVerdict.PASSED:
            by_name[test.name] = test
    results = [
        by_name.get(name)
        or TestResult(name=name, verdict=TestVerdict.RUNTIME_ERROR, message="not in the report")
        for name in dict.fromkeys(expected)
    ]
    wanted = set(expected)
    results += [t for t in tests if t.name not in wanted and t.verdict is not TestVerdict.PASSED]
    return results
