"""Multi-turn rollouts: a batch of episodes, each in its own sandbox session, in lockstep.

:class:`EpisodeEnv` drives the service's episode API (``AsyncSandboxClient``:
``upload_task``, ``open_episode``, ``episode_step``, ``judge_episode``,
``close_episode``) from a :class:`~.loop.BackgroundLoop`. :meth:`EpisodeEnv.run`
plays a batch: every episode runs concurrently in its own session (copied
from the task's snapshot), at most ``sandbox.concurrency`` at once; the turns
the episodes ask for are sampled together, in batches (:class:`TurnBatcher`),
parsed into tool calls (:mod:`.toolcalls`) and run in their sessions, and each
observation is appended to its episode's context (``agent.opening`` calls, if any, run first: the
episode's initial observation, not the policy's tokens); an episode ends when it finishes, after
``max_turns``, when its context would pass ``max_tokens``, or when the
sandbox ends it (its step budget or time). Then the hidden tests judge every
episode (``judge_episode``: the evaluator's judging), and every episode is
closed whatever happens (a failure, a cancellation: ``finally``).

An episode the platform failed (it could not open, a step or the judging
failed, or the verdict is ``infra_error``) has reward ``None``: the trainer
drops it from its group, never scoring it 0.

Only the policy's tokens are trained on: :attr:`EpisodeSample.policy_mask`
marks them (prompt, turn prefixes and observations are 0), and
:attr:`EpisodeSample.logprobs` holds the log-probabilities they were sampled
with, by the policy version :attr:`EpisodeSample.version`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

from ..client import AsyncSandboxClient
from ..errors import SandboxError
from ..evals.formats import load_tasks
from .config import AgentConfig, SandboxConfig
from .loop import BackgroundLoop
from .model import Tokenizer, sample_turns
from .toolcalls import ToolCall, ToolFormat, blank, tool_format

logger = logging.getLogger(__name__)

FAILURES = (SandboxError, httpx.HTTPError)
CLOSE_TRIES = 3
CLOSE_WAIT_S = 30.0


class Policy(Protocol):
    """Samples one turn for each context: token ids and their sampling log-probabilities."""

    def act(self, contexts: list[list[int]]) -> list[tuple[list[int], list[float]]]: ...


@dataclass
class ModelPolicy:
    """A causal LM as the policy (sampled at ``temperature``; PAD/BOS never sampled)."""

    model: object
    tokenizer: Tokenizer
    max_turn_tokens: int
    temperature: float
    stop_ids: frozenset[int]
    banned_ids: frozenset[int] = frozenset()

    def act(self, contexts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        return sample_turns(
            self.model,  # type: ignore[arg-type]
            contexts,
            max_new_tokens=self.max_turn_tokens,
            temperature=self.temperature,
            pad_id=self.tokenizer.pad_id,
            stop_ids=self.stop_ids,
            banned_ids=self.banned_ids,
        )


@dataclass
class EpisodeSample:
    """One episode as trained on: its tokens, which are the policy's, and its reward."""

    task: str
    version: int
    tokens: list[int] = field(default_factory=list)
    policy_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    """What the sandbox returned (before blanking, in the control run)."""
    reward: float | None = None
    outcome: str | None = None
    error: str | None = None
    episode_id: str | None = None
    done: bool = False
    staleness: int | None = None
    """The trainer's version minus :attr:`version` when the sample was trained on."""

    def extend(self, ids: Sequence[int], *, policy: bool, logprobs: Sequence[float] = ()) -> None:
        self.tokens.extend(ids)
        self.policy_mask.extend([1 if policy else 0] * len(ids))
        self.logprobs.extend(logprobs if policy else [0.0] * len(ids))

    @property
    def policy_tokens(self) -> int:
        return sum(self.policy_mask)


@dataclass(frozen=True)
class TaskRef:
    """An uploaded task: the reference that opens its episodes, and its id."""

    ref: str
    id: str


