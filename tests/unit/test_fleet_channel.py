"""The router-to-agent direct channel over a real loopback socket: calls, the token, breakage."""

from __future__ import annotations

import asyncio
import pickle
import struct

import pytest

from sandbox.fleet.channel import (
    MAX_FRAME_BYTES,
    TOKEN_BYTES,
    ChannelClient,
    ChannelClosedError,
    ChannelServer,
)
from sandbox.fleet.wire import Reply
from sandbox.telemetry import context


class Target:
    """What the server dispatches to: records the calls it got."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.release = asyncio.Event()

    async def run_program(self, request: str, tenant: str) -> Reply:
        self.calls.append((request, tenant))
        if request == "wait":
            await self.release.wait()
        return Reply(value=f"{request} for {tenant}")

    async def judge(self, request: str, tenant: str) -> Reply:
        return Reply(code="capacity_exhausted", message="full", retry_after=2.0)

    async def drain(self) -> Reply:
        raise AssertionError("drain is not a channel call")


async def _served() -> tuple[Target, ChannelServer, int]:
    target = Target()
    server = ChannelServer(target, "127.0.0.1")
    return target, server, await server.start()


async def test_calls_are_answered_in_any_order_over_one_connection() -> None:
    target, server, port = await _served()
    client = await ChannelClient.open("127.0.0.1", port, server.token)
    try:
        slow = asyncio.create_task(client.call("run_program", "wait", "alice"))
        while not target.calls:
            await asyncio.sleep(0.01)
        fast = await client.call("run_program", "quick", "bob")
        assert fast.value == "quick for bob" and not slow.done()
        target.release.set()
        assert (await slow).value == "wait for alice"
        refused = await client.call("judge", "x", "alice")
        assert (refused.code, refused.retry_after) == ("capacity_exhausted", 2.0)
        other = await client.call("drain")
        assert other.code == "not_found" and "drain" in other.message
    finally:
        await client.close()
        await server.close()


async def test_a_peer_without_the_token_is_dropped_unread() -> None:
    target, server, port = await _served()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        call = pickle.dumps((1, "run_program", ("evil", "mallory"), None))
        writer.write(b"\0" * TOKEN_BYTES + struct.pack("!I", len(call)) + call)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
        writer.close()
        assert target.calls == []
        with pytest.raises(ChannelClosedError):  # a client with a wrong token learns it too
            client = await ChannelClient.open("127.0.0.1", port, b"x" * TOKEN_BYTES)
            await asyncio.wait_for(client.call("run_program", "evil", "mallory"), 10)
        assert target.calls == []
    finally:
        await server.close()


def _call_frame(call_id: int, request: str) -> bytes:
    data = pickle.dumps((call_id, "run_program", (request, "alice"), None))
    return struct.pack("!I", len(data)) + data


async def test_frames_split_or_run_together_are_each_answered() -> None:
    _, server, port = await _served()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        sent = server.token + _call_frame(1, "one") + _call_frame(2, "two") + _call_frame(3, "x")
        for i in range(len(sent) - 40):  # a byte at a time, then the rest at once
            writer.write(sent[i : i + 1])
            await writer.drain()
        writer.write(sent[len(sent) - 40 :])
        answers = {}
        for _ in range(3):
            (size,) = struct.unpack("!I", await asyncio.wait_for(reader.readexactly(4), 10))
            call_id, reply = pickle.loads(await reader.readexactly(size))
            answers[call_id] = reply.value
        assert answers == {1: "one for alice", 2: "two for alice", 3: "x for alice"}
    finally:
        writer.close()
        await server.close()


@pytest.mark.parametrize(
    "frame",
    [struct.pack("!I", MAX_FRAME_BYTES + 1), struct.pack("!I", 5) + b"junk!"],
    ids=["over the bound", "not a pickle"],
)
async def test_a_bad_frame_closes_the_connection_unanswered(frame: bytes) -> None:
    target, server, port = await _served()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(server.token + frame + _call_frame(1, "after"))
        assert await asyncio.wait_for(reader.read(), 10) == b""
        assert target.calls == []
    finally:
        writer.close()
        await server.close()


async def test_a_call_in_flight_when_the_agent_goes_away_raises_channel_closed() -> None:
    target, server, port = await _served()
    client = await ChannelClient.open("127.0.0.1", port, server.token)
    pending = asyncio.create_task(client.call("run_program", "wait", "alice"))
    while not target.calls:
        await asyncio.sleep(0.01)
    await server.close()  # the agent is released (or its process dies): its sockets close
    with pytest.raises(ChannelClosedError):
        await asyncio.wait_for(pending, 10)
    assert client.closed
    with pytest.raises(ChannelClosedError):
        await client.call("run_program", "after", "alice")


class IdTarget(Target):
    """Answers with the request id it was called under."""

    async def run_program(self, request: str, tenant: str) -> Reply:
        return Reply(value=context.request_id())


async def test_a_call_is_served_under_the_request_id_it_was_made_under() -> None:
    server = ChannelServer(IdTarget(), "127.0.0.1")
    port = await server.start()
    client = await ChannelClient.open("127.0.0.1", port, server.token)
    try:
        assert (await client.call("run_program", "x", "alice")).value is None
        _, token = context.begin("req-fleet-7")
        try:
            answered = await client.call("run_program", "x", "alice")
        finally:
            context.end(token)
        assert answered.value == "req-fleet-7"
        assert (await client.call("run_program", "x", "alice")).value is None
    finally:
        await client.close()
        await server.close()
