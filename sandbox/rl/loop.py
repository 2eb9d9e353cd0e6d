"""An asyncio event loop on its own thread, for the trainer's synchronous code to call into.

The sandbox client is async; the trainer is not. :meth:`BackgroundLoop.call`
runs a coroutine there and waits for it; if the caller is interrupted
(KeyboardInterrupt, a stopping trainer) the coroutine is cancelled and waited
for, so its ``finally`` (closing episodes) has run before the call returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

CANCEL_WAIT_S = 60.0


class BackgroundLoop:
    """One event loop, run forever on a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._tasks: set[asyncio.Task[Any]] = set()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop; its future (cancelling it cancels the coroutine)."""
        return self._start(coro)[0]

    def _start(
        self, coro: Coroutine[Any, Any, T]
    ) -> tuple[concurrent.futures.Future[T], threading.Event, threading.Event]:
        started, finished = threading.Event(), threading.Event()

        async def tracked() -> T:
            started.set()
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            try:
                return await coro
            finally:
                self._tasks.discard(task)
                finished.set()

        return asyncio.run_coroutine_threadsafe(tracked(), self.loop), started, finished

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` and return its result; interrupted, cancel it and wait for its cleanup."""
        future, started, finished = self._start(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            # A coroutine that never started has nothing to clean up.
            finished.wait(CANCEL_WAIT_S if started.is_set() else 1.0)
            raise

    def cancel_all(self) -> None:
        """Cancel every coroutine running on the loop and wait until each has finished."""

        async def cancel() -> None:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=CANCEL_WAIT_S)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(cancel(), self.loop).result(CANCEL_WAIT_S + 5)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
