"""The verdict of tests that write a reward file (Harbor's verifier) instead of an exit status.

The tests write ``reward.txt`` (one number) or ``reward.json`` (a number, or a
mapping of names to numbers) to the verifier directory
(:data:`sandbox.core.sessions.JUDGE_VERIFIER`, which Harbor tasks know as
``/logs/verifier``). That directory is made fresh, owned by the judge uid and
closed to every other uid, after the agent's processes are gone; the runner reads
the files itself once the tests' processes are killed too, refusing links and
anything but a regular file. A file larger than :data:`MAX_REWARD_BYTES` is refused.

How a reward becomes a verdict:

- ``reward.json`` wins when both exist (as in Harbor). A bare number is the
  reward. A mapping's ``reward`` entry is the reward when it has one; otherwise
  the reward is the mean of its values. Every value must be a finite number
  (not a boolean, not a string).
- ``reward.txt``: its text, stripped, is one finite number.
- The trial passes when the reward is at least 1 (full marks: Harbor's tests
  write 1 for a pass and 0 for a failure); the reward itself is kept in the
  result. No reward file, an empty or malformed one, or a link where it should
  be, fails with the reason. The tests' exit status is recorded, not judged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_REWARD_BYTES", "REWARD_FILES", "RewardVerdict", "judge_rewards"]

REWARD_TEXT: Final = "reward.txt"
REWARD_JSON: Final = "reward.json"
REWARD_FILES: Final = (REWARD_JSON, REWARD_TEXT)
MAX_REWARD_BYTES: Final = 64 * 1024
PASS_REWARD: Final = 1.0


@dataclass(frozen=True)
class RewardVerdict:
    """What the reward files say: the reward, every named reward, and why not a pass."""

    reward: float | None
    rewards: dict[str, float] = field(default_factory=dict)
    reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.reason is None and self.reward is not None and self.reward >= PASS_REWARD


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _from_json(data: bytes) -> RewardVerdict:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return RewardVerdict(None, reason=f"{REWARD_JSON} is not JSON")
    if not isinstance(value, dict):
        number = _number(value)
        if number is None:
            return RewardVerdict(None, reason=f"{REWARD_JSON} holds neither a number nor a mapping")
        return RewardVerdict(number, {"reward": number})
    rewards: dict[str, float] = {}
    for name, item in value.items():
        number = _number(item)
        if number is None:
            return RewardVerdict(
                None, reason=f"{REWARD_JSON}: {name!r} is not a finite number ({item!r:.40})"
            )
        rewards[name] = number
    if not rewards:
        return RewardVerdict(None, reason=f"{REWARD_JSON} is an empty mapping")
    reward = rewards.get("reward", sum(rewards.values()) / len(rewards))
    return RewardVerdict(reward, rewards)


def _from_text(data: bytes) -> RewardVerdict:
    text = data.decode("utf-8", errors="replace").strip()
    try:
        number = _number(float(text))
    except ValueError:
        number = None
    if number is None:
        return RewardVerdict(None, reason=f"{REWARD_TEXT} is not one finite number ({text!r:.40})")
    return RewardVerdict(number, {"reward": number})


def judge_rewards(files: Mapping[str, bytes], errors: Mapping[str, str]) -> RewardVerdict:
    """The verdict from the reward files the runner read back (``errors``: why one was not)."""
    for name, parse in ((REWARD_JSON, _from_json), (REWARD_TEXT, _from_text)):
        if name in files:
            data = files[name]
            if len(data) > MAX_REWARD_BYTES:
                return RewardVerdict(
                    None, reason=f"{name} is {len(data)} bytes (at most {MAX_REWARD_BYTES})"
                )
            if not data.strip():
                return RewardVerdict(None, reason=f"{name} is empty")
            return parse(data)
        problem = errors.get(name, "not found")
        if problem != "not found":
            return RewardVerdict(None, reason=f"{name} could not be read: {problem}")
    return RewardVerdict(None, reason=f"the tests wrote no {REWARD_TEXT} or {REWARD_JSON}")
