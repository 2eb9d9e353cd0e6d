"""Reward hacking: candidates that do not solve the task try to make the judge say yes.

Every attack runs for real (a pool container, or the service over HTTP) against
the four kinds of hidden tests it applies to: ``assert`` (HumanEval's
``check(candidate)``), ``function`` (entry point and cases), ``files`` (hidden
pytest files importing ``solution``) and ``io`` (stdin to expected stdout).
Each asserts ``reward == 0.0`` (a number, never ``None``) and, where the
verdict is meaningful, the error class. Each kind also has a positive control:
the honest solution gets 1.0 in the same setup, so these tests can fail.

Loopholes found here are marked ``xfail(strict=True)`` with ``BUG:`` reasons.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from sandbox.core.execution import ExecutionService
from sandbox.core.pool import Pool
from sandbox.errors import InvalidRequestError
from sandbox.host.images import resolve_image
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult
from sandbox.languages import DRIVER_DONE
from sandbox.policy import Policy
from sandbox.quality import hacks
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

TENANT = "reward-hacker"
WALL_S = 4.0
CALL_TIMEOUT_S = 0.5
KINDS = ("assert", "function", "files", "io")
PAIR_KINDS = ("assert", "function", "files")
EACCES, EPERM = 13, 1

# The task every attack fails to solve: add two integers.
CASES = [((2, 3), 5), ((-1, 1), 0), ((10, 32), 42)]

HONEST = """\
def add(a, b):
    return a + b


if __name__ == "__main__":
    a, b = map(int, input().split())
    print(add(a, b))
"""


def hidden_tests(kind: str) -> dict[str, Any]:
    """The hidden tests of the ``add`` task, as each kind states them."""
    if kind == "assert":
        body = "".join(f"    assert candidate({a}, {b}) == {c}\n" for (a, b), c in CASES)
        return {"kind": "assert", "entry_point": "add", "script": f"def check(candidate):\n{body}"}
    if kind == "function":
        cases = [{"args": [a, b], "expected": c} for (a, b), c in CASES]
        return {"kind": "function", "entry_point": "add", "cases": cases}
    if kind == "files":
        tests = "".join(
            f"\n\ndef test_case_{i}():\n    assert solution.add({a}, {b}) == {c}\n"
            for i, ((a, b), c) in enumerate(CASES)
        )
        return {"kind": "files", "files": {"test_add.py": f"import solution{tests}"}}
    cases = [{"stdin": f"{a} {b}\n", "expected_stdout": f"{c}\n"} for (a, b), c in CASES]
    return {"kind": "io", "cases": cases}


def request(code: str, tests: Mapping[str, Any], **extra: Any) -> JudgeRequest:
    return JudgeRequest.model_validate({"code": code, "tests": dict(tests), **extra})


@pytest.fixture(scope="module")
def policy() -> Policy:
    return make_policy(
        "reward-hacking",
        resources={
            "cpus": 1.0,
            "memory_mb": 192,
            "pids": 64,
            "wall_time_s": WALL_S,
            "cpu_time_s": WALL_S,
            "stdout_bytes": 64 * 1024,
            "stderr_bytes": 64 * 1024,
        },
        env={"set": {"TEST_POOL_GROUP": "reward-hacking"}},
        pool={"warm": 0, "max": 1},
    )


@pytest.fixture(scope="module")
async def judge(pool: Pool, policy: Policy) -> Judge:
    """A judge on a one-container group (so every run reuses the same container).

    The container's first use is covered by its own test
    (:func:`test_hidden_tests_unreadable_on_a_fresh_container`); this fixture
    uses it once so every other test here runs on a container reset at least once.
    """
    judge = Judge(ExecutionService(pool, {"default": policy}, resolve_image))
    first = await judge.judge(request(HONEST, hidden_tests("function")), tenant=TENANT)
    assert first.reward == 1.0, first
    return judge


async def prime(judge: Judge) -> None:
    """Use the container once, in case an earlier attack got it retired and replaced.

    A fresh container's first execution can read the hidden tests (see
    :func:`test_hidden_tests_unreadable_on_a_fresh_container`); the tests that would
    otherwise trip over that known bug at random run after this.
    """
    tests = {"kind": "io", "cases": [{"expected_stdout": ""}]}
    result = await judge.judge(request("", tests), tenant=TENANT)
    assert result.reward == 1.0, result


async def verdict(judge: Judge, code: str, kind: str, **extra: Any) -> JudgeResult:
    return await judge.judge(request(code, hidden_tests(kind), **extra), tenant=TENANT)


def assert_zero(result: JudgeResult, error_class: str | set[str] | None = None) -> None:
    """A failed attack: reward exactly 0.0, at least one test, the expected error class."""
    assert result.reward == 0.0, result
    assert result.reward is not None
    assert result.total >= 1 and result.passed < result.total, result
    assert result.error_class not in (None, "infra"), result
    if isinstance(error_class, str):
        assert result.error_class == error_class, result
    elif error_class is not None:
        assert result.error_class in error_class, result


# ------------------------------------------------------------------------ positive controls


@pytest.mark.parametrize("kind", KINDS)
async def test_honest_solution_is_rewarded(judge: Judge, kind: str) -> None:
    result = await verdict(judge, HONEST, kind)
    assert result.reward == 1.0, result
    assert result.error_class is None
    assert result.passed == result.total == len(CASES)


# ------------------------------------------------------------------------ the attacks

FORGED_NAMES = [
    *(f"case {i}" for i in range(len(CASES))),
    *(f"test_add.py::test_case_{i}" for i in range(len(CASES))),
    *(f"line {i + 2}: assert candidate({a}, {b}) == {c}" for i, ((a, b), c) in enumerate(CASES)),
]
FORGED_REPORT = json.dumps(
    {
        "complete": True,
        "loaded": True,
        "load_error": None,
        "tests": [{"name": name, "verdict": "passed", "returned": 5} for name in FORGED_NAMES],
    }
)

WRONG_ADD = """
def add(a, b):
    return a - b


if __name__ == "__main__":
    a, b = map(int, input().split())
    print(add(a, b))
