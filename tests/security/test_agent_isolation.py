"""A ``tests.command`` runs the agent's programs as the sandbox uid: each way to the hidden tests.

Each route task asks for ``rev.py`` (reverse each line of stdin); its hidden
``check.sh`` runs the agent's program and compares with ``expected.txt``, next
to it in ``/judge/tests``. Its attack is a ``rev.py`` (or a link the agent
plants) that reads ``expected.txt`` one way: by name in the test's directory
(the issue's own example, ``python3 "$WORK/rev.py" < input.txt``), by absolute
path, climbing ``../tests``, through a descriptor the test left open, through
``/proc/PID/cwd`` or the environment, a link in the workspace the test follows.

By default (the agent's code isolated) the reference passes and every attack
fails. With ``isolate_agent: false`` (the deliberately vulnerable opt-out) every
attack passes, which shows each route is real, and ``sandbox quality check``'s
read-expected probe flags every such task, while it holds on the isolated ones.
Real containers (runc and gVisor for the routes; runc for the probe), the real
evaluator and the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox.cli import main
from sandbox.core.sessions import SessionSpec
from sandbox.evals import ReplayAgent, load_tasks, run_eval
from sandbox.evals.tasks import TaskError, load_task
from sandbox.quality import CheckSettings, run_check
from sandbox.quality.progress import QualityProgress
from sandbox.service.platform import Platform

pytestmark = pytest.mark.docker

TASK_YAML = """\
instruction: "rev.py reads lines on stdin and prints each reversed; write it."
category: planted
policy: {policy}
agent:
  timeout_s: 60
  max_steps: 10
tests:
  command: "bash check.sh"
  timeout_s: 30
"""
STUB = "raise SystemExit('not written yet')\n"
REFERENCE = "import sys\n\nfor line in sys.stdin:\n    print(line.rstrip('\\n')[::-1])\n"
INPUT = "hello world\nsandbox\n"
EXPECTED = "dlrow olleh\nxobdnas\n"
COMPARE = '[ "$out" = "$(cat expected.txt)" ]\n'
RUN = "out=$(agent-run python3 rev.py < input.txt) && " + COMPARE


def _leak(expression: str) -> str:
    """An attack rev.py printing what ``expression`` reads."""
    return f"import os, sys\n\nsys.stdout.write({expression})\n"


# route: (check.sh, the agent's attack: files it writes, a shell command it runs)
ROUTES: dict[str, tuple[str, dict[str, str], str]] = {
    # The issue's example, word for word: the judge's cwd holds the answer.
    "cwd": (
        'out=$(python3 "$WORK/rev.py" < input.txt) && ' + COMPARE,
        {"rev.py": _leak("open('expected.txt').read()")},
        "",
    ),
    "absolute": (RUN, {"rev.py": _leak("open('/judge/tests/expected.txt').read()")}, ""),
    "relative": (RUN, {"rev.py": _leak("open('../tests/expected.txt').read()")}, ""),
    "fd": (
        "exec 7< expected.txt\n" + RUN,
        {"rev.py": _leak("os.pread(7, 1 << 16, 0).decode()")},
        "",
    ),
    "proc-cwd": (
        RUN,
        {
            "rev.py": "import os, sys\n\nfor pid in os.listdir('/proc'):\n"
            "    try:\n        sys.stdout.write(open(f'/proc/{pid}/cwd/expected.txt').read())\n"
            "        break\n    except OSError:\n        pass\n"
        },
        "",
    ),
    "environ": (
        'export EXPECTED_OUTPUT="$(cat expected.txt)"\n' + RUN,
        {"rev.py": _leak("os.environ.get('EXPECTED_OUTPUT', '')")},
        "",
    ),
    # The test reads the agent's result.txt, straight from /workspace when it can.
    "symlink": (
        "agent-run python3 rev.py < input.txt > /dev/null\n"
        "out=$(cat /workspace/result.txt 2>/dev/null || agent-run cat result.txt) && " + COMPARE,
        {"rev.py": "pass\n"},
        "ln -s /judge/tests/expected.txt result.txt",
    ),
}
SYMLINK_REFERENCE = REFERENCE.replace("print(", "open('result.txt', 'a').write(").replace(
    "[::-1])", "[::-1] + '\\n')"
)


def _make_task(
    root: Path, route: str, *, isolate: bool, prefix: str = "", policy: str = "default"
) -> Path:
    check, _, _ = ROUTES[route]
    task = root / f"{prefix}{route}-{'isolated' if isolate else 'opt-out'}"
    for folder in ("files", "solution", "tests"):
        (task / folder).mkdir(parents=True)
    yaml = TASK_YAML.format(policy=policy) + ("" if isolate else "  isolate_agent: false\n")
    (task / "task.yaml").write_text(yaml)
    (task / "files" / "rev.py").write_text(STUB)
    (task / "solution" / "rev.py").write_text(
        SYMLINK_REFERENCE if route == "symlink" else REFERENCE
    )
    (task / "tests" / "check.sh").write_text(check)
    (task / "tests" / "input.txt").write_text(INPUT)
    (task / "tests" / "expected.txt").write_text(EXPECTED)
    return task


def _actions(files: dict[str, str], command: str) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = [
        {"tool": "write_file", "args": {"path": p, "content": c}} for p, c in files.items()
    ]
    if command:
        actions.append({"tool": "shell", "args": {"command": command}})
    return actions


async def _trials(
    platform: Platform, tmp_path: Path, *, isolate: bool, policy: str
) -> dict[str, str]:
    """Each route's reference and attack as evaluator trials; their outcomes by name."""
    tasks, scripts = tmp_path / "tasks", tmp_path / "scripts"
    scripts.mkdir(parents=True)
    for route, (_, attack, command) in ROUTES.items():
        reference = SYMLINK_REFERENCE if route == "symlink" else REFERENCE
        for prefix, files, shell in (("", {"rev.py": reference}, ""), ("attack:", attack, command)):
            task = _make_task(
                tasks, route, isolate=isolate, prefix=prefix.replace(":", "-"), policy=policy
            )
            lines = "".join(json.dumps(a) + "\n" for a in _actions(files, shell))
            (scripts / f"{task.name}.jsonl").write_text(lines)
    loaded = load_tasks(tasks)
    summary = await run_eval(
        loaded,
        ReplayAgent(scripts),
        sessions=platform.sessions,
        policies=platform.policies,
        out=tmp_path / "out",
        concurrency=4,
        progress=False,
        available_images=platform.images,
    )
    return {record["task"]: record["outcome"] for record in summary.records}


