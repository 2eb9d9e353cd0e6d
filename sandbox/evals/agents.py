"""Agents and the tools they act through.

An agent gets the task's instruction and a :class:`Tools` bound to one sandbox
session, and acts until it calls ``done`` (or returns), or runs out of budget::

    shell(command, timeout_s=None) -> "exit_code: 0\\n[stdout]\\n...\\n[stderr]\\n..."
    read_file(path)                 -> the file's text (truncated)
    write_file(path, content)       -> "wrote N bytes to PATH"
    list_dir(path=".")              -> one entry a line
    done(message="")                -> the agent is finished

Every tool call is one step of the task's ``agent.max_steps``; the call after the
last allowed one raises :class:`BudgetExhausted`. Shell commands are cut at the
time the agent has left (and at the policy's wall time); once the wall-clock
budget is gone every call raises :class:`AgentTimeout`. Mistakes of the agent
(a bad path, an unknown tool, arguments that are not JSON) come back as
observations starting with ``error:``; only a platform failure raises.

The tools record each step (action, observation, timing, the tokens spent
producing it) in the trial's trajectory. Agents:

* :class:`OpenAIAgent`: any OpenAI-compatible chat-completions endpoint, with
  tool calling, retries with backoff and token accounting (httpx);
* :class:`ReplayAgent`: runs recorded actions from a trajectory file;
* :class:`OracleAgent`: applies each task's reference solution;
* :class:`NullAgent`: does nothing (a floor for scores).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, TypeVar

import httpx

from sandbox.backends.base import WORKDIR
from sandbox.core.argv import shell_command
from sandbox.core.sessions import Command, SessionManager
from sandbox.errors import (
    InfrastructureError,
    InvalidRequestError,
    NotFoundError,
    SandboxError,
)
from sandbox.policy.limits import MIN_TIME_S
from sandbox.results import ExecStatus
from sandbox.telemetry import metrics

from .tasks import Task, TaskError

__all__ = [
    "TOOL_SCHEMAS",
    "Agent",
    "AgentError",
    "AgentTimeout",
    "BudgetExhausted",
    "NullAgent",
    "OpenAIAgent",
    "OracleAgent",
    "ReplayAgent",
    "Tools",
    "TrialContext",
    "Usage",
    "read_actions",
]

logger = logging.getLogger(__name__)

MAX_STREAM_CHARS: Final = 8_000
"""Each of stdout and stderr in a shell observation: head and tail kept, middle elided."""
MAX_READ_CHARS: Final = 32_000
MAX_LIST_ENTRIES: Final = 500
MAX_WRITE_BYTES: Final = 8 * 1024 * 1024
MAX_MODEL_TEXT_CHARS: Final = 4_000
"""Assistant text kept per model call in the trajectory."""
MAX_HISTORY_CHARS: Final = 200_000
"""Tool observations the OpenAI agent keeps in its conversation; older ones are elided."""
ELIDED: Final = "[an older observation, elided to keep the conversation short]"

T = TypeVar("T")


class AgentTimeout(Exception):
    """The agent's wall-clock budget is spent."""


class BudgetExhausted(Exception):
    """The agent asked for more tool calls than the task allows."""


class AgentError(SandboxError):
    """The agent itself failed (its model endpoint, its trajectory file): not a verdict."""


@dataclass(frozen=True)
class TokenPrice:
    """What a model's tokens cost per 1,000 (default 0: free, or not known)."""

    prompt_per_1k: float = 0.0
    completion_per_1k: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_per_1k + completion_tokens * self.completion_per_1k
        ) / 1000