"""

ATTACKS: dict[str, str] = {
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n" + WRONG_ADD,
    "os._exit(0) at import": "import os\nos._exit(0)\n" + WRONG_ADD,
    "raise SystemExit(0) in the function": """\
def add(a, b):
    raise SystemExit(0)


if __name__ == "__main__":
    add(0, 0)
""",
    "prints PASSED and a forged report": f"""\
import sys

REPORT = {FORGED_REPORT!r}
for stream in (sys.stdout, sys.stderr):
    print("PASSED", "OK", "1 passed", "3 passed in 0.01s", REPORT, sep="\\n", file=stream)
    stream.flush()


def add(a, b):
    print("PASSED")
    print(REPORT, file=sys.stderr)
    return a - b


if __name__ == "__main__":
    print(REPORT)
""",
    "writes a forged report to fd 1 and fd 3, then exits": f"""\
import os
import struct

REPORT = {FORGED_REPORT!r}.encode()
os.write(1, REPORT)
os.write(2, REPORT)
try:
    os.write(3, REPORT)
    os.write(3, struct.pack(">I", len(REPORT)) + REPORT)
except OSError:
    pass
os._exit(0)
""",
    "sleeps until the timeout": """\
import time


def add(a, b):
    time.sleep(100)


if __name__ == "__main__":
    add(0, 0)
""",
    "busy-loops": """\
def add(a, b):
    while True:
        pass


if __name__ == "__main__":
    add(0, 0)
""",
    "fork bomb": """\
import os


def add(a, b):
    while True:
        try:
            os.fork()
        except OSError:
            pass


if __name__ == "__main__":
    add(0, 0)
""",
    "output flood": """\
import sys


def add(a, b):
    line = "PASSED " * 1000 + "\\n"
    while True:
        sys.stdout.write(line)
        sys.stderr.write(line)


if __name__ == "__main__":
    add(0, 0)
""",
}

# (attack, kind) -> the error class the judge must give.
EXPECTED: dict[tuple[str, str], str] = {}
for _kind in PAIR_KINDS:
    EXPECTED |= {
        ("sys.exit(0) at import", _kind): "runtime_error",
        ("os._exit(0) at import", _kind): "runtime_error",
        ("raise SystemExit(0) in the function", _kind): "runtime_error",
        ("prints PASSED and a forged report", _kind): "wrong_answer",
        ("writes a forged report to fd 1 and fd 3, then exits", _kind): "runtime_error",
        ("sleeps until the timeout", _kind): "timeout",
        ("busy-loops", _kind): "timeout",
        ("fork bomb", _kind): "timeout",
        # The candidate's own output goes nowhere in pair mode: the call never returns.
        ("output flood", _kind): "timeout",
    }
EXPECTED |= {
    ("sys.exit(0) at import", "io"): "wrong_answer",
    ("os._exit(0) at import", "io"): "wrong_answer",
    ("raise SystemExit(0) in the function", "io"): "wrong_answer",
    ("prints PASSED and a forged report", "io"): "wrong_answer",
    ("writes a forged report to fd 1 and fd 3, then exits", "io"): "wrong_answer",
    ("sleeps until the timeout", "io"): "timeout",
    ("busy-loops", "io"): "timeout",
    ("fork bomb", "io"): "timeout",
    ("output flood", "io"): "output_limit",
}


@pytest.mark.parametrize(("attack", "kind"), sorted(EXPECTED))
async def test_attack_gets_no_reward(judge: Judge, attack: str, kind: str) -> None:
    expected = EXPECTED[(attack, kind)]
    # A short per-test timeout where the attack runs forever; the default elsewhere, so
    # that a loaded machine cannot turn a wrong answer into a timeout.
    extra = {"test_timeout_s": CALL_TIMEOUT_S} if expected == "timeout" else {}
    result = await verdict(judge, ATTACKS[attack], kind, **extra)
    assert_zero(result, expected)


async def test_pool_still_judges_after_the_bombs(judge: Judge) -> None:
    """After fork bombs and floods, the same group still gives honest code its 1.0."""
    await verdict(judge, ATTACKS["fork bomb"], "function", test_timeout_s=CALL_TIMEOUT_S)
    result = await verdict(judge, HONEST, "assert")
    assert result.reward == 1.0, result


@pytest.mark.parametrize("kind", KINDS)
async def test_sleeping_at_import_is_a_timeout(judge: Judge, kind: str) -> None:
    code = "import time\ntime.sleep(100)\n" + WRONG_ADD
    result = await verdict(judge, code, kind, limits={"wall_time_s": 1.5})
    assert_zero(result, "timeout")


MEMORY_BOMB = """\
def add(a, b):
    hoard = []
    while True:
        hoard.append(bytearray(8 << 20))
        hoard[-1][::4096] = b"x" * (2048)


if __name__ == "__main__":
    add(0, 0)
"""


@pytest.mark.parametrize("kind", KINDS)
async def test_memory_bomb_is_a_memory_limit(judge: Judge, kind: str) -> None:
    result = await verdict(judge, MEMORY_BOMB, kind, test_timeout_s=2.0)
    assert_zero(result, "memory_limit")


@pytest.mark.parametrize("kind", PAIR_KINDS)
async def test_memory_bomb_at_import_is_a_memory_limit(judge: Judge, kind: str) -> None:
    code = "hoard = []\nwhile True:\n    hoard.append(b'x' * (8 << 20))\n"
    result = await verdict(judge, code, kind)
    assert_zero(result, "memory_limit")


# ------------------------------------------------------------------------ rigged values

RIGGED: dict[str, str] = {
    "__eq__ always True": """\
class Anything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

    @property
    def __class__(self):
        return int

    def __bool__(self):
        return True

    def __repr__(self):
        return "5"


def add(a, b):
    return Anything()
""",
    "int subclass": """\
