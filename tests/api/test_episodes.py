"""``/v1/tasks`` and ``/v1/episodes`` over real HTTP: a scripted policy's tool calls get exactly
the sandbox's observations, and the hidden tests decide the reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.client import SandboxClient
from sandbox.errors import InvalidRequestError, NotFoundError
from sandbox.evals.catalog import HARBOR_SUITE as SHIPPED

from ..conftest import Service

pytestmark = pytest.mark.docker

TASK_YAML = """\
instruction: "value.txt holds a number; write that number plus one to answer.txt."
agent:
  timeout_s: 60
  max_steps: 4
tests:
  command: '[ "$(agent-run cat answer.txt)" = "$(( $(cat value.txt) + 1 ))" ]'
  timeout_s: 30
"""


def make_task(root: Path, value: int) -> Path:
    task = root / f"plus-one-{value}"
    for folder in ("files", "tests", "solution"):
        (task / folder).mkdir(parents=True)
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "files" / "value.txt").write_text(f"{value}\n")
    (task / "tests" / "value.txt").write_text(f"{value}\n")
    (task / "solution" / "answer.txt").write_text(f"{value + 1}\n")
    return task


@pytest.fixture(scope="module")
def client(service: Service) -> SandboxClient:
    with SandboxClient(service.url) as c:
        yield c


def test_a_scripted_episode_sees_the_sandbox_and_the_tests_decide(
    client: SandboxClient, tmp_path: Path
) -> None:
    uploaded = client.upload_task(make_task(tmp_path, 41))
    assert uploaded.task.startswith("upload:") and uploaded.id == "plus-one-41"
    assert client.upload_task(make_task(tmp_path / "again", 41)).task == uploaded.task

    rewards = []
    for answer in ("42", "7"):
        episode = client.open_episode(uploaded.task)
        assert episode.instruction.startswith("value.txt holds")
        assert {t["function"]["name"] for t in episode.tools} == {
            "shell",
            "read_file",
            "write_file",
            "done",
        }
        seen = client.episode_step(episode.id, "shell", {"command": "cat value.txt; ls"})
        assert seen.observation.splitlines()[:3] == ["exit_code: 0", "[stdout]", "41"]
        # the previous episode's answer.txt is not here: each is a fresh copy of the snapshot
        assert "answer.txt" not in seen.observation
        wrote = client.episode_step(
            episode.id, "write_file", json.dumps({"path": "answer.txt", "content": answer})
        )
        assert wrote.observation == f"wrote {len(answer)} bytes to answer.txt"
        assert client.episode_step(episode.id, "done").done
        result = client.judge_episode(episode.id)
        assert client.judge_episode(episode.id) == result
        rewards.append((result.outcome, result.reward))
        client.close_episode(episode.id)
    assert rewards == [("passed", 1.0), ("failed", 0.0)]


def test_the_budget_ends_an_episode_and_mistakes_are_observations(
    client: SandboxClient, tmp_path: Path
) -> None:
    task = client.upload_task(make_task(tmp_path, 1)).task
    episode = client.open_episode(task, max_steps=2)
    assert client.episode_step(episode.id, "rm_rf", {}).observation.startswith(
        "error: unknown tool"
    )
    last = client.episode_step(episode.id, "read_file", {"path": "nope.txt"})
    assert last.observation.startswith("error:") and last.steps_left == 0 and last.done
    over = client.episode_step(episode.id, "shell", {"command": "true"})
    assert over.done and "over" in over.observation and over.steps == 2
    assert client.judge_episode(episode.id).outcome == "failed"
    with pytest.raises(NotFoundError):
        client.open_episode("upload:" + "0" * 64)
    # a refused upload names the file in the task as the client knows it
    bad = make_task(tmp_path / "bad", 2)
    (bad / "task.yaml").write_text(TASK_YAML + "tests_typo: 1\n")
    with pytest.raises(InvalidRequestError, match=r"^plus-one-2/task.yaml: .*tests_typo"):
        client.upload_task(bad)


def test_a_shipped_harbor_task_is_an_episode_rewarded_by_its_reward_file(
    client: SandboxClient,
) -> None:
    shipped = {t.task: t for t in client.tasks()}
    assert {"shell-quoting", "cli-calc"} <= set(shipped)
    solve = (SHIPPED / "shell-quoting" / "solution" / "solve.sh").read_text()
    rewards = []
    for command in (solve, "true"):
        episode = client.open_episode("shell-quoting")
        ran = client.episode_step(episode.id, "shell", {"command": command})
        assert ran.observation.startswith("exit_code: 0"), ran.observation
        result = client.judge_episode(episode.id)
        rewards.append((result.outcome, result.reward, (result.tests or {}).get("reward")))
    assert rewards == [("passed", 1.0, 1.0), ("failed", 0.0, 0.0)]
