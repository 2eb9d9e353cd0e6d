"""The TRL environment (:mod:`sandbox.integrations.trl_env`) against a real ``sandbox serve``.

The real ``trl.GRPOTrainer`` trains a tiny Qwen2 model built here (no download: a
byte-level BPE tokenizer trained on the prompt, TRL's own Qwen2.5 chat template, so TRL
parses ``<tool_call>`` blocks) for two steps with ``environment_factory``. The model is
first fitted to emit one tool call (``bash`` copying the episode's ``value.txt`` to
``answer.txt``), so its rollouts do call tools; sampling makes some of them not. Every
rollout's episode, tool calls and reward are then checked on the service's side.
Scripted tool calls give exactly the hidden tests' verdict, a reused instance keeps
nothing from its previous episode, and a killed container gives the reward ``None`` (in the
GRPOTrainer run too, where TRL leaves it out of the group instead of scoring it 0).
"""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
import yaml
from datasets import Dataset
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    TrainerCallback,
)
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template

from sandbox.client import SandboxClient
from sandbox.errors import NotFoundError, ServiceUnreachableError
from sandbox.integrations.trl_env import SandboxToolEnv, sandbox_environment_factory

from ..conftest import REPO, Service, free_port, kill_session_container

pytestmark = pytest.mark.docker

SUITE = REPO / "sandbox" / "evals" / "suite"
INSTRUCTION = "value.txt holds a word; copy it to answer.txt."
TASK_YAML = f"""\
instruction: "{INSTRUCTION}"
agent:
  timeout_s: 300
  max_steps: 4
tests:
  command: '[ "$(agent-run cat answer.txt)" = "$(cat value.txt)" ]'
  timeout_s: 30
"""
CALL = (
    '<tool_call>\n{"name": "bash", "arguments": {"command": "cp value.txt answer.txt"}}\n'
    "</tool_call>"
)


def make_task(root: Path, word: str) -> Path:
    task = root / f"copy-{word}"
    for folder in ("files", "tests"):
        (task / folder).mkdir(parents=True)
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "files" / "value.txt").write_text(f"{word}\n")
    (task / "tests" / "value.txt").write_text(f"{word}\n")
    return task


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_task(tmp_path_factory.mktemp("trl-task"), "banana")


@pytest.fixture
def env(service: Service) -> Iterator[SandboxToolEnv]:
    environment = sandbox_environment_factory(service.url)()
    yield environment
    environment._close()


def episode_state(service: Service, episode_id: str) -> httpx.Response:
    return httpx.get(f"{service.url}/v1/episodes/{episode_id}", timeout=30)


# ---------------------------------------------------------------- scripted tool calls


def test_scripted_tool_calls_get_the_sandbox_and_the_hidden_tests_decide(
    service: Service, env: SandboxToolEnv, task: Path, tmp_path: Path
) -> None:
    prompt = [{"role": "user", "content": "Solve it."}]
    assert env.reset(task=str(task), prompt=prompt) == "\n\n" + INSTRUCTION
    first = env.episode
    assert first is not None
    seen = env.bash("cat value.txt; ls")
    assert seen.splitlines()[:4] == ["exit_code: 0", "[stdout]", "banana", "value.txt"]
    assert env.write_file("answer.txt", "banana\n") == "wrote 7 bytes to answer.txt"
    assert env.read_file("answer.txt") == "banana\n"
    assert env.get_reward() == 1.0
    assert env.result is not None and env.result.outcome == "passed"
    assert env.result.tests is not None and env.result.tests["status"] == "ok"
    # the service judged it, the same way again; three tool calls went through
    state = episode_state(service, first.id).json()
    assert (state["steps"], state["done"]) == (3, True)
    assert env.get_reward() == 1.0 and env.tool_calls == 3

    # the same instance, reused: a new episode, nothing left of the previous one
    assert env.reset(task=str(task), prompt=[{"role": "user", "content": ""}]) == INSTRUCTION
    second = env.episode
    assert second is not None and second.id != first.id
    assert episode_state(service, first.id).status_code == 404
    assert (env.result, env.tool_calls) == (None, 0)
    assert env.bash("ls").splitlines()[:3] == ["exit_code: 0", "[stdout]", "value.txt"]
    assert env.bash("echo apple > answer.txt").startswith("exit_code: 0")
    assert env.get_reward() == 0.0
    assert env.result is not None and env.result.outcome == "failed"
    assert env.result.tests is not None and env.result.tests["status"] == "nonzero_exit"

    # the directory was uploaded once (by content); its reference opens episodes too
    connection = env._connection
    assert len(connection.uploads) == 1
    (ref,) = connection.uploads.values()
    assert env.reset(task=ref) == INSTRUCTION
    assert env.write_file("answer.txt", "banana").startswith("wrote")
    assert env.get_reward() == 1.0
    # a shipped task, by id
    shipped = yaml.safe_load((SUITE / "cli-calc" / "task.yaml").read_text())
    assert env.reset(task="cli-calc") == shipped["instruction"]
    assert env.bash("ls").splitlines()[2:4] == ["README.md", "examples.txt"]
    # another content is another upload
    env.reset(task=str(make_task(tmp_path, "cherry")))
    assert len(connection.uploads) == 2
    last = env.episode
    assert last is not None
    env._close()
    assert episode_state(service, last.id).status_code == 404


