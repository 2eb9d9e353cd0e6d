"""Tool-call formats: how a policy's turn of text becomes one call of an episode's tool.

The episode tools (:data:`sandbox.evals.episodes.EPISODE_TOOLS`) are ``shell
{command}``, ``read_file {path}``, ``write_file {path, content}`` and ``done``
(finish: the episode is judged). Two formats (``agent.tool_format``):

``lines`` (the default; small enough for a character model): a turn is one
line, ended by a line break (or EOS, which also finishes the episode)::

    $ COMMAND          shell
    < PATH             read_file
    > PATH CONTENT     write_file (CONTENT is the rest of the line, plus a line break)
    .                  done (an empty line too)

The space after the sigil is optional. An observation is appended as its text
and a line break.

``json`` (for pretrained chat models; the Hermes/Qwen convention): the first
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` of the turn is the
call (``bash`` is an alias of ``shell``, ``finish`` of ``done``); a turn without
one finishes the episode. An observation is appended as
``<tool_response>\\n...\\n</tool_response>\\n``.

A turn that does not parse is not sent to the sandbox: its observation is an
``error:`` line saying what the format expects, and it uses a turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, Protocol


@dataclass(frozen=True)
class ToolCall:
    """One call of an episode tool (``done``: finish), or ``error`` when the turn did not parse."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def finishes(self) -> bool:
        return self.tool == "done"


FINISH: Final = ToolCall("done")


class ToolFormat(Protocol):
    name: str
    stop_text: str | None
    """A text that ends a turn (the model's tokens after it are discarded), if any."""

    def parse(self, text: str) -> ToolCall: ...

    def observation(self, text: str) -> str: ...


class LineFormat:
    """``$ cmd`` / ``< path`` / ``> path content`` / ``.``: one line a turn."""

    name = "lines"
    stop_text: str | None = "\n"

    def parse(self, text: str) -> ToolCall:
        line = text.split("\n", 1)[0].rstrip("\r")
        if line.strip() in ("", "."):
            return FINISH
        sigil, rest = line[0], line[1:].lstrip(" ")
        if sigil == "$" and rest.strip():
            return ToolCall("shell", {"command": rest})
        if sigil == "<" and rest.strip():
            return ToolCall("read_file", {"path": rest.strip()})
        if sigil == ">":
            path, _, content = rest.partition(" ")
            if path:
                return ToolCall("write_file", {"path": path, "content": content + "\n"})
        return ToolCall(
            "",
            error="error: a turn is one line: `$ command`, `< path`, `> path content` or `.`",
        )

    def observation(self, text: str) -> str:
        return text if text.endswith("\n") else text + "\n"


_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ALIASES: Final = {"bash": "shell", "finish": "done"}


class JsonFormat:
    """``<tool_call>{"name": "shell", "arguments": {"command": "ls"}}</tool_call>``."""

    name = "json"
    stop_text: str | None = "</tool_call>"

    def parse(self, text: str) -> ToolCall:
        found = _CALL.search(text)
        if found is None:
            return FINISH
        try:
            call = json.loads(found.group(1))
            name = str(call["name"])
            arguments = call.get("arguments") or {}
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            if not isinstance(arguments, dict):
                raise TypeError("arguments is not an object")
        except (ValueError, KeyError, TypeError) as exc:
            return ToolCall(
                "",
                error='error: a tool call is {"name": ..., "arguments": {...}} in JSON '
                f"({exc})",
            )
        return ToolCall(_ALIASES.get(name, name), arguments)

    def observation(self, text: str) -> str:
        return f"<tool_response>\n{text.rstrip(chr(10))}\n</tool_response>\n"


FORMATS: Final = ("lines", "json")


def tool_format(name: str) -> ToolFormat:
    """The format called ``name`` (``lines`` or ``json``)."""
    if name == "lines":
        return LineFormat()
    if name == "json":
        return JsonFormat()
    raise ValueError(f"unknown tool format {name!r}: one of {FORMATS}")


def blank(text: str) -> str:
    """``text`` with every character but line breaks made a space (the control run)."""
    return "".join(c if c == "\n" else " " for c in text)
