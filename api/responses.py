"""Responses built straight from pydantic models: FastAPI would otherwise validate them again."""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel


def json_response(model: BaseModel) -> Response:
    """``model`` serialised once, by pydantic, as the JSON body."""
    return Response(content=model.model_dump_json(), media_type="application/json")
