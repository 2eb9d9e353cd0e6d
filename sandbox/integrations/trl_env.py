"""A TRL environment over this service's episodes: ``GRPOTrainer(environment_factory=...)``.

TRL (>= 1.x, with transformers >= 5.2; the ``trl`` extra) makes one environment
per rollout, keeps them in a pool and reuses them: before each generation it
calls ``reset(**row)`` with the dataset row, offers the environment's public
methods to the model as tools (their type hints and Google-style docstrings are
the schemas), runs the tool calls the model emits, and at the end calls
``get_reward()`` once per rollout. :class:`SandboxToolEnv` maps that onto
``/v1/episodes``:

- ``reset(**row)`` closes the previous episode (whatever its state) and opens a
  new one of the row's ``task``: a local task directory (uploaded once, cached
  by its content), a shipped task's id, or an ``upload:<digest>`` reference. It
  returns the task's instruction, which TRL appends to the row's last user
  message.
- :meth:`~SandboxToolEnv.bash`, :meth:`~SandboxToolEnv.write_file` and
  :meth:`~SandboxToolEnv.read_file` are the episode's ``shell``, ``write_file``
  and ``read_file`` tool calls; they return the sandbox's observation as text.
- ``get_reward()`` runs the task's hidden tests (the evaluator's judging): 1.0
  for a pass, 0.0 otherwise (or the task's reward file), and ``None`` when the
  sandbox failed (a container died, the service could not be reached), which
  TRL drops from the group's baseline instead of scoring it 0.

An episode left open (the last batch's, or an instance garbage-collected) is
closed when its instance is collected or the interpreter exits.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.client import DEFAULT_URL, SandboxClient, folder_archive
from sandbox.errors import (
    AuthenticationError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    PolicyError,
    SandboxError,
    SessionLostError,
    UnsupportedError,
)
from sandbox.results import EpisodeInfo, EpisodeResult

__all__ = ["SandboxToolEnv", "sandbox_environment_factory"]

logger = logging.getLogger(__name__)

# The caller's mistakes (a bad task, a refused key, a wrong argument): raised, never a
# dropped rollout. Every other SandboxError is the platform failing: reward None.
_CALLER_ERRORS = (
    AuthenticationError,
    ForbiddenError,
    InvalidRequestError,
    PolicyError,
    UnsupportedError,
)


def _callers_fault(exc: SandboxError) -> bool:
    if isinstance(exc, NotFoundError):
        return not isinstance(exc, SessionLostError)
    return isinstance(exc, _CALLER_ERRORS)


@dataclass
class _Connection:
    """A client and the task directories uploaded through it (content digest -> ref).

    Shared by a factory's environments, which TRL's asynchronous trainer drives from a
    thread pool: the client is thread-safe, and uploads take a lock.
    """

    client: SandboxClient
    owned: bool
    uploads: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def task_ref(self, task: str | Path) -> str:
        """The reference that opens episodes of ``task``, uploading a directory once."""
        folder = Path(task).expanduser()
        if not folder.is_dir():
            return str(task)
        digest = hashlib.sha256(folder_archive(folder)).hexdigest()
        with self.lock:
            ref = self.uploads.get(digest)
            if ref is None:
                ref = self.uploads[digest] = self.client.upload_task(folder).task
        return ref


@dataclass
class _Live:
    """What the finalizer of an instance needs: its connection and its open episode."""

    connection: _Connection
    episode_id: str | None = None

    def close_episode(self) -> None:
        episode_id, self.episode_id = self.episode_id, None
        if episode_id is None:
            return
        try:
            self.connection.client.close_episode(episode_id)
        except SandboxError as exc:  # the service is gone: its reaper ends the session
            logger.warning("could not close episode %s: %s", episode_id, exc)

    def release(self) -> None:
        """Close the episode, then the client if it is this instance's own."""
        self.close_episode()
        if self.connection.owned:
            self.connection.client.close()


