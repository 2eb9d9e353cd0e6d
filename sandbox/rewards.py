"""Reward functions for the trainers people already use, scored by the sandbox service.

TRL's ``GRPOTrainer``::

    from sandbox.rewards import trl_reward
    trainer = GRPOTrainer(..., reward_funcs=[trl_reward("http://127.0.0.1:8000")])

The dataset carries each prompt's hidden tests in a ``tests`` column (a
:class:`~sandbox.judge.JudgeRequest`'s ``tests``, as an object or JSON text),
and optionally ``language``. The whole batch is judged in one ``/v1/evaluate``
call. A sample the platform could not judge gets ``None``, which TRL ignores,
never 0.

verl's custom reward hook (``custom_reward_function.path=.../sandbox/rewards.py``,
``name=compute_score``) passes ``ground_truth``: the tests, same format. Set
``SANDBOX_URL`` to the service's address.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .client import DEFAULT_URL, AsyncSandboxClient, SandboxClient
from .compat import extract_code
from .errors import InfrastructureError

URL_ENV = "SANDBOX_URL"
INFRA_ATTEMPTS = 3

RewardFunction = Callable[..., Awaitable[list[float | None]]]


def _completion_text(completion: Any) -> str:
    """TRL completions are strings, or (conversational) lists of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _tests(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _item(code: str, tests: Any, language: str, options: dict[str, Any]) -> dict[str, Any]:
    return {"code": code, "tests": _tests(tests), "language": language, **options}


def trl_reward(
    url: str | None = None,
    *,
    tests_column: str = "tests",
    language_column: str = "language",
    default_language: str = "python",
    reward: str = "binary",
    policy: str = "default",
    client: AsyncSandboxClient | None = None,
) -> RewardFunction:
    """An async reward function with TRL's signature ``(prompts, completions, **columns)``."""
    own_client = client or AsyncSandboxClient(url or os.environ.get(URL_ENV, DEFAULT_URL))

    async def sandbox_reward(
        prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
    ) -> list[float | None]:
        if tests_column not in columns:
            raise KeyError(f"the dataset needs a {tests_column!r} column with each prompt's tests")
        tests = columns[tests_column]
        languages = columns.get(language_column) or [default_language] * len(completions)
        items = [
            _item(extract_code(_completion_text(c)), t, lang, {"reward": reward, "policy": policy})
            for c, t, lang in zip(completions, tests, languages, strict=True)
        ]
        lines, _ = await own_client.evaluate(items)
        return [line.result.reward if line.result else None for line in lines]

    sandbox_reward.__name__ = "sandbox_reward"
    return sandbox_reward


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **_: Any,
) -> dict[str, Any]:
    """verl's reward hook: the judged reward of ``solution_str`` against ``ground_truth`` tests.

    ``extra_info`` may carry ``language``. Infrastructure failures are retried;
    if they persist an :class:`~sandbox.errors.InfrastructureError` is raised
    rather than a made-up score.
    """
    info = extra_info or {}
    item = _item(
        extract_code(solution_str),
        ground_truth,
        str(info.get("language", "python")),
        {"reward": str(info.get("reward", "binary"))},
    )
    with SandboxClient(os.environ.get(URL_ENV, DEFAULT_URL)) as client:
        for _attempt in range(INFRA_ATTEMPTS):
            result = client.judge(item)
            if result.reward is not None:
                return {
                    "score": result.reward,
                    "passed": result.passed,
                    "total": result.total,
                    "error_class": result.error_class or "none",
                    "data_source": data_source,
                }
    raise InfrastructureError(f"the sandbox could not judge this sample: {result.message}")
