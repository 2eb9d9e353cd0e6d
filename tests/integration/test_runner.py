"""Execution semantics of the in-container runner, against real containers.

The Python fast path (a pre-forked interpreter that runs the script itself) must
behave like ``python3 main.py``. Where possible a probe is run twice in the same
container, once on the fast path and once through a real ``execve`` of python3
(any ``PYTHON*`` variable other than the ones the fast path honours forces the
exec path), and the two results must be identical.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import pytest
from pydantic import ValidationError

from sandbox.core.execution import BASE_ENV, ExecutionService, RunRequest, exec_limits
from sandbox.core.pool import Pool
from sandbox.errors import LimitError, NotFoundError
from sandbox.policy import LimitOverrides, Policy
from sandbox.results import ExecLimits, ExecResult, ExecStatus
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

TENANT = "runner-semantics"
# Forces the exec path (a real `python3 main.py`) without changing what the probes observe.
REAL_PYTHON_ENV = {**BASE_ENV, "PYTHONNOUSERSITE": "1"}


@pytest.fixture(scope="module")
def policy() -> Policy:
    # max 1: every lease of this module reuses one container (after its verified reset).
    return make_policy(
        "runner-semantics",
        resources={"wall_time_s": 5.0, "cpu_time_s": 5.0, "memory_mb": 256},
        env={"set": {"TEST_POOL_GROUP": "runner-semantics"}},
        pool={"warm": 1, "max": 1},
    )


@pytest.fixture(scope="module")
def limits(policy: Policy) -> ExecLimits:
    return exec_limits(policy, None)


@pytest.fixture(scope="module")
def service(pool: Pool, policy: Policy, python_image: str) -> ExecutionService:
    return ExecutionService(pool, {"semantics": policy}, lambda _: python_image)


async def run_python(
    pool: Pool,
    image: str,
    policy: Policy,
    code: str,
    *,
    args: Sequence[str] = (),
    stdin: bytes = b"",
    files: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    limits: ExecLimits | None = None,
    fetch: Sequence[str] = (),
) -> ExecResult:
    """``python3 main.py ARGS`` with ``code`` as main.py, in a fresh lease of ``policy``."""
    all_files = {"main.py": code.encode(), **{k: v.encode() for k, v in (files or {}).items()}}
    async with pool.lease(image, policy, TENANT) as lease:
        return await lease.sandbox.exec(
            ["python3", "main.py", *args],
            limits=limits or exec_limits(policy, None),
            stdin=stdin,
            env=dict(BASE_ENV if env is None else env),
            files=all_files,
            fetch=fetch,
        )


def observed(result: ExecResult) -> tuple[object, ...]:
    return (result.status, result.exit_code, result.signal, result.stdout, result.stderr)


# --------------------------------------------------------------------------------------
# `python3 main.py` semantics
# --------------------------------------------------------------------------------------


async def test_main_module_file_argv_cwd_and_sys_path(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import os, sys, helper\n"
        "print(__name__)\n"
        "print(__file__)\n"
        "print(sys.argv)\n"
        "print(os.getcwd())\n"
        "print(sys.path[0])\n"
        "print(helper.VALUE, helper.__file__)\n"
        "print(sys.modules['__main__'] is sys.modules[__name__])\n"
    )
    result = await run_python(
        pool,
        python_image,
        policy,
        code,
        args=["one", "two words", "--flag"],
        files={"helper.py": "VALUE = 41 + 1\n"},
    )
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout.decode().splitlines() == [
        "__main__",
        "/workspace/main.py",
        "['main.py', 'one', 'two words', '--flag']",
        "/workspace",
        "/workspace",
        "42 /workspace/helper.py",
        "True",
    ]
    assert result.stderr == b""


async def test_stdin_is_readable(pool: Pool, python_image: str, policy: Policy) -> None:
    data = b"line one\nline two\n" + bytes(range(256)) * 64
    code = "import sys\nraw = sys.stdin.buffer.read()\nprint(len(raw), raw[:18])\n"
    result = await run_python(pool, python_image, policy, code, stdin=data)
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == f"{len(data)} {data[:18]!r}\n".encode()

    text = await run_python(
        pool, python_image, policy, "print(input()[::-1])\nprint(input())\n", stdin=b"abc\nxyz\n"
    )
    assert text.stdout == b"cba\nxyz\n"


async def test_sys_exit_with_a_number(pool: Pool, python_image: str, policy: Policy) -> None:
    result = await run_python(pool, python_image, policy, "import sys\nsys.exit(3)\n")
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 3
    assert result.signal is None
    assert result.reason is None
    assert result.stderr == b""


async def test_sys_exit_with_a_message(pool: Pool, python_image: str, policy: Policy) -> None:
    result = await run_python(pool, python_image, policy, "import sys\nsys.exit('goodbye')\n")
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 1
    assert result.stderr == b"goodbye\n"
    assert result.stdout == b""


async def test_sys_exit_zero_and_none_are_success(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    for code in ("import sys\nsys.exit(0)\n", "import sys\nsys.exit()\n", "raise SystemExit\n"):
        result = await run_python(pool, python_image, policy, code)
        assert result.status == ExecStatus.OK, code
        assert result.exit_code == 0


async def test_uncaught_exception_traceback_starts_at_main_py(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = "def inner():\n    raise ValueError('boom')\n\ninner()\n"
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 1
    lines = result.stderr.decode().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == '  File "/workspace/main.py", line 4, in <module>'
    assert lines[-1] == "ValueError: boom"
    frames = [line for line in lines if line.startswith("  File ")]
    assert frames == [
        '  File "/workspace/main.py", line 4, in <module>',
        '  File "/workspace/main.py", line 2, in inner',
    ]
    assert "runner" not in result.stderr.decode()
    # Exactly what python3 itself prints.
    real = await run_python(pool, python_image, policy, code, env=REAL_PYTHON_ENV)
    assert observed(result) == observed(real)


async def test_syntax_error_is_formatted_like_python(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = "x = 1\nprint(x +)\n"
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 1
    text = result.stderr.decode()
    assert text.startswith('  File "/workspace/main.py", line 2\n'), text
    assert text.rstrip().endswith("SyntaxError: invalid syntax"), text
    assert "Traceback" not in text
    real = await run_python(pool, python_image, policy, code, env=REAL_PYTHON_ENV)
    assert observed(result) == observed(real)


async def test_non_daemon_thread_is_awaited(pool: Pool, python_image: str, policy: Policy) -> None:
    code = (
        "import threading, time\n"
        "def work():\n"
        "    time.sleep(0.3)\n"
        "    print('thread finished', flush=True)\n"
        "threading.Thread(target=work).start()\n"
        "print('main finished', flush=True)\n"
    )
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"main finished\nthread finished\n"
    assert result.usage.wall_s >= 0.3


async def test_atexit_handlers_run_and_output_is_flushed(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('from atexit', end=''))\n"
        "sys.stdout.write('no newline;')\n"
        "sys.stderr.write('err without newline')\n"
    )
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"no newline;from atexit"
    assert result.stderr == b"err without newline"


async def test_large_buffered_output_is_complete(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = "for i in range(20000):\n    print(i)\n"
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.OK
    assert result.stdout == "".join(f"{i}\n" for i in range(20000)).encode()
    assert not result.stdout_truncated


async def test_os_exit_code(pool: Pool, python_image: str, policy: Policy) -> None:
    code = "import os\nprint('before', flush=True)\nos._exit(7)\nprint('never')\n"
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 7
    assert result.stdout == b"before\n"


async def test_exit_codes_wrap_like_python(pool: Pool, python_image: str, policy: Policy) -> None:
    result = await run_python(pool, python_image, policy, "import sys\nsys.exit(256 + 5)\n")
    assert result.exit_code == 5
    result = await run_python(pool, python_image, policy, "import sys\nsys.exit(-1)\n")
    assert result.exit_code == 255


async def test_keyboard_interrupt_ends_by_sigint(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    result = await run_python(pool, python_image, policy, "raise KeyboardInterrupt\n")
    assert result.status == ExecStatus.SIGNAL
    assert result.signal == 2
    assert result.exit_code is None
    assert result.stderr.decode().rstrip().endswith("KeyboardInterrupt")


async def test_random_numbers_differ_between_runs(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import os, random, uuid\n"
        "print(random.random(), random.getrandbits(64), uuid.uuid4(), os.urandom(8).hex())\n"
    )
    first = await run_python(pool, python_image, policy, code)
    second = await run_python(pool, python_image, policy, code)
    assert first.status == second.status == ExecStatus.OK
    a, b = first.stdout.split(), second.stdout.split()
    assert len(a) == len(b) == 4
    assert all(x != y for x, y in zip(a, b, strict=True)), (a, b)


PROBES = {
    "unittest_main": (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_ok(self):\n"
        "        self.assertEqual(1 + 1, 2)\n"
        "unittest.main(verbosity=0)\n"
    ),
    "multiprocessing_pool": (
        "import multiprocessing as mp\n"
        "def square(x):\n"
        "    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with mp.Pool(2) as p:\n"
        "        print(p.map(square, range(5)))\n"
    ),
    "pickle_main_class": (
        "import pickle\nclass A:\n    x = 1\nprint(pickle.loads(pickle.dumps(A())).x)\n"
    ),
    "inspect_source": (
        "import inspect\ndef f():\n    return 1\nprint(inspect.getsource(f), end='')\n"
    ),
    "warnings_show_source": "import warnings\nwarnings.warn('careful')\n",
    "exception_chain": (
        "try:\n    {}['k']\nexcept KeyError as e:\n    raise RuntimeError('wrapped') from e\n"
    ),
    "stream_setup": (
        "import sys\n"
        "print(sys.stdout.encoding, sys.stdout.errors, sys.stdin.encoding,\n"
        "      sys.stdout.line_buffering, sys.stderr.line_buffering, sys.flags.optimize)\n"
    ),
    "subprocess_env": (
        "import subprocess, sys\n"
        "out = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"HOME\"])'],\n"
        "                     capture_output=True, text=True)\n"
        "print(out.stdout.strip(), out.returncode)\n"
    ),
    # What a fresh interpreter has imported, and its environment (but the variable that
    # sends the real run down the exec path)
    "modules_and_environment": (
        "import os, sys\n"
        "print(sorted(sys.modules))\n"
        "print(sorted(k for k in os.environ if k != 'PYTHONNOUSERSITE'))\n"
    ),
    "keyboard_interrupt_in_function": (
        "def f():\n    raise KeyboardInterrupt\nprint('x', flush=True)\nf()\n"
    ),
}


@pytest.mark.parametrize("name", sorted(PROBES))
async def test_fast_path_is_indistinguishable_from_python3(
    pool: Pool, python_image: str, policy: Policy, name: str
) -> None:
    code = PROBES[name]
    fast = await run_python(pool, python_image, policy, code)
    real = await run_python(pool, python_image, policy, code, env=REAL_PYTHON_ENV)
    assert observed(fast) == observed(real)


async def test_local_module_shadowing_a_preloaded_stdlib_name(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = "import resource\nprint(resource.LIMITS)\n"
    files = {"resource.py": "LIMITS = {'cpu': 1}\n"}
    real = await run_python(pool, python_image, policy, code, files=files, env=REAL_PYTHON_ENV)
    assert real.stdout == b"{'cpu': 1}\n"  # what python3 main.py does
    fast = await run_python(pool, python_image, policy, code, files=files)
    assert observed(fast) == observed(real)


async def test_a_local_module_named_like_the_runner_is_the_users(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = "import runner\nprint(runner.MINE)\n"
    files = {"runner.py": "MINE = 'the user module'\n"}
    fast = await run_python(pool, python_image, policy, code, files=files)
    assert fast.status == ExecStatus.OK, fast.stderr
    assert fast.stdout == b"the user module\n"


async def test_python_env_variable_falls_back_to_exec_and_works(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import sys\n"
        "assert False, 'asserts are stripped under -O'\n"
        "print(sys.flags.optimize, sys.orig_argv, sys.argv)\n"
    )
    result = await run_python(
        pool, python_image, policy, code, args=["x"], env={**BASE_ENV, "PYTHONOPTIMIZE": "1"}
    )
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"1 ['python3', 'main.py', 'x'] ['main.py', 'x']\n"
    # Without the variable the fast path runs: asserts are live.
    fast = await run_python(pool, python_image, policy, code, args=["x"])
    assert fast.status == ExecStatus.NONZERO_EXIT
    assert b"AssertionError: asserts are stripped under -O" in fast.stderr


async def test_pythonpath_is_honoured_on_the_fast_path(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = "import sys, extra_mod\nprint(extra_mod.X, sys.path[:2])\n"
    result = await run_python(
        pool,
        python_image,
        policy,
        code,
        files={"lib/extra_mod.py": "X = 'found'\n"},
        env={**BASE_ENV, "PYTHONPATH": "/workspace/lib"},
    )
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"found ['/workspace', '/workspace/lib']\n"


# --------------------------------------------------------------------------------------
# Other programs, output and files
# --------------------------------------------------------------------------------------


async def test_bash_via_argv(
    pool: Pool, python_image: str, policy: Policy, limits: ExecLimits
) -> None:
    async with pool.lease(python_image, policy, TENANT) as lease:
        result = await lease.sandbox.exec(
            ["bash", "-c", 'echo "$0|$1|$PWD|$(id -u)"; echo oops >&2; exit 4', "zero", "one"],
            limits=limits,
            env=BASE_ENV,
        )
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 4
    assert result.stdout == b"zero|one|/workspace|10001\n"
    assert result.stderr == b"oops\n"


async def test_bash_language_through_the_service(service: ExecutionService) -> None:
    result = await service.run(
        RunRequest(
            language="bash",
            code='read name\necho "hello $name from $0 $1"\n',
            args=["arg1"],
            stdin="world\n",
            policy="semantics",
        ),
        tenant=TENANT,
    )
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"hello world from main.sh arg1\n"


async def test_missing_command_raises_not_found_and_keeps_the_sandbox(
    pool: Pool, python_image: str, policy: Policy, limits: ExecLimits
) -> None:
    async with pool.lease(python_image, policy, TENANT) as lease:
        first_id = lease.sandbox.id
        with pytest.raises(NotFoundError, match="no-such-command"):
            await lease.sandbox.exec(["no-such-command", "x"], limits=limits, env=BASE_ENV)
        # The runner answered cleanly: the same sandbox keeps working.
        after = await lease.sandbox.exec(["true"], limits=limits, env=BASE_ENV)
        assert after.status == ExecStatus.OK
    async with pool.lease(python_image, policy, TENANT) as lease:
        assert lease.sandbox.id == first_id


async def test_stdout_and_stderr_are_separate_and_bytes_exact(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    out_bytes = b"\xff\xfe\x00binary\x80\n\xc3\x28"
    err_bytes = b"\xed\xa0\x80 not utf-8 \xff"
    code = (
        "import sys\n"
        f"sys.stdout.buffer.write({out_bytes!r})\n"
        "sys.stdout.buffer.flush()\n"
        f"sys.stderr.buffer.write({err_bytes!r})\n"
        "print('text out')\n"
        "print('text err', file=sys.stderr)\n"
    )
    result = await run_python(pool, python_image, policy, code)
    assert result.status == ExecStatus.OK
    assert result.stdout == out_bytes + b"text out\n"
    assert result.stderr == err_bytes + b"text err\n"
    assert not result.stdout_truncated and not result.stderr_truncated


async def test_stdout_cap_gives_output_limit_and_truncated(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    limits = exec_limits(policy, LimitOverrides(stdout_bytes=1000, wall_time_s=3.0))
    code = (
        "import sys\n"
        "sys.stdout.write('x' * 5000)\n"
        "sys.stdout.flush()\n"
        "print('done', file=sys.stderr)\n"
    )
    result = await run_python(pool, python_image, policy, code, limits=limits)
    assert result.status == ExecStatus.OUTPUT_LIMIT
    assert result.stdout_truncated is True
    assert result.stdout == b"x" * 1000
    assert result.reason == "output"

    # Exactly the cap is not an overflow.
    exact = await run_python(
        pool, python_image, policy, "import sys\nsys.stdout.write('y' * 1000)\n", limits=limits
    )
    assert exact.status == ExecStatus.OK
    assert exact.stdout == b"y" * 1000
    assert exact.stdout_truncated is False


async def test_stderr_cap_gives_output_limit_and_truncated(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    limits = exec_limits(policy, LimitOverrides(stderr_bytes=300))
    code = "import sys\nsys.stderr.write('e' * 4000)\n"
    result = await run_python(pool, python_image, policy, code, limits=limits)
    assert result.status == ExecStatus.OUTPUT_LIMIT
    assert result.stderr_truncated is True
    assert result.stdout_truncated is False
    assert result.stderr == b"e" * 300


FETCH_SETUP = (
    "import os\n"
    "open('out.txt', 'wb').write(b'result\\x00\\xff')\n"
    "os.makedirs('sub/dir')\n"
    "open('sub/dir/deep.txt', 'w').write('deep')\n"
    "os.symlink('/etc/passwd', 'link_to_passwd')\n"
    "os.symlink('out.txt', 'link_to_out')\n"
    "os.symlink('/etc', 'etc_link')\n"
    "os.mkfifo('fifo')\n"
)


async def test_fetching_files_back(pool: Pool, python_image: str, policy: Policy) -> None:
    fetch = [
        "out.txt",
        "sub/dir/deep.txt",
        "link_to_passwd",
        "link_to_out",
        "etc_link/passwd",
        "../etc/passwd",
        "sub/../out.txt",
        "/etc/passwd",
        "missing.txt",
        "fifo",
        "sub",
    ]
    started = time.monotonic()
    result = await run_python(pool, python_image, policy, FETCH_SETUP, fetch=fetch)
    assert time.monotonic() - started < 5  # the FIFO did not block the read-back
    assert result.status == ExecStatus.OK, result.stderr
    assert result.files == {"out.txt": b"result\x00\xff", "sub/dir/deep.txt": b"deep"}
    errors = result.file_errors
    assert errors["link_to_passwd"] == "symlink refused"
    assert errors["link_to_out"] == "symlink refused"
    assert errors["etc_link/passwd"] == "symlink refused"
    assert errors["../etc/passwd"] == "invalid path"
    assert errors["sub/../out.txt"] == "invalid path"
    assert errors["/etc/passwd"] == "invalid path"
    assert errors["missing.txt"] == "not found"
    assert errors["fifo"] == "not a regular file"
    assert errors["sub"] == "not a regular file"
    assert set(errors) == set(fetch) - set(result.files)


def test_requests_refuse_climbing_fetch_paths() -> None:
    """Refused when the request is validated (a 422 naming the field), before any run."""
    for path in ("../etc/passwd", "/etc/passwd", "a/../../b"):
        with pytest.raises(ValidationError, match="fetch_files"):
            RunRequest(code="print(1)", policy="semantics", fetch_files=[path])


async def test_service_fetches_a_regular_file(service: ExecutionService) -> None:
    result = await service.run(
        RunRequest(
            code="open('answer.txt', 'w').write('42')\nimport os\nos.symlink('/etc/shadow', 's')\n",
            policy="semantics",
            fetch_files=["answer.txt", "s"],
        ),
        tenant=TENANT,
    )
    assert result.status == ExecStatus.OK, result.stderr
    assert result.files == {"answer.txt": b"42"}
    assert result.file_errors == {"s": "symlink refused"}


# --------------------------------------------------------------------------------------
# Resource usage and limits
# --------------------------------------------------------------------------------------


async def test_resource_usage_is_reported(pool: Pool, python_image: str, policy: Policy) -> None:
    burn = (
        "import time\n"
        "end = time.process_time() + 0.6\n"
        "while time.process_time() < end:\n"
        "    pass\n"
        "data = bytearray(40 * 1024 * 1024)\n"
        "data[::4096] = b'x' * len(data[::4096])\n"
    )
    result = await run_python(pool, python_image, policy, burn)
    assert result.status == ExecStatus.OK, result.stderr
    assert 0.5 <= result.usage.cpu_s <= 1.6, result.usage
    assert result.usage.wall_s >= result.usage.cpu_s * 0.9
    assert result.usage.peak_memory_bytes is not None
    assert result.usage.peak_memory_bytes >= 40 * 1024 * 1024

    sleeper = await run_python(pool, python_image, policy, "import time\ntime.sleep(0.4)\n")
    assert sleeper.status == ExecStatus.OK
    assert sleeper.usage.wall_s >= 0.4
    assert sleeper.usage.cpu_s < 0.3


async def test_lowered_wall_time_is_enforced(pool: Pool, python_image: str, policy: Policy) -> None:
    limits = exec_limits(policy, LimitOverrides(wall_time_s=1.0))
    assert limits.wall_s == 1.0
    started = time.monotonic()
    result = await run_python(
        pool, python_image, policy, "import time\ntime.sleep(30)\n", limits=limits
    )
    elapsed = time.monotonic() - started
    assert result.status == ExecStatus.TIMEOUT
    assert result.reason == "wall_time"
    assert 1.0 <= result.usage.wall_s < 2.5
    assert elapsed < 4.0


async def test_lowered_cpu_time_is_enforced(pool: Pool, python_image: str, policy: Policy) -> None:
    limits = exec_limits(policy, LimitOverrides(cpu_time_s=0.5))
    result = await run_python(pool, python_image, policy, "while True:\n    pass\n", limits=limits)
    assert result.status == ExecStatus.TIMEOUT
    assert result.usage.wall_s < 3.0
    assert result.usage.cpu_s >= 0.4


async def test_lowered_memory_is_enforced(pool: Pool, python_image: str, policy: Policy) -> None:
    limits = exec_limits(policy, LimitOverrides(memory_mb=64))
    assert limits.memory_bytes == 64 * 1024 * 1024
    code = (
        "import time\n"
        "chunks = []\n"
        "for i in range(100):\n"
        "    chunks.append(b'x' * (4 * 1024 * 1024))\n"
        "    time.sleep(0.02)\n"
        "print('survived', len(chunks) * 4, 'MiB')\n"
    )
    result = await run_python(pool, python_image, policy, code, limits=limits)
    assert result.status == ExecStatus.MEMORY_LIMIT, (result.stdout, result.stderr)
    assert b"survived" not in result.stdout
    assert result.usage.wall_s < 4.0


async def test_lowered_open_files_and_file_size(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    limits = exec_limits(policy, LimitOverrides(open_files=32, file_size_mb=1))
    code = (
        "import errno, resource\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
        "handles = []\n"
        "try:\n"
        "    for i in range(100):\n"
        "        handles.append(open('/dev/null'))\n"
        "except OSError as e:\n"
        "    print('open', errno.errorcode[e.errno])\n"
        "for h in handles:\n"
        "    h.close()\n"
        "try:\n"
        "    with open('big', 'wb') as f:\n"
        "        f.write(b'x' * (2 * 1024 * 1024))\n"
        "except OSError as e:\n"
        "    print('write', errno.errorcode[e.errno])\n"
    )
    result = await run_python(pool, python_image, policy, code, limits=limits)
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"(32, 32)\nopen EMFILE\nwrite EFBIG\n"


async def test_raising_a_limit_is_refused(policy: Policy, service: ExecutionService) -> None:
    for overrides in (
        LimitOverrides(wall_time_s=policy.resources.wall_time_s + 1),
        LimitOverrides(memory_mb=policy.resources.memory_mb * 2),
        LimitOverrides(stdout_bytes=policy.resources.stdout_bytes + 1),
        LimitOverrides(open_files=policy.resources.open_files + 1),
    ):
        with pytest.raises(LimitError, match="exceeds policy"):
            exec_limits(policy, overrides)
        with pytest.raises(LimitError):
            await service.run(
                RunRequest(code="print(1)", policy="semantics", limits=overrides), tenant=TENANT
            )
    # Equal to the policy is fine.
    same = exec_limits(policy, LimitOverrides(wall_time_s=policy.resources.wall_time_s))
    assert same.wall_s == policy.resources.wall_time_s


async def test_service_applies_lowered_limits(service: ExecutionService) -> None:
    result = await service.run(
        RunRequest(
            code="import time\nprint('start', flush=True)\ntime.sleep(20)\n",
            policy="semantics",
            limits=LimitOverrides(wall_time_s=1.0),
        ),
        tenant=TENANT,
    )
    assert result.status == ExecStatus.TIMEOUT
    assert result.stdout == b"start\n"
    assert result.usage.wall_s < 2.5


# One program for every case of exec_cases: what a case finds tells whether it ran alone.
CASE_PROBE = """
import builtins, os, subprocess, sys, time
case = sys.stdin.read().strip()
left = [p for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}/cmdline")
        and b"sleep" in open(f"/proc/{p}/cmdline", "rb").read()]
