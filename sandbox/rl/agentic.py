"""GRPO on multi-turn episodes, with generation running ahead of training by a bounded degree.

The config's ``agent`` section (:class:`~.config.AgentConfig`) names task
directories; they are uploaded to the service (``upload_task``) and every
rollout is an episode of one (:mod:`.rollouts`). A step trains on
``prompts_per_step`` tasks x ``group_size`` episodes, all played concurrently,
each in its own session; an episode the platform failed (reward ``None``) is
dropped from its group. Only the policy's tokens enter the loss (observation,
prompt and turn-prefix tokens are masked out).

Off-policy control: a generation thread plays batches with its own copy of
the policy (synced from the trainer's weights when it starts a batch, so a
batch has one *version*: the number of batches trained on when it started) and
hands them to the training loop through a bounded queue. Batch ``i`` may start
only once the trainer's version is at least ``i - max_staleness``, so when it
is trained on (at version ``i``) its staleness, ``version_now -
sample.version``, is at most ``max_staleness``: 0 is strictly on-policy
(generation and training alternate), 1 overlaps playing batch ``i + 1`` with
training on batch ``i``. The loss corrects for staleness with the importance
ratio ``exp(logp_now - logp_sampled)``, where ``logp_sampled`` are the
log-probabilities recorded *while sampling*, by the version that played the
episode (never recomputed), clipped as in PPO.

Metrics (``metrics.jsonl``, one line a step): reward and pass rate, dropped
episodes, turns and tool calls (and calls per episode of each tool: ``invalid``
for a turn that did not parse), staleness (this batch's, and the run's mean
and max), ``gen_wait_s`` (how long generation waited for training before this
batch could start) and ``train_wait_s`` (how long training waited for this
batch), and every ``eval_every`` steps the held-out pass rate (fresh episodes
of the held-out tasks, ``eval_samples`` each).
"""

from __future__ import annotations

import copy
import logging
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .config import AgentConfig, TrainConfig
from .grpo import clipped_policy_loss, masked_group_advantages
from .model import CharTokenizer, build, sequence_logprobs
from .rollouts import EpisodeEnv, EpisodeSample, ModelPolicy
from .trainer import History, grpo_updates, metrics_log

logger = logging.getLogger(__name__)

POLL_S = 0.2


@dataclass
class AgentBatch:
    """One step's episodes (``group_size`` consecutive ones per task) and how they were made."""

    samples: list[EpisodeSample]
    version: int
    generate_s: float
    gen_wait_s: float