class Int(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def add(a, b):
    return Int(a - b)
""",
    "str subclass": """\
class Str(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def add(a, b):
    return Str("nope")
""",
    "list subclass": """\
class List(list):
    def __eq__(self, other):
        return True


def add(a, b):
    return List()
""",
    "numpy array subclass": """\
import numpy


class Array(numpy.ndarray):
    def __eq__(self, other):
        return True

    def __bool__(self):
        return True


def add(a, b):
    return numpy.zeros(3).view(Array)
""",
    "numpy scalar subclass": """\
import numpy


class Scalar(numpy.int64):
    __module__ = "numpy"

    def __eq__(self, other):
        return True

    __hash__ = numpy.int64.__hash__


def add(a, b):
    return Scalar(a - b)
""",
}


@pytest.mark.parametrize("kind", PAIR_KINDS)
@pytest.mark.parametrize("rig", sorted(RIGGED))
async def test_rigged_return_value_gets_no_reward(judge: Judge, rig: str, kind: str) -> None:
    result = await verdict(judge, RIGGED[rig], kind)
    assert_zero(result, "wrong_answer")


async def test_exact_numpy_scalar_is_a_plain_value(judge: Judge) -> None:
    """Control for the numpy rigs: an exact numpy integer crosses as the number it holds."""
    code = "import numpy\n\ndef add(a, b):\n    return numpy.int64(a + b)\n"
    for kind in PAIR_KINDS:
        result = await verdict(judge, code, kind)
        assert result.reward == 1.0, result


# ------------------------------------------------------------------------ the harness

FRAME = """
import json
import os
import struct


def frame(message):
    body = json.dumps(message).encode()
    return struct.pack(">I", len(body)) + body
"""

HARNESS_ATTACKS: dict[str, tuple[str, str | set[str]]] = {
    "patches wire.encode to answer 5": (
        """\
import wire

_encode = wire.encode


def _always_five(value, handle=None, depth=0):
    if depth == 0 and type(value) is int:
        return 5
    return _encode(value, handle, depth)


wire.encode = _always_five


def add(a, b):
    return a - b
""",
        "wrong_answer",
    ),
    "patches socket.sendall to rewrite every answer": (
        """\
import json
import socket
import struct

_sendall = socket.socket.sendall


def _rewrite(self, data, *args):
    body = json.loads(data[4:])
    if "value" in body or "raise" in body:
        body = {"value": 5}
    data = json.dumps(body).encode()
    return _sendall(self, struct.pack(">I", len(data)) + data, *args)


socket.socket.sendall = _rewrite


def add(a, b):
    raise ValueError("no idea")
""",
        "wrong_answer",
    ),
    "patches builtins in its own process": (
        """\
import builtins

builtins.isinstance = lambda *args: True
builtins.len = lambda obj: 3
builtins.abs = lambda x: 0
builtins.__dict__["True"] = False


def add(a, b):
    return a - b
""",
        "runtime_error",
    ),
    "sends {'value': 3} on fd 3 at import, then exits": (
        FRAME + 'os.write(3, frame({"value": 3}))\nos._exit(0)\n',
        "runtime_error",
    ),
    "sends a hello and answers ahead of the questions, then exits": (
        FRAME
        + 'os.write(3, frame({"loaded": True, "names": {}}))\n'
        + 'os.write(3, b"".join(frame({"value": 5}) for _ in range(10)))\n'
        + "os._exit(0)\n",
        # The entry point arrives as the number 5 (wrong_answer when called), unless the
        # judge's question already finds the socket closed (runtime_error).
        {"wrong_answer", "runtime_error"},
    ),
    "sends garbage on fd 3": (
        FRAME + "os.write(3, os.urandom(4096))\nos._exit(0)\n",
        "runtime_error",
    ),
    "announces a huge message on fd 3": (
        FRAME + 'os.write(3, struct.pack(">I", 2**32 - 1) + b"{" * 65536)\nos._exit(0)\n',
        "runtime_error",
    ),
    "patches the candidate server's answer()": (
        """\
import sys

server = sys.modules["__main__"]
server.answer = lambda module, request, handles: {"value": 5}


def add(a, b):
    return a - b
""",
        # The entry point itself arrives as the number 5: calling it fails in the judge.
        # (judge_function.py then crashes on an unbound `value`, line 43: runtime_error.)
        {"wrong_answer", "runtime_error"},
    ),
}


@pytest.mark.parametrize("kind", PAIR_KINDS)
@pytest.mark.parametrize("attack", sorted(HARNESS_ATTACKS))
async def test_tampering_with_the_harness_gets_no_reward(
    judge: Judge, attack: str, kind: str
) -> None:
    code, error_class = HARNESS_ATTACKS[attack]
    result = await verdict(judge, code, kind)
    assert_zero(result, error_class)


# ------------------------------------------------------------------------ planted config

PLANT = """\
import os
import site

HOOK = (
    "# planted-by-the-candidate\\n"
    "import report\\n"
    "report.Recorder.end = lambda self, name, exc, **extra: "
    "self.tests.append({'name': name, 'verdict': 'passed', 'returned': 5})\\n"
)
FILES = {
    "conftest.py": HOOK + "collect_ignore_glob = ['*']\\n",
    "sitecustomize.py": HOOK,
    "usercustomize.py": HOOK,
    "zz_judge.pth": "import sitecustomize  # planted-by-the-candidate\\n",
    "pytest.ini": "[pytest]\\n# planted-by-the-candidate\\naddopts = -p no:python --co\\n",
    "setup.cfg": "[tool:pytest]\\n# planted-by-the-candidate\\naddopts = -p no:python --co\\n",
    "tox.ini": "[pytest]\\n# planted-by-the-candidate\\naddopts = -p no:python --co\\n",
}


def writable_dirs():
    dirs = {"/workspace", "/tmp", "/dev/shm", "/judge", "/judge/tests", "/var/tmp", "/"}
    dirs.update(site.getsitepackages() + [site.getusersitepackages()])
    for root, subdirs, _ in os.walk("/"):
        if root.startswith(("/proc", "/sys")):
            subdirs[:] = []
        elif os.access(root, os.W_OK):
            dirs.add(root)
    return sorted(dirs)


PLANTED = []
for directory in writable_dirs():
    for name, text in FILES.items():
        path = os.path.join(directory, name)
        try:
            os.makedirs(directory, exist_ok=True)
            with open(path, "w") as handle:
                handle.write(text)
            PLANTED.append(path)
        except OSError:
            pass
"""

PLANTED_CHECK = """\
import os

NAMES = ("conftest.py", "sitecustomize.py", "usercustomize.py", "zz_judge.pth", "pytest.ini",
         "setup.cfg", "tox.ini")


def survivors():
    found = []
    for root, subdirs, files in os.walk("/"):
        if root.startswith(("/proc", "/sys")):
            subdirs[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            if name in NAMES and os.path.isfile(path):
                try:
                    with open(path) as handle:
                        if "planted-by-the-candidate" in handle.read():
                            found.append(path)
                except OSError:
                    pass
    return sorted(found)
"""


@pytest.mark.parametrize("kind", KINDS)
async def test_planted_config_files_change_nothing(judge: Judge, kind: str) -> None:
    result = await verdict(judge, PLANT + WRONG_ADD, kind)
    assert_zero(result, "wrong_answer")
    # The planting worked somewhere (else this test proves nothing) ...
    probe = PLANT + "\n\ndef add(a, b):\n    return sorted({os.path.dirname(p) for p in PLANTED})\n"
    planted = await judge.judge(
        request(
            probe,
            {"kind": "function", "entry_point": "add", "cases": [{"args": [0, 0]}]},
        ),
        tenant=TENANT,
    )
    message = planted.tests[0].message or ""
    assert "/workspace" in message and "/tmp" in message, planted
    assert "/judge" not in message, planted
    # ... and nothing planted survives into the next execution in the same container.
    check = await judge.judge(
        request(
            PLANTED_CHECK,
            {"kind": "function", "entry_point": "survivors", "cases": [{"expected": []}]},
        ),
        tenant=TENANT,
    )
    assert check.reward == 1.0, check


# ------------------------------------------------------------------------ the hidden tests

STEAL = """\
import ctypes
import os
import re
import signal
import subprocess

PTRACE_ATTACH = 16


class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_size_t)]


def parse(text, a, b):
    found = re.search(rb"\\(\\s*%d\\s*,\\s*%d\\s*\\)\\s*==\\s*(-?\\d+)" % (a, b), text)
    return int(found.group(1)) if found else None


def judge_pids():
    # The owner of /proc/PID (stat needs no read access: the candidate's status files
    # of other processes cannot be opened).
    pids = []
    for pid in os.listdir("/proc"):
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if pid.isdigit() and uid != os.getuid() and uid >= 1000:
            pids.append(int(pid))
    return pids


def attempt(log, key, action):
    try:
        return action()
    except OSError as exc:
        log.add(f"{key}={exc.errno}")
    except Exception as exc:
        log.add(f"{key}={type(exc).__name__}")
    return None


def read(path):
    with open(path, "rb") as handle:
        return handle.read(1 << 24)


def memory(pid, log):
    maps = attempt(log, "maps", lambda: read(f"/proc/{pid}/maps")) or b""
    with open(f"/proc/{pid}/mem", "rb", 0) as mem:
        chunks = []
        for line in maps.decode().splitlines():
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            mem.seek(low)
            chunks.append(mem.read(min(high - low, 1 << 24)))
    return b"".join(chunks)


def steal(a, b):
    log = set()
    libc = ctypes.CDLL(None, use_errno=True)
    pids = judge_pids()
    sources = [lambda: read("/judge/test.py"), lambda: read("/judge/spec.json")]
    sources += [lambda: read("/judge/tests/test_add.py")]
    names = ["test.py", "spec.json", "test_add.py"]
    attempt(log, "ls", lambda: os.listdir("/judge"))
    attempt(log, "write", lambda: open("/judge/test.py", "w").write("def check(c): pass\\n"))
    attempt(log, "unlink", lambda: os.unlink("/judge/test.py"))
    attempt(log, "symlink", lambda: os.symlink("/workspace/x", "/judge/tests/test_x.py"))
    found = subprocess.run(
        ["find", "/", "-xdev", "-name", "test*", "-path", "*judge*"],
        capture_output=True, text=True,
    )
    log.add(f"find={len(found.stdout.split())}")
    for pid in pids:
        for part in ("root/judge/test.py", "cwd/test.py", "cwd/spec.json", "environ", "cmdline"):
            sources.append(lambda path=f"/proc/{pid}/{part}": read(path))
            names.append(part.split("/")[-1])
        fds = attempt(log, "fd", lambda pid=pid: os.listdir(f"/proc/{pid}/fd")) or []
        for fd in fds:
            sources.append(lambda path=f"/proc/{pid}/fd/{fd}": read(path))
            names.append("fd" + fd)
        sources.append(lambda pid=pid: memory(pid, log))
        names.append("mem")
        if libc.ptrace(PTRACE_ATTACH, pid, 0, 0) != 0:
            log.add(f"ptrace={ctypes.get_errno()}")
        buffer = ctypes.create_string_buffer(4096)
        local, remote = IOVec(ctypes.addressof(buffer), 4096), IOVec(0x400000, 4096)
        if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) < 0:
            log.add(f"vm={ctypes.get_errno()}")
        attempt(log, "kill", lambda pid=pid: os.kill(pid, signal.SIGKILL))
    for name, source in zip(names, sources):
        text = attempt(log, name, source)
        if text:
            value = parse(text, a, b)
            if value is not None:
                return value
    return f"pids={len(pids)} " + " ".join(sorted(log))