print(case, hasattr(builtins, "MARKED"), os.path.exists("note.txt"), len(left), flush=True)
builtins.MARKED = True  # in this interpreter only, if each case has its own
if case == "write":
    open("note.txt", "w").write("from the first case")
elif case == "daemon":
    subprocess.Popen(["sleep", "300"], start_new_session=True)
elif case == "hang":
    time.sleep(30)
"""


@pytest.mark.parametrize("output_cap_kb", [64, 4096], ids=["one request", "a request per case"])
async def test_cases_in_one_request_run_as_separate_executions(
    pool: Pool, python_image: str, policy: Policy, output_cap_kb: int
) -> None:
    """``exec_cases``: one request to the runner (or, with output caps too large for one
    reply, several), each case its own process with its own stdin and wall limit, leftovers
    killed before the next, the files written once, results in order; the same outcomes as
    one ``exec`` per case."""
    caps = {"stdout_bytes": output_cap_kb << 10, "stderr_bytes": output_cap_kb << 10}
    limits = exec_limits(policy, LimitOverrides(wall_time_s=1.0)).model_copy(update=caps)
    stdins = [b"write", b"daemon", b"hang", b"after", b"last"]
    async with pool.lease(python_image, policy, TENANT) as lease:
        runs = await lease.sandbox.exec_cases(
            ["python3", "main.py"],
            stdins,
            limits=limits,
            env=dict(BASE_ENV),
            files={"main.py": CASE_PROBE.encode()},
            reset_after=True,
        )
    assert [run.status for run in runs] == [
        ExecStatus.OK,
        ExecStatus.OK,
        ExecStatus.TIMEOUT,
        ExecStatus.OK,
        ExecStatus.OK,
    ], runs
    assert runs[2].reason == "wall_time" and 1.0 <= runs[2].usage.wall_s < 2.5, runs[2]
    # No case sees another's interpreter, nor the daemon once its case is over; the
    # workspace carries over, as it does from one exec to the next within a lease.
    assert [run.stdout for run in runs] == [
        b"write False False 0\n",
        b"daemon False True 0\n",
        b"hang False True 0\n",
        b"after False True 0\n",
        b"last False True 0\n",
    ]
    async with pool.lease(python_image, policy, TENANT) as lease:
        one_by_one = [
            await lease.sandbox.exec(
                ["python3", "main.py"],
                limits=limits,
                stdin=stdin,
                env=dict(BASE_ENV),
                files={"main.py": CASE_PROBE.encode()} if not index else None,
            )
            for index, stdin in enumerate(stdins)
        ]
    assert [observed(run) for run in one_by_one] == [observed(run) for run in runs]
    # stop_on_failure: no case runs after the first that does not exit 0.
    async with pool.lease(python_image, policy, TENANT) as lease:
        stopped = await lease.sandbox.exec_cases(
            ["python3", "main.py"],
            [b"write", b"hang", b"after"],
            limits=limits,
            env=dict(BASE_ENV),
            files={"main.py": CASE_PROBE.encode()},
            stop_on_failure=True,
        )
    assert [run.status for run in stopped] == [ExecStatus.OK, ExecStatus.TIMEOUT], stopped
