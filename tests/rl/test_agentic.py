"""Multi-turn episodes in the embedded trainer, against the real service and real sandboxes.

A scripted policy (its turns fixed in advance) plays the demo's tasks
(:mod:`sandbox.rl.demo_tasks`: ``v`` holds a digit, the hidden test wants it
in ``a``): the observations are the sandbox's and the
rewards the hidden tests'. Then the trainer's loss: observation tokens get
exactly zero gradient, and a stale sample is weighed by its ratio to the
log-probs recorded when it was sampled; a failed episode (one that could not
open, one whose container was killed between turns) is dropped (``None``,
never 0); episodes are closed on cancellation; and the staleness bound holds
with a slow trainer.
"""

from __future__ import annotations

import string
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from sandbox.rl.agentic import AgentBatch, AgentTrainer
from sandbox.rl.config import AgentConfig, ModelConfig, SandboxConfig, TrainConfig
from sandbox.rl.demo_tasks import INSTRUCTION, write_task
from sandbox.rl.grpo import masked_group_advantages
from sandbox.rl.model import CharTokenizer
from sandbox.rl.plots import plot_held_out
from sandbox.rl.rollouts import EpisodeEnv, EpisodeSample
from sandbox.rl.toolcalls import JsonFormat, LineFormat, ToolCall
from sandbox.rl.trainer import grpo_updates

from ..conftest import Service, kill_session_container

pytestmark = pytest.mark.docker

CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"


