"""The direct channel from the router to a host agent: runs and judgements without a Ray call.

A Ray actor call crosses several threads in both processes (about 2 ms at the median on
this 2-core machine, against 0.06 ms for a round trip on a TCP socket), so the calls of
the hot path (:data:`CALLS`) travel on a channel of their own: the agent listens on its
node's address (:class:`ChannelServer`, a port the OS picks) and hands the port and a
random token to the router over Ray, the cluster's trusted control plane; the router
opens one connection (:class:`ChannelClient`) whose first frame is the token. A peer
that does not show the token is dropped before anything it sent is read.

Frames are a 4-byte length and a pickle, as Ray itself moves objects between the
processes of a cluster: a call is ``(call id, method, args, request id)``, its answer
``(call id, Reply)``. Calls are multiplexed; answers come back in any order. The agent
serves each call under the HTTP request's id (:mod:`sandbox.telemetry.context`), so its
pool's runner frames carry it as a single host's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import pickle
import secrets
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Final

from sandbox.errors import InfrastructureError
from sandbox.fleet.wire import Reply
from sandbox.telemetry import context

logger = logging.getLogger(__name__)

CALLS: Final = frozenset({"run_program", "judge"})
"""The agent methods the channel serves; everything else goes through Ray."""
TOKEN_BYTES: Final = 32
MAX_FRAME_BYTES: Final = 1 << 30
_LENGTH = struct.Struct("!I")

Dispatch = Callable[..., Awaitable[Reply]]


class ChannelClosedError(InfrastructureError):
    """The channel to a host broke: what was sent on it has no answer."""


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if size > MAX_FRAME_BYTES:
        raise ConnectionError(f"a frame of {size} bytes is over the bound {MAX_FRAME_BYTES}")
    return await reader.readexactly(size)


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


class ChannelServer:
    """The agent's end: serves :data:`CALLS` of ``target`` to peers that show the token."""

    def __init__(self, target: object, host: str) -> None:
        self._target = target
        self._host = host
        self.token = secrets.token_bytes(TOKEN_BYTES)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        """Listen (once) and return the port."""
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self._host, 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        """Stop listening and close every connection (calls in flight get no answer)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            token = await reader.readexactly(TOKEN_BYTES)
            if not hmac.compare_digest(token, self.token):
                logger.warning("channel: a peer without the token was dropped")
                return
            while True:
                call_id, method, args, request_id = pickle.loads(await _read_frame(reader))
                task = asyncio.create_task(self._answer(writer, call_id, method, args, request_id))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the router went away
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        call_id: int,
        method: str,
        args: tuple[Any, ...],
        request_id: str | None,
    ) -> None:
        if method in CALLS:
            # The task runs in a copy of the server's context: the call opened here is its own.
            if request_id is not None:
                context.begin(request_id)
            reply = await getattr(self._target, method)(*args)
        else:
            reply = Reply(code="not_found", message=f"the channel serves no call {method!r}")
        if not writer.is_closing():
            writer.write(_frame((call_id, reply)))


class ChannelClient:
    """The router's end: :meth:`call` sends a call and waits for its answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._ids = 0
        self.closed = False
        self._reading = asyncio.create_task(self._read_loop(), name="fleet-channel")

    @classmethod
    async def open(cls, host: str, port: int, token: bytes) -> ChannelClient:
        """Connect to an agent's :class:`ChannelServer` and show it ``token``."""
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(token)
        return cls(reader, writer)

    async def call(self, method: str, *args: Any) -> Reply:
        """The agent's reply to ``method(*args)``; :class:`ChannelClosedError` if it broke."""
        if self.closed:
            raise ChannelClosedError("the channel to this host is closed")
        self._ids += 1
        call_id = self._ids
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            self._writer.write(_frame((call_id, method, args, context.request_id())))
            return await future
        finally:
            self._pending.pop(call_id, None)

    async def _read_loop(self) -> None:
        try:
            while True:
                call_id, reply = pickle.loads(await _read_frame(self._reader))
                future = self._pending.get(call_id)
                if future is not None and not future.done():
                    future.set_result(reply)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self._fail(f"the channel to this host broke: {type(exc).__name__}")

    def fail(self, why: str) -> None:
        """Close the channel now: every call waiting on it raises :class:`ChannelClosedError`
        saying ``why`` (the router does this to a host it lost, whose answers may never come)."""
        self._reading.cancel()
        self._fail(why)

    def _fail(self, why: str) -> None:
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ChannelClosedError(why))
        self._writer.close()

    async def close(self) -> None:
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._fail("the channel was closed")