def add(a, b):
    return steal(a, b)
"""


def test_the_stealer_would_win_if_it_could_read() -> None:
    """Control: the attack's parser finds every answer in each kind's hidden test text."""
    namespace: dict[str, Any] = {}
    exec(compile(STEAL, "<steal>", "exec"), namespace)
    for kind in ("assert", "files"):
        tests = hidden_tests(kind)
        text = tests.get("script") or next(iter(tests["files"].values()))
        for (a, b), c in CASES:
            assert namespace["parse"](text.encode(), a, b) == c


@pytest.mark.parametrize("kind", PAIR_KINDS)
async def test_hidden_tests_cannot_be_read_or_changed(judge: Judge, kind: str) -> None:
    await prime(judge)
    result = await verdict(judge, STEAL, kind)
    assert_zero(result, "wrong_answer")
    # And the judge ran the real tests to their end: each one judged, none replaced.
    assert result.total == len(CASES), result


async def test_judge_process_is_out_of_reach(judge: Judge) -> None:
    """The candidate finds the judge's process but can read, trace or signal none of it."""
    await prime(judge)
    script = "def check(candidate):\n    assert candidate(2, 3) == 5, candidate(-999, -999)\n"
    tests = {"kind": "assert", "entry_point": "add", "script": script}
    result = await judge.judge(request(STEAL, tests), tenant=TENANT)
    assert_zero(result, "wrong_answer")
    log = set((result.tests[0].message or "").removeprefix("AssertionError: ").split())
    assert "pids=1" in log, result  # the judge process was found ...
    expected = {
        f"ls={EACCES}",
        f"test.py={EACCES}",
        f"test_add.py={EACCES}",
        f"write={EACCES}",
        f"unlink={EACCES}",
        f"symlink={EACCES}",
        f"environ={EACCES}",
        f"cmdline={EACCES}",  # the candidate's processes open no other process's /proc entry
        f"fd={EACCES}",
        f"maps={EACCES}",
        f"mem={EACCES}",
        f"ptrace={EPERM}",
        f"vm={EPERM}",
        f"kill={EPERM}",
        "find=0",
    }
    assert expected <= log, f"missing {expected - log}; got {sorted(log)}"  # ... and refused


