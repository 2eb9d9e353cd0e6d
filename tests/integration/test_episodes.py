"""Episodes on a real platform: a sandbox that dies mid-episode gives no verdict (reward None),
never a 0; sessions are copies of one task snapshot and none outlives its episode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import docker
import pytest

from sandbox.evals.episodes import EpisodeManager
from sandbox.evals.formats import load_task
from sandbox.evals.tasks import Task
from sandbox.service.platform import Platform

from ..api.test_episodes import make_task

pytestmark = pytest.mark.docker

TENANT = "episodes"


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return load_task(make_task(tmp_path, 6))


@pytest.fixture
async def manager(platform: Platform) -> EpisodeManager:
    manager = EpisodeManager(platform.sessions)
    yield manager
    await manager.close_all()


def _container(platform: Platform, session_id: str) -> str:
    return platform.sessions.get(session_id, tenant=TENANT).lease.sandbox.id


async def test_a_container_killed_mid_episode_gives_no_verdict(
    platform: Platform, manager: EpisodeManager, task: Task, docker_client: docker.DockerClient
) -> None:
    episode = await manager.open(task, tenant=TENANT)
    first = await manager.step(episode.id, "shell", {"command": "cat value.txt"}, tenant=TENANT)
    assert first.observation.splitlines()[2] == "6" and not first.done
    await asyncio.to_thread(
        docker_client.containers.get(_container(platform, episode.session_id)).kill
    )
    after = await manager.step(
        episode.id, "shell", {"command": "echo 7 > answer.txt"}, tenant=TENANT
    )
    assert after.done and "the sandbox failed" in after.observation
    result = await manager.judge(episode.id, tenant=TENANT)
    assert (result.outcome, result.reward, result.passed) == ("infra_error", None, None)
    assert "mid-episode" in (result.error or "")
    assert platform.sessions.sessions_of(TENANT) == []


async def test_a_container_killed_before_judging_gives_no_verdict(
    platform: Platform, manager: EpisodeManager, task: Task, docker_client: docker.DockerClient
) -> None:
    episode = await manager.open(task, tenant=TENANT)
    await manager.step(
        episode.id, "write_file", {"path": "answer.txt", "content": "7"}, tenant=TENANT
    )
    await asyncio.to_thread(
        docker_client.containers.get(_container(platform, episode.session_id)).kill
    )
    result = await manager.judge(episode.id, tenant=TENANT)
    assert (result.outcome, result.reward) == ("infra_error", None)
    # a healthy episode of the same task, after, still passes: the snapshot is intact
    again = await manager.open(task, tenant=TENANT)
    await manager.step(
        again.id, "write_file", {"path": "answer.txt", "content": "7"}, tenant=TENANT
    )
    assert (await manager.judge(again.id, tenant=TENANT)).reward == 1.0


async def test_a_reaped_session_is_judged_infra_and_concurrent_episodes_share_one_snapshot(
    platform: Platform, manager: EpisodeManager, task: Task
) -> None:
    reaped = await manager.open(task, tenant=TENANT)
    await platform.sessions.close(reaped.session_id, tenant=TENANT)  # as the idle reaper does
    snapshots_before = len(platform.sessions.snapshots.snapshots_of(TENANT))
    episodes = await asyncio.gather(*(manager.open(task, tenant=TENANT) for _ in range(6)))
    assert len(platform.sessions.snapshots.snapshots_of(TENANT)) == snapshots_before
    assert manager.get(reaped.id, tenant=TENANT).done
    assert (await manager.judge(reaped.id, tenant=TENANT)).reward is None

    async def solve(episode_id: str, answer: str) -> float | None:
        await manager.step(
            episode_id, "write_file", {"path": "answer.txt", "content": answer}, tenant=TENANT
        )
        return (await manager.judge(episode_id, tenant=TENANT)).reward

    answers = ["7", "8"] * 3
    rewards = await asyncio.gather(
        *(solve(e.id, a) for e, a in zip(episodes, answers, strict=True))
    )
    assert rewards == [1.0, 0.0] * 3
    assert platform.sessions.sessions_of(TENANT) == []