class ScriptedPolicy:
    """Turn ``i`` of every episode is ``script[i]``; log-probs 0. Serves one episode a run."""

    def __init__(self, tokenizer: CharTokenizer, script: list[str], gate: Any = None) -> None:
        self.tokenizer, self.script, self.turn, self.gate = tokenizer, script, 0, gate

    def act(self, contexts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        if self.gate is not None:
            self.gate(self.turn)
        text = self.script[min(self.turn, len(self.script) - 1)]
        self.turn += 1
        ids = self.tokenizer.encode_piece(text)
        return [(ids, [0.0] * len(ids)) for _ in contexts]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    write_task(root / "train" / "v3", 3)
    write_task(root / "held" / "h5", 5, note="held out\n")
    return root


def _agent(tasks: Path, **overrides: Any) -> AgentConfig:
    base: dict[str, Any] = {
        "tasks": [tasks / "train"],
        "held_out": [tasks / "held"],
        "prompt": "{instruction}\n",
        "max_turns": 4,
        "max_turn_tokens": 64,
        "max_tokens": 512,
        "max_output_chars": 64,
    }
    return AgentConfig.model_validate(base | overrides)


@pytest.fixture(scope="module")
def env(service: Service, tasks: Path) -> Iterator[EpisodeEnv]:
    tokenizer = CharTokenizer(CHARSET)
    environment = EpisodeEnv(SandboxConfig(url=service.url), _agent(tasks), tokenizer)
    try:
        yield environment
    finally:
        environment.close()


def _play(env: EpisodeEnv, ref: str, script: list[str], **agent: Any) -> EpisodeSample:
    old = env.agent
    env.agent = old.model_copy(update=agent)
    if "tool_format" in agent:
        env.format = JsonFormat() if agent["tool_format"] == "json" else LineFormat()
    try:
        assert isinstance(env.tokenizer, CharTokenizer)
        (sample,) = env.run([ref], ScriptedPolicy(env.tokenizer, script), version=7)
    finally:
        env.agent, env.format = old, LineFormat()
    return sample


def test_a_scripted_episode_sees_the_sandbox_and_the_hidden_tests_decide(
    env: EpisodeEnv, tasks: Path
) -> None:
    (task,) = env.upload([tasks / "train"])
    passed = _play(env, task.ref, ["< v\n", "$ cat v; echo hi >&2; exit 3\n", "> a 3\n", ".\n"])
    assert passed.observations == [
        "3\n",
        "exit_code: 3\n[stdout]\n3\n[stderr]\nhi",
        "wrote 2 bytes to a",
    ]
    assert [c.tool for c in passed.calls] == ["read_file", "shell", "write_file", "done"]
    assert (passed.reward, passed.outcome, passed.version) == (1.0, "passed", 7)
    text = env.tokenizer.decode(passed.tokens)
    instruction = INSTRUCTION + "\n"
    assert text == (
        f"{instruction}< v\n3\n$ cat v; echo hi >&2; exit 3\n"
        "exit_code: 3\n[stdout]\n3\n[stderr]\nhi\n> a 3\nwrote 2 bytes to a\n.\n"
    )
    # The policy's tokens are exactly the script's; everything else is masked out.
    policy = [t for t, m in zip(passed.tokens, passed.policy_mask, strict=True) if m]
    script = "< v\n$ cat v; echo hi >&2; exit 3\n> a 3\n.\n"
    assert env.tokenizer.decode(policy) == script
    assert len(passed.logprobs) == len(passed.tokens)

    wrong = _play(env, task.ref, ["> a 7\n", "\n"])
    assert (wrong.reward, wrong.outcome, wrong.observations) == (
        0.0,
        "failed",
        ["wrote 2 bytes to a"],
    )
    # The same task in the JSON format of chat models.
    json_script = [
        '<tool_call>{"name": "bash", "arguments": {"command": "cat v"}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "3"}}'
        "</tool_call> and some chatter after it",
        "All done.",
    ]
    chat = _play(env, task.ref, json_script, tool_format="json")
    assert chat.observations == [
        "exit_code: 0\n[stdout]\n3\n[stderr] (empty)",
        "wrote 1 bytes to a",
    ]
    assert chat.reward == 1.0
    assert "<tool_response>\nwrote 1 bytes to a\n</tool_response>\n" in env.tokenizer.decode(
        chat.tokens
    )
    assert "chatter" not in env.tokenizer.decode(chat.tokens)  # cut at </tool_call>


def test_observations_are_truncated_blanked_and_budgets_end_episodes(
    env: EpisodeEnv, tasks: Path
) -> None:
    (task,) = env.upload([tasks / "train"])
    long = _play(env, task.ref, ["$ seq 1000\n", ".\n"], max_output_chars=16)
    assert "characters elided" in long.observations[0] and len(long.observations[0]) < 120
    blind = _play(env, task.ref, ["< v\n", ".\n"], blank_observations=True)
    assert blind.observations == ["3\n"]  # what came back, kept for the record
    assert env.tokenizer.decode(blind.tokens).endswith("< v\n \n.\n")  # what the policy saw
    turns = _play(env, task.ref, ["$ true\n"], max_turns=3)
    assert len(turns.calls) == 3 and turns.reward == 0.0
    tokens = _play(env, task.ref, ["$ echo 1234567890\n"], max_tokens=120)
    assert len(tokens.tokens) <= 120 and tokens.done


@pytest.fixture(scope="module")
def trainer(
    service: Service, tasks: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentTrainer]:
    agent_trainer = AgentTrainer(_config(service, tasks, tmp_path_factory.mktemp("agent")))
    try:
        yield agent_trainer
    finally:
        agent_trainer.close()


def _scripted(trainer: AgentTrainer, refs: list[str], script: list[str]) -> list[EpisodeSample]:
    assert isinstance(trainer.tokenizer, CharTokenizer)
    return trainer.env.run(refs, ScriptedPolicy(trainer.tokenizer, script), version=0)


def _on_policy(trainer: AgentTrainer, sample: EpisodeSample) -> EpisodeSample:
    """``sample`` as if the current model had played it: its log-probs, recorded."""
    logprobs, _, _ = trainer.token_logprobs(trainer.model, [sample])
    sample.logprobs = [0.0, *logprobs[0].detach().tolist()]
    return sample


def test_a_failed_episode_is_dropped_and_the_loss_is_as_if_it_never_ran(
    trainer: AgentTrainer,
) -> None:
    ref = trainer.train_tasks[0].ref
    missing = "upload:" + "0" * 64
    good, bad = _scripted(trainer, [ref, missing], ["< v\n", "> a 3\n"])
    assert good.reward == 1.0 and bad.reward is None and "could not open" in (bad.error or "")
    assert trainer.env.live == set()
    (wrong,) = _scripted(trainer, [ref], ["< v\n", "> a 1\n"])
    samples = [good, wrong]
    for sample in samples:  # the logprobs the current model would have sampled with
        _on_policy(trainer, sample)

    def gradient(group: list[EpisodeSample]) -> torch.Tensor:
        trainer.model.zero_grad()
        trainer.optimizer.zero_grad()
        loss, _ = trainer.group_loss(group, *masked_group_advantages([s.reward for s in group]))
        loss.backward()
        return torch.cat([p.grad.flatten() for p in trainer.model.parameters()])

    with_dropped = gradient([samples[0], bad, samples[1]])
    alone = gradient(samples)
    assert alone.abs().max() > 0 and torch.allclose(with_dropped, alone, atol=1e-7)
    bad.reward = 0.0  # scored 0 instead, it would have moved the update
    assert not torch.allclose(gradient([samples[0], bad, samples[1]]), alone, atol=1e-4)


def test_observation_tokens_get_exactly_zero_gradient(trainer: AgentTrainer) -> None:
    ref = trainer.train_tasks[0].ref
    (right,) = _scripted(trainer, [ref], ["$ cat v\n", "> a 3\n"])
    (played,) = trainer.env.run([ref], trainer.policy(trainer.model), version=0)
    group = [_on_policy(trainer, right), played]  # played: the model's own log-probs
    assert [s.reward for s in group] == [1.0, 0.0]

    captured: list[torch.Tensor] = []

    def keep(_module: Any, _inputs: Any, output: torch.Tensor) -> None:
        output.retain_grad()
        captured.append(output)

    # The trainer's own loss: advantages of the group's rewards (+1, -1), the clipped loss.
    trainer.optimizer.zero_grad()
    hook = trainer.model.lm_head.register_forward_hook(keep)
    try:
        loss, _ = trainer.group_loss(group, *masked_group_advantages([s.reward for s in group]))
        loss.backward()
    finally:
        hook.remove()
        trainer.optimizer.zero_grad()
    (logits,) = captured  # (episodes, positions, vocab): position i predicts token i + 1
    for row, sample in enumerate(group):
        grad = logits.grad[row]
        targets = sample.policy_mask[1:] + [0] * (len(grad) - len(sample.tokens) + 1)
        observed = [i for i, m in enumerate(targets) if not m]
        policy = [i for i, m in enumerate(targets) if m]
        assert len(observed) > 20 and policy
        assert all(bool((grad[i] == 0).all()) for i in observed)
        assert all(float(grad[i].abs().sum()) > 0 for i in policy)
    assert sum(right.policy_mask) == len("$ cat v\n> a 3\n")


def test_a_stale_sample_is_corrected_by_its_sampling_log_probs(trainer: AgentTrainer) -> None:
    batch = trainer.play(trainer.model, trainer.version)  # a group of two episodes
    recorded = [list(s.logprobs) for s in batch.samples]
    ones, keep = torch.ones(2), torch.ones(2, dtype=torch.bool)
    clip = 1 + trainer.config.grpo.epsilon_high

    def ratio_and_loss() -> tuple[torch.Tensor, torch.Tensor, float, float]:
        """The ratio to the recorded log-probs, the policy tokens, the trainer's loss (all
        advantages 1) and that loss from the ratio: -mean(min(ratio, 1 + epsilon_high))."""
        now, old, mask = trainer.token_logprobs(trainer.model, batch.samples)
        loss, _ = trainer.group_loss(batch.samples, ones, keep)
        ratio = torch.exp(now - old).detach()
        per_token = torch.minimum(ratio, ratio.clamp(max=clip)) * mask
        expected = -(per_token.sum(dim=1) / mask.sum(dim=1)).mean()
        return ratio, mask > 0, float(loss.detach()), float(expected)

    ratio, policy, loss, expected = ratio_and_loss()
    assert bool(policy.any()) and torch.allclose(ratio[policy], torch.ones(int(policy.sum())))
    assert loss == pytest.approx(-1.0, abs=1e-5)  # on-policy: the ratio is 1

    # One optimiser step of the trainer's (as if the first episode had passed): the policy
    # moves on, and the same samples are now one version stale.
    advantages = torch.tensor([1.0, -1.0])
    grpo = trainer.config.grpo
    grpo_updates(
        trainer.model,
        trainer.optimizer,
        grpo,
        [(batch.samples, advantages, keep)],
        trainer.group_loss,
    )
    ratio, policy, loss, expected = ratio_and_loss()
    assert [s.logprobs for s in batch.samples] == recorded  # never recomputed
    assert float((ratio[policy] - 1).abs().min()) > 1e-6  # on every policy token
    assert loss == pytest.approx(expected, abs=1e-6)  # weighed by that ratio, clipped


def test_a_container_killed_between_turns_gives_no_reward(
    trainer: AgentTrainer, service: Service
) -> None:
    ref = trainer.train_tasks[0].ref
    killed: list[str] = []

    def kill_one(turn: int) -> None:
        if turn >= 1 and not killed:  # an episode has played a turn; both are open
            episode = sorted(trainer.env.live)[0]
            info = httpx.get(f"{service.url}/v1/episodes/{episode}", timeout=30).json()
            kill_session_container(service, info["session_id"])
            killed.append(episode)

    assert isinstance(trainer.tokenizer, CharTokenizer)
    policy = ScriptedPolicy(trainer.tokenizer, ["< v\n", "> a 3\n"], gate=kill_one)
    samples = trainer.env.run([ref, ref], policy, version=0)
    (dead,) = [s for s in samples if s.episode_id in killed]
    (alive,) = [s for s in samples if s is not dead]
    assert (dead.reward, dead.outcome, alive.reward) == (None, "infra_error", 1.0)
    assert dead.observations[-1] == "error: the sandbox failed; the episode has no verdict"
    _, keep = masked_group_advantages([s.reward for s in samples])
    assert keep.tolist() == [s is alive for s in samples]  # dropped from its group
    assert trainer.env.live == set()
    assert httpx.get(f"{service.url}/v1/episodes/{killed[0]}", timeout=30).status_code == 404


def test_episodes_are_closed_when_a_batch_is_cancelled(env: EpisodeEnv, tasks: Path) -> None:
    (task,) = env.upload([tasks / "train"])
    asked = threading.Event()

    def stall(turn: int) -> None:
        if turn >= 1:  # the episodes are open and waiting on the policy
            asked.set()
            time.sleep(10)

    assert isinstance(env.tokenizer, CharTokenizer)
    policy = ScriptedPolicy(env.tokenizer, ["< v\n", "> a 3\n"], gate=stall)
    seen: list[str] = []
    future = env._loop.submit(env._run([task.ref] * 2, policy, 0))
    assert asked.wait(60)
    deadline = time.monotonic() + 8
    while len(env.live) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    seen.extend(env.live)
    assert len(seen) == 2
    env.cancel()
    assert future.cancelled() or future.exception() is not None
    assert env.live == set()
    with httpx.Client(base_url=env._client.base_url) as http:
        for episode in seen:
            assert http.get(f"/v1/episodes/{episode}").status_code == 404


def _config(service: Service, tasks: Path, out: Path, **overrides: Any) -> TrainConfig:
    base: dict[str, Any] = {
        "model": {"charset": CHARSET, "n_positions": 128},
        "agent": _agent(tasks, max_tokens=128, max_turns=2, max_turn_tokens=8).model_dump(),
        "grpo": {"group_size": 2, "prompts_per_step": 1},
        "sandbox": {"url": service.url, "concurrency": 4},
        "eval_every": 1000,
        "eval_samples": 1,
        "checkpoint_every": 1000,
        "out_dir": str(out),
    }
    data = base | overrides
    data["model"] = base["model"] | overrides.get("model", {})
    return TrainConfig.model_validate(data)


@pytest.mark.parametrize("bound", [0, 2])
def test_generation_runs_ahead_of_training_no_further_than_max_staleness(
    service: Service, tasks: Path, tmp_path: Path, bound: int
) -> None:
    config = _config(service, tasks, tmp_path)
    agent = config.agent
    assert agent is not None
    config = config.model_copy(update={"agent": agent.model_copy(update={"max_staleness": bound})})
    trainer = AgentTrainer(config)
    trained: list[AgentBatch] = []
    update = trainer.update

    def slow_update(batch: AgentBatch) -> dict[str, float]:
        trained.append(batch)
        # A slow trainer: wait until generation has got as far ahead as it may (the
        # next `bound` batches played and queued), and a little longer.
        deadline = time.monotonic() + 120
        while trainer._queue.qsize() < bound and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        return update(batch)

    trainer.update = slow_update  # type: ignore[method-assign]
    try:
        history = trainer.train(steps=6)
    finally:
        trainer.close()
    steps = [m for m in history.metrics if m["step"] > 0]
    assert [m["staleness"] for m in steps] == [
        step - 1 - m["version"] for step, m in enumerate(steps, start=1)
    ]
    assert max(m["staleness"] for m in steps) == bound  # reached, never passed
    assert all(m["staleness_max"] <= bound for m in steps)
    for index, batch in enumerate(trained):
        assert {s.version for s in batch.samples} == {batch.version}
        assert {s.staleness for s in batch.samples} == {index - batch.version}
    if bound == 0:
        assert all(m["gen_wait_s"] >= 0.9 for m in steps[1:])  # generation waited for training
    assert all(m["train_wait_s"] >= 0 and m["gen_wait_s"] >= 0 for m in steps)
    assert "held_out_pass_rate" in history.metrics[-1]
    assert all(sum(m["calls_by_tool"].values()) == pytest.approx(m["calls_mean"]) for m in steps)
    assert trainer.env.live == set()
    plot = plot_held_out({"run": tmp_path / "metrics.jsonl"}, tmp_path / "h.png", "read_file")
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_the_line_format_parses_what_the_docs_say() -> None:
    lines = LineFormat()
    assert lines.parse("$ ls -l") == ToolCall("shell", {"command": "ls -l"})
    assert lines.parse("<v\n") == ToolCall("read_file", {"path": "v"})
    assert lines.parse("> a 4 5") == ToolCall("write_file", {"path": "a", "content": "4 5\n"})
    assert lines.parse(".").finishes and lines.parse("").finishes
    assert lines.parse("hello").error is not None
    chat = JsonFormat()
    assert chat.parse("no call").finishes
    assert chat.parse('<tool_call>{"name": "finish"}</tool_call>').finishes
    assert chat.parse("<tool_call>{nope}</tool_call>").error is not None


def test_a_word_of_the_vocabulary_is_one_token() -> None:
    tokenizer = CharTokenizer("0123456789", ["< v", "< vv", "err"])
    assert tokenizer.vocab_size == 3 + 10 + 3
    ids = tokenizer.encode_piece("< vv7\nerror: < v")  # the longest word first; others dropped
    assert len(ids) == 4 and tokenizer.decode(ids) == "< vv7err< v"
    assert tokenizer.encode("< v3") == [tokenizer.bos_id, *tokenizer.encode_piece("< v3")]
    with pytest.raises(ValueError, match="charset"):
        tokenizer.encode("< w")


def test_the_config_says_what_to_train_on(tasks: Path) -> None:
    agent = _agent(tasks).model_dump()
    with pytest.raises(ValueError, match=r"sandbox\.url"):
        TrainConfig.model_validate({"agent": agent})
    with pytest.raises(ValueError, match="n_positions"):
        TrainConfig.model_validate(
            {"agent": agent, "sandbox": {"url": "http://x"}, "model": {"n_positions": 64}}
        )
    with pytest.raises(ValueError, match="domains"):
        TrainConfig.model_validate({})
    assert ModelConfig().kind == "tiny-gpt2"
