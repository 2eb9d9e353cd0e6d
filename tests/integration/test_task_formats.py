"""Harbor and Terminal-Bench tasks run and judged on real sandboxes, and the reward file attacked.

The tasks in ``tests/data/formats`` map onto the built-in python image (a
Dockerfile that only copies files over ``sandbox-python``, or ``docker_image =
"sandbox-python"``), but tb-count-level, built for its ``RUN``; count-words'
separate verifier has an image of its own (``tests/Dockerfile``, built). On an
in-process platform the oracle passes them, the null agent fails them. Then an
agent tries every way to plant a reward before the verifier runs, and verifiers
write their reward file in hostile shapes (a link, a FIFO, oversized, missing, a
partial reward): the runner, which reads the file itself, must refuse each and
never hang.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sandbox.evals import NullAgent, OracleAgent
from sandbox.evals.agents import Agent, Tools, TrialContext
from sandbox.evals.formats import load_task, load_tasks
from sandbox.evals.formats.export import SUITE, export_harbor
from sandbox.evals.tasks import Task
from sandbox.evals.tasks import load_tasks as own_load_tasks
from sandbox.quality import CheckSettings, run_check
from sandbox.quality.progress import QualityProgress
from sandbox.service.platform import Platform
from tests.conftest import REPO, SANDBOX_BIN, harbor_bin
from tests.integration.eval_runs import by_task, run_tasks

pytestmark = pytest.mark.docker

FORMATS = REPO / "tests" / "data" / "formats"


def formats_tasks() -> list[Task]:
    return load_tasks(FORMATS / "harbor") + load_tasks(FORMATS / "terminal-bench")


async def test_oracle_passes_and_null_fails_both_formats(
    platform: Platform, tmp_path: Path
) -> None:
    tasks = formats_tasks()
    assert {t.format for t in tasks} == {"harbor", "terminal-bench"}
    oracle = by_task(await run_tasks(platform, tasks, OracleAgent(), tmp_path / "oracle"))
    null = by_task(await run_tasks(platform, tasks, NullAgent(), tmp_path / "null"))
    for task in tasks:
        assert oracle[task.id]["outcome"] == "passed", oracle[task.id]["tests"]
        assert oracle[task.id]["tests"]["reward"] == 1.0
        assert null[task.id]["outcome"] == "failed", null[task.id]["tests"]
    # reward.json: its "reward" entry is the reward, the other entries are kept.
    assert oracle["count-words"]["tests"]["rewards"] == {"reward": 1.0, "formatted": 1.0}
    assert null["count-words"]["tests"]["reward"] == 0.0
    # count-words' separate verifier ran in its tests/Dockerfile's own image (which alone
    # holds the expected count), given the agent's /app: built once, found cached after.
    built = [
        oracle["count-words"]["verifier_environment"],
        null["count-words"]["verifier_environment"],
    ]
    assert [b["image"].startswith("sandbox-env:") for b in built] == [True, True]
    assert built[0]["id"] == built[1]["id"] and built[1]["cached"] is True
    assert "verifier_environment" not in oracle["fix-greeting"]
    # tb-count-level's Dockerfile has a RUN: built by the environment builder.
    assert oracle["tb-count-level"]["environment"]["image"].startswith("sandbox-env:")
    # [verifier.env] reached the tests, which ran from the copy of the working directory.
    assert "2 passed" in oracle["fix-greeting"]["tests"]["stdout_tail"]


class PlantingAgent(Agent):
    """Solves nothing; plants a reward of 1 wherever it can, and leaves a process trying."""

    name = "planter"

    def __init__(self) -> None:
        self.observations: dict[str, list[str]] = {}

    async def run(self, trial: TrialContext, tools: Tools) -> None:
        attempts = [
            "mkdir -p /judge/logs/verifier && echo 1 > /judge/logs/verifier/reward.txt",
            "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
            "mkdir -p logs/verifier && echo 1 > logs/verifier/reward.txt && "
            "echo '{\"reward\": 1}' > logs/verifier/reward.json && echo 1 > reward.txt",
            "mkdir -p /tmp/logs/verifier && echo 1 > /tmp/logs/verifier/reward.txt",
            "ln -s /judge/logs/verifier/reward.txt planted-link && mkfifo /workspace/reward.json",
            # More than a separate verifier is handed (64 MiB): judged without it, not dropped.
            "head -c 70000000 /dev/zero > padding",
            # A process that outlives the agent, racing to write the reward while tests run.
            "nohup bash -c 'while true; do mkdir -p /judge/logs/verifier 2>/dev/null; "
            "echo 1 > /judge/logs/verifier/reward.txt 2>/dev/null; sleep 0.05; done' "
            ">/dev/null 2>&1 &",
        ]
        seen = self.observations.setdefault(trial.task_id, [])
        for command in attempts:
            seen.append(await tools.shell(command))
        tools.done("planted")


async def test_a_reward_planted_by_the_agent_never_counts(
    platform: Platform, tmp_path: Path
) -> None:
    tasks = [
        load_task(FORMATS / "harbor" / "fix-greeting"),
        load_task(FORMATS / "harbor" / "count-words"),
    ]
    agent = PlantingAgent()
    records = by_task(await run_tasks(platform, tasks, agent, tmp_path / "planted"))
    for record in records.values():
        assert record["outcome"] == "failed", (record["error"], record["tests"])
        assert record["tests"]["reward"] == 0.0
    notes = records["count-words"]["verifier_environment"]["notes"]
    assert any("not handed to the verifier" in note for note in notes), notes
    # The judge's space and the root are closed to the agent.
    for seen in agent.observations.values():
        assert "Permission denied" in seen[0], seen[0]
        # /logs: a tmpfs of the harbor policy that the verifier never reads (harmless).
        assert seen[1].startswith("exit_code: 0"), seen[1]
        assert seen[2].startswith("exit_code: 0"), seen[2]  # planted in the workspace: harmless


def _variant(tmp_path: Path, name: str, test_sh: str) -> Task:
    """fix-greeting with its own test.sh (the oracle solves it: only the verifier differs)."""
    target = tmp_path / name
    shutil.copytree(FORMATS / "harbor" / "fix-greeting", target)
    (target / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
    return load_task(target)


async def test_hostile_reward_files_are_refused(platform: Platform, tmp_path: Path) -> None:
    variants = {
        "link": "echo 1 > /tmp/one && ln -s /tmp/one /logs/verifier/reward.txt\n",
        "fifo": "mkfifo /logs/verifier/reward.txt\n",
        "dir-link": "rm -rf /logs/verifier && ln -s /tmp /logs/verifier && "
        "echo 1 > /tmp/reward.txt\n",
        "huge": "python3 -c \"print('1' + ' ' * 100000)\" > /logs/verifier/reward.txt\n",
        "none": "true\n",
        "partial": "echo '{\"reward\": 0.5}' > /logs/verifier/reward.json\n",
        "nan": "echo nan > /logs/verifier/reward.txt\n",
        "bool": "echo '{\"reward\": true}' > /logs/verifier/reward.json\n",
        "exit-status-ignored": "echo 1 > /logs/verifier/reward.txt; exit 3\n",
    }
    tasks = [_variant(tmp_path, name, script) for name, script in variants.items()]
    records = by_task(await run_tasks(platform, tasks, OracleAgent(), tmp_path / "hostile"))
    reasons = {name: str(records[name]["tests"]["reason"]) for name in variants}
    assert records["exit-status-ignored"]["outcome"] == "passed", records["exit-status-ignored"]
    assert records["exit-status-ignored"]["tests"]["exit_code"] == 3
    for name in set(variants) - {"exit-status-ignored"}:
        assert records[name]["outcome"] == "failed", (name, records[name]["tests"])
    assert "symlink" in reasons["link"]
    assert "not a regular file" in reasons["fifo"]
    assert "symlink" in reasons["dir-link"]
    assert "bytes" in reasons["huge"]
    assert "wrote no" in reasons["none"]
    assert records["partial"]["tests"]["reward"] == 0.5
    assert "below 1" in reasons["partial"]
    assert "not one finite number" in reasons["nan"]
    assert "not a finite number" in reasons["bool"]


async def test_a_task_whose_environment_needs_building_is_built_and_judged(
    platform: Platform, tmp_path: Path
) -> None:
    target = tmp_path / "needs-build"
    shutil.copytree(FORMATS / "harbor" / "fix-greeting", target)
    dockerfile = target / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN echo built > /opt/built-marker\n")
    task = load_task(target)
    assert task.environment is not None and task.environment.dockerfile == dockerfile
    record = by_task(await run_tasks(platform, [task], OracleAgent(), tmp_path / "built"))[task.id]
    assert record["outcome"] == "passed", (record["error"], record["tests"])
    assert record["environment"]["image"].startswith("sandbox-env:")


def test_the_exported_suite_passes_harbor_lint(tmp_path: Path) -> None:
    out = tmp_path / "harbor"
    done = subprocess.run(
        [str(SANDBOX_BIN), "tasks", "export", str(out), "--format", "harbor"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    exported = sorted(p.name for p in out.iterdir())
    assert exported == sorted(t.id for t in own_load_tasks(SUITE))
    lint = subprocess.run(
        [str(harbor_bin()), "lint", "--json", *(str(out / name) for name in exported)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert json.loads(lint.stdout) == []


async def test_exported_tasks_read_back_give_the_same_verdicts(
    platform: Platform, tmp_path: Path
) -> None:
    """The first task of each of the suite's categories, exported to Harbor's format and
    read back: the reference solution passes each and doing nothing fails each, as every
    original does (the quality gate, ``test_quality.py::test_shipped_tasks_are_clean``,
    runs both on the whole suite)."""
    suite = own_load_tasks(SUITE)
    first: dict[str, Task] = {}
    for task in suite:
        first.setdefault(task.config.category, task)
    assert set(first) == {t.config.category for t in suite} and len(first) >= 7
    export_harbor(list(first.values()), tmp_path / "harbor")
    imported = load_tasks(tmp_path / "harbor")
    assert {t.config.category: t.id for t in imported} == {c: t.id for c, t in first.items()}
    assert all(t.format == "harbor" and t.needs_own_environment is None for t in imported)
    for agent, verdict in ((OracleAgent(), "passed"), (NullAgent(), "failed")):
        summary = await run_tasks(platform, imported, agent, tmp_path / agent.name, concurrency=4)
        outcomes = {r["task"]: r["outcome"] for r in summary.records}
        assert outcomes == {t.id: verdict for t in imported}, summary.records


async def test_quality_check_reads_both_formats_and_reports_the_verifier(
    platform: Platform, tmp_path: Path
) -> None:
    needs_build = tmp_path / "needs-build"
    shutil.copytree(FORMATS / "harbor" / "fix-greeting", needs_build)
    with (needs_build / "environment" / "Dockerfile").open("a") as dockerfile:
        dockerfile.write("RUN echo built > /opt/built-marker\n")
    reads_tmp = tmp_path / "reads-tmp"
    shutil.copytree(FORMATS / "harbor" / "count-words", reads_tmp)
    (reads_tmp / "tests" / "test.sh").write_text(
        "#!/bin/bash\n[ -f /tmp/skip ] && echo 1 > /logs/verifier/reward.txt && exit 0\n"
        + (FORMATS / "harbor" / "count-words" / "tests" / "test.sh").read_text()
    )
    items = {}
    # Every probe where the test needs the whole library (fix-greeting's one loophole); the
    # others, whose point is their controls (judged by count-words' separate verifier) and
    # static findings, with forged-report alone (it applies to programs only).
    for paths, probes in (
        (
            [FORMATS / "harbor" / "fix-greeting", FORMATS / "terminal-bench" / "tb-sum-numbers"],
            None,
        ),
        ([FORMATS / "harbor" / "count-words", needs_build, reads_tmp], ("forged-report",)),
    ):
        report = await run_check(
            paths,
            CheckSettings(concurrency=4, runs=1, probes=probes),
            platform=platform,
            progress=QualityProgress(enabled=False),
        )
        items.update({item.key: item for item in report.items})
    assert not items["count-words"].failing, items["count-words"].findings
    assert items["count-words"].controls["empty"].passed is False
    assert items["tb-sum-numbers"].status == "ok", items["tb-sum-numbers"].findings
    # test_outputs.py runs the agent's greet.py as the judge uid: it writes the reward itself.
    greeting = items["fix-greeting"]
    assert greeting.status == "loophole"
    assert {f.probe for f in greeting.findings if f.severity == "loophole"} == {"forged-report"}
    # A RUN line: the environment builder builds it, and it is checked like the others.
    assert items["needs-build"].loaded, items["needs-build"].findings
    assert items["needs-build"].status != "broken", items["needs-build"].findings
    warned = [f for f in items["reads-tmp"].findings if f.check == "verifier"]
    assert warned and "/tmp" in warned[0].message, items["reads-tmp"].findings


def test_sandbox_eval_run_takes_both_formats(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for source in (
        FORMATS / "harbor" / "count-words",
        FORMATS / "terminal-bench" / "tb-sum-numbers",
    ):
        shutil.copytree(source, mixed / source.name)
    shutil.copytree(REPO / "tests" / "data" / "tasks" / "fix-add", mixed / "fix-add")
    out = tmp_path / "run"
    done = subprocess.run(
        [
            str(SANDBOX_BIN),
            "eval",
            "run",
            str(mixed),
            "--agent",
            "oracle",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["task"]: r["outcome"] for r in records} == dict.fromkeys(
        ["count-words", "tb-sum-numbers", "fix-add"], "passed"
    )
    meta = json.loads((out / "run.json").read_text())
    assert {t: m["format"] for t, m in meta["tasks"].items()} == {
        "count-words": "harbor",
        "tb-sum-numbers": "terminal-bench",
        "fix-add": "sandbox",
    }
