"""The trainer against the real service: learning, overlap, rollback, dropped samples.

Rewards come from real sandboxes behind ``sandbox serve`` on loopback. The task
(print 7 by finishing ``print(`` in two tokens) passes by chance about once in
600 samples, so a rising held-out pass rate is learning, not luck.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sandbox.errors import InfrastructureError
from sandbox.host.launcher import free_port
from sandbox.rl.config import SandboxConfig, TrainConfig
from sandbox.rl.grpo import masked_group_advantages
from sandbox.rl.model import Rollout
from sandbox.rl.plots import plot_run, read_metrics
from sandbox.rl.rewards import SandboxRewards
from sandbox.rl.trainer import MAX_FAILED_BATCHES, Trainer
from sandbox.telemetry.metrics import REGISTRY

from ..conftest import Service

pytestmark = pytest.mark.docker


def _config(out: Path, url: str, **overrides: Any) -> TrainConfig:
    base: dict[str, Any] = {
        "model": {"charset": "0123456789()+# print\n", "n_positions": 32},
        "domains": [{"name": "seven", "targets": ["7"]}],
        "held_out": [{"name": "seven", "targets": ["7"]}],
        "grpo": {
            "group_size": 16,
            "prompts_per_step": 8,
            "max_new_tokens": 2,
            "learning_rate": 0.01,
            "epsilon_high": 0.5,
        },
        "sandbox": {"url": url},
        "steps": 80,
        "eval_every": 5,
        "eval_samples": 32,
        "target_pass_rate": 0.7,
        "seed": 3,
        "out_dir": str(out),
    }
    return TrainConfig.model_validate(base | overrides)


@pytest.fixture(scope="module")
def trained(service: Service, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trainer]:
    torch.set_num_threads(1)
    trainer = Trainer(_config(tmp_path_factory.mktemp("train"), service.url))
    trainer.train()
    try:
        yield trainer
    finally:
        trainer.close()


def test_the_held_out_pass_rate_rises_from_chance(trained: Trainer) -> None:
    metrics = trained.history.metrics
    evaluated = [m for m in metrics if "held_out_pass_rate" in m]
    assert evaluated[0]["step"] == 0 and evaluated[0]["held_out_pass_rate"] <= 0.05
    assert evaluated[-1]["held_out_pass_rate"] >= 0.7, evaluated
    rewards = [m["reward"] for m in metrics if m["step"] > 0]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.3
    assert all(m["dropped_infra"] == 0 for m in metrics if m["step"] > 0)
    # The model's tokens per step: the prompt once per completion, at most 2 new per completion.
    steps = [m for m in metrics if m["step"] > 0]
    assert all(m["prompt_tokens"] > 0 and m["prompt_tokens"] % 16 == 0 for m in steps)
    assert all(0 < m["completion_tokens"] <= 8 * 16 * 2 for m in steps)
    counted = REGISTRY.get_sample_value(
        "sandbox_model_tokens_total", {"source": "rl", "kind": "completion"}
    )
    assert counted is not None and counted >= sum(m["completion_tokens"] for m in steps)
    # The log on disk is the history, and it plots.
    assert read_metrics(trained.out / "metrics.jsonl") == metrics
    png = plot_run(trained.out / "metrics.jsonl", trained.out / "training.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_sandbox_judges_while_the_trainer_computes(trained: Trainer) -> None:
    steps = [m for m in trained.history.metrics if m["step"] > 0]
    assert len(steps) >= 3
    for this, following in itertools.pairwise(steps):
        # Batch t+1 went to the sandbox before the update on batch t, and the sandbox
        # was judging it while that update ran: the two intervals intersect.
        verify_start, verify_end = following["verify_window"]
        update_start, update_end = this["update_window"]
        assert max(verify_start, update_start) < min(verify_end, update_end), this["step"]
    for m in steps:
        assert m["wait_s"] <= m["step_s"] and 0 <= m["wait_fraction"] <= 1


def test_a_planted_regression_rolls_back(trained: Trainer) -> None:
    best = trained.history.best_pass_rate
    good = trained._good_checkpoint
    assert good is not None and best >= 0.7

    def wreck(step: int) -> None:
        if step == 1:
            with torch.no_grad():
                for parameter in trained.model.parameters():
                    parameter.normal_(0, 1)

    before = len(trained.history.rollbacks)
    trained.train(steps=2, before_step=wreck)
    events = trained.history.rollbacks[before:]
    assert [e["step"] for e in events] == [2], trained.history.metrics
    assert events[0]["pass_rate"] < best - 0.1
    restored = torch.load(events[0]["restored"], weights_only=True)["model"]
    for name, value in trained.model.state_dict().items():
        assert torch.equal(value, restored[name]), name
    assert trained.history.metrics[-1]["rolled_back"] is True
    assert trained.evaluate()["held_out_pass_rate"] >= best - 0.3


def _unreachable(tmp_path: Path, **overrides: Any) -> Trainer:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = _config(tmp_path, url, **overrides)
    return Trainer(config, rewards=SandboxRewards(SandboxConfig(url=url)))


def test_the_rollback_gate_tells_noise_from_a_regression(tmp_path: Path) -> None:
    trainer = _unreachable(tmp_path)
    try:
        assert trainer.regression_p([[32, 20]]) is None  # no baseline yet
        trainer.history.best_counts = [[32, 23], [32, 30]]
        assert trainer.regression_p([[32, 23], [32, 30]]) > 0.5  # the same counts
        assert trainer.regression_p([[32, 20], [32, 28]]) > 0.05  # within the noise
        assert trainer.regression_p([[32, 5], [32, 12]]) < 0.001  # a real drop
    finally:
        trainer.close()


def test_unjudged_samples_are_dropped_not_scored_zero(tmp_path: Path) -> None:
    trainer = _unreachable(tmp_path, grpo={"group_size": 4, "max_new_tokens": 2})
    try:
        rollout = trainer.generate([trainer.held_out[0]], group_size=4).rollouts[0]

        def gradient(group: Rollout, rewards: list[float | None]) -> torch.Tensor:
            trainer.model.zero_grad()
            loss, _ = trainer.group_loss(group, *masked_group_advantages(rewards))
            loss.backward()
            return torch.cat([p.grad.flatten() for p in trainer.model.parameters()])

        dropped = gradient(rollout, [1.0, None, 0.0, None])
        # The same group with the two unjudged samples never generated.
        kept = Rollout(
            rollout.prompt_ids,
            [rollout.completions[0], rollout.completions[2]],
            [rollout.old_logprobs[0], rollout.old_logprobs[2]],
        )
        alone = gradient(kept, [1.0, 0.0])
        assert alone.abs().max() > 0
        assert torch.allclose(dropped, alone, atol=1e-6)
        # Scored 0 instead, they would have pushed the update elsewhere.
        zeroed = gradient(rollout, [1.0, 0.0, 0.0, 0.0])
        assert not torch.allclose(zeroed, alone, atol=1e-3)
    finally:
        trainer.close()


def test_a_sandbox_that_judges_nothing_stops_training_without_updates(tmp_path: Path) -> None:
    trainer = _unreachable(tmp_path, eval_every=1000)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    try:
        with pytest.raises(InfrastructureError, match="in a row"):
            trainer.train(steps=10)
    finally:
        trainer.close()
    steps = [m for m in trainer.history.metrics if m["step"] > 0]
    assert len(steps) == MAX_FAILED_BATCHES - 1
    assert all(m["dropped_infra"] == 16 * 8 and m["reward"] is None for m in steps)
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, before[name]), name
