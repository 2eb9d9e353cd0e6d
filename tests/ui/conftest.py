"""A keyed service for the console's tests: an admin and two tenants, its own state."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sandbox.service.tenants import hash_key, new_key
from tests.conftest import REPO, SANDBOX_BIN, Service

KEYS = {name: new_key() for name in ("admin", "team-a", "team-b")}


TASK = REPO / "tests" / "data" / "tasks" / "fix-add"
PROBLEMS = REPO / "tests" / "data" / "quality" / "star-import.jsonl"
# A training log in the trainer's metrics.jsonl format (one line a step), for the curves.
METRICS = [
    {"step": 1, "reward": 0.2, "pass_rate": 0.1, "prompt_tokens": 100, "completion_tokens": 40},
    {"step": 2, "reward": 0.5, "pass_rate": 0.4, "held_out_pass_rate": 0.3, "prompt_tokens": 120},
    {"step": 3, "reward": 0.7, "pass_rate": 0.6, "completion_tokens": 2},
]


def real_runs(runs: Path, state: Path) -> None:
    """Two real evaluation runs of one task by ``sandbox eval run`` (oracle and null agents)
    and a real ``sandbox quality check`` of a planted problem, side by side."""
    commands = {
        agent: ["eval", "run", str(TASK), "--agent", agent, "--out", str(runs / "evals" / agent)]
        for agent in ("oracle", "null")
    }
    quality_out = runs / "quality" / "star-import"
    commands["quality"] = ["quality", "check", str(PROBLEMS), "--runs", "1"]
    commands["quality"] += ["--probes", "exit-zero", "--out", str(quality_out)]
    children = [
        subprocess.Popen(
            [str(SANDBOX_BIN), *command, "--no-progress"],
            env={**os.environ, "SANDBOX_STATE_DIR": str(state / name)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for name, command in commands.items()
    ]
    for child in children:
        output, _ = child.communicate(timeout=300)
        # null fails its task: exit 1 ("below target") is its outcome, not an error.
        assert child.returncode in (0, 1), output.decode(errors="replace")


def console_runs(root: Path) -> Path:
    """``root/runs``: :func:`real_runs` and a training log (:data:`METRICS`) in
    ``train/demo`` (the console's tests', and its benchmark's)."""
    runs = root / "runs"
    real_runs(runs, root / "run-state")
    (runs / "train" / "demo").mkdir(parents=True)
    (runs / "train" / "demo" / "metrics.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in METRICS)
    )
    return runs


@pytest.fixture(scope="package")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``sandbox serve`` with keys for ``admin`` (an admin), ``team-a`` and ``team-b``, and
    ``--runs-dir`` holding two evaluation runs, a quality report and a training log."""
    root = tmp_path_factory.mktemp("console")
    runs = console_runs(root)
    entries: list[dict[str, Any]] = [
        {"tenant": name, "key_sha256": hash_key(key), "admin": name == "admin"}
        for name, key in KEYS.items()
    ]
    keys = root / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": entries}))
    with Service(
        "--keys",
        str(keys),
        "--runs-dir",
        str(runs),
        env={"SANDBOX_STATE_DIR": str(root / "state")},
    ) as svc:
        yield svc


def api(service: Service, tenant: str) -> httpx.Client:
    """An API client with ``tenant``'s key in its headers."""
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    return httpx.Client(base_url=service.url, headers=headers, timeout=60)


def run(service: Service, tenant: str, code: str) -> dict[str, Any]:
    with api(service, tenant) as http:
        response = http.post("/v1/run", json={"code": code})
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


@contextlib.contextmanager
def logged_in(service: Service, tenant: str) -> Iterator[httpx.Client]:
    """A client holding the console's cookie for ``tenant`` (posted through the login form)."""
    with httpx.Client(base_url=service.url, timeout=60) as http:
        response = http.post("/ui/login", data={"key": KEYS[tenant]})
        assert response.status_code == 303, response.text
        yield http
