"""Reward functions for the trainers people already use, scored by the sandbox service.

TRL's ``GRPOTrainer`` (and ``AsyncGRPOTrainer``)::

    from sandbox.rewards import trl_reward
    trainer = GRPOTrainer(..., reward_funcs=[trl_reward("http://127.0.0.1:8000")])

TRL calls a reward function as ``f(prompts=..., completions=..., completion_ids=...,
trainer_state=..., **every_dataset_column)`` (newer versions add ``log_extra``,
``log_metric`` and ``environments``); completions are strings, or, for a
conversational dataset, lists of messages (``{"role": "assistant", "content": ...}``,
possibly with tool turns), of which the last assistant message with code is judged.
The function is a coroutine function, which TRL runs on its event loop from
version 0.27.0 on (older TRL calls only plain functions). It is a
``functools.partial`` of a module-level function, so it pickles, as
``AsyncGRPOTrainer``'s rollout process needs (unless you pass your own ``client``).

The dataset carries each prompt's hidden tests in a ``tests`` column: a
:class:`~sandbox.judge.JudgeRequest`'s ``tests`` (``{"kind": "io", ...}``), a whole
label (``{"tests": {...}, "language": ..., "test_timeout_s": ...}``) or verl's code
format (``{"inputs": [...], "outputs": [...], "fn_name": ...}``), as an object or
JSON text; a row whose tests are ``None`` is not code and gets ``None``. An optional
``language`` column picks the language per row. The whole batch is judged in one
``/v1/evaluate`` call. A sample the platform could not judge (an infrastructure
failure, a deadline) gets ``None``, never 0: TRL turns it into NaN and, from
TRL 1.6.0 on, leaves a completion that every reward function scored ``None`` out
of its group's baseline (before 1.6.0 its NaNs were summed to 0). If the service
cannot be reached at all, the call is retried and then raises
:class:`~sandbox.errors.InfrastructureError`: training stops rather than learn
from nothing.

verl's custom reward hook (``reward.custom_reward_function.path=.../sandbox/rewards.py``,
``name=compute_score``) is called as ``compute_score(data_source=, solution_str=,
ground_truth=, extra_info=, **reward_kwargs)`` and may return a float or a dict with
``"score"``; :func:`compute_score` returns a dict with the same keys for every sample
(verl collects them into columns). ``ground_truth`` takes the same formats as the
``tests`` column. Set ``SANDBOX_URL`` to the service's address, and ``SANDBOX_API_KEY``
when it wants keys (both functions send it as ``Authorization: Bearer``).

An exception from ``compute_score`` is not caught by verl's naive, dapo or gdpo reward
managers (verl 0.9): it fails the step. That is what :func:`compute_score` does when
the platform still cannot judge a sample after :data:`INFRA_ATTEMPTS` tries: a score
of 0 would teach the policy that working code is wrong, and verl has no "no reward"
value (a NaN would poison its group's advantages). verl's ``limited`` reward manager
catches exceptions and scores them 0.0 with an ``error`` entry; it is the one to
avoid if that matters.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.client import DEFAULT_URL, AsyncSandboxClient, SandboxClient
from sandbox.errors import CapacityError, InfrastructureError, SandboxTimeoutError
from sandbox.judge.judge import JudgeResult
from sandbox.languages import ALIASES

logger = logging.getLogger(__name__)

URL_ENV = "SANDBOX_URL"
KEY_ENV = "SANDBOX_API_KEY"
INFRA_ATTEMPTS = 3
RETRY_WAIT_S = 1.0
# Failures of the platform or of the way to it, worth another try; anything else
# (a bad request, a refused key) is a mistake that retrying cannot fix.
TRANSIENT = (InfrastructureError, SandboxTimeoutError, CapacityError)

RewardFunction = Callable[..., Coroutine[Any, Any, list[float | None]]]


# ------------------------------------------------------------------------ the code


_BLOCK = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
_OPENING = re.compile(r"```([^\n`]*)\n")
_TAGS = {**ALIASES, "py": "python", "cc": "cpp", "cxx": "cpp", "bash": "bash", "shell": "bash"}


def _tag(tag: str) -> str:
    words = tag.strip().lower().split()
    return _TAGS.get(words[0], words[0]) if words else ""


def code_from_response(text: str, language: str = "python") -> str:
    """The code in a model's response.

    The last fenced block tagged with ``language`` (or an alias: ```` ```py ````),
    else the last fenced block, else the text after an opening fence that was never
    closed (a completion cut off at the token limit), else the whole response.
    """
    blocks = _BLOCK.findall(text)
    if blocks:
        wanted = _tag(language)
        tagged = [body for tag, body in blocks if _tag(tag) == wanted]
        return str((tagged or [body for _, body in blocks])[-1])
    openings = list(_OPENING.finditer(text))
    return text[openings[-1].end() :] if openings else text


def _content_text(content: Any) -> str:
    """A message's content: a string, or a list of parts (``{"type": "text", "text": ...}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") == "text":
                parts.append(str(part.get("text") or ""))
        return "".join(parts)
    return str(content)


def completion_text(completion: Any) -> str:
    """The text to judge in a TRL completion.

    A string as it is; a conversational completion (a list of messages, where tool
    calls add ``tool`` and further ``assistant`` turns) gives its last assistant
    message with a fenced block, else its last non-empty assistant message.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        said = [
            _content_text(message.get("content"))
            for message in completion
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant"
        ]
        said = [text for text in said if text.strip()]
        with_code = [text for text in said if "```" in text]
        return (with_code or said or [""])[-1]
    return str(completion)


# ------------------------------------------------------------------------ the tests


def _plain(value: Any) -> Any:
    """JSON-like Python values from what a dataset gives (numpy arrays and scalars from parquet)."""
    if isinstance(value, str | bytes | bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    tolist = getattr(value, "tolist", None)
    return _plain(tolist()) if callable(tolist) else value


def _json(value: Any, what: str) -> Any:
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{what} is not JSON: {exc}") from None
    return _plain(value)


def _text(value: Any) -> str:
    """An APPS-style input or output: a string, or a list of lines."""
    if isinstance(value, list):
        return "\n".join(str(line) for line in value)
    return str(value)


def _call_args(value: Any) -> list[Any]:
    """Call-based arguments: one JSON value per line (verl's and PRIME's format), or a list."""
    if isinstance(value, str):
        return [json.loads(line) for line in value.split("\n") if line.strip()]
    return list(value) if isinstance(value, list) else [value]


def _expected(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


_SOLUTION_SHIM = """

try:
    {name}
except NameError:
    def {name}(*args, **kwargs):
        return Solution().{name}(*args, **kwargs)
"""


def _from_inputs_outputs(spec: dict[str, Any], language: str, compare: str) -> tuple[Any, str]:
    """verl's (PRIME's, APPS's, TACO's) ``inputs``/``outputs`` as our tests, and code to append."""
    inputs, outputs = spec["inputs"], spec["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise ValueError("'inputs' and 'outputs' must be non-empty lists")
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    fn_name = spec.get("fn_name")
    if not fn_name:
        cases = [
            {"stdin": _text(stdin), "expected_stdout": _text(stdout)}
            for stdin, stdout in zip(inputs, outputs, strict=True)
        ]
        return {"kind": "io", "compare": compare, "cases": cases}, ""
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise ValueError(f"fn_name {fn_name!r} is not a Python identifier")
    if _tag(language) != "python":
        raise ValueError(f"call-based tests (fn_name) are judged in Python only, not {language}")
    try:
        calls = [
            {"args": _call_args(args), "expected": _expected(value)}
            for args, value in zip(inputs, outputs, strict=True)
        ]
    except ValueError as exc:
        raise ValueError(f"call-based inputs must be one JSON value per line: {exc}") from None
    tests = {"kind": "function", "entry_point": fn_name, "cases": calls}
    # LeetCode-style answers define the function as a method of ``class Solution``.
    return tests, _SOLUTION_SHIM.format(name=fn_name)


def judge_item(
    response: str,
    ground_truth: Any,
    *,
    language: str = "python",
    reward: str = "binary",
    policy: str = "default",
    compare: str = "tokens",
) -> dict[str, Any]:
    """A ``/v1/judge`` (or ``/v1/evaluate`` item) request for a response and its ground truth.

    ``ground_truth`` (an object or JSON text) is one of: our ``tests``
    (``{"kind": ...}``); a label (``{"tests": ..., "language": ..., ...}``, whose
    fields win over the keyword arguments); verl's code format
    (``{"inputs": [...], "outputs": [...], "fn_name": optional}``): stdin and expected
    stdout compared with ``compare`` (``tokens``: whitespace-insensitive), or, with
    ``fn_name``, calls of that function (or ``Solution().fn_name``) with the JSON
    arguments on each input's lines, compared with the JSON value of its output.
    """
    value = _json(ground_truth, "the ground truth")
    if not isinstance(value, dict):
        raise ValueError(f"the ground truth must be an object, not {type(value).__name__}")
    fields: dict[str, Any] = {"language": language, "reward": reward, "policy": policy}
    suffix = ""
    if "tests" in value:
        label = {key: item for key, item in value.items() if key != "code"}
        fields.update(label, tests=_json(label["tests"], "the label's tests"))
    elif "kind" in value:
        fields["tests"] = value
    elif "inputs" in value and "outputs" in value:
        fields["tests"], suffix = _from_inputs_outputs(value, str(fields["language"]), compare)
    else:
        keys = sorted(value)[:8]
        raise ValueError(
            "the ground truth must be tests ({'kind': ...}), a label ({'tests': ...}) or "
            f"{{'inputs': [...], 'outputs': [...]}}; got keys {keys}"
        )
    code = code_from_response(response, str(fields["language"]))
    return {"code": code + suffix if suffix else code, **fields}


# ------------------------------------------------------------------------ TRL


def _key(api_key: str | None) -> str | None:
    return api_key or os.environ.get(KEY_ENV) or None


def _url(url: str | None) -> str:
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


async def _evaluate(
    client: AsyncSandboxClient, items: list[dict[str, Any]], options: dict[str, Any]
) -> list[float | None]:
    """One ``/v1/evaluate`` call, tried again (same idempotency key) if the service fails."""
    key = uuid.uuid4().hex
    last = ""
    for attempt in range(INFRA_ATTEMPTS):
        if attempt:
            await asyncio.sleep(RETRY_WAIT_S * attempt)
        try:
            lines, _ = await client.evaluate(items, idempotency_key=key, **options)
        except TRANSIENT as exc:
            last = f"{type(exc).__name__}: {exc}"
            logger.warning("sandbox batch attempt %d failed: %s", attempt + 1, last)
            continue
        rewards: list[float | None] = []
        for line in lines:
            if line.result is None or line.result.reward is None:
                why = line.error or (line.result.message if line.result else None)
                logger.warning("sandbox could not judge item %d: %s", line.index, why)
                rewards.append(None)
            else:
                rewards.append(float(line.result.reward))
        return rewards
    raise InfrastructureError(
        f"the sandbox at {client.base_url} could not judge the batch in {INFRA_ATTEMPTS} "
        f"attempts: {last}"
    )


@dataclass(frozen=True)
class RewardOptions:
    """What :func:`trl_reward` binds: where the service is and how to judge."""

    url: str | None = None
    api_key: str | None = None
    tests_column: str = "tests"
    language_column: str = "language"
    default_language: str = "python"
    reward: str = "binary"
    policy: str = "default"
    compare: str = "tokens"
    evaluate_options: tuple[tuple[str, Any], ...] = ()
    client: AsyncSandboxClient | None = None


async def sandbox_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    sandbox_options: RewardOptions = RewardOptions(),
    **columns: Any,
) -> list[float | None]:
    """The rewards of one TRL batch (see :func:`trl_reward`, which binds the options).

    The options travel in one keyword of their own, so no dataset column can shadow them.
    """
    opts = sandbox_options
    if opts.tests_column not in columns:
        raise KeyError(f"the dataset needs a {opts.tests_column!r} column with each prompt's tests")
    tests = list(columns[opts.tests_column])
    languages = list(columns.get(opts.language_column) or [None] * len(completions))
    if not len(prompts) == len(completions) == len(tests) == len(languages):
        raise ValueError(
            f"{len(prompts)} prompts, {len(completions)} completions, {len(tests)} tests "
            f"and {len(languages)} languages: TRL gives one of each per completion"
        )
    rows: list[int] = []
    items: list[dict[str, Any]] = []
    for row, (completion, truth, language) in enumerate(
        zip(completions, tests, languages, strict=True)
    ):
        if truth is None:
            continue  # not a code task: this reward does not apply
        items.append(
            judge_item(
                completion_text(completion),
                truth,
                language=str(language or opts.default_language),
                reward=opts.reward,
                policy=opts.policy,
                compare=opts.compare,
            )
        )
        rows.append(row)
    rewards: list[float | None] = [None] * len(completions)
    if not items:
        return rewards
    options = dict(opts.evaluate_options)
    if opts.client is not None:
        judged = await _evaluate(opts.client, items, options)
    else:
        async with AsyncSandboxClient(_url(opts.url), api_key=_key(opts.api_key)) as own:
            judged = await _evaluate(own, items, options)
    for row, value in zip(rows, judged, strict=True):
        rewards[row] = value
    return rewards


def trl_reward(
    url: str | None = None,
    *,
    api_key: str | None = None,
    tests_column: str = "tests",
    language_column: str = "language",
    default_language: str = "python",
    reward: str = "binary",
    policy: str = "default",
    compare: str = "tokens",
    concurrency: int | None = None,
    item_timeout_s: float | None = None,
    client: AsyncSandboxClient | None = None,
) -> RewardFunction:
    """An async reward function for TRL's ``GRPOTrainer`` (TRL >= 0.27.0).

    ``url`` defaults to ``$SANDBOX_URL`` and ``api_key`` to ``$SANDBOX_API_KEY``, both
    read when the function is called. ``concurrency`` and ``item_timeout_s`` go to
    ``/v1/evaluate``; an item not judged in ``item_timeout_s`` gets ``None``. Each call
    opens its own connection (so any event loop may run it) unless ``client`` is given,
    which then cannot be pickled.
    """
    evaluate_options: list[tuple[str, Any]] = []
    if concurrency is not None:
        evaluate_options.append(("concurrency", concurrency))
    if item_timeout_s is not None:
        evaluate_options.append(("item_timeout_s", item_timeout_s))
    options = RewardOptions(
        url=url,
        api_key=api_key,
        tests_column=tests_column,
        language_column=language_column,
        default_language=default_language,
        reward=reward,
        policy=policy,
        compare=compare,
        evaluate_options=tuple(evaluate_options),
        client=client,
    )
    bound = functools.partial(sandbox_reward, sandbox_options=options)
    # TRL before 1.x names reward functions by ``__name__``, which a partial lacks.
    bound.__name__ = "sandbox_reward"  # type: ignore[attr-defined]
    return bound


# ------------------------------------------------------------------------ verl


def _judge(client: SandboxClient, item: dict[str, Any]) -> JudgeResult:
    """Judge, trying again while the platform fails; raise if it never manages."""
    last = ""
    for attempt in range(INFRA_ATTEMPTS):
        if attempt:
            time.sleep(RETRY_WAIT_S * attempt)
        try:
            result = client.judge(item)
        except TRANSIENT as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        if result.reward is not None:
            return result
        last = f"{result.error_class}: {result.message}"
    raise InfrastructureError(
        f"the sandbox at {client.base_url} could not judge this sample in {INFRA_ATTEMPTS} "
        f"attempts ({last}); not scoring it 0"
    )


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    language: str | None = None,
    reward: str | None = None,
    policy: str | None = None,
    compare: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """verl's reward hook: the judged reward of ``solution_str`` against ``ground_truth``.

    Options (``language``, ``reward``: binary/fraction/weighted, ``policy``,
    ``compare``) come from the ground truth's label, else ``extra_info``, else
    verl's ``custom_reward_function.reward_kwargs``. Returns ``score`` (the reward),
    ``passed``, ``total``, ``error_class`` (``none`` when all passed) and
    ``data_source``. Infrastructure failures are tried :data:`INFRA_ATTEMPTS`
    times; then :class:`~sandbox.errors.InfrastructureError` is raised rather than a
    made-up score (see the module's notes on what verl does with it).
    """
    info = extra_info if isinstance(extra_info, Mapping) else {}

    def option(name: str, given: str | None, default: str) -> str:
        return str(info.get(name) or given or default)

    item = judge_item(
        solution_str,
        ground_truth,
        language=option("language", language, "python"),
        reward=option("reward", reward, "binary"),
        policy=option("policy", policy, "default"),
        compare=option("compare", compare, "tokens"),
    )
    with SandboxClient(_url(None), api_key=_key(None)) as client:
        result = _judge(client, item)
    assert result.reward is not None
    return {
        "score": float(result.reward),
        "passed": result.passed,
        "total": result.total,
        "error_class": result.error_class or "none",
        "data_source": str(data_source),
    }
