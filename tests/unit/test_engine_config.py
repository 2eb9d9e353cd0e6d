"""Unit tests of sandbox.host.engine.merge_daemon_json: dockerd's config gains the gVisor
runtimes and the build runtime as its default.

Engine-free: every test works on a daemon.json in a temporary directory. (That
the running engine lists the runtimes is checked in tests/integration/test_mounts.py.)
"""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path
from typing import Any

import pytest

from sandbox.errors import EngineError
from sandbox.host.engine import (
    BUILD_RUNTIME_PATH,
    RUNSC_PATH,
    SANDBOX_RUNTIMES,
    install_build_runtime,
    merge_daemon_json,
)

RUNSC = {"path": RUNSC_PATH, "runtimeArgs": ["--network=none"]}
RUNSC_NET = {"path": RUNSC_PATH}
BUILD = {"path": str(BUILD_RUNTIME_PATH)}
# Root sessions: the root file system writable, its writes in the sandbox's memory.
ROOT = {"path": RUNSC_PATH, "runtimeArgs": ["--network=none", "--overlay2=root:memory"]}
ROOT_NET = {"path": RUNSC_PATH, "runtimeArgs": ["--overlay2=root:memory"]}
OURS = {
    "runsc": RUNSC,
    "runsc-net": RUNSC_NET,
    "runsc-root": ROOT,
    "runsc-root-net": ROOT_NET,
    "sandbox-build": BUILD,
}


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def leftovers(directory: Path) -> list[str]:
    """Temporary files of an interrupted or refused write."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".daemon.json."))


def test_the_registered_runtimes() -> None:
    # The names and arguments the rest of the platform relies on: policies with
    # network.mode none run on runsc (no network at all), allowlist ones on runsc-net;
    # sandbox-build, the default, runs tenants' build steps under gVisor.
    assert {name: dict(spec) for name, spec in SANDBOX_RUNTIMES.items()} == OURS


def test_absent_file_is_created_with_our_runtimes(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "docker" / "daemon.json"  # the directory is missing too
    said: list[str] = []
    assert merge_daemon_json(path=path, progress=said.append) is True
    assert load(path) == {"default-runtime": "sandbox-build", "runtimes": OURS}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert len(said) == 1 and "runsc" in said[0] and str(path) in said[0]
    assert leftovers(path.parent) == []


@pytest.mark.parametrize("text", ["", "  \n"])
def test_empty_file_counts_as_an_empty_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(text, encoding="utf-8")
    assert merge_daemon_json(path=path, progress=lambda _: None) is True
    assert load(path) == {"default-runtime": "sandbox-build", "runtimes": OURS}


def test_other_keys_and_runtimes_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    original: dict[str, Any] = {
        "log-driver": "json-file",
        "log-opts": {"max-size": "10m", "max-file": "3"},
        "storage-driver": "overlay2",
        "insecure-registries": ["registry.local:5000"],
        "default-runtime": "runc",
        "runtimes": {"kata": {"path": "/usr/bin/kata-runtime", "runtimeArgs": ["--debug"]}},
    }
    path.write_text(json.dumps(original), encoding="utf-8")
    assert merge_daemon_json(path=path, progress=lambda _: None) is True
    merged = load(path)
    # runc as the default is replaced: the build runtime runs everything but build steps
    # under runc.
    expected = {
        **original,
        "default-runtime": "sandbox-build",
        "runtimes": {**original["runtimes"], **OURS},
    }
    assert merged == expected


def test_an_operators_own_default_runtime_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps({"default-runtime": "kata", "runtimes": OURS}), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="sandbox.host.engine"):
        assert merge_daemon_json(path=path, progress=lambda _: None) is False
    assert load(path)["default-runtime"] == "kata"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "build_runtime: engine" in warnings[0], warnings


def test_the_build_runtime_is_installed_with_this_machines_programs(tmp_path: Path) -> None:
    path = tmp_path / "lib" / "build-runtime"
    assert install_build_runtime(path=path, progress=lambda _: None) is True
    text = path.read_text(encoding="utf-8")
    assert "@RUNC@" not in text and f"RUNSC={RUNSC_PATH}" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert install_build_runtime(path=path, progress=lambda _: None) is False


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"log-driver": "json-file",', "not valid JSON"),
        ("{'single': 'quotes'}", "not valid JSON"),
        ('["runtimes"]', "must hold a JSON object"),
        ('"text"', "must hold a JSON object"),
        ('{"runtimes": ["runsc"]}', '"runtimes" must be a JSON object'),
    ],
)
def test_a_file_that_cannot_be_merged_is_refused_not_clobbered(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EngineError) as info:
        merge_daemon_json(path=path, progress=lambda _: None)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)
    assert "fix it by hand" in str(info.value)
    assert path.read_text(encoding="utf-8") == text
    assert leftovers(tmp_path) == []


def test_a_differently_configured_runsc_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The operator's own runsc (here: with debug logging and gVisor's network) wins;
    # the missing runsc-net is still added, and the conflict is logged.
    path = tmp_path / "daemon.json"
    theirs = {"path": "/opt/gvisor/runsc", "runtimeArgs": ["--debug"]}
    path.write_text(json.dumps({"runtimes": {"runsc": theirs}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="sandbox.host.engine"):
        assert merge_daemon_json(path=path, progress=lambda _: None) is True
    assert load(path) == {
        "default-runtime": "sandbox-build",
        "runtimes": {**OURS, "runsc": theirs},
    }
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "'runsc'" in warnings[0] and "leaving it as it is" in warnings[0]


def test_conflicting_runtimes_only_leave_the_file_untouched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "daemon.json"
    theirs = {"path": "/x/runsc"}
    text = json.dumps(
        {
            "default-runtime": "sandbox-build",
            "runtimes": {name: theirs for name in OURS},
        }
    )
    path.write_text(text, encoding="utf-8")
    said: list[str] = []
    with caplog.at_level(logging.WARNING, logger="sandbox.host.engine"):
        assert merge_daemon_json(path=path, progress=said.append) is False
    assert path.read_text(encoding="utf-8") == text
    assert said == []
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == len(OURS)


def test_merging_twice_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text('{"debug": true, "runtimes": {"kata": {"path": "/k"}}}', encoding="utf-8")
    assert merge_daemon_json(path=path, progress=lambda _: None) is True
    first = path.read_bytes()
    inode = path.stat().st_ino
    assert merge_daemon_json(path=path, progress=lambda _: None) is False
    assert path.read_bytes() == first
    assert path.stat().st_ino == inode  # not even rewritten with the same bytes


def test_an_already_complete_file_is_not_rewritten(tmp_path: Path) -> None:
    # Registered by hand, in another layout: nothing to add, so the operator's
    # formatting stays as it is.
    path = tmp_path / "daemon.json"
    runtimes = dict(reversed(OURS.items()))
    text = json.dumps({"runtimes": runtimes, "default-runtime": "sandbox-build"}, indent=8)
    path.write_text(text, encoding="utf-8")
    assert merge_daemon_json(path=path, progress=lambda _: None) is False
    assert path.read_text(encoding="utf-8") == text