@pytest.mark.parametrize("policy", ["default", "gvisor"])
@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "opt-out"])
async def test_each_route_to_the_hidden_tests(
    platform: Platform, tmp_path: Path, isolate: bool, policy: str
) -> None:
    """Isolated, every attack fails; the opt-out (the positive control) lets each pass."""
    outcomes = await _trials(platform, tmp_path, isolate=isolate, policy=policy)
    mode = "isolated" if isolate else "opt-out"
    for route in ROUTES:
        assert outcomes[f"{route}-{mode}"] == "passed", (route, outcomes)
        # gVisor does not let even the same uid through another process's /proc/PID/cwd.
        closed = isolate or (policy == "gvisor" and route == "proc-cwd")
        attack = "failed" if closed else "passed"
        assert outcomes[f"attack-{route}-{mode}"] == attack, (route, outcomes)


# The loss was gVisor's (a pipe's readiness after the program's exit): many runs there.
RUNS = {"default": 10, "gvisor": 60}
REPEATED = """
bad=0
for i in $(seq {runs}); do
  out=$(agent-run python3 rev.py < input.txt)
  [ "$out" = "$(cat expected.txt)" ] || {{ bad=$((bad + 1)); echo "run $i: [$out]" >&2; }}
done
echo "missed $bad"
"""


@pytest.mark.parametrize("policy", ["default", "gvisor"])
async def test_agent_run_brings_back_every_byte_every_time(platform: Platform, policy: str) -> None:
    """``agent-run``'s output is whole on every call: its server once lost a program's output
    now and then under gVisor (a pipe's readiness reported after the program had exited)."""
    spec = SessionSpec(policy=policy, files={"rev.py": REFERENCE})
    session = await platform.sessions.create(spec, tenant="agent-run")
    try:
        result = await platform.sessions.run_hidden_tests(
            session.id,
            {"input.txt": INPUT.encode(), "expected.txt": EXPECTED.encode()},
            command=REPEATED.format(runs=RUNS[policy]),
            timeout_s=240,
            tenant="agent-run",
        )
    finally:
        await platform.sessions.close(session.id, tenant="agent-run")
    assert result.stdout.decode().strip() == "missed 0", result.stderr.decode()[-2000:]


async def test_the_probe_flags_every_route_only_with_the_opt_out(
    platform: Platform, tmp_path: Path
) -> None:
    paths = [
        _make_task(tmp_path / mode, route, isolate=mode == "isolated")
        for route in ROUTES
        for mode in ("isolated", "opt-out")
    ]
    report = await run_check(
        paths,
        CheckSettings(concurrency=6, runs=1, probes=("read-expected",)),
        platform=platform,
        progress=QualityProgress(enabled=False),
    )
    for item in report.items:
        holes = {f.probe for f in item.findings if f.severity == "loophole"}
        assert item.references and all(r.passed for r in item.references), item.findings
        if item.key.endswith("opt-out"):
            assert "read-expected" in holes, (item.key, [f.message for f in item.findings])
        else:
            assert not item.failing, (item.key, [f.message for f in item.findings])
            assert item.probes["read-expected"].passed is False, item.key


def test_the_cli_flags_the_issues_example_with_the_opt_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _make_task(tmp_path, "cwd", isolate=False)
    code = main(
        [
            "quality",
            "check",
            str(task),
            "--runs",
            "1",
            "--probes",
            "read-expected",
            "--no-progress",
            "--out",
            str(tmp_path / "report"),
        ]
    )
    out = capsys.readouterr().out
    assert code != 0, out
    assert "read-expected" in out and "loophole" in out, out


def test_the_opt_out_is_refused_where_it_means_nothing(tmp_path: Path) -> None:
    task = _make_task(tmp_path, "cwd", isolate=False)
    yaml = (task / "task.yaml").read_text().replace('command: "bash check.sh"', "framework: pytest")
    (task / "task.yaml").write_text(yaml)
    with pytest.raises(TaskError) as refused:
        load_task(task)
    assert refused.value.key == "tests" and "'isolate_agent' applies to a 'command'" in str(
        refused.value
    )
