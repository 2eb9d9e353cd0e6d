"""ASGI middleware: JSON bodies from non-browser clients, and a cap on body size.

``curl -d '{...}'`` sends ``application/x-www-form-urlencoded``. Such a body is
read as JSON when the request carries no ``Origin`` header: browsers always
send one on cross-site requests, so a web page still cannot make a visitor's
browser post code to a service on localhost (the CSRF case FastAPI's strict
content-type check exists for); it gets 415 instead.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 << 20
CONSOLE_PREFIX = "/ui/"
_JSON = b"application/json"
_LENIENT = (b"", b"application/x-www-form-urlencoded", b"text/plain")


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"code": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", _JSON),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyPolicy:
    """Treat lenient content types as JSON for non-browser clients; cap body size (413)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(CONSOLE_PREFIX):  # the console's own HTML forms
            await self.app(scope, self._capped(receive), send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope["headers"])
        content_type = b""
        origin = False
        length = None
        for name, value in headers:
            if name == b"content-type":
                content_type = value.split(b";")[0].strip().lower()
            elif name == b"origin":
                origin = True
            elif name == b"content-length":
                length = int(value) if value.isdigit() else None
        if length is not None and length > self.max_body_bytes:
            message = f"request body over {self.max_body_bytes} bytes"
            await _reply(send, 413, "body_too_large", message)
            return
        if content_type in _LENIENT:
            if origin:
                await _reply(
                    send, 415, "unsupported_media_type", "send the body as application/json"
                )
                return
            headers = [(n, v) for n, v in headers if n != b"content-type"]
            headers.append((b"content-type", _JSON))
            scope = {**scope, "headers": headers}
        await self.app(scope, self._capped(receive), send)

    def _capped(self, receive: Receive) -> Receive:
        seen = 0
        limit = self.max_body_bytes

        async def capped() -> Message:
            nonlocal seen
            message: Message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, f"request body over {limit} bytes")
            return message

        return capped
