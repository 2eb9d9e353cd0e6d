"""Plain values across the judge/candidate boundary, and the socket framing they travel in.

Only exact built-in types are encoded as values: ``None``, ``bool``, ``int``,
``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``dict``,
``set``, ``frozenset`` (and numpy scalars, as the Python number they hold).
Anything else, subclasses of built-ins included, is never trusted as a value:
the candidate side turns it into a *handle* (an opaque reference the judge can
call methods on), so an object whose ``__eq__`` always says True never
reaches a comparison. Decoding is strict and builds fresh built-in objects.
Used by the judge, the candidate and the trusted host alike.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

MAX_MESSAGE_BYTES = 64 << 20
MAX_DEPTH = 100
_HEADER = struct.Struct(">I")


class WireError(ValueError):
    """A value or message that does not follow the wire format."""


class Unencodable(WireError):
    """A value that is not plain data (the caller may send a handle instead)."""


def encode(value: Any, handle: Any = None, depth: int = 0) -> Any:
    """``value`` as JSON-ready data; ``handle(obj)`` encodes what is not plain (else it raises)."""
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -(2**63) <= value < 2**63 else {"$int": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is list:
        return [encode(item, handle, depth + 1) for item in value]
    if kind is tuple:
        return {"$tuple": [encode(item, handle, depth + 1) for item in value]}
    if kind is dict:
        return {
            "$dict": [
                [encode(k, handle, depth + 1), encode(v, handle, depth + 1)]
                for k, v in value.items()
            ]
        }
    if kind is set or kind is frozenset:
        tag = "$set" if kind is set else "$frozenset"
        return {tag: [encode(item, handle, depth + 1) for item in value]}
    if kind is bytes:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"$complex": [encode(value.real), encode(value.imag)]}
    scalar = _numpy_scalar(value)
    if scalar is not None:
        return encode(scalar, handle, depth)
    if handle is None:
        raise Unencodable(f"{kind.__module__}.{kind.__qualname__} is not plain data")
    return handle(value)


def _numpy_scalar(value: Any) -> Any:
    """The Python number inside an exact numpy scalar (never a subclass), else None."""
    kind = type(value)
    if kind.__module__ != "numpy" or not hasattr(value, "item"):
        return None
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None or kind not in _numpy_types(numpy):
        return None
    item = value.item()
    return item if type(item) in (bool, int, float, complex) else None


def _numpy_types(numpy: Any) -> set[type]:
    names = [
        "bool_",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "longdouble",
        "complex64",
        "complex128",
    ]
    return {getattr(numpy, name) for name in names if hasattr(numpy, name)}


def decode(data: Any, handle: Any = None, depth: int = 0) -> Any:
    """The value ``data`` stands for; ``handle(spec)`` rebuilds handles (else they are refused)."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    kind = type(data)
    if data is None or kind in (bool, str, int, float):
        return data
    if kind is list:
        return [decode(item, handle, depth + 1) for item in data]
    if kind is not dict or len(data) not in (1, 2):
        raise WireError(f"not a wire value: {str(data)[:80]}")
    if "$handle" in data:
        if handle is None:
            raise WireError("a handle where a plain value was required")
        return handle(data)
    ((tag, body),) = data.items()
    if tag == "$int":
        return int(body)
    if tag == "$float":
        return float(body)
    if tag == "$tuple":
        return tuple(decode(item, handle, depth + 1) for item in body)
    if tag == "$dict":
        return {decode(k, handle, depth + 1): decode(v, handle, depth + 1) for k, v in body}
    if tag == "$set":
        return {decode(item, handle, depth + 1) for item in body}
    if tag == "$frozenset":
        return frozenset(decode(item, handle, depth + 1) for item in body)
    if tag == "$bytes":
        return base64.b64decode(body)
    if tag == "$complex":
        return complex(float(body[0]), float(body[1]))
    raise WireError(f"unknown wire tag {tag!r}")


def send(sock: Any, message: dict[str, Any]) -> None:
    """Write one length-prefixed JSON message."""
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    sock.sendall(_HEADER.pack(len(body)) + body)


def receive(sock: Any) -> dict[str, Any] | None:
    """Read one message; None when the other side closed the connection."""
    header = _read_exact(sock, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    body = _read_exact(sock, size)
    if body is None:
        return None
    message = json.loads(body)
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


def _read_exact(sock: Any, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
