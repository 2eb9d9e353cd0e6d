"""The agent evaluator end to end on real sandboxes: tasks, agents, outcomes, resume, gate, report.

The tiny tasks in ``tests/data/tasks`` (a Python bug fix judged by pytest, a
bash CLI with a set-up, a shell data task judged by a plain script whose
workspace needs an executable bit) run in real sessions on a private,
in-process platform, or through ``sandbox eval`` as a subprocess. The
OpenAI-compatible agent talks to a scripted chat-completions server this file
starts on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sandbox.evals import (
    NullAgent,
    OracleAgent,
    ReplayAgent,
    TaskError,
    compare_runs,
    load_task,
    load_tasks,
    run_eval,
    summarize,
    write_reports,
)
from sandbox.evals.agents import Agent
from sandbox.evals.runner import RunSummary, read_results
from sandbox.service.platform import Platform
from tests.conftest import REPO, SANDBOX_BIN

pytestmark = pytest.mark.docker

TASKS = REPO / "tests" / "data" / "tasks"
TASK_IDS = ["count-errors", "fix-add", "greet-cli"]


async def run(
    platform: Platform,
    agent: Agent,
    out: Path,
    *,
    tasks: Path = TASKS,
    epochs: int = 1,
    concurrency: int = 3,
) -> RunSummary:
    return await run_eval(
        load_tasks(tasks),
        agent,
        sessions=platform.sessions,
        policies=platform.policies,
        out=out,
        epochs=epochs,
        concurrency=concurrency,
        progress=False,
        available_images=platform.images,
    )


def outcomes(summary: RunSummary) -> dict[tuple[str, int], str]:
    return {(r["task"], r["epoch"]): r["outcome"] for r in summary.records}


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    return subprocess.run(
        [str(SANDBOX_BIN), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
async def oracle_run(platform: Platform, tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    return await run(platform, OracleAgent(), tmp_path_factory.mktemp("oracle"), epochs=2)


@pytest.fixture(scope="module")
async def null_run(platform: Platform, tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    return await run(platform, NullAgent(), tmp_path_factory.mktemp("null"), epochs=2)


# ------------------------------------------------------------------------------ scores


async def test_oracle_scores_everything(oracle_run: RunSummary) -> None:
    assert outcomes(oracle_run) == {(t, e): "passed" for t in TASK_IDS for e in (0, 1)}
    metrics = summarize(oracle_run.records)
    assert metrics["pass_rate"] == 1.0 and metrics["pass_hat_k"]["2"] == 1.0
    record = next(r for r in oracle_run.records if r["task"] == "fix-add")
    assert record["tests"]["report"] == {
        "tests": 2,
        "passed": 2,
        "failures": 0,
        "errors": 0,
        "skipped": 0,
    }
    # The trajectory: start, ready, the oracle's steps, done, end.
    trail = events(oracle_run.out / record["trajectory"])
    assert [e["type"] for e in trail] == ["start", "ready", "step", "step", "end"]
    write = trail[2]
    assert write["tool"] == "write_files" and "return a + b" in write["args"]["files"]["calc.py"]
    assert write["duration_s"] >= 0 and write["observation"].startswith("wrote")
    assert trail[3]["tool"] == "done" and trail[-1]["outcome"] == "passed"
    # The shell-judged task ran solve.sh after its set-up ran prepare.sh (an executable).
    solve = events(oracle_run.out / "trajectories" / "count-errors" / "epoch-0.jsonl")[2]
    assert solve["tool"] == "shell" and solve["exit_code"] == 0


async def test_null_agent_scores_nothing(null_run: RunSummary) -> None:
    assert outcomes(null_run) == {(t, e): "failed" for t in TASK_IDS for e in (0, 1)}
    assert summarize(null_run.records)["pass_rate"] == 0.0
    fix_add = next(r for r in null_run.records if r["task"] == "fix-add")
    assert fix_add["tests"]["report"]["failures"] == 2 and fix_add["steps"] == 0


async def test_replays(platform: Platform, oracle_run: RunSummary, tmp_path: Path) -> None:
    # The oracle's own recorded trajectories, replayed: every task passes again.
    right = await run(platform, ReplayAgent(oracle_run.out), tmp_path / "right")
    assert set(outcomes(right).values()) == {"passed"}
    # A recorded wrong fix fails.
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(
        json.dumps({"tool": "read_file", "args": {"path": "calc.py"}})
        + "\n"
        + json.dumps(
            {
                "tool": "write_file",
                "args": {"path": "calc.py", "content": "def add(a, b):\n    return a * b\n"},
            }
        )
        + "\n"
    )
    failed = await run(platform, ReplayAgent(wrong), tmp_path / "wrong", tasks=TASKS / "fix-add")
    (record,) = failed.records
    assert record["outcome"] == "failed" and record["steps"] == 2
    assert record["tests"]["report"]["failures"] == 2  # 2 * 3 != 5 and -4 * 1 != -3
    trail = events(failed.out / record["trajectory"])
    assert "return a - b" in trail[2]["observation"]  # what the agent read


async def test_every_outcome(platform: Platform, tmp_path: Path) -> None:
    """Budget, wall time, hanging tests, a broken set-up and an early exit, in one run."""
    tasks, scripts = tmp_path / "tasks", tmp_path / "scripts"
    scripts.mkdir()
    fix_add = (TASKS / "fix-add" / "task.yaml").read_text()

    def variant(name: str, yaml_text: str, actions: list[dict[str, Any]]) -> None:
        shutil.copytree(TASKS / "fix-add", tasks / name)
        (tasks / name / "task.yaml").write_text(yaml_text)
        (scripts / f"{name}.jsonl").write_text("".join(json.dumps(a) + "\n" for a in actions))

    def shell(command: str) -> dict[str, Any]:
        return {"tool": "shell", "args": {"command": command}}

    def write(content: str) -> dict[str, Any]:
        return {"tool": "write_file", "args": {"path": "calc.py", "content": content}}

    variant("budget", fix_add.replace("max_steps: 10", "max_steps: 2"), [shell("true")] * 3)
    variant(
        "slow",
        fix_add.replace("timeout_s: 60", "timeout_s: 2"),
        [shell("sleep 8"), shell("true")],
    )
    variant(
        "hang",
        fix_add.replace("timeout_s: 8", "timeout_s: 2"),
        [write("import time\ntime.sleep(60)\n")],
    )
    variant("broken", fix_add.replace("tags:", "setup: exit 3\ntags:"), [])
    # Exiting 0 at import, before the harness sends its report, is not a pass.
    variant("exit-hack", fix_add, [write("import os\nos._exit(0)\n")])
    # The hidden tests are nowhere while the agent works.
    variant("peek", fix_add, [shell("find / -name 'test_calc.py' 2>/dev/null | wc -l")])
    started = time.monotonic()
    summary = await run(
        platform, ReplayAgent(scripts), tmp_path / "out", tasks=tasks, concurrency=6
    )
    elapsed = time.monotonic() - started
    by_task = {r["task"]: r for r in summary.records}
    assert {t: r["outcome"] for t, r in by_task.items()} == {
        "budget": "budget_exhausted",
        "slow": "agent_timeout",
        "hang": "test_timeout",
        "broken": "infra_error",
        "exit-hack": "failed",
        "peek": "failed",
    }
    peek = events(summary.out / by_task["peek"]["trajectory"])
    assert peek[2]["observation"].startswith("exit_code: 0\n[stdout]\n0\n")
    assert by_task["budget"]["steps"] == 2
    # The sleep was cut at the agent's deadline, not left to run its 8 s.
    assert by_task["slow"]["agent_s"] < 5
    assert "exit 3" in by_task["broken"]["error"] and by_task["broken"]["score"] is None
    assert "no report came on the channel" in by_task["exit-hack"]["tests"]["reason"]
    assert by_task["hang"]["tests"]["status"] == "timeout"
    metrics = summarize(summary.records)
    assert metrics["infra_errors"] == 1 and metrics["scored_trials"] == 5
    assert metrics["pass_rate"] == 0.0
    assert elapsed < 40


async def test_a_forged_junit_report_is_not_a_pass(platform: Platform, tmp_path: Path) -> None:
    forge = (
        "import os\n"
        "with open('/judge/report.xml', 'w') as f:\n"
        '    f.write(\'<testsuite tests="1"><testcase name="t"/></testsuite>\')\n'
        "os._exit(0)\n"
    )
    script = tmp_path / "forge.jsonl"
    script.write_text(
        json.dumps({"tool": "write_file", "args": {"path": "calc.py", "content": forge}}) + "\n"
    )
    summary = await run(platform, ReplayAgent(script), tmp_path / "out", tasks=TASKS / "fix-add")
    record = summary.records[0]
    assert record["outcome"] == "failed"
    assert record["tests"]["exit_code"] == 0  # the forger did exit 0 ...
    assert "no report came on the channel" in record["tests"]["reason"]  # ... to no avail


# ------------------------------------------------------------------------------ OpenAI agent


class ScriptedModel:
    """A chat-completions server on 127.0.0.1 answering with scripted tool calls."""

    FIXED = "def add(a, b):\n    return a + b\n"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.failed_once = False
        self.answers = [
            self._calls([("list_dir", {"path": "."}), ("read_file", {"path": "calc.py"})], 50, 5),
            self._calls([("write_file", {"path": "calc.py", "content": self.FIXED})], 60, 6),
            self._calls(
                [("shell", {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"})], 70, 7
            ),
            {
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Fixed add()."},
                    }
                ],
                "usage": {"prompt_tokens": 80, "completion_tokens": 8, "total_tokens": 88},
            },
        ]
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                model.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": "no such path"})
                elif not model.failed_once:
                    model.failed_once = True  # the client must retry this
                    self._send(503, {"error": "overloaded"}, {"Retry-After": "0"})
                else:
                    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                    self._send(200, model.answers[min(turn, len(model.answers) - 1)])

            def _send(
                self, status: int, payload: Any, headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def _calls(
        calls: list[tuple[str, dict[str, Any]]], prompt: int, completion: int
    ) -> dict[str, Any]:
        return {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call-{prompt}-{i}",
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)},
                            }
                            for i, (name, args) in enumerate(calls)
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    model = ScriptedModel()
    yield model
    model.close()


def test_openai_agent_end_to_end(scripted_model: ScriptedModel, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = cli(
        "eval",
        "run",
        str(TASKS / "fix-add"),
        "--agent",
        "openai",
        "--model",
        "scripted-1",
        "--base-url",
        scripted_model.url,
        "--api-key-env",
        "EVAL_TEST_KEY",
        "--temperature",
        "0.5",
        "--seed",
        "7",
        "--price-prompt-per-1k",
        "0.5",
        "--price-completion-per-1k",
        "2",
        "--out",
        str(out),
        env={"EVAL_TEST_KEY": "sk-test-123", "SANDBOX_STATE_DIR": str(tmp_path / "state")},
    )
    assert done.returncode == 0, done.stderr
    (record,) = read_results(out / "results.jsonl")
    assert record["outcome"] == "passed", record
    # What the agent sent: one 503 retried, then four turns, each with the tool schema.
    requests = scripted_model.requests
    assert len(requests) == 5
    for body, headers in zip(requests, scripted_model.headers, strict=True):
        assert body["model"] == "scripted-1"
        assert body["temperature"] == 0.5 and body["seed"] == 7
        assert headers["Authorization"] == "Bearer sk-test-123"
        tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
        assert set(tools) == {"shell", "read_file", "write_file", "list_dir", "done"}
        assert tools["write_file"]["parameters"]["required"] == ["path", "content"]
        assert tools["shell"]["parameters"]["properties"]["command"]["type"] == "string"
    assert requests[0] == requests[1]  # the retry repeats the same request
    last = requests[-1]["messages"]
    assert [m["role"] for m in last] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last[1]["content"].startswith("`calc.py` in the workspace")
    assert last[4]["tool_call_id"] == "call-50-1" and "return a - b" in last[4]["content"]
    assert "calc.py (" in last[3]["content"]  # the listing
    assert last[8]["content"].startswith("exit_code: 0") and "\n5" in last[8]["content"]
    # Tokens from `usage`, summed; steps counted.
    assert record["tokens"] == {"prompt_tokens": 260, "completion_tokens": 26, "total_tokens": 286}
    assert record["model_calls"] == 4 and record["steps"] == 4
    # Their cost at the prices given: 0.5 per 1k prompt tokens, 2 per 1k completion tokens.
    assert record["cost"] == pytest.approx((260 * 0.5 + 26 * 2) / 1000)
    # Every step recorded with its action, observation, timing and tokens.
    trail = events(out / record["trajectory"])
    models = [e for e in trail if e["type"] == "model"]
    steps = [e for e in trail if e["type"] == "step"]
    assert [m["tokens"]["total_tokens"] for m in models] == [55, 66, 77, 88]
    assert [m["cost"] for m in models] == [
        pytest.approx(
            (m["tokens"]["prompt_tokens"] * 0.5 + m["tokens"]["completion_tokens"] * 2) / 1000
        )
        for m in models
    ]
    assert models[0]["attempts"] == 2 and models[1]["attempts"] == 1
    assert [s["tool"] for s in steps] == ["list_dir", "read_file", "write_file", "shell", "done"]
    assert [s["tokens"] and s["tokens"]["total_tokens"] for s in steps[:4]] == [55, None, 66, 77]
    assert all(s["duration_s"] >= 0 and "observation" in s for s in steps[:4])
    assert steps[3]["exit_code"] == 0 and steps[4]["args"]["message"] == "Fixed add()."
    # The key is nowhere in what the run wrote.
    for path in out.rglob("*"):
        if path.is_file():
            assert "sk-test-123" not in path.read_text(errors="replace"), path
    report = json.loads((out / "report.json").read_text())
    assert report["metrics"]["usage"]["total_tokens"] == 286
    assert report["metrics"]["usage"]["cost"] == pytest.approx(record["cost"])


# ------------------------------------------------------------------------------ resume


def test_resume_after_kill_loses_and_repeats_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "SANDBOX_STATE_DIR": str(tmp_path / "state")}
    args = [
        str(SANDBOX_BIN),
        "eval",
        "run",
        str(TASKS),
        "--agent",
        "oracle",
        "--epochs",
        "4",
        "--concurrency",
        "1",
        "--out",
        str(out),
    ]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_bytes().splitlines()) >= 4:
            break
        assert first.poll() is None, first.communicate()
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    before = read_results(results)
    assert 4 <= len(before) < 12
    # Simulate a record torn by the kill: a half-written last line.
    with results.open("ab") as handle:
        handle.write(b'{"task": "fix-add", "epoch": 3, "outc')
    second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"resuming; {len(before)} trial(s) already finished" in second.stderr
    after = read_results(results)
    trials = Counter((r["task"], r["epoch"]) for r in after)
    assert set(trials) == {(t, e) for t in TASK_IDS for e in range(4)}  # nothing lost
    assert max(trials.values()) == 1  # nothing repeated
    assert after[: len(before)] == before  # the first run's records were kept as they were
    ran = re.findall(r"^\[\d+/12\] ", second.stderr, flags=re.MULTILINE)
    assert len(ran) == 12 - len(before)  # only the missing trials ran
    meta = json.loads((out / "run.json").read_text())
    assert len(meta["invocations"]) == 2
    assert all(r["outcome"] == "passed" for r in after)
    # Every trajectory was written by exactly one finished trial.
    for task, epoch in trials:
        trail = events(out / "trajectories" / task / f"epoch-{epoch}.jsonl")
        assert [e["type"] for e in trail].count("start") == 1 and trail[-1]["type"] == "end"
    # A different agent may not resume into the same directory.
    refused = cli("eval", "run", str(TASKS), "--agent", "null", "--out", str(out), env=env)
    assert refused.returncode == 2 and "holds a run of agent 'oracle'" in refused.stderr


# ------------------------------------------------------------------------------ the gate


async def test_gate(
    platform: Platform, oracle_run: RunSummary, null_run: RunSummary, tmp_path: Path
) -> None:
    rerun = await run(platform, OracleAgent(), tmp_path / "rerun", epochs=2)
    planted = cli("eval", "compare", str(oracle_run.out), str(null_run.out))
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "verdict: REGRESSION" in planted.stdout
    assert compare_runs(oracle_run.out, null_run.out).p_regression == pytest.approx(1 / 216)
    quiet = cli("eval", "compare", str(oracle_run.out), str(rerun.out))
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "verdict: no significant change" in quiet.stdout
    # Report JSONs work as inputs too, and --json gives the machine-readable answer.
    write_reports(oracle_run.out)
    write_reports(null_run.out)
    as_json = cli(
        "eval",
        "compare",
        str(oracle_run.out / "report.json"),
        str(null_run.out / "report.json"),
        "--json",
    )
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["regression"] is True


# ------------------------------------------------------------------------------ report


def test_html_report_is_self_contained(null_run: RunSummary, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    done = cli("eval", "report", str(null_run.out), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert "pass rate 0.0%" in done.stdout
    text = page.read_text()
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    lowered = text.lower()
    for external in ("<script", "<link", "src=", "href=", "url(", "@import", "http:", "https:"):
        assert external not in lowered, external
    assert lowered.count("<svg") >= 4 and "<style>" in lowered
    for task in TASK_IDS:
        assert task in text
    report = json.loads((null_run.out / "report.json").read_text())
    assert report["metrics"]["pass_rate"] == 0.0 and report["run"]["complete"]


# ------------------------------------------------------------------------------ task loading


def test_tasks_are_validated_strictly(tmp_path: Path) -> None:
    def broken(name: str, yaml_text: str | None = None) -> Path:
        task = tmp_path / name
        shutil.copytree(TASKS / "fix-add", task)
        if yaml_text is not None:
            (task / "task.yaml").write_text(yaml_text)
        return task

    with pytest.raises(TaskError, match=r"task\.yaml: agent\.max_step: unknown key"):
        load_task(broken("typo", "instruction: x\nagent: {max_step: 3}\n"))
    with pytest.raises(TaskError, match=r"task\.yaml: difficulty: got 'trivial'"):
        load_task(broken("level", "instruction: x\ndifficulty: trivial\n"))
    with pytest.raises(TaskError, match=r"task\.yaml: instruction: is required"):
        load_task(broken("empty", "category: x\n"))
    with pytest.raises(TaskError, match="duplicate key"):
        load_task(broken("twice", "instruction: x\ninstruction: y\n"))
    # A command that runs pytest or names a report would be judged by forgeable evidence.
    forgeable = "instruction: x\ntests: {command: 'python3 -m pytest --junitxml=r.xml .'}\n"
    with pytest.raises(TaskError, match=r"tests\.command: a command that runs pytest.*framework"):
        load_task(broken("forgeable", forgeable))
    both = "instruction: x\ntests: {framework: pytest, command: 'bash check.sh'}\n"
    with pytest.raises(TaskError, match=r"tests: give either 'framework: pytest'"):
        load_task(broken("both", both))
    assert load_task(broken("default", "instruction: x\n")).config.tests.pytest
    link = broken("link")
    (link / "files" / "escape").symlink_to("/etc/passwd")
    with pytest.raises(TaskError, match=r"files/escape: is a symbolic link"):
        load_task(link)
    no_tests = broken("no-tests")
    shutil.rmtree(no_tests / "tests")
    with pytest.raises(TaskError, match=r"tests: missing"):
        load_task(no_tests)
    stray = broken("stray")
    (stray / "notes.txt").write_text("x")
    with pytest.raises(TaskError, match=r"unexpected entry 'notes\.txt'"):
        load_task(stray)
    big = broken("big")
    (big / "files" / "huge.bin").write_bytes(b"\0" * (8 * 1024 * 1024 + 1))
    with pytest.raises(TaskError, match="at most 8388608 bytes"):
        load_task(big)
    (tmp_path / "set" / "not-a-task").mkdir(parents=True)
    with pytest.raises(TaskError, match=r"not-a-task: holds no task\.yaml"):
        load_tasks(tmp_path / "set")


async def test_model_calls_are_retried_on_429_5xx_and_transport_errors() -> None:
    import httpx

    from sandbox.evals.agents import AgentError, OpenAIAgent, OpenAIConfig

    answers: list[Any] = [
        httpx.Response(429, json={"error": "slow down"}, headers={"Retry-After": "0"}),
        httpx.ConnectError("refused"),
        httpx.Response(502, text="bad gateway"),
        httpx.Response(200, json={"choices": [{"message": {"role": "assistant"}}]}),
        httpx.Response(400, json={"error": "context too long"}),
    ]
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    config = OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", backoff_s=0.01, seed=1)
    agent = OpenAIAgent(config, transport=httpx.MockTransport(handle))
    try:
        body, attempts = await agent._complete([{"role": "user", "content": "hi"}])
        assert attempts == 4 and body["choices"][0]["message"]["role"] == "assistant"
        assert seen[0].url == "http://127.0.0.1:9/v1/chat/completions"
        with pytest.raises(AgentError, match="refused the request: HTTP 400"):
            await agent._complete([{"role": "user", "content": "hi"}])
        assert len(seen) == 5  # a 400 is not retried
    finally:
        await agent.aclose()
