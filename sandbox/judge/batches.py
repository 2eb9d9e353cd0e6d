"""Batches of submissions: judged concurrently, streamed back as they finish, run at most once.

Every item is one :class:`~sandbox.judge.JudgeRequest` (all its tests in one
leased container). Results come out as they finish, each tagged with its index.
Every item gets exactly one line, whatever happens to another: an item that
fails in a way nobody foresaw gets an ``internal_error`` line (and is counted
in the summary's ``errors``). An item that runs past ``item_timeout_s``, or is
still waiting when the batch's ``deadline_s`` passes, gets reward ``None`` and ``error_class
"deadline_exceeded"``: never a 0 the code did not earn. A batch once accepted
waits out a full pool (its items retry after the pool's ``Retry-After``)
instead of failing items that merely found no room. An idempotency key makes
a retried batch replay (or join) the first run instead of running again; it is
bound to the batch it first came with (a hash of the canonical request), so
another batch under the same key is refused rather than answered with the first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
from collections import OrderedDict
from collections.abc import AsyncIterator

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sandbox.core.validation import PriorityClassName
from sandbox.errors import CapacityError, InvalidRequestError, SandboxError, status_and_code
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult, unjudged

logger = logging.getLogger(__name__)

MAX_ITEMS = 10_000
DEADLINE = "deadline_exceeded"
DEFAULT_CONCURRENCY = 16
MAX_CONCURRENCY = 256
MAX_ITEMS_IN_FLIGHT = 50_000
IDEMPOTENCY_TTL_S = 3600.0
MAX_REMEMBERED_BATCHES = 256
MAX_CAPACITY_WAIT_S = 600.0


class EvaluateRequest(BaseModel):
    """A batch of submissions."""

    model_config = ConfigDict(extra="forbid")

    items: list[JudgeRequest] = Field(min_length=1, max_length=MAX_ITEMS)
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY)
    early_stop: bool | None = Field(
        default=None, description="Set every item's early_stop (stop at its first failing test)."
    )
    item_timeout_s: float | None = Field(default=None, gt=0)
    deadline_s: float | None = Field(default=None, gt=0)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    priority_class: PriorityClassName = None

    @model_validator(mode="after")
    def _class_named_once(self) -> EvaluateRequest:
        named = [i for i, item in enumerate(self.items) if item.priority_class is not None]
        if named:
            raise ValueError(
                f"items[{named[0]}].priority_class: a batch runs in one class; name it once, "
                "as the batch's priority_class (or the X-Priority-Class header)"
            )
        return self


class ItemLine(BaseModel):
    """One NDJSON line: an item's result, or the error that kept it from being judged."""

    index: int
    id: str | None = None
    result: JudgeResult | None = None
    error: dict[str, str] | None = None


class Summary(BaseModel):
    """The last NDJSON line of a batch."""

    done: bool = True
    items: int
    judged: int
    all_passed: int
    infra_errors: int
    errors: int
    mean_reward: float | None
    duration_s: float
    replayed: bool = False


def request_hash(request: EvaluateRequest) -> str:
    """What an idempotency key is bound to: the canonical batch (JSON, sorted keys),
    without the key itself, ``concurrency`` and ``priority_class`` (how fast, not what, is
    judged)."""
    exclude = {"idempotency_key", "concurrency", "priority_class"}
    canonical = request.model_dump(mode="json", exclude=exclude)
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class _Batch:
    """One running or finished batch: its lines so far, and who is waiting for more."""

    def __init__(self, tenant: str, key: str | None, digest: str | None = None) -> None:
        self.tenant = tenant
        self.key = key
        self.digest = digest
        self.lines: list[str] = []
        self.finished = False
        self.changed = asyncio.Condition()
        self.created = time.monotonic()

    async def add(self, line: str, *, final: bool = False) -> None:
        async with self.changed:
            self.lines.append(line)
            self.finished = final
            self.changed.notify_all()

    async def follow(self) -> AsyncIterator[str]:
        sent = 0
        while True:
            async with self.changed:
                await self.changed.wait_for(
                    lambda seen=sent: len(self.lines) > seen or self.finished  # type: ignore[misc]
                )
                new, finished = self.lines[sent:], self.finished
            for line in new:
                yield line
            sent += len(new)
            if finished and sent == len(self.lines):
                return