class SandboxToolEnv:
    """One rollout's episode in a sandbox session, for TRL's ``environment_factory``.

    Args:
        url: The service's base URL.
        api_key: The tenant's API key, if the service requires one.
        task: The task to use when a row has no ``task_column`` value.
        task_column: The dataset column naming each row's task.
        max_steps: Cap on tool calls per episode (at most the task's own budget).
        timeout_s: Cap on an episode's wall time (at most the task's own budget).
        max_output_chars: Cap on each observation (head and tail kept).
        client: A client to share (the factory's); otherwise the instance makes its own.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        task: str | Path | None = None,
        task_column: str = "task",
        max_steps: int | None = None,
        timeout_s: float | None = None,
        max_output_chars: int | None = None,
        client: SandboxClient | None = None,
        _connection: _Connection | None = None,
    ) -> None:
        if _connection is None:
            owned = client is None
            _connection = _Connection(client or SandboxClient(url, api_key=api_key), owned)
        self._connection = _connection
        self._default_task = task
        self._task_column = task_column
        self._options: dict[str, Any] = {
            "max_steps": max_steps,
            "timeout_s": timeout_s,
            "max_output_chars": max_output_chars,
        }
        self._live = _Live(_connection)
        self._finalizer = weakref.finalize(self, self._live.release)
        self._episode: EpisodeInfo | None = None
        self._result: EpisodeResult | None = None
        self._failure: str | None = None
        self._tool_calls = 0

    # ------------------------------------------------------------ TRL's contract

    def reset(self, **row: Any) -> str:
        """Close the previous episode and open one of the row's task; its instruction.

        ``row`` is the dataset row TRL passes (``prompt`` and every other column).
        A task that does not exist, or that the key may not use, raises; the
        platform failing to start the session instead makes this rollout's reward
        ``None`` (the returned text then says the sandbox failed).
        """
        self._live.close_episode()
        self._episode, self._result, self._failure, self._tool_calls = None, None, None, 0
        task = row.get(self._task_column) or self._default_task
        if not task:
            raise ValueError(
                f"the row has no {self._task_column!r} column and no default task was given: "
                f"add a {self._task_column!r} column (a task directory, a shipped task id or "
                "an upload: reference) or pass task= to SandboxToolEnv"
            )
        try:
            ref = self._connection.task_ref(task)
            episode = self._connection.client.open_episode(ref, **self._options)
        except SandboxError as exc:
            if _callers_fault(exc):
                raise type(exc)(f"task {task!r}: {exc}") from exc
            return self._failed(f"the sandbox failed to start an episode of {task!r}: {exc}")
        self._episode = episode
        self._live.episode_id = episode.id
        return _separator(row.get("prompt")) + episode.instruction

    def get_reward(self) -> float | None:
        """Run the hidden tests once: the reward, or ``None`` when the sandbox failed."""
        if self._result is None:
            if self._episode is None or self._failure is not None:
                return None
            try:
                self._result = self._connection.client.judge_episode(self._episode.id)
            except SandboxError as exc:
                self._failed(f"judging failed: {exc}")
                return None
        return self._result.reward

    # ------------------------------------------------------------ the tools

    def bash(self, command: str) -> str:
        """Run a bash command in the task's workspace.

        Args:
            command: The command line, run by bash in the workspace directory.

        Returns:
            The exit code, stdout and stderr of the command.
        """
        return self._step("shell", {"command": command})

    def write_file(self, path: str, content: str) -> str:
        """Create or replace a file in the workspace.

        Args:
            path: The file's path, relative to the workspace.
            content: The text to write.

        Returns:
            What was written, or the error.
        """
        return self._step("write_file", {"path": path, "content": content})

    def read_file(self, path: str) -> str:
        """Read a text file from the workspace.

        Args:
            path: The file's path, relative to the workspace.

        Returns:
            The file's content, or the error.
        """
        return self._step("read_file", {"path": path})

    # ------------------------------------------------------------ state

    @property
    def episode(self) -> EpisodeInfo | None:
        """The open episode (None before ``reset`` or when the sandbox failed to start)."""
        return self._episode

    @property
    def result(self) -> EpisodeResult | None:
        """The judged episode, once ``get_reward`` ran the hidden tests."""
        return self._result

    @property
    def failure(self) -> str | None:
        """Why this rollout has no reward (the sandbox failed), if it has none."""
        return self._failure

    @property
    def tool_calls(self) -> int:
        """Tool calls sent to the service in this episode."""
        return self._tool_calls

    def _close(self) -> None:
        """Close the open episode and this instance's own client (also done on collection)."""
        self._finalizer()

    def _step(self, tool: str, arguments: Mapping[str, Any]) -> str:
        if self._failure is not None:
            return f"error: the sandbox failed; this episode has no verdict ({self._failure})"
        if self._episode is None:
            raise RuntimeError("no episode: call reset() first")
        self._tool_calls += 1
        try:
            step = self._connection.client.episode_step(self._episode.id, tool, arguments)
        except InvalidRequestError as exc:  # the model's arguments: its mistake to see
            return f"error: {exc}"
        except SandboxError as exc:
            return self._failed(f"the sandbox failed mid-episode: {exc}")
        return step.observation

    def _failed(self, why: str) -> str:
        logger.warning("%s; the rollout gets no reward", why)
        self._failure = why
        return f"error: {why}"


def _separator(prompt: object) -> str:
    """What goes between the row's last user message and the instruction TRL appends."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        content = prompt[-1].get("content")
        return "\n\n" if isinstance(content, str) and content.strip() else ""
    return ""


def sandbox_environment_factory(
    url: str = DEFAULT_URL,
    *,
    api_key: str | None = None,
    check: bool = True,
    **options: Any,
) -> Callable[[], SandboxToolEnv]:
    """A factory for ``GRPOTrainer(environment_factory=...)``: its environments share one
    client (and its cache of uploaded task directories).

    Args:
        url: The service's base URL.
        api_key: The tenant's API key, if the service requires one.
        check: Fail now (``GET /healthz``) if the service does not answer.
        **options: :class:`SandboxToolEnv`'s ``task``, ``task_column``, ``max_steps``,
            ``timeout_s`` and ``max_output_chars``.
    """
    connection = _Connection(SandboxClient(url, api_key=api_key), owned=False)
    if check:
        connection.client.health()

    def make() -> SandboxToolEnv:
        return SandboxToolEnv(url, _connection=connection, **options)

    # The shared client closes after the last environment (each holds the connection).
    weakref.finalize(connection, connection.client.close)
    return make
