"""A candidate judged with ``isolate_candidate`` cannot read the judge's processes in /proc.

The test commands here compare the candidate's output with a literal (the
expected answer) that is nowhere but in the command: in a shell command's text
(the issue's ``[ "$out" = "TOK3N..." ]``), or on the command line and in the
environment of the process that calls the candidate. The candidate is a thief:
it scans ``/proc/*/cmdline``, ``/proc/*/environ``, ``/proc/*/maps`` and every
``/proc/*/fd/*`` (the link and what it opens) of every process for the literal,
and prints what it found. An honest candidate that prints the literal passes
the same tests, so a thief's failure is the scan's, never a broken test. Both
runtimes: runc (Docker's default) and gVisor (runsc).

What holds where (docs/security.md, "The judge's processes in /proc"):

- A shell command runs from a file only the judge uid can read, never from a
  command line: hidden under both runtimes.
- The candidate's processes open no other process's /proc entry (Landlock):
  under runc, whatever the test command starts is hidden too.
- gVisor has no Landlock and shows every process's command line and
  environment to every uid: a literal in the arguments or environment of a
  process the test command starts is the residual risk, a strict xfail.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.core.pool import Pool
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult
from sandbox.policy import Policy
from tests.conftest import judge_on, make_policy

pytestmark = pytest.mark.docker

TENANT = "proc-isolation-tests"
SECRET = "TOK3N-5d0c9a1e7b3f42e8a6f1"
TAP = 'echo 1..1; if [ "$out" = "{secret}" ]; then echo "ok 1 - literal"; else echo "not ok 1"; fi'

# The literal only in the text of a shell command (bash's `[` is a builtin: no process
# of its own carries it).
SHELL_COMMAND = "out=$($RUN_CANDIDATE </dev/null); " + TAP.format(secret=SECRET)
# The literal on the command line and in the environment of the process that calls the
# candidate (a Python test driver given as an argv list).
DRIVER = f"""
import os, subprocess
expected = {SECRET!r}
os.environ["EXPECTED"] = expected
done = subprocess.run(os.environ["RUN_CANDIDATE"].split(), stdin=subprocess.DEVNULL,
                      capture_output=True, text=True, pass_fds=(3,))
print("1..1")
print("ok 1 - literal" if done.stdout.strip() == expected else "not ok 1")
"""

THIEF = r"""
import os, re

pattern = re.compile(rb"TOK3N-[0-9a-f]{20}")
found, seen = set(), 0
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    seen += 1
    paths = [f"/proc/{pid}/{leaf}" for leaf in ("cmdline", "environ", "maps")]
    paths.append(f"/proc/self/root/proc/{pid}/cmdline")  # the same file by another path
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            found.update(pattern.findall(os.readlink(path).encode()))
        except OSError:
            pass
        paths.append(path)
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                found.update(pattern.findall(os.read(fd, 1 << 20)))
            finally:
                os.close(fd)
        except OSError:
            pass
print(found.pop().decode() if found else f"nothing in {seen} processes")
"""
HONEST = f"print({SECRET!r})\n"


@pytest.fixture(scope="module", params=["runc", "runsc"])
def policy(request: pytest.FixtureRequest) -> Policy:
    return make_policy(
        f"proc-isolation-{request.param}",
        runtime=request.param,
        resources={"memory_mb": 256, "pids": 64, "wall_time_s": 30, "cpu_time_s": 30},
        env={"set": {"TEST_POOL_GROUP": f"proc-isolation-{request.param}"}},
        pool={"warm": 0, "max": 1},
    )


@pytest.fixture(scope="module")
def judge(pool: Pool, policy: Policy) -> Judge:
    return judge_on(pool, policy)


def command_tests(command: list[str] | str) -> dict[str, Any]:
    return {
        "kind": "command",
        "files": {"README": "the expected value is in the command only\n"},
        "command": command,
        "report": "tap",
        "isolate_candidate": True,
    }


async def run(judge: Judge, code: str, tests: dict[str, Any]) -> JudgeResult:
    request = JudgeRequest.model_validate({"language": "python", "code": code, "tests": tests})
    return await judge.judge(request, tenant=TENANT)


async def assert_hidden(judge: Judge, tests: dict[str, Any]) -> None:
    honest = await run(judge, HONEST, tests)
    assert honest.reward == 1.0, honest
    thief = await run(judge, THIEF, tests)
    assert thief.reward == 0.0 and thief.error_class == "wrong_answer", thief
    assert SECRET not in thief.model_dump_json(), thief


async def test_a_shell_commands_literal_is_hidden(judge: Judge) -> None:
    await assert_hidden(judge, command_tests(SHELL_COMMAND))


async def test_literals_in_the_processes_the_command_starts_are_hidden(
    judge: Judge, policy: Policy, request: pytest.FixtureRequest
) -> None:
    if policy.runtime == "runsc":
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="residual risk: gVisor has no Landlock and shows every process's "
                "command line and environment to every uid (docs/security.md)",
            )
        )
    await assert_hidden(judge, command_tests(["python3", "-c", DRIVER]))
