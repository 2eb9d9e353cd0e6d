"""The real ``sandbox`` console script, run as a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sandbox.core.pool import PoolStatus
from sandbox.policy import load_policy
from sandbox.results import RunResult
from tests.conftest import REPO, SANDBOX_BIN, Service, free_port

pytestmark = pytest.mark.docker

STRICT = "policies/strict.yaml"
TABLE_HEADER = ["POLICY", "IMAGE", "IDLE", "BUSY", "START", "RESET", "WAIT", "WARM", "MAX"]


def sandbox(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SANDBOX_BIN), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    path = tmp_path / "hello.py"
    path.write_text(
        "import sys\n"
        "print('hello from the sandbox')\n"
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    return path


# --------------------------------------------------------------------------- run


def test_run_prints_output_and_exits_with_program_code(hello: Path) -> None:
    proc = sandbox("run", hello, "--policy", STRICT)
    assert proc.stdout == "hello from the sandbox\n"
    assert "to stderr" in proc.stderr
    assert proc.returncode == 3
    no_traceback(proc)


def test_run_exit_zero(tmp_path: Path) -> None:
    path = tmp_path / "ok.py"
    path.write_text("print(2 ** 10)\n")
    proc = sandbox("run", path, "--policy", "strict")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "1024\n"


def test_run_json(hello: Path) -> None:
    proc = sandbox("run", hello, "--policy", STRICT, "--json")
    result = RunResult.model_validate_json(proc.stdout)
    assert result.status == "nonzero_exit"
    assert result.exit_code == 3
    assert result.stdout == "hello from the sandbox\n"
    assert result.stderr == "to stderr\n"
    assert proc.returncode == 3


def test_run_stdin(tmp_path: Path) -> None:
    program = tmp_path / "rev.py"
    program.write_text("import sys\nfor line in sys.stdin:\n    print(line.strip()[::-1])\n")
    data = tmp_path / "input.txt"
    data.write_text("abc\nhello\n")
    proc = sandbox("run", program, "--stdin", data, "--policy", STRICT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "cba\nolleh\n"


def test_run_args(tmp_path: Path) -> None:
    program = tmp_path / "args.py"
    program.write_text("import sys, json\nprint(json.dumps(sys.argv[1:]))\n")
    proc = sandbox("run", program, "first", "second arg", "--policy", STRICT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["first", "second arg"]


def test_run_shell_script(tmp_path: Path) -> None:
    script = tmp_path / "x.sh"
    script.write_text('echo "shell says $1"\nexit 5\n')
    proc = sandbox("run", script, "hi", "--policy", STRICT)
    assert proc.stdout == "shell says hi\n"
    assert proc.returncode == 5


def test_run_timeout_is_reported(tmp_path: Path) -> None:
    program = tmp_path / "spin.py"
    program.write_text("while True:\n    pass\n")
    proc = sandbox("run", program, "--policy", STRICT)
    assert proc.returncode == 1, proc.stderr
    assert "sandbox: timeout" in proc.stderr


def test_unknown_extension_needs_language(tmp_path: Path) -> None:
    program = tmp_path / "program.rb"
    program.write_text("puts 1\n")
    proc = sandbox("run", program, "--policy", STRICT)
    assert proc.returncode == 2
    assert "program.rb" in proc.stderr
    assert "--language" in proc.stderr
    assert proc.stdout == ""
    no_traceback(proc)


def test_explicit_language_overrides_extension(tmp_path: Path) -> None:
    program = tmp_path / "program.txt"
    program.write_text("print('python after all')\n")
    proc = sandbox("run", program, "--language", "python", "--policy", STRICT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "python after all\n"


def test_unknown_language_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "program.txt"
    program.write_text("x\n")
    proc = sandbox("run", program, "--language", "cobol", "--policy", STRICT)
    assert proc.returncode == 2
    assert "cobol" in proc.stderr
    no_traceback(proc)


def test_unknown_policy_is_refused(hello: Path) -> None:
    proc = sandbox("run", hello, "--policy", "no-such-policy")
    assert proc.returncode == 2
    assert "no-such-policy" in proc.stderr
    no_traceback(proc)


def test_run_through_the_service(hello: Path, service: Service, tmp_path: Path) -> None:
    data = tmp_path / "in.txt"
    data.write_text("x")
    proc = sandbox("run", hello, "a", "--url", service.url, "--stdin", data)
    assert proc.stdout == "hello from the sandbox\n"
    assert proc.returncode == 3
    proc = sandbox("run", hello, "--url", service.url, "--json", "--policy", "strict")
    assert RunResult.model_validate_json(proc.stdout).exit_code == 3


def test_run_through_unreachable_service(hello: Path) -> None:
    proc = sandbox("run", hello, "--url", f"http://127.0.0.1:{free_port()}")
    assert proc.returncode == 2
    assert "cannot reach" in proc.stderr
    no_traceback(proc)


@pytest.mark.parametrize("which", ["program", "stdin"])
def test_missing_file_is_a_clean_error(hello: Path, tmp_path: Path, which: str) -> None:
    missing = tmp_path / "does-not-exist.py"
    if which == "program":
        proc = sandbox("run", missing, "--policy", STRICT)
    else:
        proc = sandbox("run", hello, "--stdin", missing, "--policy", STRICT)
    assert proc.returncode == 2
    assert "does-not-exist.py" in proc.stderr
    no_traceback(proc)


def test_run_passes_binary_stdout_through(tmp_path: Path) -> None:
    program = tmp_path / "bin.py"
    program.write_text("import sys\nsys.stdout.buffer.write(b'A\\xff\\xfeB')\n")
    proc = subprocess.run(
        [str(SANDBOX_BIN), "run", str(program), "--policy", STRICT],
        cwd=REPO,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"A\xff\xfeB"


@pytest.mark.parametrize("via", ["local", "service"])
def test_run_stderr_is_the_programs_only(hello: Path, service: Service, via: str) -> None:
    extra = ["--url", service.url] if via == "service" else []
    proc = sandbox("run", hello, "--policy", "strict", *extra)
    assert proc.returncode == 3
    assert proc.stderr == "to stderr\n"


# --------------------------------------------------------------------------- policy check


def test_policy_check_shipped_policies() -> None:
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "policies").glob("*.yaml"))
    assert len(files) >= 3
    proc = sandbox("policy", "check", *files)
    assert proc.returncode == 0, proc.stderr
    ok_lines = [line for line in proc.stdout.splitlines() if line.startswith("ok: ")]
    assert len(ok_lines) == len(files)
    for name in files:
        assert any(line.startswith(f"ok: {name} ") for line in ok_lines), proc.stdout
    assert "policy 'strict'" in proc.stdout
    assert proc.stderr == "" or "refused" not in proc.stderr


BAD_POLICIES = {
    "unknown key": ("resources:\n  memory_mb: 256\n  memroy_mb: 1\n", "resources.memroy_mb"),
    "duplicate key": ("pool:\n  warm: 1\n  warm: 2\n", "pool.warm"),
    "privileged": ("privileged: true\n", "privileged"),
    "python tag": ("resources: !!python/object:os.system\n  memory_mb: 1\n", "resources"),
    "python apply tag": (
        "resources:\n  memory_mb: !!python/object/apply:os.system ['touch /tmp/pwned-by-policy']\n",
        "resources.memory_mb",
    ),
    "root uid": ("user:\n  uid: 0\n", "user.uid"),
    "string for int": ("resources:\n  memory_mb: '512'\n", "resources.memory_mb"),
}


@pytest.mark.parametrize("case", sorted(BAD_POLICIES))
def test_policy_check_refuses_bad_files(tmp_path: Path, case: str) -> None:
    text, key = BAD_POLICIES[case]
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    proc = sandbox("policy", "check", bad)
    assert proc.returncode == 2
    assert str(bad) in proc.stderr
    assert f"{key}:" in proc.stderr, proc.stderr
    assert "ok:" not in proc.stdout
    no_traceback(proc)
    assert not Path("/tmp/pwned-by-policy").exists()


def test_policy_check_mixed_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("network:\n  mode: host\n")
    proc = sandbox("policy", "check", "policies/default.yaml", bad)
    assert proc.returncode == 2
    assert "ok: policies/default.yaml" in proc.stdout
    assert str(bad) in proc.stderr
    assert "network.mode" in proc.stderr


def test_policy_check_missing_file(tmp_path: Path) -> None:
    proc = sandbox("policy", "check", tmp_path / "nope.yaml")
    assert proc.returncode == 2
    assert "nope.yaml" in proc.stderr
    no_traceback(proc)


# --------------------------------------------------------------------------- pool status


def test_pool_status_table(service: Service) -> None:
    proc = sandbox("pool", "status", "--url", service.url)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == TABLE_HEADER
    rows = [line.split() for line in lines[1:]]
    assert all(len(row) == len(TABLE_HEADER) for row in rows), proc.stdout
    (row,) = [r for r in rows if r[0] == "default" and r[1].startswith("sandbox-python:")]
    shipped = load_policy(REPO / "policies" / "default.yaml").pool
    assert row[7:] == [str(shipped.warm), str(shipped.max)]
    assert all(cell.isdigit() for cell in row[2:])


def test_pool_status_json(service: Service) -> None:
    proc = sandbox("pool", "status", "--url", service.url, "--json")
    assert proc.returncode == 0, proc.stderr
    status = PoolStatus.model_validate_json(proc.stdout)
    assert "default" in {g.policy for g in status.groups}
    assert status.max_waiting > 0


def test_pool_status_unreachable() -> None:
    proc = sandbox("pool", "status", "--url", f"http://127.0.0.1:{free_port()}")
    assert proc.returncode == 2
    assert "cannot reach" in proc.stderr
    no_traceback(proc)
