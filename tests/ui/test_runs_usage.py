"""``/metrics`` of a real service carries the model usage its runs directory recorded.

Evaluations and training call their model in processes of their own; the service
sums what their run files say (``results.jsonl`` per trial, ``metrics.jsonl`` per
step), by source, and reads a file again when it grows; the console's overview shows
the same sums. The service has no keys: its console needs no login, on loopback.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Service, metric

pytestmark = pytest.mark.docker

# Two trials as the evaluator writes them (sandbox/evals/runner.py), one without a model.
TRIALS = [
    {
        "task": "a",
        "tokens": {"prompt_tokens": 300, "completion_tokens": 50, "total_tokens": 350},
        "model_calls": 3,
        "cost": 0.0125,
    },
    {
        "task": "b",
        "tokens": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "model_calls": 0,
        "cost": 0.0,
    },
]
STEPS = [{"step": 1, "prompt_tokens": 1000, "completion_tokens": 400, "reward": 0.5}]


def _write(path: Path, records: list[dict[str, Any]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("usage") / "runs"
    _write(root / "evals" / "gpt" / "results.jsonl", TRIALS)
    _write(root / "train" / "grpo" / "metrics.jsonl", STEPS)
    return root


@pytest.fixture(scope="module")
def service(runs: Path) -> Iterator[Service]:
    with Service("--runs-dir", str(runs), env={"SANDBOX_STATE_DIR": str(runs.parent / "s")}) as svc:
        yield svc


def _scrape(service: Service) -> str:
    response = httpx.get(f"{service.url}/metrics", timeout=30)
    response.raise_for_status()
    return response.text


def test_the_runs_model_usage_is_in_metrics_and_follows_new_records(
    service: Service, runs: Path
) -> None:
    text = _scrape(service)
    tokens = "sandbox_runs_model_tokens"
    assert metric(text, tokens, source="eval", kind="prompt") == 300
    assert metric(text, tokens, source="eval", kind="completion") == 50
    assert metric(text, "sandbox_runs_model_calls", source="eval") == 3
    assert metric(text, "sandbox_runs_model_cost", source="eval") == pytest.approx(0.0125)
    assert metric(text, tokens, source="rl", kind="prompt") == 1000
    assert metric(text, tokens, source="rl", kind="completion") == 400
    assert "sandbox_executions_total" in text  # the platform's own metrics are still there

    # A training step appended, and a half-written line after it, are read on the next scrape.
    _write(runs / "train" / "grpo" / "metrics.jsonl", [{"step": 2, "prompt_tokens": 7}], "a")
    with (runs / "train" / "grpo" / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 3, "prompt_tok')
    _write(runs / "evals" / "other" / "results.jsonl", TRIALS[:1])
    text = _scrape(service)
    assert metric(text, tokens, source="rl", kind="prompt") == 1007
    assert metric(text, tokens, source="eval", kind="prompt") == 600
    assert metric(text, "sandbox_runs_model_calls", source="eval") == 6


def test_without_keys_the_console_is_served_on_loopback_without_login(service: Service) -> None:
    assert urllib.parse.urlsplit(service.url).hostname == "127.0.0.1"
    with httpx.Client(base_url=service.url, timeout=30) as http:
        overview = http.get("/ui")  # no cookie, no header: the page itself, not the login form
        assert overview.status_code == 200 and "tenant: anonymous" in overview.text
        for path in ("/ui/audit", "/ui/evaluations", "/ui/training"):  # the admin's pages too
            assert http.get(path).status_code == 200, path
        model = http.get("/ui/api/overview").json()["model"]
    # The overview's model usage is /metrics' sum over the sources.
    text = _scrape(service)
    tokens = "sandbox_runs_model_tokens"
    assert model["prompt_tokens"] == metric(text, tokens, kind="prompt") > 0
    assert model["completion_tokens"] == metric(text, tokens, kind="completion") > 0
    assert model["calls"] == metric(text, "sandbox_runs_model_calls") > 0
    cost = metric(text, "sandbox_runs_model_cost")
    assert model["cost"] == pytest.approx(cost) and cost > 0