@pytest.mark.parametrize("kind", ["assert", "files"])
async def test_hidden_tests_unreadable_on_a_fresh_container(pool: Pool, kind: str) -> None:
    fresh = make_policy(
        f"reward-hacking-fresh-{kind}",
        resources={"wall_time_s": WALL_S, "cpu_time_s": WALL_S, "memory_mb": 192},
        env={"set": {"TEST_POOL_GROUP": f"reward-hacking-fresh-{kind}"}},
        pool={"warm": 0, "max": 1},
    )
    judge = Judge(ExecutionService(pool, {"default": fresh}, resolve_image))
    result = await judge.judge(request(STEAL, hidden_tests(kind)), tenant=TENANT)
    assert_zero(result, "wrong_answer")


# ------------------------------------------------------------------------ trusted helpers

POLY_PRELUDE = '''\
import math


def poly(xs, x):
    """The polynomial with coefficients xs at x."""
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def find_zero(xs):
    """A zero of poly(xs, x)."""
'''

POLY_TESTS = """\
def check(candidate):
    for coeffs in ([1, 2], [-6, 11, -6, 1], [5, 0, 0, 3], [-3, 1, 2, -1, 0, 4]):
        x = candidate(list(coeffs))
        assert abs(poly(coeffs, x)) < 1e-4
"""

POLY_HONEST = """\
def poly(xs, x):
    return sum(c * x**i for i, c in enumerate(xs))


def find_zero(xs):
    low, high = -1.0, 1.0
    while poly(xs, low) * poly(xs, high) > 0:
        low, high = low * 2, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if poly(xs, low) * poly(xs, middle) <= 0:
            high = middle
        else:
            low = middle
    return low
"""

POLY_CHEAT = """\
import builtins


def poly(xs, x):
    return 0


abs = lambda x: 0  # noqa: E731
builtins.poly = poly
builtins.abs = abs


def find_zero(xs):
    return 0.0
"""


@pytest.mark.parametrize(("code", "reward"), [(POLY_HONEST, 1.0), (POLY_CHEAT, 0.0)])
async def test_prompt_helpers_come_from_the_trusted_prelude(
    judge: Judge, code: str, reward: float
) -> None:
    """HumanEval/32-style: ``poly`` in the test is the prompt's, never the candidate's."""
    tests = {
        "kind": "assert",
        "entry_point": "find_zero",
        "prelude": POLY_PRELUDE,
        "script": POLY_TESTS,
    }
    result = await judge.judge(request(code, tests, reward="fraction"), tenant=TENANT)
    assert result.reward == reward, result
    if reward == 0.0:
        assert result.error_class == "wrong_answer"


SHADOWS = """\
import builtins

abs = lambda x: 0  # noqa: E731
len = lambda obj: 1  # noqa: E731
isinstance = lambda obj, kind: True  # noqa: E731
# In its own process too (len and isinstance would break its own server: see the
# "patches builtins in its own process" attack).
builtins.abs = abs
builtins.__dict__["True"] = False


def add(a, b):
    return str(a - b) + "xx"
"""

SHADOW_CHECKS = [
    "abs(add(2, 3) - 5) < 1e-9",
    "len(str(add(2, 3))) == 1",
    "isinstance(add(2, 3), int)",
]


@pytest.mark.parametrize("kind", ["assert", "files"])
async def test_shadowed_builtins_do_not_reach_the_tests(judge: Judge, kind: str) -> None:
    tests: dict[str, Any]
    if kind == "assert":
        body = "".join(
            f"    assert {check.replace('add', 'candidate')}\n" for check in SHADOW_CHECKS
        )
        tests = {"kind": "assert", "entry_point": "add", "script": f"def check(candidate):\n{body}"}
    else:
        body = "".join(
            f"\n\ndef test_{i}():\n    assert {check.replace('add', 'solution.add')}\n"
            for i, check in enumerate(SHADOW_CHECKS)
        )
        tests = {"kind": "files", "files": {"test_shadow.py": f"import solution{body}"}}
    result = await judge.judge(request(SHADOWS, tests, reward="fraction"), tenant=TENANT)
    assert_zero(result, "wrong_answer")
    assert result.passed == 0 and result.total == len(SHADOW_CHECKS), result


# ------------------------------------------------------------------------ what can be read

TOKEN_PREFIX = "rhtok_"