def test_a_bad_task_raises_and_an_unreachable_service_fails_at_once(
    env: SandboxToolEnv, tmp_path: Path
) -> None:
    with pytest.raises(NotFoundError, match="no-such-task"):
        env.reset(task="no-such-task")
    with pytest.raises(ValueError, match="'task' column"):
        env.reset(prompt=[{"role": "user", "content": ""}])
    with pytest.raises(ServiceUnreachableError):
        sandbox_environment_factory(f"http://127.0.0.1:{free_port()}")


def test_episodes_left_open_are_closed_on_collection_and_at_exit(
    service: Service, task: Path
) -> None:
    env = sandbox_environment_factory(service.url)()
    env.reset(task=str(task))
    assert env.episode is not None
    collected = env.episode.id
    del env
    gc.collect()
    assert episode_state(service, collected).status_code == 404

    # a trainer process that ends with its last batch's episodes open
    script = f"""
from sandbox.integrations.trl_env import sandbox_environment_factory
make = sandbox_environment_factory({service.url!r})
envs = [make(), make()]
for env in envs:
    env.reset(task={str(task)!r})
print(" ".join(env.episode.id for env in envs))
"""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    left_open = done.stdout.split()
    assert len(left_open) == 2
    for episode_id in left_open:
        assert episode_state(service, episode_id).status_code == 404


# ---------------------------------------------------------------- sandbox failures


def _kill(service: Service, env: SandboxToolEnv) -> None:
    """Kill the container of ``env``'s episode (not through its tools: no step is counted)."""
    assert env.episode is not None
    kill_session_container(service, env.episode.session_id)


def test_a_killed_sandbox_gives_no_reward(
    service: Service, env: SandboxToolEnv, task: Path
) -> None:
    # killed mid-episode: the next tool call says so, and there is no verdict
    env.reset(task=str(task))
    _kill(service, env)
    assert "the sandbox failed" in env.bash("cp value.txt answer.txt")
    assert env.get_reward() is None
    assert env.result is not None and env.result.outcome == "infra_error"

    # killed after the work, before judging: no verdict either (never 0)
    env.reset(task=str(task))
    assert env.bash("cp value.txt answer.txt").startswith("exit_code: 0")
    _kill(service, env)
    assert env.get_reward() is None

    # the instance recovers on its next reset: a real verdict again
    env.reset(task=str(task))
    assert env.bash("cp value.txt answer.txt").startswith("exit_code: 0")
    assert env.get_reward() == 1.0


def test_a_service_gone_mid_episode_gives_no_reward(task: Path) -> None:
    svc = Service()
    try:
        svc.wait_ready()
        env = sandbox_environment_factory(svc.url)()
        env.reset(task=str(task))
    finally:
        svc.stop()
    assert "the sandbox failed mid-episode" in env.bash("ls")
    assert env.failure is not None and env.get_reward() is None
    env._close()  # the service is gone: nothing to close, no error


# ---------------------------------------------------------------- the real GRPOTrainer