@dataclass
class Usage:
    """Tokens an agent's model spent, summed over its calls, and their cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0
    cost: float = 0.0

    def add(self, usage: Mapping[str, Any] | None) -> dict[str, int]:
        """Count one call's ``usage`` object; returns what it added."""
        usage = usage or {}
        added = {
            "prompt_tokens": _int(usage.get("prompt_tokens")),
            "completion_tokens": _int(usage.get("completion_tokens")),
        }
        added["total_tokens"] = _int(usage.get("total_tokens")) or sum(added.values())
        self.prompt_tokens += added["prompt_tokens"]
        self.completion_tokens += added["completion_tokens"]
        self.total_tokens += added["total_tokens"]
        self.model_calls += 1
        return added

    def as_dict(self) -> dict[str, int | float]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "model_calls": self.model_calls,
            "cost": self.cost,
        }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class TrialContext:
    """What an agent is told about its trial: never the tests or the solution."""

    task_id: str
    epoch: int
    instruction: str


class Trajectory:
    """A JSONL file of events, one object a line, flushed as it goes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8")

    def write(self, event: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# ------------------------------------------------------------------------------ tools

TOOL_SCHEMAS: Final[list[dict[str, Any]]] = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": (
                "Run a bash command in /workspace (the sandbox's working directory) and get "
                "its exit code, stdout and stderr. No network. Commands are cut at their time "
                "limit; background processes survive until the task ends."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "passed to bash -c"},
                    "timeout_s": {
                        "type": "number",
                        "description": "seconds before the command is stopped (optional)",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file below /workspace or /tmp.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative to /workspace, or absolute"}
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or replace a file below /workspace with the given content.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative to /workspace"},
                    "content": {"type": "string", "description": "the whole new content"},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": "List a directory's entries (name, kind, size).",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "default: /workspace"},
                },
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "done",
            "description": "Call when the task is finished; nothing can be changed afterwards.",
            "parameters": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "a short summary (optional)"}
                },
                "additionalProperties": False,
            },
        },
    },
]

_ARGUMENTS: Final[dict[str, tuple[set[str], set[str]]]] = {
    # tool: (required, optional) argument names, for actions that are not from our own code
    "shell": ({"command"}, {"timeout_s"}),
    "read_file": ({"path"}, set()),
    "write_file": ({"path"}, {"content", "content_base64"}),
    "list_dir": (set(), {"path"}),
    "done": (set(), {"message"}),
    "write_files": (set(), {"files", "files_base64"}),
}


def _elide(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters elided ...]\n{text[-half:]}"


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _content_args(key: str, data: bytes) -> dict[str, str]:
    """``{key: text}`` for UTF-8 content, else ``{key_base64: ...}`` (exact bytes on replay)."""
    try:
        return {key: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{key}_base64": base64.b64encode(data).decode("ascii")}


class Tools:
    """The tools of one trial, bound to its session; enforces and records the budget.

    ``max_output_chars`` caps each observation (stdout and stderr each, a file read;
    head and tail kept) below the defaults :data:`MAX_STREAM_CHARS` and :data:`MAX_READ_CHARS`.
    """

    def __init__(
        self,
        sessions: SessionManager,
        session_id: str,
        *,
        tenant: str,
        max_steps: int,
        timeout_s: float,
        command_wall_s: float,
        trajectory: Trajectory | None = None,
        max_output_chars: int | None = None,
    ) -> None:
        self._sessions = sessions
        self.stream_chars = max_output_chars or MAX_STREAM_CHARS
        self.read_chars = max_output_chars or MAX_READ_CHARS
        self._session_id = session_id
        self._tenant = tenant
        self.max_steps = max_steps
        self.timeout_s = timeout_s
        self.command_wall_s = command_wall_s
        self.trajectory = trajectory or Trajectory(None)
        self.started = time.monotonic()
        self.deadline = self.started + timeout_s
        self.steps = 0
        self.finished = False
        self.done_message = ""
        self.exhausted = False
        self.timed_out = False
        self.usage = Usage()
        self._pending_tokens: dict[str, int] = {}
        self._model_call: int | None = None
        self._inflight: set[asyncio.Task[Any]] = set()

    # --------------------------------------------------------------- budget

    @property
    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def steps_left(self) -> int:
        return self.max_steps - self.steps

    @property
    def workdir(self) -> str:
        """The session's working directory: its environment's WORKDIR (writable, filled from
        the image) when that is not /workspace, else /workspace."""
        return self._sessions.get(self._session_id, tenant=self._tenant).seed or WORKDIR

    def expire(self) -> None:
        """The runner's clock ran out: every further call raises :class:`AgentTimeout`."""
        self.timed_out = True

    def _take_step(self) -> int:
        if self.finished:
            raise AgentError("the agent called a tool after done")
        if self.timed_out or self.time_left <= 0:
            self.timed_out = True
            raise AgentTimeout(f"the agent's {self.timeout_s:g} s are spent")
        if self.steps >= self.max_steps:
            self.exhausted = True
            raise BudgetExhausted(f"the agent used all {self.max_steps} steps")
        self.steps += 1
        return self.steps

    # --------------------------------------------------------------- model accounting

    def record_model_call(
        self,
        *,
        usage: Mapping[str, Any] | None,
        duration_s: float,
        text: str | None = None,
        tool_calls: int = 0,
        finish_reason: str | None = None,
        attempts: int = 1,
        price: TokenPrice | None = None,
    ) -> None:
        """Count one model call's tokens and their cost at ``price``; both are attributed to
        the next step, and counted in ``sandbox_model_*_total{source="eval"}``."""
        added = self.usage.add(usage)
        cost = (price or TokenPrice()).cost(added["prompt_tokens"], added["completion_tokens"])
        self.usage.cost += cost
        metrics.record_model_call("eval", added["prompt_tokens"], added["completion_tokens"], cost)
        for key, value in added.items():
            self._pending_tokens[key] = self._pending_tokens.get(key, 0) + value
        self._model_call = self.usage.model_calls
        self.trajectory.write(
            {
                "type": "model",
                "call": self._model_call,
                "at_s": round(time.monotonic() - self.started, 4),
                "duration_s": round(duration_s, 4),
                "tokens": added,
                "cost": round(cost, 8),
                "usage_reported": bool(usage),
                "attempts": attempts,
                "finish_reason": finish_reason,
                "tool_calls": tool_calls,
                "text": _elide(text or "", MAX_MODEL_TEXT_CHARS) or None,
            }
        )

    # --------------------------------------------------------------- the tools

    async def shell(self, command: str, timeout_s: float | None = None) -> str:
        args: dict[str, Any] = {"command": command}
        if timeout_s is not None:
            args["timeout_s"] = timeout_s
        return await self._step("shell", args, lambda: self._shell(command, timeout_s))

    async def read_file(self, path: str) -> str:
        return await self._step("read_file", {"path": path}, lambda: self._read_file(path))

    async def write_file(self, path: str, content: str | bytes) -> str:
        data = content.encode() if isinstance(content, str) else content
        args = {"path": path, **_content_args("content", data)}
        return await self._step("write_file", args, lambda: self._write_files({path: data}))

    async def write_files(self, files: Mapping[str, bytes]) -> str:
        """Several files in one step (not offered to models; the oracle lays solutions)."""
        text: dict[str, str] = {}
        binary: dict[str, str] = {}
        for path, data in files.items():
            encoded = _content_args("content", data)
            if "content" in encoded:
                text[path] = encoded["content"]
            else:
                binary[path] = encoded["content_base64"]
        args: dict[str, Any] = {"files": text}
        if binary:
            args["files_base64"] = binary
        return await self._step("write_files", args, lambda: self._write_files(files))

    async def list_dir(self, path: str = ".") -> str:
        return await self._step("list_dir", {"path": path}, lambda: self._list_dir(path))

    def done(self, message: str = "") -> str:
        """The agent is finished (free: not a step)."""
        if not self.finished:
            self.finished = True
            self.done_message = message
            self.trajectory.write(
                {
                    "type": "step",
                    "step": None,
                    "tool": "done",
                    "args": {"message": message} if message else {},
                    "at_s": round(time.monotonic() - self.started, 4),
                }
            )
        return "done"

    async def call(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Run a tool by name with JSON (or already decoded) arguments, as models ask."""
        if isinstance(arguments, str):
            try:
                decoded = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return await self._error(
                    name, {"raw": arguments[:2000]}, f"arguments are not valid JSON ({exc})"
                )
        else:
            decoded = dict(arguments or {})
        if not isinstance(decoded, dict):
            return await self._error(name, {"raw": decoded}, "arguments must be a JSON object")
        if name not in _ARGUMENTS:
            known = ", ".join(sorted(set(_ARGUMENTS) - {"write_files"}))
            return await self._error(name, decoded, f"unknown tool {name!r}; the tools are {known}")
        required, optional = _ARGUMENTS[name]
        missing = sorted(required - set(decoded))
        unknown = sorted(set(decoded) - required - optional)
        if missing or unknown:
            problem = f"missing {missing}" if missing else f"unknown arguments {unknown}"
            return await self._error(name, decoded, f"{name}: {problem}")
        try:
            return await self._dispatch(name, decoded)
        except (TypeError, ValueError, binascii.Error) as exc:
            return await self._error(name, decoded, f"{name}: bad arguments ({exc})")

    async def _dispatch(self, name: str, args: dict[str, Any]) -> str:
        if name == "shell":
            timeout = args.get("timeout_s")
            if timeout is not None and (
                isinstance(timeout, bool) or not isinstance(timeout, int | float)
            ):
                raise TypeError("timeout_s must be a number")
            return await self.shell(_str(args, "command"), timeout)
        if name == "read_file":
            return await self.read_file(_str(args, "path"))
        if name == "write_file":
            if "content_base64" in args:
                data = base64.b64decode(_str(args, "content_base64"), validate=True)
                return await self.write_file(_str(args, "path"), data)
            return await self.write_file(_str(args, "path"), _str(args, "content", ""))
        if name == "list_dir":
            return await self.list_dir(_str(args, "path", "."))
        if name == "write_files":
            files = {p: str(c).encode() for p, c in dict(args.get("files") or {}).items()}
            for path, text in dict(args.get("files_base64") or {}).items():
                files[path] = base64.b64decode(str(text), validate=True)
            return await self.write_files(files)
        return self.done(_str(args, "message", ""))

    # --------------------------------------------------------------- machinery

    async def _error(self, tool: str, args: Mapping[str, Any], message: str) -> str:
        async def fail() -> tuple[str, dict[str, Any]]:
            return f"error: {message}", {"error": True}

        return await self._step(tool, dict(args), fail)

    async def _step(
        self,
        tool: str,
        args: dict[str, Any],
        action: Callable[[], Awaitable[tuple[str, dict[str, Any]]]],
    ) -> str:
        index = self._take_step()
        tokens, self._pending_tokens = self._pending_tokens, {}
        model_call = self._model_call
        started = time.monotonic()

        async def run_and_record() -> str:
            try:
                observation, extra = await action()
            except (ValueError, NotFoundError) as exc:  # the agent's mistake, not ours
                self._check_alive()
                observation, extra = f"error: {exc}", {"error": True}
            self.trajectory.write(
                {
                    "type": "step",
                    "step": index,
                    "tool": tool,
                    "args": args,
                    "observation": observation,
                    "at_s": round(started - self.started, 4),
                    "duration_s": round(time.monotonic() - started, 4),
                    "tokens": tokens or None,
                    "model_call": model_call,
                    **extra,
                }
            )
            return observation

        # A command in flight is never cancelled half-way (the sandbox's channel would be
        # out of step): if the agent is stopped, it finishes and is recorded all the same.
        task = asyncio.ensure_future(run_and_record())
        self._inflight.add(task)
        task.add_done_callback(self._settled)
        return await asyncio.shield(task)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._inflight.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here when nobody awaits it any more

    async def settle(self) -> None:
        """Wait for a tool call still in flight (after the agent was stopped)."""
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    def _check_alive(self) -> None:
        try:
            self._sessions.get(self._session_id, tenant=self._tenant)
        except NotFoundError:
            raise InfrastructureError("the session ended under the agent") from None

    async def _shell(self, command: str, timeout_s: float | None) -> tuple[str, dict[str, Any]]:
        if not command.strip():
            raise InvalidRequestError("the command is empty")
        limit = min(self.command_wall_s, self.time_left)
        if timeout_s is not None and timeout_s > 0:
            limit = min(limit, float(timeout_s))
        if limit < MIN_TIME_S:
            self.timed_out = True
            raise AgentTimeout(f"the agent's {self.timeout_s:g} s are spent")
        result = await self._sessions.exec(
            self._session_id,
            Command(command=command, timeout_s=round(limit, 3)),
            tenant=self._tenant,
        )
        if result.status is ExecStatus.INFRA_ERROR:
            raise InfrastructureError(f"a command failed in the platform: {result.error}")
        lines = [f"exit_code: {result.exit_code if result.exit_code is not None else '-'}"]
        if result.status is ExecStatus.TIMEOUT:
            lines.append(f"note: the command was stopped after its time limit ({limit:.1f} s)")
        elif result.status not in (ExecStatus.OK, ExecStatus.NONZERO_EXIT):
            lines.append(f"note: the command was stopped ({result.status.value}: {result.reason})")
        for name, data, cut in (
            ("stdout", result.stdout, result.stdout_truncated),
            ("stderr", result.stderr, result.stderr_truncated),
        ):
            text = _elide(_text(data), self.stream_chars).rstrip("\n")
            note = " (truncated by the sandbox)" if cut else ""
            lines.append(f"[{name}]{note}" + ("" if text else " (empty)"))
            if text:
                lines.append(text)
        extra = {
            "exit_code": result.exit_code,
            "status": result.status.value,
            "wall_s": round(result.usage.wall_s, 4),
        }
        return "\n".join(lines), extra

    async def _read_file(self, path: str) -> tuple[str, dict[str, Any]]:
        data = await self._sessions.read_file(self._session_id, path, tenant=self._tenant)
        if b"\0" in data[:8192]:
            return (
                f"({len(data)} bytes of binary data; inspect it with shell, e.g. od -c)",
                {"bytes": len(data)},
            )
        return _elide(_text(data), self.read_chars), {"bytes": len(data)}

    async def _write_files(self, files: Mapping[str, bytes]) -> tuple[str, dict[str, Any]]:
        relative: dict[str, bytes] = {}
        for path, data in files.items():
            name = path
            if name.startswith(WORKDIR + "/"):
                name = name[len(WORKDIR) + 1 :]
            elif name.startswith("./"):
                name = name[2:]
            if name.startswith("/"):
                raise InvalidRequestError(
                    f"{path!r}: files are written below {WORKDIR} only; use shell elsewhere"
                )
            if len(data) > MAX_WRITE_BYTES:
                raise InvalidRequestError(f"{path!r}: at most {MAX_WRITE_BYTES} bytes a file")
            relative[name] = data
        await self._sessions.write_files(self._session_id, relative, tenant=self._tenant)
        total = sum(len(d) for d in relative.values())
        if len(relative) == 1:
            return f"wrote {total} bytes to {next(iter(relative))}", {}
        return f"wrote {len(relative)} files ({total} bytes)", {}

    async def _list_dir(self, path: str) -> tuple[str, dict[str, Any]]:
        entries = await self._sessions.list_dir(self._session_id, path, tenant=self._tenant)
        if not entries:
            return "(empty directory)", {}
        lines = []
        for entry in entries[:MAX_LIST_ENTRIES]:
            if entry.kind == "dir":
                lines.append(f"{entry.name}/")
            elif entry.kind == "link":
                lines.append(f"{entry.name} (symbolic link)")
            elif entry.kind == "other":
                lines.append(f"{entry.name} (special file)")
            else:
                lines.append(f"{entry.name} ({entry.size} bytes)")
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries]")
        return "\n".join(lines), {}


def _str(args: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value


# ------------------------------------------------------------------------------ agents


class Agent(ABC):
    """Acts on one trial at a time; one instance serves a whole run (keep no trial state)."""

    name: str = "agent"

    def describe(self) -> dict[str, Any]:
        """What to record about the agent in the run's metadata (never a secret)."""
        return {"name": self.name}

    def prepare(self, tasks: Sequence[Task]) -> None:  # noqa: B027 (optional hook)
        """Refuse, before anything runs, tasks this agent cannot take (raise TaskError)."""

    @abstractmethod
    async def run(self, trial: TrialContext, tools: Tools) -> None:
        """Act until done; returning counts as done."""

    async def aclose(self) -> None:  # noqa: B027 (optional hook)
        """Release what the agent holds (connections)."""


class NullAgent(Agent):
    """Does nothing: every task should fail (a floor, and a check that tasks are not free)."""

    name = "null"

    async def run(self, trial: TrialContext, tools: Tools) -> None:
        tools.done("null agent")


class OracleAgent(Agent):
    """Applies the reference solution: solution files over the workspace, then solve.sh."""

    name = "oracle"

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    def prepare(self, tasks: Sequence[Task]) -> None:
        for task in tasks:
            if not task.solution:
                raise TaskError(
                    "has no solution/; the oracle agent needs a reference solution",
                    source=str(task.path),
                )
        self._tasks = {task.id: task for task in tasks}

    async def run(self, trial: TrialContext, tools: Tools) -> None:
        task = self._tasks[trial.task_id]
        files = task.solution_files
        if files:
            await tools.write_files(files)
            executable = sorted(p for p in task.solution_executable if p in files)
            if executable:
                await tools.shell(shell_command("chmod", "+x", paths=executable))
        script = task.solve_script
        if script is not None:
            observation = await tools.shell(script.decode("utf-8", errors="replace"))
            if not observation.startswith("exit_code: 0\n"):
                logger.warning("oracle: solve.sh of %s did not exit 0", task.id)
        tools.done("reference solution applied")


def read_actions(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The actions of a trajectory file: ``(tool, args)`` in order.

    Lines are JSON objects: our own trajectories (``{"type": "step", "tool": ...,
    "args": ...}``; other event types are skipped) or bare ``{"tool": ..., "args":
    ...}``. Blank lines and a half-written last line are ignored.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AgentError(f"{path}: cannot read the trajectory: {exc.strerror}") from None
    lines = raw.decode("utf-8", errors="replace").splitlines()
    actions: list[tuple[str, dict[str, Any]]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                continue
            raise AgentError(
                f"{path}:{number}: not a JSON object; fix or remove the line"
            ) from None
        if not isinstance(event, dict) or event.get("type", "step") != "step":
            continue
        tool = event.get("tool")
        args = event.get("args", {})
        if not isinstance(tool, str) or not isinstance(args, dict):
            raise AgentError(f"{path}:{number}: a step needs 'tool' (string) and 'args' (object)")
        actions.append((tool, args))
    return actions


class ReplayAgent(Agent):
    """Runs recorded actions: one trajectory file for every task, or one per task.

    ``path`` is a file (the same actions for every task) or a directory holding
    ``<task>.jsonl``, ``<task>/epoch-<k>.jsonl`` or a run directory's
    ``trajectories/<task>/epoch-<k>.jsonl`` (epoch ``k`` if recorded, else epoch 0).
    """

    name = "replay"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise AgentError(f"{self.path}: no such trajectory file or directory")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path.resolve())}

    def _file_for(self, task_id: str, epoch: int) -> Path | None:
        if self.path.is_file():
            return self.path
        candidates = [
            self.path / f"{task_id}.jsonl",
            self.path / task_id / f"epoch-{epoch}.jsonl",
            self.path / "trajectories" / task_id / f"epoch-{epoch}.jsonl",
            self.path / task_id / "epoch-0.jsonl",
            self.path / "trajectories" / task_id / "epoch-0.jsonl",
        ]
        return next((c for c in candidates if c.is_file()), None)

    def prepare(self, tasks: Sequence[Task]) -> None:
        missing = [task.id for task in tasks if self._file_for(task.id, 0) is None]
        if missing:
            raise AgentError(
                f"{self.path}: no recorded trajectory for {', '.join(missing)} (looked for "
                "<task>.jsonl, <task>/epoch-<k>.jsonl and trajectories/<task>/epoch-<k>.jsonl)"
            )

    async def run(self, trial: TrialContext, tools: Tools) -> None:
        found = self._file_for(trial.task_id, trial.epoch)
        if found is None:
            raise AgentError(f"{self.path}: no trajectory for task {trial.task_id}")
        for tool, args in read_actions(found):
            if tool == "done":
                break
            await tools.call(tool, args)
        tools.done("replay finished")


# ------------------------------------------------------------------------------ OpenAI

SYSTEM_PROMPT: Final = """\
You are an autonomous software engineer working in a Linux sandbox (Debian, no network).
Your working directory is /workspace. Use the tools to inspect and change files and to run
commands. You have at most {steps} tool calls and {minutes:g} minutes in all, and each command
is stopped after {wall:g} seconds. Hidden tests will check the result after you finish. When
the task is complete, call the `done` tool (or answer without calling a tool)."""

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
RETRY_STATUSES: Final = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass
class OpenAIConfig:
    """How to reach the model."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    request_timeout_s: float = 300.0
    max_retries: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    price: TokenPrice = field(default_factory=TokenPrice)


class OpenAIAgent(Agent):
    """An agent over any OpenAI-compatible ``/chat/completions`` endpoint with tool calling.

    Each assistant message's tool calls are run in order, one step each, and
    answered with ``tool`` messages; an answer without a tool call (or the
    ``done`` tool) ends the trial. Requests are retried with exponential
    backoff and jitter on 408/409/425/429/5xx and transport errors, honouring
    ``Retry-After``; tokens come from each response's ``usage``.
    """

    def __init__(
        self, config: OpenAIConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        headers = {"Content-Type": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.AsyncClient(
            base_url=config.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(config.request_timeout_s, connect=30.0),
            transport=transport,
        )
        self._random = random.Random(config.seed)

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {
            "name": self.name,
            "model": c.model,
            "base_url": c.base_url,
            "temperature": c.temperature,
            "seed": c.seed,
            "max_tokens": c.max_tokens,
        }

    async def aclose(self) -> None:
        await self._client.aclose()

    def _payload(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        c = self.config
        payload: dict[str, Any] = {
            "model": c.model,
            "messages": messages,
            "tools": TOOL_SCHEMAS,
            "tool_choice": "auto",
            "temperature": c.temperature,
        }
        if c.seed is not None:
            payload["seed"] = c.seed
        if c.max_tokens is not None:
            payload["max_tokens"] = c.max_tokens
        payload.update(c.extra_body)
        return payload

    async def _complete(self, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
        """One chat completion (retried); returns the decoded response and the attempts made."""
        payload = self._payload(messages)
        attempt = 0
        while True:
            attempt += 1
            problem: str
            retry_after: float | None = None
            try:
                response = await self._client.post("chat/completions", json=payload)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    try:
                        body = response.json()
                    except ValueError:
                        raise AgentError(
                            f"the model endpoint answered 200 with a body that is not JSON: "
                            f"{response.text[:300]!r}"
                        ) from None
                    if not isinstance(body, dict) or not body.get("choices"):
                        raise AgentError(
                            f"the model endpoint's answer has no choices: {str(body)[:300]}"
                        )
                    return body, attempt
                problem = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUSES:
                    raise AgentError(f"the model endpoint refused the request: {problem}")
                retry_after = _retry_after(response.headers.get("retry-after"))
            if attempt > self.config.max_retries:
                raise AgentError(f"the model endpoint failed {attempt} times; last: {problem}")
            delay = min(self.config.max_backoff_s, self.config.backoff_s * 2 ** (attempt - 1))
            delay = delay / 2 + self._random.uniform(0, delay / 2)
            if retry_after is not None:
                delay = min(self.config.max_backoff_s, max(delay, retry_after))
            logger.info("model call failed (%s); retry %d in %.1f s", problem, attempt, delay)
            await asyncio.sleep(delay)

    async def run(self, trial: TrialContext, tools: Tools) -> None:
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": SYSTEM_PROMPT.format(
                    steps=tools.max_steps,
                    minutes=round(tools.timeout_s / 60, 1),
                    wall=tools.command_wall_s,
                ),
            },
            {"role": "user", "content": trial.instruction},
        ]
        while not tools.finished:
            started = time.monotonic()
            body, attempts = await self._complete(messages)
            choice = body["choices"][0] if isinstance(body["choices"], list) else {}
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                raise AgentError(f"the model's answer has no message: {str(body)[:300]}")
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                calls = []
            content = message.get("content")
            tools.record_model_call(
                usage=body.get("usage") if isinstance(body.get("usage"), dict) else None,
                duration_s=time.monotonic() - started,
                text=content if isinstance(content, str) else None,
                tool_calls=len(calls),
                finish_reason=choice.get("finish_reason"),
                attempts=attempts,
                price=self.config.price,
            )
            echoed: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                echoed["tool_calls"] = calls
            messages.append(echoed)
            if not calls:
                tools.done(content if isinstance(content, str) else "")
                return
            for index, call in enumerate(calls):
                function = call.get("function") if isinstance(call, dict) else None
                call_id = call.get("id") if isinstance(call, dict) else None
                call_id = call_id if isinstance(call_id, str) else f"call_{index}"
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    observation = await tools.call("<missing>", {})
                else:
                    arguments = function.get("arguments")
                    if not isinstance(arguments, str | dict | type(None)):
                        arguments = json.dumps(arguments)
                    observation = await tools.call(function["name"], arguments)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": observation})
                if tools.finished:
                    return
            _trim_history(messages)


def _trim_history(messages: list[dict[str, Any]]) -> None:
    """Elide the oldest tool observations once they add up to more than MAX_HISTORY_CHARS."""
    observations = [m for m in messages if m.get("role") == "tool"]
    total = sum(len(m["content"]) for m in observations)
    for message in observations[:-1]:
        if total <= MAX_HISTORY_CHARS:
            return
        if message["content"] != ELIDED:
            total -= len(message["content"]) - len(ELIDED)
            message["content"] = ELIDED


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    return None


def openai_config_from_env(
    *,
    model: str,
    base_url: str | None,
    api_key_env: str,
    temperature: float,
    seed: int | None,
    price: TokenPrice | None = None,
) -> OpenAIConfig:
    """The CLI's agent settings: the key is read from ``api_key_env`` (never a flag)."""
    key = os.environ.get(api_key_env)
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    if not key and url == DEFAULT_BASE_URL:
        raise InvalidRequestError(
            f"no API key: set ${api_key_env} (or name another variable with --api-key-env), "
            "or point --base-url at an endpoint that needs none"
        )
    return OpenAIConfig(
        model=model,
        base_url=url,
        api_key=key or None,
        temperature=temperature,
        seed=seed,
        price=price or TokenPrice(),
    )