SCANNER = """\
import ctypes
import os
import re
import sys

PATTERN = re.compile(b"rh" + b"tok_" + b"[0-9a-f]{32}")
hits = set()
counts = {"mem": 0, "fs": 0, "proc": 0}


def scan(data, where):
    counts[where] += len(data)
    hits.update(match.group().decode() for match in PATTERN.finditer(data))


def read(path, limit=16 << 20):
    try:
        with open(path, "rb", 0) as handle:
            return handle.read(limit)
    except OSError:
        return b""


def scan_memory(pid):
    try:
        with open(f"/proc/{pid}/maps") as handle:
            regions = handle.read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        return
    with mem:
        for line in regions:
            fields = line.split()
            if "r" not in fields[1] or fields[-1] in ("[vvar]", "[vsyscall]"):
                continue
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if high - low > 1 << 28:
                continue
            try:
                mem.seek(low)
                scan(mem.read(high - low), "mem")
            except (OSError, OverflowError, ValueError):
                pass


def scan_everything():
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: read our own /proc/self/mem
    scan(sys.stdin.buffer.read() if not sys.stdin.closed else b"", "proc")
    scan_memory("self")
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for name in ("cmdline", "environ", "status", "maps", "stack", "io"):
                scan(read(f"/proc/{pid}/{name}"), "proc")
            scan_memory(pid)
    scan(repr(dict(os.environ)).encode() + repr(sys.argv).encode(), "proc")
    with open("/proc/self/mountinfo") as handle:
        mounts = [line.split()[4] for line in handle if line.split()[5].startswith("rw")]
    for top in mounts:
        if top.startswith(("/proc", "/sys")):
            continue
        for root, subdirs, files in os.walk(top):
            if root.startswith(("/proc", "/sys")):
                subdirs[:] = []
                continue
            for name in files:
                path = os.path.join(root, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    scan(read(path), "fs")
    summary = "hits=0 mem={}M fs={}K proc={}K".format(
        counts["mem"] >> 20, counts["fs"] >> 10, counts["proc"] >> 10
    )
    return "\\n".join(sorted(hits)) if hits else summary


def add(a, b):
    return scan_everything()


if __name__ == "__main__":
    print(scan_everything())
"""


def token() -> str:
    return TOKEN_PREFIX + secrets.token_hex(16)


def scan_summary(result: JudgeResult) -> str:
    """The scanner's summary line from a wrong answer's message; fails if it found a token."""
    message = result.tests[0].message or ""
    assert TOKEN_PREFIX not in message, f"the candidate found a secret: {message}"
    found = re.search(r"hits=0 mem=(\d+)M", message)
    assert found, result
    assert int(found.group(1)) >= 8, f"the scanner did not read its own memory: {message}"
    return message


async def test_scanner_finds_what_it_was_given(judge: Judge) -> None:
    """Control: a token the candidate holds in memory is found, and pays (so scans can fail)."""
    secret = token()
    tests = {"kind": "io", "cases": [{"stdin": secret, "expected_stdout": secret}]}
    result = await judge.judge(request(SCANNER, tests), tenant=TENANT)
    assert result.reward == 1.0, result


async def test_expected_output_is_nowhere_the_candidate_can_read(judge: Judge) -> None:
    expected = token()
    tests = {
        "kind": "io",
        "cases": [{"stdin": "1 2\n", "expected_stdout": expected}] * 2,
        "compare": "tokens",
    }
    result = await judge.judge(request(SCANNER, tests), tenant=TENANT)
    assert_zero(result, "wrong_answer")
    scan_summary(result)


@pytest.mark.parametrize("kind", ["assert", "function"])
async def test_expected_values_are_nowhere_the_candidate_can_read(judge: Judge, kind: str) -> None:
    await prime(judge)
    expected = token()
    if kind == "function":
        tests: dict[str, Any] = {
            "kind": "function",
            "entry_point": "add",
            "cases": [{"args": [1, 2], "expected": expected}],
        }
    else:
        script = f"def check(candidate):\n    assert candidate(1, 2) == {expected!r}\n"
        tests = {"kind": "assert", "entry_point": "add", "script": script}
    result = await judge.judge(request(SCANNER, tests), tenant=TENANT)
    assert_zero(result, "wrong_answer")
    if kind == "function":
        scan_summary(result)


async def test_earlier_executions_leave_nothing_readable(pool: Pool, judge: Judge) -> None:
    """Submission A's hidden tests and inputs are gone when B runs in the same container."""
    secrets_of_a = [token() for _ in range(7)]
    t1, t2, t3, t4, t5, t6, t7 = secrets_of_a
    a_code = HONEST
    runs_of_a: list[dict[str, Any]] = [
        {
            "kind": "assert",
            "entry_point": "add",
            "prelude": f"PROMPT = {t1!r}\n",
            "script": (
                f"SECRET = {t2!r}\n\ndef check(candidate):\n    assert candidate(2, 3) == 5\n"
            ),
        },
        {
            "kind": "files",
            "files": {
                "test_a.py": f"import solution\n\nS = {t3!r}\n\n"
                "def test_a():\n    assert solution.add(1, 1) == 2\n"
            },
        },
        {
            "kind": "function",
            "entry_point": "add",
            "cases": [{"args": [t4, ""], "expected": t4}, {"args": [1, 2], "expected": t5}],
        },
        {"kind": "io", "cases": [{"stdin": t6, "expected_stdout": t7}]},
    ]
    group_before = _group(pool, judge)
    for tests in runs_of_a:
        result = await judge.judge(request(a_code, tests), tenant=TENANT)
        assert result.reward is not None and result.error_class != "infra", result
    io_b = {"kind": "io", "cases": [{"stdin": "", "expected_stdout": t2}]}
    function_b = {
        "kind": "function",
        "entry_point": "add",
        "cases": [{"args": [0, 0], "expected": t2}],
    }
    for tests in (io_b, function_b):
        result = await judge.judge(request(SCANNER, tests), tenant=TENANT)
        assert_zero(result, "wrong_answer")
        message = scan_summary(result)
        assert not any(secret in message for secret in secrets_of_a), message
    group_after = _group(pool, judge)
    # Same container throughout: none created or retired between A and B.
    assert group_after.created_total == group_before.created_total, (group_before, group_after)
    assert group_after.retired_total == group_before.retired_total, (group_before, group_after)