class Evaluator:
    """Runs batches on a :class:`~sandbox.judge.Judge`; remembers them by idempotency key."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._batches: OrderedDict[tuple[str, str], _Batch] = OrderedDict()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, request: EvaluateRequest, *, tenant: str) -> AsyncIterator[str]:
        """Validate the batch and start it (or find its earlier run); returns its NDJSON lines.

        Raises before anything runs: bad items (:class:`InvalidRequestError` naming
        the index), a key already used for another batch (:class:`InvalidRequestError`)
        or an overloaded service (:class:`CapacityError`).
        """
        self._forget_old()
        key = request.idempotency_key
        digest = request_hash(request) if key is not None else None
        if key is not None and (tenant, key) in self._batches:
            earlier = self._batches[(tenant, key)]
            if earlier.digest != digest:
                raise InvalidRequestError(
                    f"Idempotency-Key {key!r} was used for a different batch "
                    f"({'running' if not earlier.finished else 'finished'}); a retry must send "
                    "the same items and settings (only concurrency may change), and a new "
                    "batch needs a new key"
                )
            return self._replay(earlier)
        items = [self._prepare(i, item, request) for i, item in enumerate(request.items)]
        if self._in_flight + len(items) > MAX_ITEMS_IN_FLIGHT:
            raise CapacityError(
                f"{self._in_flight} items are being judged; this batch of {len(items)} would "
                f"pass the limit of {MAX_ITEMS_IN_FLIGHT}; retry later",
                retry_after=5.0,
            )
        batch = _Batch(tenant, key, digest)
        if key is not None:
            self._batches[(tenant, key)] = batch
        self._in_flight += len(items)
        task = asyncio.create_task(self._run(batch, items, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return batch.follow()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _prepare(self, index: int, item: JudgeRequest, request: EvaluateRequest) -> JudgeRequest:
        if request.early_stop is not None:
            item = item.model_copy(update={"early_stop": request.early_stop})
        try:
            self.judge.plan(item)
        except SandboxError as exc:
            raise type(exc)(f"items[{index}]: {exc}") from exc
        return item

    async def _replay(self, batch: _Batch) -> AsyncIterator[str]:
        async for line in batch.follow():
            if batch.finished and line is batch.lines[-1]:
                summary = Summary.model_validate_json(line)
                yield summary.model_copy(update={"replayed": True}).model_dump_json() + "\n"
            else:
                yield line

    async def _run(
        self, batch: _Batch, items: list[JudgeRequest], request: EvaluateRequest
    ) -> None:
        started = time.monotonic()
        deadline = started + request.deadline_s if request.deadline_s else None
        limit = asyncio.Semaphore(request.concurrency)
        results: list[JudgeResult | None] = [None] * len(items)
        errors = 0

        async def one(index: int, item: JudgeRequest) -> None:
            nonlocal errors
            line = ItemLine(index=index, id=item.id)
            try:
                async with limit:
                    line.result = await self._judge_with_deadlines(
                        item, request, deadline, batch.tenant
                    )
                results[index] = line.result
            except SandboxError as exc:
                errors += 1
                _, code = status_and_code(exc)
                line.error = {"code": code, "message": str(exc)}
            except Exception:  # a fault of ours: this item's line says so, the rest go on
                logger.exception("batch item %d failed unexpectedly", index)
                errors += 1
                line.error = {"code": "internal_error", "message": "internal error; see the log"}
            finally:
                self._in_flight -= 1
            empty = {name for name in ("result", "error") if getattr(line, name) is None}
            await batch.add(line.model_dump_json(exclude=empty) + "\n")

        try:
            await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
        finally:
            judged = [r for r in results if r is not None]
            rewards = [r.reward for r in judged if r.reward is not None]
            summary = Summary(
                items=len(items),
                judged=len(judged),
                all_passed=sum(1 for r in judged if r.all_passed),
                infra_errors=sum(1 for r in judged if r.error_class == "infra"),
                errors=errors,
                mean_reward=sum(rewards) / len(rewards) if rewards else None,
                duration_s=round(time.monotonic() - started, 6),
            )
            await batch.add(summary.model_dump_json() + "\n", final=True)

    async def _judge_with_deadlines(
        self,
        item: JudgeRequest,
        request: EvaluateRequest,
        deadline: float | None,
        tenant: str,
    ) -> JudgeResult:
        timeout = request.item_timeout_s
        if deadline is not None:
            remaining = deadline - time.monotonic()
            timeout = remaining if timeout is None else min(timeout, remaining)
        started = time.perf_counter()
        if timeout is not None and timeout <= 0:
            message = "the batch deadline passed before this item ran"
            return unjudged(item, message, started, DEADLINE)
        try:
            return await asyncio.wait_for(self._judge_when_room(item, tenant), timeout)
        except TimeoutError:
            return unjudged(item, f"not judged within {timeout:.1f} s", started, DEADLINE)

    async def _judge_when_room(self, item: JudgeRequest, tenant: str) -> JudgeResult:
        """Judge ``item``, retrying while the pool has no room (for at most
        :data:`MAX_CAPACITY_WAIT_S`; then the item's line carries the error)."""
        give_up = time.monotonic() + MAX_CAPACITY_WAIT_S
        while True:
            try:
                return await self.judge.judge(item, tenant=tenant)
            except CapacityError as exc:
                pause = exc.retry_after * random.uniform(0.5, 1.5)
                if time.monotonic() + pause > give_up:
                    raise
                await asyncio.sleep(pause)

    def _forget_old(self) -> None:
        """Drop finished batches past their time to live, or beyond the count kept."""
        now = time.monotonic()
        for key, batch in list(self._batches.items()):
            expired = now - batch.created > IDEMPOTENCY_TTL_S
            if batch.finished and (expired or len(self._batches) > MAX_REMEMBERED_BATCHES):
                del self._batches[key]


def parse_lines(lines: list[str]) -> tuple[list[ItemLine], Summary]:
    """The item lines (in index order) and the summary of a finished batch's NDJSON."""
    items = [ItemLine.model_validate_json(line) for line in lines[:-1]]
    summary = Summary.model_validate_json(lines[-1])
    return sorted(items, key=lambda line: line.index), summary
