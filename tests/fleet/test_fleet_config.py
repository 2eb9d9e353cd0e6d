"""A bad fleet config stops `sandbox serve --fleet` at start, naming the file and the key."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SANDBOX_BIN


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("classes:\n  interactive: {weight: 5, max_wait_s: 1, colour: red}\n", "colour"),
        ("tenants:\n  bob: {max_class: platinum}\n", "tenants.bob.max_class"),
        ("placement: {k: 0}\n", "placement.k"),
    ],
)
def test_a_bad_fleet_config_is_refused_at_start(tmp_path: Path, text: str, key: str) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text(text)
    started = subprocess.run(
        [str(SANDBOX_BIN), "serve", "--fleet", "auto", "--fleet-config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1"},  # never reached: refused first
    )
    assert started.returncode != 0
    assert str(config) in started.stderr and key in started.stderr, started.stderr