class EpisodeEnv:
    """Episodes of uploaded tasks on the service, played in batches by a policy."""

    def __init__(self, sandbox: SandboxConfig, agent: AgentConfig, tokenizer: Tokenizer) -> None:
        if not sandbox.url:
            raise ValueError("episodes run through the service: set sandbox.url")
        self.agent = agent
        self.tokenizer = tokenizer
        self.format: ToolFormat = tool_format(agent.tool_format)
        self._loop = BackgroundLoop("episodes")
        key = os.environ.get(sandbox.api_key_env) if sandbox.api_key_env else None
        self._client = self._loop.call(_client(sandbox.url, key))
        # At most `concurrency` episodes hold a session at once (eval and training
        # together): keep it at most the policy's pool.max, or opens wait for a sandbox.
        self._sessions = asyncio.Semaphore(sandbox.concurrency)
        self.live: set[str] = set()
        """The episodes open at this moment (opened, not yet closed)."""

    @property
    def stop_ids(self) -> frozenset[int]:
        """Tokens that end a turn: EOS, and the format's stop text when it is one token."""
        stop = self.format.stop_text
        ids = self.tokenizer.encode_piece(stop) if stop else []
        return (
            frozenset([self.tokenizer.eos_id, *ids])
            if len(ids) == 1
            else frozenset([self.tokenizer.eos_id])
        )

    def upload(self, paths: Sequence[Path]) -> list[TaskRef]:
        """Upload every task under ``paths`` (a task directory or a directory of them)."""

        async def upload_all() -> list[TaskRef]:
            refs = []
            for path in paths:
                for task in load_tasks(path):
                    info = await self._client.upload_task(task.path)
                    refs.append(TaskRef(info.task, info.id))
            return refs

        return self._loop.call(upload_all())

    def run(self, tasks: Sequence[str], policy: Policy, *, version: int) -> list[EpisodeSample]:
        """Play one episode of each of ``tasks`` (references; repeat one for a group)."""
        return self._loop.call(self._run(list(tasks), policy, version))

    def cancel(self) -> None:
        """Cancel the batches being played; return once their episodes are closed (or
        after :data:`CLOSE_WAIT_S`: the service reaps what is left)."""
        self._loop.cancel_all()
        deadline = time.monotonic() + CLOSE_WAIT_S
        while self.live and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.cancel()
        self._loop.call(self._client.aclose())
        self._loop.close()

    # ------------------------------------------------------------------ one batch

    async def _run(self, tasks: list[str], policy: Policy, version: int) -> list[EpisodeSample]:
        samples = [EpisodeSample(task, version) for task in tasks]
        batcher = TurnBatcher(policy)
        try:
            await asyncio.gather(*(self._episode(s, batcher) for s in samples))
        finally:
            batcher.close()
        return samples

    async def _episode(self, sample: EpisodeSample, batcher: TurnBatcher) -> None:
        """One episode, start to verdict, holding one of ``concurrency`` session slots."""
        async with self._sessions:
            try:
                await self._open(sample)
                for line in self.agent.opening:
                    if sample.done:
                        break
                    sample.extend(self.tokenizer.encode_piece(line + "\n"), policy=False)
                    await self._execute(sample, self.format.parse(line))
                turn = 0
                while not sample.done and turn < self.agent.max_turns:
                    await self._turn(sample, batcher, turn)
                    turn += 1
                await self._judge(sample)
            finally:
                # A cancellation must not cut the close short: wait it out, then re-raise.
                closing = asyncio.ensure_future(self._close(sample))
                try:
                    await asyncio.shield(closing)
                except asyncio.CancelledError:
                    await closing
                    raise

    async def _open(self, sample: EpisodeSample) -> None:
        agent = self.agent
        try:
            info = await self._client.open_episode(
                sample.task,
                max_steps=agent.max_turns + len(agent.opening),
                timeout_s=agent.episode_timeout_s,
                max_output_chars=agent.max_output_chars,
            )
        except FAILURES as exc:
            self._failed(sample, f"the episode could not open: {exc}")
            return
        sample.episode_id = info.id
        self.live.add(info.id)
        prompt = agent.prompt.replace("{instruction}", info.instruction)
        # encode("") is the tokenizer's start (BOS for the character model); the
        # instruction is encoded as a piece, so characters outside a charset are dropped.
        start = self.tokenizer.encode("")
        sample.extend(start + self.tokenizer.encode_piece(prompt), policy=False)

    def _failed(self, sample: EpisodeSample, error: str) -> None:
        logger.warning("episode of %s dropped: %s", sample.task, error)
        sample.error, sample.done, sample.reward = error, True, None

    def _prefix(self, turn: int) -> str:
        prefixes = self.agent.turn_prefixes
        return prefixes[min(turn, len(prefixes) - 1)] if prefixes else ""

    async def _turn(self, sample: EpisodeSample, batcher: TurnBatcher, turn: int) -> None:
        """One turn: the policy's tokens, its tool call run in the session, the observation."""
        prefix = self._prefix(turn)
        prefix_ids = self.tokenizer.encode_piece(prefix)
        if len(sample.tokens) + len(prefix_ids) >= self.agent.max_tokens:
            sample.done = True  # no room for another turn
            return
        sample.extend(prefix_ids, policy=False)
        ids, logprobs = self._cut(*await batcher.act(list(sample.tokens)))
        room = self.agent.max_tokens - len(sample.tokens)
        ids, logprobs = ids[:room], logprobs[:room]
        sample.extend(ids, policy=True, logprobs=logprobs)
        call = self.format.parse(prefix + self.tokenizer.decode(ids))
        ended_by_eos = bool(ids) and ids[-1] == self.tokenizer.eos_id
        await self._execute(sample, call)
        if ended_by_eos:
            sample.done = True

    async def _execute(self, sample: EpisodeSample, call: ToolCall) -> None:
        """Run ``call`` in the episode's session and append what came back to its context."""
        sample.calls.append(call)
        if call.finishes:
            sample.done = True
            return
        if call.error is not None:
            observation = call.error
        else:
            assert sample.episode_id is not None
            try:
                step = await self._client.episode_step(sample.episode_id, call.tool, call.arguments)
            except FAILURES as exc:
                self._failed(sample, f"a tool call failed in the platform: {exc}")
                return
            observation = step.observation
            sample.done = step.done
        sample.observations.append(observation)
        shown = blank(observation) if self.agent.blank_observations else observation
        room = self.agent.max_tokens - len(sample.tokens)
        observed = self.tokenizer.encode_piece(self.format.observation(shown))
        sample.extend(observed[:room], policy=False)
        if len(observed) >= room:
            sample.done = True

    def _cut(self, ids: list[int], logprobs: list[float]) -> tuple[list[int], list[float]]:
        """Keep a turn's tokens up to the format's stop text (sampled tokens after it are
        dropped, as a stop string would have stopped sampling there)."""
        stop = self.format.stop_text
        if not stop or stop not in self.tokenizer.decode(ids):
            return ids, logprobs
        for end in range(1, len(ids) + 1):
            if stop in self.tokenizer.decode(ids[:end]):
                return ids[:end], logprobs[:end]
        return ids, logprobs

    async def _judge(self, sample: EpisodeSample) -> None:
        if sample.episode_id is None or sample.error is not None:
            return
        try:
            result = await self._client.judge_episode(sample.episode_id)
        except FAILURES as exc:
            self._failed(sample, f"the hidden tests could not run: {exc}")
            return
        sample.reward, sample.outcome = result.reward, result.outcome
        if result.reward is None:
            sample.error = result.error or result.outcome

    async def _close(self, sample: EpisodeSample) -> None:
        if sample.episode_id is None:
            return
        for attempt in range(CLOSE_TRIES):
            try:
                await self._client.close_episode(sample.episode_id)
                self.live.discard(sample.episode_id)
                return
            except FAILURES as exc:  # the service reaps what it could not close now
                logger.warning("episode %s not closed (%d): %r", sample.episode_id, attempt, exc)
                await asyncio.sleep(0.5)


class TurnBatcher:
    """Batches the turns episodes ask for: one policy call serves every request pending.

    Episodes run independently (each its own coroutine); while the policy
    samples one batch, the requests that arrive queue for the next.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._pending: list[tuple[list[int], asyncio.Future[tuple[list[int], list[float]]]]] = []
        self._draining = False
        self._task: asyncio.Task[None] | None = None
        self.calls = 0

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def act(self, context: list[int]) -> tuple[list[int], list[float]]:
        future: asyncio.Future[tuple[list[int], list[float]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending.append((context, future))
        if not self._draining:
            self._draining = True
            self._task = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(0)  # let every episode that is ready ask first
                batch, self._pending = self._pending, []
                live = [(c, f) for c, f in batch if not f.done()]
                if not live:
                    continue
                self.calls += 1
                try:
                    turns = await asyncio.to_thread(self.policy.act, [c for c, _ in live])
                except Exception as exc:  # every episode waiting gets the error
                    for _, future in live:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), turn in zip(live, turns, strict=True):
                    if not future.done():
                        future.set_result(turn)
        finally:
            self._draining = False


async def _client(url: str, key: str | None) -> AsyncSandboxClient:
    return AsyncSandboxClient(url, api_key=key, timeout=600)