def _tokenizer(tools: list[Any]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the rendered prompt, with TRL's Qwen2.5 chat
    template (TRL knows how to parse its tool calls)."""
    render = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"x": 0}, unk_token="x"))
    )
    render.chat_template = qwen2_5_chat_template
    prompt = render.apply_chat_template(
        [{"role": "user", "content": INSTRUCTION}],
        tools=tools,
        tokenize=False,
        add_generation_prompt=True,
    )
    corpus = [str(prompt) + CALL, "exit_code: 0\n[stdout] (empty)\n[stderr] (empty)\n"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus * 3,
        trainers.BpeTrainer(
            vocab_size=700,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    bpe.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t in ("<tool_call>", "</tool_call>")]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
    )
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def _policy(tokenizer: PreTrainedTokenizerFast, tools: list[Any]) -> Qwen2ForCausalLM:
    """A tiny random Qwen2, fitted to answer the task's prompt with ``CALL``."""
    torch.manual_seed(0)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=pad,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = eos, pad
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": INSTRUCTION}],
        tools=tools,
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt_ids = tokenizer(str(prompt))["input_ids"]
    ids = torch.tensor([prompt_ids + tokenizer(CALL + "<|im_end|>")["input_ids"]])
    labels = ids.clone()
    labels[0, : len(prompt_ids)] = -100
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(300):
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    assert loss.item() < 0.05
    return model


class _Audit(TrainerCallback):
    """After each step: every pooled environment's episode as the service reports it."""

    def __init__(self, service: Service, made: list[SandboxToolEnv]) -> None:
        self.service, self.made = service, made
        self.steps: list[list[dict[str, Any]]] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        rows = []
        with SandboxClient(self.service.url) as client:
            for env in self.made:
                assert env.episode is not None and env.result is not None, env.failure
                on_service = episode_state(self.service, env.episode.id).json()
                rows.append(
                    {
                        "id": env.episode.id,
                        "tool_calls": env.tool_calls,
                        "reward": env.get_reward(),
                        "service_steps": on_service["steps"],
                        "service_done": on_service["done"],
                        # judging is idempotent: the service's own verdict, read back
                        "service_reward": client.judge_episode(env.episode.id).reward,
                    }
                )
        self.steps.append(rows)


class _KillBeforeJudging(TrainerCallback):
    """In the second step, the container of one pooled environment's episode is killed when
    TRL asks that environment for its reward (its rollout done, before the hidden tests)."""

    def __init__(self, service: Service, made: list[SandboxToolEnv]) -> None:
        self.service, self.made = service, made
        self.victim: SandboxToolEnv | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step != 1:
            return
        victim = self.victim = self.made[1]
        judge = victim.get_reward

        def get_reward() -> float | None:
            if victim.result is None:
                _kill(self.service, victim)
            return judge()

        victim.get_reward = get_reward  # type: ignore[method-assign]


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """The tiny model on one thread: on 2 shared cores, torch's thread pool spinning
    against the service and its containers makes training several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_torch_thread")
def test_grpo_trainer_runs_every_rollout_through_the_service(
    service: Service, task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    base = sandbox_environment_factory(service.url)
    made: list[SandboxToolEnv] = []

    def factory() -> SandboxToolEnv:
        env = base()
        made.append(env)
        return env

    probe = base()
    tools = [probe.bash, probe.read_file, probe.write_file]  # the order TRL lists them
    tokenizer = _tokenizer(tools)
    model = _policy(tokenizer, tools)
    probe._close()

    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": ""}]] * 8, "task": [str(task)] * 8}
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        max_completion_length=96,
        max_tool_calling_iterations=1,
        learning_rate=1e-4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    audit, killer = _Audit(service, made), _KillBeforeJudging(service, made)
    trainer = GRPOTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=factory,
        callbacks=[killer, audit],
    )
    try:
        assert sorted(t.__name__ for t in trainer.tools) == ["bash", "read_file", "write_file"]
        trainer.train()
    finally:
        for env in made:
            env._close()

    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert trainer.state.global_step == 2 and len(logs) == len(audit.steps) == 2
    assert len(made) == 4  # TRL's pool: one instance per rollout, reused by the next step
    ids = [row["id"] for rows in audit.steps for row in rows]
    assert len(set(ids)) == 8  # every rollout its own episode
    for log, rows in zip(logs, audit.steps, strict=True):
        judged = [row for row in rows if row["reward"] is not None]
        for row in rows:
            # the service saw exactly the rollout's tool calls, and judged it
            assert row["service_steps"] == row["tool_calls"] and row["service_done"]
            assert row["service_reward"] == row["reward"]
            if row["tool_calls"] == 0:
                assert row["reward"] == 0.0  # value.txt is only readable in the sandbox
        assert all(row["reward"] in (0.0, 1.0) for row in judged)
        # TRL's own figures are the service's; a rollout without a verdict is left out
        assert log["tools/call_frequency"] == pytest.approx(
            sum(r["service_steps"] for r in rows) / len(rows)
        )
        assert log["rewards/SandboxToolEnv/mean"] == pytest.approx(
            sum(r["reward"] for r in judged) / len(judged)
        )
    assert any(row["reward"] == 1.0 for rows in audit.steps for row in rows)

    # The killed rollout: no verdict, and TRL did not score it 0 (TRL 1.16 turns a None
    # reward into NaN, keeps it out of its group's mean and std, and zeroes its advantage).
    victim = killer.victim
    assert victim is not None and victim.result is not None
    assert (victim.get_reward(), victim.result.outcome) == (None, "infra_error")
    first, second = audit.steps
    assert all(row["reward"] is not None for row in first)
    assert [row["id"] for row in second if row["reward"] is None] == [victim.result.episode]
    # TRL's record of the last batch: rewards and advantages, in its rollouts' order
    at = trainer.environments.index(victim)
    rewards = list(trainer._logs["rewards"]["SandboxToolEnv"])
    advantages = list(trainer._logs["advantages"])
    assert math.isnan(rewards[at]) and advantages[at] == 0.0
    others = [i for i in range(len(rewards)) if i != at]
    judged_rewards = [rewards[i] for i in others]
    assert 1.0 in judged_rewards  # else scoring the killed one 0 would change nothing
    assert sum(advantages[i] for i in others) == pytest.approx(0.0, abs=1e-4)
    # the first step's episodes were closed when their instances were reset; the last
    # step's when the environments were closed
    for episode_id in ids:
        assert episode_state(service, episode_id).status_code == 404