class AgentTrainer:
    """GRPO over episodes of tasks, with generation up to ``max_staleness`` versions ahead."""

    def __init__(
        self,
        config: TrainConfig,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if config.agent is None:
            raise ValueError("AgentTrainer needs the config's `agent` section")
        self.config = config
        self.agent: AgentConfig = config.agent
        self.random = random.Random(config.seed)
        self.model, self.tokenizer = build(config.model, config.seed)
        self.sampler = copy.deepcopy(self.model)
        self.reference = copy.deepcopy(self.model) if config.grpo.kl_coef else None
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=config.grpo.learning_rate,
            weight_decay=config.grpo.weight_decay,
        )
        self.banned: frozenset[int] = (
            frozenset({self.tokenizer.pad_id, self.tokenizer.bos_id})
            if isinstance(self.tokenizer, CharTokenizer)
            else frozenset()
        )
        self.progress = progress
        self.out = config.out_dir
        (self.out / "checkpoints").mkdir(parents=True, exist_ok=True)
        self.history = History()
        self.version = 0
        self.staleness_seen: list[int] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._queue: queue.Queue[AgentBatch] = queue.Queue(maxsize=self.agent.max_staleness + 1)
        self._producer: threading.Thread | None = None
        self._producer_error: BaseException | None = None
        self._order: list[Any] = []
        self.env = EpisodeEnv(config.sandbox, self.agent, self.tokenizer)
        try:
            self.train_tasks = self.env.upload(self.agent.tasks)
            self.held_out = self.env.upload(self.agent.held_out)
        except BaseException:
            self.env.close()
            raise

    # ------------------------------------------------------------------ generation

    def policy(self, model: torch.nn.Module) -> ModelPolicy:
        return ModelPolicy(
            model,
            self.tokenizer,
            max_turn_tokens=self.agent.max_turn_tokens,
            temperature=self.config.grpo.temperature,
            stop_ids=self.env.stop_ids,
            banned_ids=self.banned,
        )

    def play(self, model: torch.nn.Module, version: int) -> AgentBatch:
        """One training batch: ``prompts_per_step`` tasks, ``group_size`` episodes each."""
        grpo = self.config.grpo
        picked = [self._next_task() for _ in range(grpo.prompts_per_step)]
        refs = [task.ref for task in picked for _ in range(grpo.group_size)]
        started = time.monotonic()
        samples = self.env.run(refs, self.policy(model), version=version)
        return AgentBatch(samples, version, time.monotonic() - started, 0.0)

    def _next_task(self) -> Any:
        """The training tasks in turn, reshuffled after each pass (every task as often)."""
        if not self._order:
            self._order = list(self.train_tasks)
            self.random.shuffle(self._order)
        return self._order.pop()

    def _produce(self) -> None:
        """The generation thread: batch ``i`` starts once training is at ``i - max_staleness``."""
        index = 0
        try:
            while not self._stop.is_set():
                waited = time.monotonic()
                with self._cond:
                    while self.version < index - self.agent.max_staleness:
                        if self._stop.is_set():
                            return
                        self._cond.wait(POLL_S)
                    version = self.version
                    self.sampler.load_state_dict(self.model.state_dict())
                gate_s = time.monotonic() - waited
                batch = self.play(self.sampler, version)
                batch.gen_wait_s = gate_s
                while not self._stop.is_set():
                    try:
                        self._queue.put(batch, timeout=POLL_S)
                        break
                    except queue.Full:
                        continue
                index += 1
        except BaseException as exc:  # handed to the training loop, which raises it
            if not self._stop.is_set():
                self._producer_error = exc

    def _next_batch(self) -> tuple[AgentBatch, float]:
        started = time.monotonic()
        while True:
            if self._producer_error is not None:
                raise RuntimeError(
                    f"episode generation failed: {self._producer_error}"
                ) from self._producer_error
            try:
                return self._queue.get(timeout=POLL_S), time.monotonic() - started
            except queue.Empty:
                continue

    # ------------------------------------------------------------------ update

    def update(self, batch: AgentBatch) -> dict[str, float]:
        """PPO-clipped steps on one batch; episodes judged ``None`` take no part.

        Each group's loss is weighted by its judged episodes, as in the
        single-turn trainer; the mask is the policy's tokens only.
        """
        grpo = self.config.grpo
        size = grpo.group_size
        groups = [batch.samples[g : g + size] for g in range(0, len(batch.samples), size)]
        parts = [
            (g, *masked_group_advantages([s.reward for s in g], scale=grpo.scale_rewards))
            for g in groups
        ]
        # The generation thread copies the weights under the same lock.
        return grpo_updates(self.model, self.optimizer, grpo, parts, self.group_loss, self._cond)

    def group_loss(
        self, group: list[EpisodeSample], advantages: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The clipped loss of one group's kept episodes, over the policy's tokens only."""
        rows = [i for i, s in enumerate(group) if bool(keep[i]) and len(s.tokens) >= 2]
        members = [group[i] for i in rows]
        logprobs, old, mask = self.token_logprobs(self.model, members)
        ref = None
        if self.reference is not None:
            with torch.no_grad():
                ref = self.token_logprobs(self.reference, members)[0]
        grpo = self.config.grpo
        return clipped_policy_loss(
            logprobs,
            old,
            advantages[rows],
            mask,
            epsilon_low=grpo.epsilon_low,
            epsilon_high=grpo.epsilon_high,
            kl_coef=grpo.kl_coef,
            ref_logprobs=ref,
        )

    def token_logprobs(
        self, model: torch.nn.Module, samples: list[EpisodeSample]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Under ``model`` (with grad): each episode's token log-probs, the sampling ones, and
        the loss mask (1 exactly on the policy's tokens), all aligned to tokens ``1..``."""
        logprobs = sequence_logprobs(
            model,
            [s.tokens for s in samples],
            self.tokenizer.pad_id,
            self.config.grpo.temperature,
            self.banned,
        )
        width = logprobs.shape[1]
        old = torch.zeros_like(logprobs)
        mask = torch.zeros_like(logprobs)
        for row, s in enumerate(samples):
            pad = width - (len(s.tokens) - 1)
            old[row] = torch.tensor(s.logprobs[1:] + [0.0] * pad)
            mask[row] = torch.tensor(s.policy_mask[1:] + [0] * pad, dtype=torch.float32)
        # Padding predicts PAD, which is never sampled (-inf): keep only the real log-probs.
        logprobs = torch.where(mask > 0, logprobs, torch.zeros_like(logprobs))
        return logprobs, old, mask

    # ------------------------------------------------------------------ evaluation

    def evaluate(self) -> dict[str, Any]:
        """The held-out pass rate: ``eval_samples`` fresh episodes of each held-out task.

        ``held_out_counts`` is ``[judged, passed]`` per held-out task, in order.
        """
        size = self.config.eval_samples
        refs = [task.ref for task in self.held_out for _ in range(size)]
        samples = self.env.run(refs, self.policy(self.model), version=self.version)
        counts = []
        for index in range(len(self.held_out)):
            got = [s.reward for s in samples[index * size : (index + 1) * size]]
            judged = [r for r in got if r is not None]
            counts.append([len(judged), sum(1 for r in judged if r >= 1.0)])
        judged_n = sum(c[0] for c in counts)
        return {
            "held_out_pass_rate": sum(c[1] for c in counts) / judged_n if judged_n else 0.0,
            "held_out_counts": counts,
            "held_out_dropped": len(samples) - judged_n,
            "held_out_example": self.tokenizer.decode(samples[0].tokens) if samples else "",
        }

    # ------------------------------------------------------------------ the loop

    def train(
        self, steps: int | None = None, *, before_step: Callable[[int], None] | None = None
    ) -> History:
        """Run the loop (step 0 evaluates the untrained policy); ``before_step`` is for tests.

        Ends after ``steps`` (else the config's), once the held-out pass rate
        reaches ``target_pass_rate``, or once ``time_budget_s`` has passed.
        """
        total_steps = steps or self.config.steps
        started = time.monotonic()
        with metrics_log(self.out, self.history, self.progress) as emit:
            emit({"step": 0, "version": 0, "elapsed_s": 0.0} | self._evaluate())
            self._stop.clear()
            self._producer = threading.Thread(target=self._produce, name="generation", daemon=True)
            self._producer.start()
            try:
                for step in range(1, total_steps + 1):
                    if before_step is not None:
                        before_step(step)
                    step_started = time.monotonic()
                    batch, train_wait = self._next_batch()
                    staleness = self.version - batch.version
                    if staleness > self.agent.max_staleness:  # the gate's invariant
                        raise RuntimeError(f"staleness {staleness} > {self.agent.max_staleness}")
                    for sample in batch.samples:
                        sample.staleness = staleness
                    self.staleness_seen.append(staleness)
                    update_started = time.monotonic()
                    stats = self.update(batch)
                    update_s = time.monotonic() - update_started
                    with self._cond:
                        self.version += 1
                        self._cond.notify_all()
                    record = self._record(step, batch, stats, train_wait, update_s)
                    record["step_s"] = round(time.monotonic() - step_started, 4)
                    out_of_time = self._out_of_time(started)
                    if step % self.config.eval_every == 0 or step == total_steps or out_of_time:
                        record |= self._evaluate()
                        self.save(step)
                    elif step % self.config.checkpoint_every == 0:
                        self.save(step)
                    record["elapsed_s"] = round(time.monotonic() - started, 2)
                    emit(record)
                    target = self.config.target_pass_rate
                    if target is not None and record.get("held_out_pass_rate", -1) >= target:
                        break
                    if out_of_time:
                        logger.warning("stopped at step %d: the time budget is spent", step)
                        break
            finally:
                self._stop_producer()
        return self.history

    def _evaluate(self) -> dict[str, Any]:
        started = time.monotonic()
        held = self.evaluate()
        rate = held["held_out_pass_rate"]
        if rate >= self.history.best_pass_rate:
            self.history.best_pass_rate = rate
            self.history.best_counts = held["held_out_counts"]
        return held | {"eval_s": round(time.monotonic() - started, 4)}

    def _stop_producer(self) -> None:
        """Stop generation: its batch in flight is cancelled (its episodes closed)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._producer is not None:
            self.env.cancel()
            self._producer.join(timeout=120)
            self._producer = None
        while not self._queue.empty():
            self._queue.get_nowait()

    def _out_of_time(self, started: float) -> bool:
        budget = self.config.time_budget_s
        return budget is not None and time.monotonic() - started >= budget

    def _record(
        self,
        step: int,
        batch: AgentBatch,
        stats: dict[str, float],
        train_wait: float,
        update_s: float,
    ) -> dict[str, Any]:
        samples = batch.samples
        judged = [s.reward for s in samples if s.reward is not None]
        seen = self.staleness_seen
        by_tool = Counter(c.tool or "invalid" for s in samples for c in s.calls)
        return {
            "step": step,
            "version": batch.version,
            "reward": sum(judged) / len(judged) if judged else None,
            "pass_rate": sum(1 for r in judged if r >= 1.0) / len(judged) if judged else None,
            "episodes": len(samples),
            "dropped_infra": len(samples) - len(judged),
            "calls_mean": sum(len(s.calls) for s in samples) / len(samples),
            "calls_by_tool": {tool: n / len(samples) for tool, n in sorted(by_tool.items())},
            "tool_calls": sum(len(s.observations) for s in samples),
            "policy_tokens_mean": sum(s.policy_tokens for s in samples) / len(samples),
            **stats,
            "staleness": seen[-1],
            "staleness_mean": round(sum(seen) / len(seen), 4),
            "staleness_max": max(seen),
            "generate_s": round(batch.generate_s, 4),
            "episodes_per_s": round(len(samples) / batch.generate_s, 3)
            if batch.generate_s
            else None,
            "gen_wait_s": round(batch.gen_wait_s, 4),
            "train_wait_s": round(train_wait, 4),
            "wait_s": round(train_wait, 4),
            "update_s": round(update_s, 4),
            "example": self.tokenizer.decode(samples[0].tokens) if samples else "",
        }

    # ------------------------------------------------------------------ checkpoints

    def save(self, step: int) -> None:
        torch.save(
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "step": step,
                "version": self.version,
            },
            self.out / "checkpoints" / f"step-{step:06d}.pt",
        )

    def close(self) -> None:
        self._stop_producer()
        self.env.close()
