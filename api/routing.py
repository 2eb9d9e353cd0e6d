"""The route class of every router: a JSON body must be valid text before it is validated.

JSON may escape half of a UTF-16 surrogate pair (``"\\ud800"``), which Python
decodes to a string no file name, program, stream or response can encode. Such
a body is refused here, for every field at once, as a 422 naming where it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from sandbox.core.validation import dotted, lone_surrogate

# Only a body holding such an escape is searched (keeps the hot path one regex scan).
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


class _TextRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            parsed = await super().json()
            if _ESCAPED_SURROGATE.search(body):
                where = lone_surrogate(parsed)
                if where is not None:
                    raise HTTPException(
                        422,
                        f"{dotted(('body', *where))}: not valid UTF-8 text (a lone surrogate, "
                        "half of a UTF-16 pair); send text",
                    )
        return self._json


class TextJSONRoute(APIRoute):
    """An :class:`APIRoute` whose JSON body is refused (422) when it holds a lone surrogate."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def text_only(request: Request) -> Response:
            return await handler(_TextRequest(request.scope, request.receive))

        return text_only
