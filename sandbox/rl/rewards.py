"""Rewards from the sandbox, judged in the background so generation never waits for it.

The judge runs on its own event loop in a thread: over HTTP (one
``/v1/evaluate`` call per batch) when a URL is configured, else on an
in-process platform. :meth:`SandboxRewards.submit` returns at once with a
future; a sample the platform could not judge gets ``None`` (dropped from the
update, never scored 0). With ``dedupe`` (the default) identical requests in
one batch (the same program and tests: a group that has converged) are run
once and share the verdict; every distinct program is still run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from sandbox.judge.judge import JudgeRequest

from ..client import AsyncSandboxClient
from ..errors import SandboxError
from .config import SandboxConfig
from .loop import BackgroundLoop

if TYPE_CHECKING:
    from sandbox.service.platform import Platform

logger = logging.getLogger(__name__)


@dataclass
class Verdicts:
    """Rewards for one batch (``None`` where the platform failed) and when judging ran."""

    rewards: list[float | None]
    started: float
    finished: float
    executed: int
    error: str | None = None


class SandboxRewards:
    """Submits batches to the sandbox and hands back futures of their rewards."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._loop = BackgroundLoop("rewards")
        self._client: AsyncSandboxClient | None = None
        self._platform: Platform | None = None
        self._loop.call(self._open())

    async def _open(self) -> None:
        if self.config.url:
            key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
            self._client = AsyncSandboxClient(self.config.url, api_key=key, timeout=600)
        else:
            from sandbox.service.platform import Platform, PlatformSettings

            self._platform = Platform(PlatformSettings(warm=[]))
            await self._platform.start()

    def submit(self, requests: Sequence[JudgeRequest]) -> concurrent.futures.Future[Verdicts]:
        """Start judging ``requests``; the future resolves to their rewards, in order."""
        return self._loop.submit(self._judge(list(requests)))

    async def _judge(self, requests: list[JudgeRequest]) -> Verdicts:
        started = time.monotonic()
        if self.config.dedupe:
            keys = [request.model_dump_json() for request in requests]
            chosen: dict[str, JudgeRequest] = {}
            for key, request in zip(keys, requests, strict=True):
                chosen.setdefault(key, request)
            unique = list(chosen.values())
        else:
            unique = requests
        try:
            rewards = await self._rewards(unique)
        except (SandboxError, httpx.HTTPError) as exc:  # the whole batch: every sample dropped
            logger.warning("the sandbox could not judge a batch: %s", exc)
            return Verdicts(
                [None] * len(requests), started, time.monotonic(), executed=0, error=str(exc)
            )
        if self.config.dedupe:
            by_key = dict(zip(chosen, rewards, strict=True))
            rewards = [by_key[key] for key in keys]
        return Verdicts(rewards, started, time.monotonic(), executed=len(unique))

    async def _rewards(self, requests: list[JudgeRequest]) -> list[float | None]:
        if self._client is not None:
            lines, _ = await self._client.evaluate(requests, concurrency=self.config.concurrency)
            return [line.result.reward if line.result else None for line in lines]
        assert self._platform is not None
        judge = self._platform.judge
        results = await asyncio.gather(
            *(judge.judge(r, tenant="trainer") for r in requests), return_exceptions=True
        )
        return [r.reward if not isinstance(r, BaseException) else None for r in results]

    def close(self) -> None:
        async def shut() -> None:
            if self._client is not None:
                await self._client.aclose()
            if self._platform is not None:
                await self._platform.close()

        self._loop.call(shut())
        self._loop.close()
