"""The host end of a runner's channel: the container's attached stdio, spoken asynchronously.

docker-py's ``attach_socket`` is blocking; on the hot path we speak the Docker
attach protocol directly over the engine's unix socket with asyncio: one HTTP
``POST /containers/{id}/attach`` upgraded to a raw stream. What the container
writes comes back multiplexed (an 8-byte header per chunk naming stdout or
stderr); stdout carries the runner's frames, stderr its log.

Each request carries the id of the HTTP call it serves (``request_id``, a field
the runner ignores), and the runner's log lines are logged under the id of the
request it last received.

The container is created with ``StdinOnce``: when this connection closes
(the service exits or is killed), the runner sees end of file, exits, and the
container removes itself.

Where the runner listens on a socket of its own (runc; see ``runner.__main__``),
:meth:`RunnerChannel.use_socket` moves the frames there once the runner is up:
every byte through the attach stream costs dockerd and the shim a copy each way.
The attach stream stays open for the runner's log and its lifetime.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import itertools
import logging
import struct
from collections.abc import Awaitable
from typing import Any

from ..errors import ContainerLostError, EngineError, SandboxTimeoutError
from ..runner.protocol import HEADER, MAX_FRAME_BYTES, decode_body, encode_frame
from ..telemetry import context

logger = logging.getLogger(__name__)

_MUX_HEADER = struct.Struct(">BxxxI")
_STDOUT, _STDERR = 1, 2
_MAX_RUNNER_LOG_LINE = 4096


class RunnerChannel:
    """Request/response over one container's attached stdio; one request at a time."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._name = name
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._pending: asyncio.Future[dict[str, Any]] | None = None
        self._follow_up: asyncio.Future[dict[str, Any]] | None = None
        self._inbox: collections.deque[dict[str, Any]] = collections.deque()
        self._frames_out = writer  # where requests go: stdin, or the runner's socket
        self._socket_task: asyncio.Task[None] | None = None
        self._log = bytearray()
        self._closed_reason: str | None = None
        self._request_id: str | None = None  # of the call the runner serves (for its log)
        # In a context of its own: it outlives the call that started the container.
        self._task = asyncio.create_task(
            self._until_broken(self._read_attach(), "channel"),
            name=f"runner-channel-{name}",
            context=contextvars.Context(),
        )

    @classmethod
    async def attach(cls, socket_path: str, api_version: str, container_id: str) -> RunnerChannel:
        """Attach to a created (not necessarily started) container's stdio."""
        try:
            reader, writer = await asyncio.open_unix_connection(socket_path, limit=1 << 20)
        except OSError as exc:
            raise EngineError(f"cannot reach the Docker engine at {socket_path}: {exc}") from exc
        request = (
            f"POST /v{api_version}/containers/{container_id}/attach"
            "?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
            "Host: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
            "Content-Length: 0\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
        if " 101 " not in status_line and " 200 " not in status_line:
            writer.close()
            raise EngineError(f"attach to container {container_id[:12]} refused: {status_line}")
        return cls(reader, writer, container_id[:12])

    async def use_socket(self, path: str) -> bool:
        """Send requests to the runner's own socket at ``path`` (a host path) from now on.

        Returns False, and the channel stays on the attach stream, when the socket
        cannot be reached (the service in a container of its own, without the host's
        ``/proc``; a runner without one).
        """
        async with self._lock:
            if self._closed_reason is not None or self._socket_task is not None:
                return False
            try:
                reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
            except OSError as exc:
                logger.info("runner %s: its socket is out of reach (%s)", self._name, exc)
                return False
            self._frames_out = writer
            self._socket_task = asyncio.create_task(
                self._until_broken(self._read_socket(reader), "socket"),
                name=f"runner-socket-{self._name}",
                context=contextvars.Context(),
            )
            return True

    @property
    def transport(self) -> str:
        """Where requests go: ``"socket"`` (the runner's own) or ``"attach"`` (its stdin)."""
        return "socket" if self._socket_task is not None else "attach"

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    async def call(
        self, message: dict[str, Any], timeout: float, *, follow_up: bool = False
    ) -> dict[str, Any]:
        """Send one request and wait for its reply; raises if the runner is gone or silent.

        With ``follow_up`` the runner sends a second frame later; the channel stays
        reserved until :meth:`follow_up` has received it.
        """
        await self._lock.acquire()
        release = True
        try:
            if self._closed_reason is not None:
                raise ContainerLostError(f"runner {self._name} is gone: {self._closed_reason}")
            frame_id = next(self._ids)
            self._request_id = context.request_id()
            if self._request_id is not None:
                message = {**message, "request_id": self._request_id}
            reply = await self._exchange({**message, "id": frame_id}, timeout)
            if reply.get("id") != frame_id:
                self._fail("reply out of order")
                raise ContainerLostError(f"runner {self._name} answered out of order")
            if follow_up:
                self._arm_follow_up()
                release = False
            return reply
        finally:
            if release:
                self._lock.release()

    async def follow_up(self, timeout: float) -> dict[str, Any]:
        """The second frame of the last ``call(..., follow_up=True)``."""
        future = self._follow_up
        if future is None:
            raise ContainerLostError(f"runner {self._name}: no follow-up frame is expected")
        self._follow_up = None
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            self._fail("runner did not send its follow-up in time")
            raise SandboxTimeoutError(
                f"runner {self._name} did not finish within {timeout:.1f} s"
            ) from None

    def _expect(self) -> asyncio.Future[dict[str, Any]]:
        """A future for the next frame; resolved at once if it already arrived."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self._inbox:
            future.set_result(self._inbox.popleft())
        else:
            self._pending = future
        return future

    def _arm_follow_up(self) -> None:
        future = self._follow_up = self._expect()

        def done(_: asyncio.Future[dict[str, Any]]) -> None:
            if not future.cancelled():
                future.exception()  # whoever awaits it sees it; otherwise it is dropped
            if self._pending is future:
                self._pending = None
            self._lock.release()

        future.add_done_callback(done)

    async def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self._inbox:
            self._fail("the runner sent a frame nobody asked for")
            raise ContainerLostError(f"runner {self._name} sent an unexpected frame")
        future = self._expect()
        try:
            self._frames_out.write(encode_frame(message))
            await self._frames_out.drain()
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._fail("runner did not answer in time")
            raise SandboxTimeoutError(
                f"runner {self._name} did not answer within {timeout:.1f} s"
            ) from None
        except (ConnectionError, OSError) as exc:
            self._fail(f"channel broke: {exc}")
            raise ContainerLostError(f"runner {self._name} channel broke: {exc}") from exc
        finally:
            if self._pending is future:
                self._pending = None

    async def close(self) -> None:
        """Close the connection (the runner then exits); idempotent."""
        self._fail("closed by the service")
        for task in (self._task, self._socket_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for writer in {self._writer, self._frames_out}:
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    def _fail(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        if self._pending is not None and not self._pending.done():
            self._pending.set_exception(
                ContainerLostError(f"runner {self._name} is gone: {self._closed_reason}")
            )
        self._writer.close()
        self._frames_out.close()

    async def _until_broken(self, reading: Awaitable[None], what: str) -> None:
        """Run a read loop; whatever breaks it fails the channel (cancelling does not)."""
        try:
            await reading
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("runner %s: %s failed", self._name, what)
            self._fail(f"{what} error: {exc}")

    async def _read_attach(self) -> None:
        """The attach stream: frames on stdout, the runner's log on stderr."""
        buffer = bytearray()
        try:
            while True:
                header = await self._reader.readexactly(_MUX_HEADER.size)
                stream, size = _MUX_HEADER.unpack(header)
                payload = await self._reader.readexactly(size)
                if stream == _STDOUT:
                    buffer += payload
                    self._deliver(buffer)
                elif stream == _STDERR:
                    self._runner_log(payload)
        except asyncio.IncompleteReadError:
            self._fail("the container's output ended (runner exited)")

    async def _read_socket(self, reader: asyncio.StreamReader) -> None:
        """Frames from the runner's socket (no multiplexing: nothing else comes that way)."""
        buffer = bytearray()
        while chunk := await reader.read(1 << 16):
            buffer += chunk
            self._deliver(buffer)
        self._fail("the runner closed its socket")

    def _deliver(self, buffer: bytearray) -> None:
        """Hand every whole frame in ``buffer`` to its waiter (or the inbox); keep the rest."""
        while len(buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(buffer)
            if size > MAX_FRAME_BYTES:
                raise ValueError(f"frame of {size} bytes from runner")
            if len(buffer) < HEADER.size + size:
                return
            body = bytes(buffer[HEADER.size : HEADER.size + size])
            del buffer[: HEADER.size + size]
            message = decode_body(body)
            if self._pending is not None and not self._pending.done():
                self._pending.set_result(message)
                self._pending = None
            else:
                self._inbox.append(message)

    def _runner_log(self, payload: bytes) -> None:
        self._log += payload
        *lines, rest = self._log.split(b"\n")
        self._log = bytearray(rest[-_MAX_RUNNER_LOG_LINE:])
        for line in lines:
            logger.warning(
                "runner %s: %s",
                self._name,
                line.decode(errors="replace")[:4096],
                extra={"request_id": self._request_id},
            )
