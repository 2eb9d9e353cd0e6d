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
``(call id, Reply)``. Calls are multiplexed; answers come back in any order. Each end is
an :class:`asyncio.Protocol` that unpickles a frame in the callback that receives its last
byte, so an answer reaches its waiting call (and a call its task) with no reader task and
no copy of the frame in between. The agent
serves each call under the HTTP request's id (:mod:`sandbox.telemetry.context`), so its
pool's runner frames carry it as a single host's do.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import pickle
import secrets
import struct
from collections.abc import Coroutine
from typing import Any, Final, cast

from sandbox.errors import InfrastructureError
from sandbox.fleet.wire import Reply
from sandbox.telemetry import context

logger = logging.getLogger(__name__)

CALLS: Final = frozenset({"run_program", "judge"})
"""The agent methods the channel serves; everything else goes through Ray."""
TOKEN_BYTES: Final = 32
MAX_FRAME_BYTES: Final = 1 << 30
_LENGTH = struct.Struct("!I")


class ChannelClosedError(InfrastructureError):
    """The channel to a host broke: what was sent on it has no answer."""


def _frame(obj: Any) -> tuple[bytes, bytes]:
    """The length prefix and the pickle of ``obj`` (written together, never concatenated)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)), data


class _Frames(asyncio.Protocol):
    """One connection's frames: :meth:`data_received` unpickles each whole frame as it comes
    and hands it to :meth:`frame_received` at once (no reader task in between)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def send(self, obj: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(_frame(obj))

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer)
            if size > MAX_FRAME_BYTES:
                self.drop(f"a frame of {size} bytes is over the bound {MAX_FRAME_BYTES}")
                return
            end = _LENGTH.size + size
            if len(buffer) < end:
                return
            frame = memoryview(buffer)[_LENGTH.size : end]  # read in place, not copied
            try:
                obj = pickle.loads(frame)
            except Exception as exc:
                frame.release()
                self.drop(f"a frame that does not unpickle ({type(exc).__name__})")
                return
            frame.release()
            del buffer[:end]
            self.frame_received(obj)

    def frame_received(self, obj: Any) -> None:
        raise NotImplementedError

    def drop(self, why: str) -> None:
        """Close the connection: what was sent on it is not read."""
        logger.warning("channel: connection dropped: %s", why)
        self._buffer.clear()
        if self.transport is not None:
            self.transport.close()


class _Served(_Frames):
    """The agent's end of one connection: the token first, then calls, each in a task."""

    def __init__(self, server: ChannelServer) -> None:
        super().__init__()
        self._server = server
        self._trusted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        if self._trusted:
            super().data_received(data)
            return
        self._buffer += data
        if len(self._buffer) < TOKEN_BYTES:
            return
        if not hmac.compare_digest(bytes(self._buffer[:TOKEN_BYTES]), self._server.token):
            self.drop("a peer without the token")
            return
        self._trusted = True
        rest = bytes(self._buffer[TOKEN_BYTES:])
        self._buffer.clear()
        super().data_received(rest)

    def frame_received(self, obj: Any) -> None:
        call_id, method, args, request_id = obj
        # The task runs in a copy of this context: the call it opens is its own.
        self._server.spawn(self._answer(call_id, method, args, request_id))

    async def _answer(
        self, call_id: int, method: str, args: tuple[Any, ...], request_id: str | None
    ) -> None:
        if method in CALLS:
            if request_id is not None:
                context.begin(request_id)
            reply = await getattr(self._server.target, method)(*args)
        else:
            reply = Reply(code="not_found", message=f"the channel serves no call {method!r}")
        self.send((call_id, reply))


class ChannelServer:
    """The agent's end: serves :data:`CALLS` of ``target`` to peers that show the token."""

    def __init__(self, target: object, host: str) -> None:
        self.target = target
        self._host = host
        self.token = secrets.token_bytes(TOKEN_BYTES)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections: set[_Served] = set()

    async def start(self) -> int:
        """Listen (once) and return the port."""
        if self._server is None:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(lambda: _Served(self), self._host, 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def spawn(self, call: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(call)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop listening and close every connection (calls in flight get no answer)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()


class ChannelClient(_Frames):
    """The router's end: :meth:`call` sends a call and waits for its answer."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._ids = 0
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, token: bytes) -> ChannelClient:
        """Connect to an agent's :class:`ChannelServer` and show it ``token``."""
        _, client = await asyncio.get_running_loop().create_connection(cls, host, port)
        assert client.transport is not None
        client.transport.write(token)
        return client

    async def call(self, method: str, *args: Any) -> Reply:
        """The agent's reply to ``method(*args)``; :class:`ChannelClosedError` if it broke."""
        if self.closed:
            raise ChannelClosedError("the channel to this host is closed")
        self._ids += 1
        call_id = self._ids
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            self.send((call_id, method, args, context.request_id()))
            return await future
        finally:
            self._pending.pop(call_id, None)

    def frame_received(self, obj: Any) -> None:
        call_id, reply = obj
        future = self._pending.get(call_id)
        if future is not None and not future.done():
            future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        why = type(exc).__name__ if exc is not None else "closed by the host"
        self._fail(f"the channel to this host broke: {why}")

    def fail(self, why: str) -> None:
        """Close the channel now: every call waiting on it raises :class:`ChannelClosedError`
        saying ``why`` (the router does this to a host it lost, whose answers may never come)."""
        self._fail(why)

    def _fail(self, why: str) -> None:
        if not self.closed:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ChannelClosedError(why))
        if self.transport is not None:
            self.transport.close()

    async def close(self) -> None:
        self._fail("the channel was closed")
