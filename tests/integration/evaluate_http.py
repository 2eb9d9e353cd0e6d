"""Judging a batch through a live service's ``POST /v1/evaluate``."""

from __future__ import annotations

import json
from typing import Any

import httpx


def evaluate(
    http: httpx.Client, items: list[dict[str, Any]], *, concurrency: int, timeout_s: float = 600
) -> dict[str, dict[str, Any]]:
    """Judge ``items`` as one streamed batch; results by id (no item may be an infra error)."""
    with http.stream(
        "POST",
        "/v1/evaluate",
        json={"items": items, "concurrency": concurrency},
        timeout=timeout_s,
    ) as response:
        assert response.status_code == 200, response.read()
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    summary = lines[-1]
    assert summary["done"] is True and summary["items"] == len(items)
    assert summary["infra_errors"] == 0
    return {line["id"]: line["result"] for line in lines[:-1]}