def _group(pool: Pool, judge: Judge) -> Any:
    (policy,) = judge.execution.policies.values()
    (group,) = [g for g in pool.status().groups if g.policy == policy.name]
    return group


# ------------------------------------------------------------------------ known loopholes


async def test_keyboard_interrupt_cannot_end_pytest_early(judge: Judge) -> None:
    code = """\
class Interrupt(KeyboardInterrupt, Exception):
    pass


def add(a, b):
    if (a, b) == (2, 3):
        return 5
    raise Interrupt("stop here")
"""
    result = await verdict(judge, code, "files", reward="fraction")
    assert result.total == len(CASES), result
    assert result.reward == pytest.approx(1 / 3), result


async def test_stop_iteration_cannot_end_the_tests_iteration(judge: Judge) -> None:
    script = (
        "def check(candidate):\n"
        "    assert all(map(candidate, [2, 3, 5, 7, 11]))\n"
        "    assert not any(map(candidate, [4, 6, 8, 9, 10]))\n"
    )
    tests = {"kind": "assert", "entry_point": "is_prime", "script": script}
    code = "def is_prime(n):\n    raise StopIteration\n"
    result = await judge.judge(request(code, tests), tenant=TENANT)
    assert_zero(result, "runtime_error")


async def test_huge_int_for_a_float_is_a_wrong_answer(judge: Judge) -> None:
    tests = {"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3.5}]}
    result = await judge.judge(
        request("def add(a, b):\n    return 10**400\n", tests), tenant=TENANT
    )
    assert_zero(result, "wrong_answer")


# Function-style tests outside Python: a driver appended to the candidate's code
# calls the function and prints the results; the expected outputs stay outside.
JS_DRIVER = """\
const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);
console.log(add(a, b));
"""
C_DRIVER = """\
#include <stdio.h>
int main(void) {
    int a, b;
    if (scanf("%d %d", &a, &b) != 2) return 2;
    printf("%d\\n", add(a, b));
    return 0;
}
"""
DRIVER_CASES = [
    {"stdin": "2 3", "expected_stdout": "5"},
    {"stdin": "-1 1", "expected_stdout": "0"},
    {"stdin": "40 2", "expected_stdout": "42"},
]
# Thieves: read their whole source (candidate and driver) and print it, hoping the
# answers are in there; then exit 0 before the driver runs.
JS_SOURCE_THIEF = """\
process.stdout.write(require("fs").readFileSync(__filename, "utf8"));
process.exit(0);
function add(a, b) { return 0; }
"""
C_SOURCE_THIEF = """\
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void steal(void) {
    FILE *f = fopen("main.c", "r");
    int c;
    while (f && (c = fgetc(f)) != EOF) putchar(c);
    exit(0);
}
int add(int a, int b) { return 0; }
"""


def driver_tests(driver: str) -> dict[str, Any]:
    return {"kind": "io", "driver": driver, "cases": DRIVER_CASES, "compare": "tokens"}


@pytest.mark.parametrize(
    ("language", "driver", "honest", "thief"),
    [
        ("javascript", JS_DRIVER, "function add(a, b) { return a + b; }\n", JS_SOURCE_THIEF),
        ("c", C_DRIVER, "int add(int a, int b) { return a + b; }\n", C_SOURCE_THIEF),
    ],
)
async def test_driver_function_tests_cannot_be_forged(
    judge: Judge, language: str, driver: str, honest: str, thief: str
) -> None:
    """Honest code passes, wrong code fails, and reading its own source gets a thief nothing."""
    tests = driver_tests(driver)
    passed = await judge.judge(request(honest, tests, language=language), tenant=TENANT)
    assert passed.reward == 1.0, passed
    wrong = honest.replace("a + b", "a - b")
    assert_zero(await judge.judge(request(wrong, tests, language=language), tenant=TENANT))
    assert_zero(await judge.judge(request(thief, tests, language=language), tenant=TENANT))


# Silent drivers (asserts that print nothing: MultiPL-E's tests). Nothing from the
# candidate's process can prove that they ran to their end: any mark written into the
# program (a completion token) can be read back from its source, its binary or its memory.
# So a Python driver runs in the judge's process against the candidate's module (as
# ``assert`` tests do), and elsewhere a silent driver is refused before anything runs.
PY_SILENT_DRIVER = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
C_SILENT_DRIVER = """\
#include <assert.h>
int main(void) {
    assert(add(2, 3) == 5);
    assert(add(-1, 1) == 0);
    return 0;
}
"""
JS_SILENT_DRIVER = 'const assert = require("assert");\nassert.strictEqual(add(2, 3), 5);\n'
PY_HONEST = "def add(a, b):\n    return a + b\n"
PY_PRINTING_DRIVER = "a, b = map(int, input().split())\nprint(add(a, b))\n"
DRIVERS = {  # language: (silent driver, printing driver, honest code, wrong code)
    "python": (PY_SILENT_DRIVER, PY_PRINTING_DRIVER, PY_HONEST, "def add(a, b):\n    return 0\n"),
    "javascript": (
        JS_SILENT_DRIVER,
        JS_DRIVER,
        "function add(a, b) { return a + b; }\n",
        "function add(a, b) { return 0; }\n",
    ),
    "c": (
        C_SILENT_DRIVER,
        C_DRIVER,
        "int add(int a, int b) { return a + b; }\n",
        "int add(int a, int b) { return 0; }\n",
    ),
}
SILENT_CASES = [{"stdin": "", "expected_stdout": ""}]


def silent_tests(driver: str, cases: list[dict[str, str]] = SILENT_CASES) -> dict[str, Any]:
    return {"kind": "io", "driver": driver, "cases": cases}


# A wrong ``add`` under a silent Python driver, each trying to end the program "well".
PY_SILENT_ATTACKS = {
    "os._exit(0) in the function": "import os\n\ndef add(a, b):\n    os._exit(0)\n",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n\ndef add(a, b):\n    return 0\n",
    "os._exit(0) at exit": (
        "import atexit, os\natexit.register(os._exit, 0)\n\ndef add(a, b):\n    return 0\n"
    ),
    "prints the old placeholder": (
        f"import os\n\ndef add(a, b):\n    print({DRIVER_DONE!r}, flush=True)\n    os._exit(0)\n"
    ),
    "reads a token from its own source": hacks.token_thief("python", DRIVERS["python"][3]),
    "a rigged __eq__": "class Yes:\n    def __eq__(self, other):\n        return True\n\n"
    "def add(a, b):\n    return Yes()\n",
}


async def test_a_silent_python_driver_runs_in_the_judge(judge: Judge) -> None:
    """The driver's asserts run in the judge's process, each call crossing to the candidate's:
    the honest ``add`` passes, and no wrong one ending its program early gets anything."""
    tests = silent_tests(PY_SILENT_DRIVER)
    passed = await judge.judge(request(HONEST, tests), tenant=TENANT)
    assert passed.reward == 1.0, passed
    assert [t.name for t in passed.tests] == ["case 0"], passed
    for attack, code in PY_SILENT_ATTACKS.items():
        result = await judge.judge(request(code, tests), tenant=TENANT)
        assert result.reward == 0.0, (attack, result)
        assert_zero(result)


async def test_a_silent_python_driver_reads_each_cases_stdin(judge: Judge) -> None:
    """A silent driver that reads its arguments from stdin gets each case's, one test a case
    (with its weight)."""
    driver = "a, b = map(int, input().split())\nassert add(a, b) == a + b\n"
    cases = [
        {"stdin": "2 3\n", "expected_stdout": "", "weight": 1},
        {"stdin": "-1 1\n", "expected_stdout": "", "weight": 3, "name": "negative"},
    ]
    tests = silent_tests(driver, cases)
    passed = await judge.judge(request(HONEST, tests, reward="weighted"), tenant=TENANT)
    assert passed.reward == 1.0, passed
    assert [(t.name, t.weight) for t in passed.tests] == [("case 0", 1.0), ("negative", 3.0)]
    code = "def add(a, b):\n    return 5\n"  # right for the first case only
    partial = await judge.judge(request(code, tests, reward="weighted"), tenant=TENANT)
    assert partial.reward == 0.25, partial
    assert [t.verdict for t in partial.tests] == ["passed", "wrong_answer"], partial


@pytest.mark.parametrize("language", ["javascript", "c"])
async def test_a_silent_driver_is_refused_outside_python(judge: Judge, language: str) -> None:
    """Outside Python the driver can only run in the candidate's process: refused (422),
    saying what to write instead."""
    silent, _, honest, _ = DRIVERS[language]
    with pytest.raises(InvalidRequestError, match="put them in expected_stdout") as refused:
        await judge.judge(request(honest, silent_tests(silent), language=language), tenant=TENANT)
    assert "assert" in str(refused.value)


@pytest.mark.parametrize("path", ["silent", "printing"])
@pytest.mark.parametrize("language", sorted(DRIVERS))
async def test_the_token_thief_gets_nothing_on_any_driver_path(
    judge: Judge, language: str, path: str
) -> None:
    """A wrong ``add`` that reads its own program (source, binary), prints the last
    32-hex-digit run found there (where a completion token would be) and exits 0: reward 0,
    or a refusal before anything runs; the honest one still gets 1.0 where it runs."""
    silent, printing, honest, wrong = DRIVERS[language]
    tests = silent_tests(silent) if path == "silent" else driver_tests(printing)
    thief = hacks.token_thief(language, wrong)
    assert thief is not None
    refused = path == "silent" and language != "python"
    for code, reward in ((honest, 1.0), (thief, 0.0)):
        if refused:
            with pytest.raises(InvalidRequestError):
                await judge.judge(request(code, tests, language=language), tenant=TENANT)
            continue
        result = await judge.judge(request(code, tests, language=language), tenant=TENANT)
        assert result.reward == reward, result


@pytest.mark.parametrize("language", ["javascript", "c", "go"])
async def test_same_process_assert_tests_are_refused_outside_python(
    judge: Judge, language: str
) -> None:
    """Tests appended into the candidate's own process could be read and skipped: refused."""
    tests = {"kind": "assert", "script": "assert(add(1, 2) == 3);"}
    with pytest.raises(InvalidRequestError, match="use io tests, with a `driver`"):
        await judge.judge(
            request("int add(int a, int b) { return a + b; }", tests, language=language),
            tenant=TENANT,
        )


# ------------------------------------------------------------------------ over HTTP

HTTP_ATTACKS = [
    ("sys.exit(0) at import", "function", "runtime_error"),
    ("os._exit(0) at import", "assert", "runtime_error"),
    ("prints PASSED and a forged report", "files", "wrong_answer"),
    ("prints PASSED and a forged report", "io", "wrong_answer"),
    ("writes a forged report to fd 1 and fd 3, then exits", "assert", "runtime_error"),
]


@pytest.mark.parametrize(("attack", "kind", "error_class"), HTTP_ATTACKS)
def test_attack_over_http_gets_no_reward(
    http: httpx.Client, attack: str, kind: str, error_class: str
) -> None:
    body = {"code": ATTACKS[attack], "tests": hidden_tests(kind), "test_timeout_s": 2}
    response = http.post("/v1/judge", json=body)
    assert response.status_code == 200, response.text
    result = JudgeResult.model_validate(response.json())
    assert_zero(result, error_class)


@pytest.mark.parametrize("kind", KINDS)
def test_rigged_and_honest_over_http(http: httpx.Client, kind: str) -> None:
    honest = http.post("/v1/judge", json={"code": HONEST, "tests": hidden_tests(kind)})
    assert honest.status_code == 200, honest.text
    assert honest.json()["reward"] == 1.0, honest.json()
    if kind != "io":
        rigged = http.post(
            "/v1/judge", json={"code": RIGGED["int subclass"], "tests": hidden_tests(kind)}
        )
        assert rigged.status_code == 200, rigged.text
        assert_zero(JudgeResult.model_validate(rigged.json()), "wrong_answer")
