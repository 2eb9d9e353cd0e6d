"""The GRPO loop: generate, verify in the sandbox (overlapped), update, evaluate, roll back.

Step ``t`` generates batch ``t + 1`` while the sandbox judges batch ``t``, then
updates on batch ``t``'s rewards (its log-probabilities were recorded when it
was sampled, so the PPO ratio stays exact). Samples the platform could not
judge are dropped from the update. Every ``eval_every`` steps the held-out set
is judged; a drop from the best evaluation so far that the evaluator's gate
(:func:`sandbox.evals.compare.stratified_test`, per prompt) finds significant at
``rollback_alpha`` and larger than ``rollback_min_drop`` rolls the model and the
optimiser back to the last good checkpoint. Metrics go to ``metrics.jsonl``
(reward, pass rate, KL, loss, time split, fraction of time waiting on the
sandbox), checkpoints to ``checkpoints/``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from ..errors import InfrastructureError
from ..evals.compare import stratified_test
from ..telemetry import metrics
from .config import GrpoConfig, TrainConfig
from .grpo import clipped_policy_loss, masked_group_advantages
from .model import Rollout, build, completion_logprobs, sample_group
from .rewards import SandboxRewards, Verdicts
from .tasks import DomainMix, Prompt, judge_request

logger = logging.getLogger(__name__)

MAX_FAILED_BATCHES = 3


@dataclass
class Batch:
    prompts: list[Prompt]
    rollouts: list[Rollout]
    texts: list[list[str]]
    generate_s: float
    generated_at: tuple[float, float]
    prompt_tokens: int = 0  # the prompt once per completion sampled
    completion_tokens: int = 0


G = TypeVar("G")


def grpo_updates(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    grpo: GrpoConfig,
    groups: Sequence[tuple[G, torch.Tensor, torch.Tensor]],
    group_loss: Callable[[G, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, float]]],
    step_lock: AbstractContextManager[Any] | None = None,
) -> dict[str, float]:
    """``updates_per_batch`` clipped steps over ``(group, advantages, keep)`` triples.

    Each group's loss is weighted by its judged (kept) samples over all judged
    samples, so a dropped sample counts as if it had never been generated.
    ``step_lock`` is held around each optimiser step (a reader of the weights).
    """
    judged_total = sum(int(keep.sum()) for _, _, keep in groups)
    stats = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0}
    if judged_total == 0:
        return stats
    model.train()
    for _ in range(grpo.updates_per_batch):
        optimizer.zero_grad()
        total = torch.zeros(())
        stats = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0}
        for group, group_advantage, keep in groups:
            if not bool(keep.any()):
                continue
            loss, info = group_loss(group, group_advantage, keep)
            weight = float(keep.sum()) / judged_total
            total = total + loss * weight
            stats["kl"] += info["kl"] * weight
            stats["clip_fraction"] += info["clip_fraction"] * weight
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grpo.max_grad_norm)
        with step_lock or contextlib.nullcontext():
            optimizer.step()
        stats["loss"] = float(total.detach())
    return stats


@contextlib.contextmanager
def metrics_log(
    out: Path, history: History, progress: Callable[[dict[str, Any]], None] | None
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """``emit(record)``: one line of ``out/metrics.jsonl``, kept in ``history`` and shown."""
    with (out / "metrics.jsonl").open("w") as log:

        def emit(record: dict[str, Any]) -> None:
            history.metrics.append(record)
            log.write(json.dumps(record) + "\n")
            log.flush()
            if progress is not None:
                progress(record)

        yield emit


@dataclass
class History:
    """What the loop did, for tests and reports."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    rollbacks: list[dict[str, Any]] = field(default_factory=list)
    best_pass_rate: float = -1.0
    best_counts: list[list[int]] | None = None


