"""The agentic demo's learning, simulated in memory: how many episodes a config needs, per seed.

Not a benchmark of the platform: the real trainer (``AgentTrainer``: sampling,
masks, ``grpo_updates``, evaluation) plays the demo's tasks
(:mod:`sandbox.rl.demo_tasks`), but the service's episode API is a dictionary
(``read_file``/``write_file`` of the workspace, the hidden test's comparison,
the step budget), so thousands of episodes take seconds. This is how the demo's
config was chosen (the README's "What was tried"); what the real service
measures is ``make demo-agent``.

    python bench/demo_agent_sim.py [--seeds 0 1 2] [--blank] [--episodes 5000]
        [--config sandbox/rl/configs/demo-agent.yaml] [--set grpo.group_size=16 ...]

prints, per seed, the training episodes until the held-out pass rate reached
the config's target (or the last rate), and the policy's read rate then.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import yaml

from sandbox.rl import rollouts
from sandbox.rl.agentic import AgentTrainer
from sandbox.rl.config import TrainConfig
from sandbox.rl.demo_tasks import write_demo_tasks

REPO = Path(__file__).resolve().parent.parent


class EpisodesInMemory:
    """The episode API of ``AsyncSandboxClient``, over workspaces held in dictionaries."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[dict[str, str], str, str]] = {}
        self.episodes: dict[str, dict[str, Any]] = {}

    async def upload_task(self, path: Path) -> SimpleNamespace:
        files = {f.name: f.read_text() for f in (path / "files").iterdir()}
        expected = (path / "tests" / "v").read_text()  # the test: `a` holds what v holds
        instruction = yaml.safe_load((path / "task.yaml").read_text())["instruction"]
        ref = f"upload:{uuid.uuid4().hex}"
        self.tasks[ref] = (files, expected, instruction)
        return SimpleNamespace(task=ref, id=path.name)

    async def open_episode(self, task: str, **budget: Any) -> SimpleNamespace:
        files, expected, instruction = self.tasks[task]
        episode = uuid.uuid4().hex
        self.episodes[episode] = {
            "files": dict(files),
            "expected": expected,
            "steps": 0,
            "max_steps": budget["max_steps"],
        }
        return SimpleNamespace(id=episode, instruction=instruction)

    async def episode_step(
        self, episode: str, tool: str, arguments: dict[str, Any]
    ) -> SimpleNamespace:
        state = self.episodes[episode]
        if state["steps"] >= state["max_steps"]:
            spent = f"error: the agent used all {state['max_steps']} steps; the episode is over"
            return SimpleNamespace(observation=spent, done=True)
        state["steps"] += 1
        files, path = state["files"], arguments.get("path", "")
        if tool == "read_file":
            observation = files.get(path, f"error: {path}: not found")
        elif tool == "write_file":
            files[path] = arguments["content"]
            observation = f"wrote {len(arguments['content'].encode())} bytes to {path}"
        else:
            observation = f"exit_code: 127\n[stdout] (empty)\n[stderr]\nsh: 1: {tool}: not found"
        return SimpleNamespace(observation=observation, done=state["steps"] >= state["max_steps"])

    async def judge_episode(self, episode: str) -> SimpleNamespace:
        state = self.episodes[episode]
        passed = state["files"].get("a", "").rstrip("\n") == state["expected"].rstrip("\n")
        return SimpleNamespace(
            reward=float(passed), outcome="passed" if passed else "failed", error=None
        )

    async def close_episode(self, episode: str) -> None:
        self.episodes.pop(episode, None)

    async def aclose(self) -> None:
        return None


async def _in_memory(url: str, key: str | None) -> EpisodesInMemory:
    return EpisodesInMemory()


def run(data: dict[str, Any], seed: int, episodes: int, blank: bool) -> dict[str, Any]:
    """One training run of the config ``data`` (a mapping) with ``seed``; what it reached."""
    with tempfile.TemporaryDirectory() as scratch:
        train, held_out = write_demo_tasks(Path(scratch) / "tasks")
        data = data | {"out_dir": scratch, "seed": seed, "time_budget_s": None}
        data["agent"] = data["agent"] | {
            "tasks": [str(train)],
            "held_out": [str(held_out)],
            "blank_observations": blank,
        }
        grpo = data["grpo"]
        data["steps"] = max(1, episodes // (grpo["group_size"] * grpo["prompts_per_step"]))
        trainer = AgentTrainer(TrainConfig.model_validate(data))
        try:
            history = trainer.train()
        finally:
            trainer.close()
    steps = [m for m in history.metrics if m["step"] > 0]
    last = next(m for m in reversed(history.metrics) if "held_out_pass_rate" in m)
    return {
        "seed": seed,
        "episodes": sum(m["episodes"] for m in steps if m["step"] <= last["step"]),
        "held_out": round(last["held_out_pass_rate"], 3),
        "read_rate": steps[-1]["calls_by_tool"].get("read_file", 0.0) if steps else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "sandbox/rl/configs/demo-agent.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=5000, help="training episodes at most")
    parser.add_argument("--blank", action="store_true", help="the control run")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=YAML")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rollouts._client = _in_memory  # type: ignore[assignment]
    data = yaml.safe_load(args.config.read_text())
    for item in args.set:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        node = data
        for parent in parents:
            node = node[parent]
        node[leaf] = yaml.safe_load(value)
    for seed in args.seeds:
        started = time.monotonic()
        result = run(data, seed, args.episodes, args.blank)
        print(result | {"wall_s": round(time.monotonic() - started, 1)}, flush=True)


if __name__ == "__main__":
    main()
