"""Framing of the runner channel: a 4-byte big-endian length, then a JSON object.

Shared by the runner (inside the container, stdlib only) and the host side.
Binary payloads travel base64-encoded inside the JSON.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 512 << 20


class ProtocolError(Exception):
    """A frame on the channel is malformed."""


def encode_frame(message: dict[str, Any]) -> bytes:
    """Serialise one message into a length-prefixed frame."""
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> dict[str, Any]:
    """Parse a frame body (without its header) into a message."""
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks = []
    remaining = size
    while remaining:
        chunk = os.read(fd, remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict[str, Any] | None:
    """Block until one whole frame is read from ``fd``; ``None`` at end of file."""
    header = _read_exact(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
    body = _read_exact(fd, size)
    if body is None:
        return None
    return decode_body(body)


def write_frame(fd: int, message: dict[str, Any]) -> None:
    """Write one whole frame to ``fd``."""
    view = memoryview(encode_frame(message))
    while view:
        written = os.write(fd, view)
        view = view[written:]


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    return base64.b64decode(text, validate=True)