class Trainer:
    """GRPO on a causal LM with rewards from the sandbox."""

    def __init__(
        self,
        config: TrainConfig,
        rewards: SandboxRewards | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.config = config
        random.seed(config.seed)
        self.model, self.tokenizer = build(config.model, config.seed)
        self.reference = copy.deepcopy(self.model) if config.grpo.kl_coef else None
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=config.grpo.learning_rate,
            weight_decay=config.grpo.weight_decay,
        )
        self.train_mix = DomainMix(config.domains, config.seed)
        self.held_out = DomainMix(config.held_out, config.seed + 1).every_prompt()
        self.rewards = rewards or SandboxRewards(config.sandbox)
        self._owns_rewards = rewards is None
        self.progress = progress
        self.out = config.out_dir
        (self.out / "checkpoints").mkdir(parents=True, exist_ok=True)
        self.history = History()
        self._good_checkpoint: Path | None = None
        self._failed_batches = 0
        self._stop_ids = frozenset(self.tokenizer.encode("\n")[-1:])

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[Prompt], *, group_size: int) -> Batch:
        started = time.monotonic()
        rollouts, texts = [], []
        for prompt in prompts:
            rollout = sample_group(
                self.model,
                self.tokenizer.encode(prompt.text),
                group_size=group_size,
                max_new_tokens=self.config.grpo.max_new_tokens,
                temperature=self.config.grpo.temperature,
                eos_id=self.tokenizer.eos_id,
                stop_ids=self._stop_ids,
            )
            rollouts.append(rollout)
            texts.append([self.tokenizer.decode(c) for c in rollout.completions])
        finished = time.monotonic()
        prompt_tokens = completion_tokens = 0
        for rollout in rollouts:  # one call of the model per group; a local model costs 0
            spent = len(rollout.prompt_ids) * len(rollout.completions)
            made = sum(len(c) for c in rollout.completions)
            metrics.record_model_call("rl", spent, made, 0.0)
            prompt_tokens, completion_tokens = prompt_tokens + spent, completion_tokens + made
        return Batch(
            prompts,
            rollouts,
            texts,
            finished - started,
            (started, finished),
            prompt_tokens,
            completion_tokens,
        )

    def verify(self, batch: Batch) -> Any:
        requests = [
            judge_request(prompt, text, self.config.sandbox)
            for prompt, group in zip(batch.prompts, batch.texts, strict=True)
            for text in group
        ]
        return self.rewards.submit(requests)

    # ------------------------------------------------------------------ update

    def update(self, batch: Batch, verdicts: Verdicts) -> dict[str, float]:
        """PPO-clipped steps on one judged batch; samples judged ``None`` take no part.

        Each group's loss is weighted by its judged samples, so a dropped sample
        counts exactly as if it had never been generated (never as a reward of 0).
        """
        grpo = self.config.grpo
        size = grpo.group_size
        groups = [verdicts.rewards[g * size : (g + 1) * size] for g in range(len(batch.rollouts))]
        advantages = [masked_group_advantages(g, scale=grpo.scale_rewards) for g in groups]
        parts = [(r, a, k) for r, (a, k) in zip(batch.rollouts, advantages, strict=True)]
        return grpo_updates(self.model, self.optimizer, grpo, parts, self.group_loss)

    def group_loss(
        self, rollout: Rollout, advantages: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The clipped loss of one group's kept completions under the current model."""
        grpo = self.config.grpo
        logprobs, mask = completion_logprobs(
            self.model, rollout, self.tokenizer.pad_id, grpo.temperature
        )
        old = torch.zeros_like(logprobs)
        for row, values in enumerate(rollout.old_logprobs):
            old[row, : len(values)] = torch.tensor(values)
        ref = None
        if self.reference is not None:
            with torch.no_grad():
                ref, _ = completion_logprobs(
                    self.reference, rollout, self.tokenizer.pad_id, grpo.temperature
                )
        return clipped_policy_loss(
            logprobs,
            old,
            advantages,
            mask * keep.unsqueeze(1),
            epsilon_low=grpo.epsilon_low,
            epsilon_high=grpo.epsilon_high,
            kl_coef=grpo.kl_coef,
            ref_logprobs=ref,
        )

    # ------------------------------------------------------------------ evaluation

    def evaluate(self) -> dict[str, Any]:
        """Held-out pass rate (per tier too), sampling ``eval_samples`` completions a prompt.

        ``held_out_counts`` is ``[judged, passed]`` per held-out prompt, in order.
        """
        batch = self.generate(self.held_out, group_size=self.config.eval_samples)
        verdicts: Verdicts = self.verify(batch).result()
        size = self.config.eval_samples
        by_tier: dict[str, list[float]] = {}
        counts: list[list[int]] = []
        for group, prompt in enumerate(batch.prompts):
            got = [r for r in verdicts.rewards[group * size : (group + 1) * size] if r is not None]
            counts.append([len(got), sum(1 for r in got if r >= 1.0)])
            by_tier.setdefault(prompt.tier, []).extend(got)
        scores = [r for values in by_tier.values() for r in values]
        result: dict[str, Any] = {
            "held_out_pass_rate": sum(scores) / len(scores) if scores else 0.0,
            "held_out_counts": counts,
        }
        for tier, values in by_tier.items():
            if values:
                result[f"held_out_{tier}"] = sum(values) / len(values)
        return result

    def regression_p(self, counts: list[list[int]]) -> float | None:
        """The evaluator's gate on held-out counts: P(a drop this large | no real change).

        Per prompt, the best evaluation so far is the baseline and ``counts`` the
        candidate, compared by the exact stratified permutation test of
        :mod:`sandbox.evals.compare`. ``None`` before there is a baseline.
        """
        best = self.history.best_counts
        if best is None:
            return None
        pairs = [
            (nb, cb, nc, cc) for (nb, cb), (nc, cc) in zip(best, counts, strict=True) if nb and nc
        ]
        return stratified_test(pairs).p_lower if pairs else None

    # ------------------------------------------------------------------ checkpoints

    def save(self, step: int) -> Path:
        path = self.out / "checkpoints" / f"step-{step:06d}.pt"
        torch.save(
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "step": step,
            },
            path,
        )
        return path

    def load(self, path: Path) -> None:
        state = torch.load(path, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    # ------------------------------------------------------------------ the loop

    def train(
        self, steps: int | None = None, *, before_step: Callable[[int], None] | None = None
    ) -> History:
        """Run the loop; ``before_step`` is called with each step number (tests use it).

        Step 0 is the held-out evaluation of the untrained model. The loop ends
        after ``steps`` (else the config's), once the held-out pass rate reaches
        ``target_pass_rate``, or once ``time_budget_s`` has passed.
        """
        total_steps = steps or self.config.steps
        grpo = self.config.grpo
        started = time.monotonic()
        with metrics_log(self.out, self.history, self.progress) as emit:
            emit({"step": 0} | self._evaluate_and_maybe_roll_back(0))
            pending = self.generate(
                self.train_mix.sample(grpo.prompts_per_step), group_size=grpo.group_size
            )
            in_flight = self.verify(pending)
            try:
                for step in range(1, total_steps + 1):
                    if before_step is not None:
                        before_step(step)
                    step_started = time.monotonic()
                    # Overlap: generate the next batch while the sandbox judges this one.
                    upcoming = self.generate(
                        self.train_mix.sample(grpo.prompts_per_step), group_size=grpo.group_size
                    )
                    wait_started = time.monotonic()
                    verdicts: Verdicts = in_flight.result()
                    waited = time.monotonic() - wait_started
                    self._check_sandbox(verdicts)
                    in_flight = self.verify(upcoming)
                    update_started = time.monotonic()
                    stats = self.update(pending, verdicts)
                    update_window = (update_started, time.monotonic())
                    record = self._record(
                        step,
                        pending,
                        verdicts,
                        stats,
                        waited,
                        update_window,
                        time.monotonic() - step_started,
                    )
                    pending = upcoming
                    out_of_time = self._out_of_time(started)
                    if step % self.config.eval_every == 0 or step == total_steps or out_of_time:
                        record |= self._evaluate_and_maybe_roll_back(step)
                    elif step % self.config.checkpoint_every == 0:
                        self.save(step)
                    emit(record)
                    target = self.config.target_pass_rate
                    if target is not None and record.get("held_out_pass_rate", -1) >= target:
                        break
                    if out_of_time:
                        logger.warning(
                            "stopped at step %d: the time budget of %.0f s is spent",
                            step,
                            self.config.time_budget_s,
                        )
                        break
            finally:
                in_flight.cancel()
        return self.history

    def _out_of_time(self, started: float) -> bool:
        budget = self.config.time_budget_s
        return budget is not None and time.monotonic() - started >= budget

    def _check_sandbox(self, verdicts: Verdicts) -> None:
        """Stop when the sandbox has judged nothing for several batches in a row."""
        self._failed_batches = self._failed_batches + 1 if verdicts.error else 0
        if self._failed_batches >= MAX_FAILED_BATCHES:
            raise InfrastructureError(
                f"the sandbox failed {self._failed_batches} batches in a row "
                f"(last: {verdicts.error})"
            )

    def _evaluate_and_maybe_roll_back(self, step: int) -> dict[str, Any]:
        started = time.monotonic()
        held = self.evaluate() | {"eval_s": round(time.monotonic() - started, 4)}
        rate = held["held_out_pass_rate"]
        p_value = self.regression_p(held["held_out_counts"])
        drop = self.history.best_pass_rate - rate
        held["regression_p"] = p_value
        regressed = (
            p_value is not None
            and p_value < self.config.rollback_alpha
            and drop > self.config.rollback_min_drop
        )
        if regressed and self._good_checkpoint is not None:
            self.load(self._good_checkpoint)
            event = {
                "step": step,
                "pass_rate": rate,
                "best": self.history.best_pass_rate,
                "restored": str(self._good_checkpoint),
            }
            self.history.rollbacks.append(event)
            logger.warning(
                "held-out pass rate fell to %.2f (best %.2f): rolled back to %s",
                rate,
                self.history.best_pass_rate,
                self._good_checkpoint.name,
            )
            return held | {"rolled_back": True}
        path = self.save(step)
        if rate >= self.history.best_pass_rate:
            self.history.best_pass_rate = rate
            self.history.best_counts = held["held_out_counts"]
            self._good_checkpoint = path
        return held | {"rolled_back": False}

    def _record(
        self,
        step: int,
        batch: Batch,
        verdicts: Verdicts,
        stats: dict[str, float],
        waited: float,
        update_window: tuple[float, float],
        step_s: float,
    ) -> dict[str, Any]:
        judged = [r for r in verdicts.rewards if r is not None]
        size = self.config.grpo.group_size
        per_domain: dict[str, list[float]] = {}
        for group, prompt in enumerate(batch.prompts):
            values = [
                r for r in verdicts.rewards[group * size : (group + 1) * size] if r is not None
            ]
            per_domain.setdefault(prompt.domain, []).extend(values)
        return {
            "step": step,
            "reward": sum(judged) / len(judged) if judged else None,
            "pass_rate": sum(1 for r in judged if r >= 1.0) / len(judged) if judged else None,
            "dropped_infra": len(verdicts.rewards) - len(judged),
            "executed": verdicts.executed,
            "domains": {d: sum(v) / len(v) for d, v in per_domain.items() if v},
            **stats,
            "generate_s": round(batch.generate_s, 4),
            "prompt_tokens": batch.prompt_tokens,
            "completion_tokens": batch.completion_tokens,
            "verify_s": round(verdicts.finished - verdicts.started, 4),
            "verify_window": [verdicts.started, verdicts.finished],
            "generate_window": list(batch.generated_at),
            "update_s": round(update_window[1] - update_window[0], 4),
            "update_window": list(update_window),
            "step_s": round(step_s, 4),
            "wait_s": round(waited, 4),
            "wait_fraction": round(waited / step_s, 4) if step_s else 0.0,
        }

    def close(self) -> None:
        if self._owns_rewards:
            self.rewards.close()
