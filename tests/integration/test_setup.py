"""The engine set-up (``make setup`` / ``sandbox engine ensure``), on the engine it set up.

The docker-marked tests check what set-up leaves behind on the running engine: it
answers, both gVisor runtimes are registered with the arguments the platform relies
on, and ``sandbox engine ensure`` run again (the CLI ``make setup`` calls) changes
nothing. ``test_images.py::test_ensure_engine_is_idempotent`` covers the in-process
call; here it is the command, and the engine's config file too.

The rest are engine-free: which Debian packages set-up would install, decided by the
programs present on a given ``PATH`` (a directory of stand-in executables), without
installing anything.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import psutil
import pytest

from sandbox.errors import EngineError
from sandbox.host import engine
from sandbox.host.engine import (
    DAEMON_JSON,
    ENGINE_PACKAGES,
    RUNSC_PATH,
    RUNTIME_BUILD,
    RUNTIME_RUNSC,
    RUNTIME_RUNSC_NET,
    docker_client,
    engine_status,
    install_missing_packages,
    missing_packages,
)
from sandbox.host.images import resolve_image
from sandbox.host.launcher import SANDBOX_BIN

docker_mark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    c = docker_client(timeout=120)
    yield c
    c.close()


# --------------------------------------------------------------------------- the running engine


@docker_mark
def test_the_engine_answers(client: docker.DockerClient) -> None:
    assert client.ping() is True
    status = engine_status()
    assert status["running"] is True
    assert status["server_version"]
    # Set-up installed everything it needs, and registered every runtime.
    assert status["missing_packages"] == []
    assert status["missing_runtimes"] == []
    # Tenants' build steps run under gVisor through the default runtime (build-runtime.sh).
    assert status["default_runtime"] == RUNTIME_BUILD


@docker_mark
def test_docker_info_lists_both_gvisor_runtimes(client: docker.DockerClient) -> None:
    runtimes = client.info()["Runtimes"]
    runsc = runtimes[RUNTIME_RUNSC]
    assert runsc["path"] == RUNSC_PATH
    assert "--network=none" in runsc.get("runtimeArgs", [])
    runsc_net = runtimes[RUNTIME_RUNSC_NET]
    assert runsc_net["path"] == RUNSC_PATH
    # runsc-net is the one with gVisor's own network stack (allowlist policies).
    assert "--network=none" not in runsc_net.get("runtimeArgs", [])
    assert Path(RUNSC_PATH).is_file() and os.access(RUNSC_PATH, os.X_OK)


@docker_mark
def test_runsc_has_no_network_even_on_a_docker_network(client: docker.DockerClient) -> None:
    # Docker gives the container the default bridge network; --network=none makes gVisor
    # ignore it, so the sandbox sees only its loopback device.
    out = client.containers.run(
        resolve_image("python"),
        ["cat", "/proc/net/dev"],
        runtime=RUNTIME_RUNSC,
        remove=True,
    ).decode()
    devices = sorted(line.split(":")[0].strip() for line in out.splitlines()[2:] if ":" in line)
    assert devices == ["lo"], out


def _dockerd_identity() -> tuple[int, float]:
    pid = engine_status()["dockerd_pid"]
    assert pid is not None, "no local dockerd found (is DOCKER_HOST a remote engine?)"
    return pid, psutil.Process(pid).create_time()


def _file_state(path: Path) -> tuple[int, int, bytes] | None:
    try:
        info = path.stat()
        return info.st_ino, info.st_mtime_ns, path.read_bytes()
    except FileNotFoundError:
        return None


@docker_mark
def test_engine_ensure_command_on_a_running_engine_changes_nothing(
    client: docker.DockerClient,
) -> None:
    if os.environ.get("DOCKER_HOST", engine.LOCAL_SOCKET) != engine.LOCAL_SOCKET:
        pytest.skip("DOCKER_HOST names a remote engine: its dockerd is not visible here")
    dockerd_before = _dockerd_identity()
    config_before = _file_state(DAEMON_JSON)
    assert config_before is not None, f"set-up leaves {DAEMON_JSON} behind"
    assert set(json.loads(config_before[2])["runtimes"]) >= {RUNTIME_RUNSC, RUNTIME_RUNSC_NET}

    for _ in range(2):
        done = subprocess.run(
            [str(SANDBOX_BIN), "engine", "ensure"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        said = done.stdout + done.stderr
        assert "is running" in said, said
        # No install, no config merge, no reload, no start.
        for action in ("installing", "added the runtimes", "reloading", "starting dockerd"):
            assert action not in said, said

    # The same dockerd process (pid and start time: not a restart that reused the pid),
    # the config file untouched (not even rewritten with equal content), still answering.
    assert _dockerd_identity() == dockerd_before
    assert _file_state(DAEMON_JSON) == config_before
    assert client.ping() is True
    assert engine_status()["missing_runtimes"] == []


# --------------------------------------------------------------------------- which packages


def _bin_dir(tmp_path: Path, *programs: str, not_executable: tuple[str, ...] = ()) -> str:
    """A directory holding stand-in executables (and plain files) of the given names."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in programs:
        path = directory / name
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    for name in not_executable:
        (directory / name).write_text("not a program\n")
    return str(directory)


def test_the_packages_set_up_installs() -> None:
    # Debian package -> the program that says it is installed.
    assert dict(ENGINE_PACKAGES) == {
        "docker.io": "dockerd",
        "runsc": "runsc",
        "debootstrap": "debootstrap",
    }


def test_a_bare_machine_misses_every_package(tmp_path: Path) -> None:
    assert missing_packages(ENGINE_PACKAGES, path=_bin_dir(tmp_path)) == [
        "docker.io",
        "runsc",
        "debootstrap",
    ]


def test_only_packages_whose_program_is_absent_are_missing(tmp_path: Path) -> None:
    # A file of the right name that cannot be run does not count as installed.
    path = _bin_dir(tmp_path, "dockerd", "debootstrap", not_executable=("runsc",))
    assert missing_packages(ENGINE_PACKAGES, path=path) == ["runsc"]


def test_programs_are_looked_for_on_every_directory_of_the_path(tmp_path: Path) -> None:
    first = tmp_path / "a"
    second = tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for directory, name in ((first, "dockerd"), (second, "runsc"), (second, "debootstrap")):
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)
    assert missing_packages(ENGINE_PACKAGES, path=os.pathsep.join([str(first), str(second)])) == []


def test_nothing_is_installed_when_nothing_is_missing(tmp_path: Path) -> None:
    said: list[str] = []
    path = _bin_dir(tmp_path, "dockerd", "runsc", "debootstrap")
    assert install_missing_packages(ENGINE_PACKAGES, progress=said.append, path=path) == []
    assert said == []


def test_without_root_the_error_names_the_apt_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "_is_root", lambda: False)
    path = _bin_dir(tmp_path, "dockerd")
    with pytest.raises(EngineError, match=r"apt-get install -y runsc debootstrap"):
        install_missing_packages(ENGINE_PACKAGES, progress=lambda _: None, path=path)


@docker_mark
def test_this_machine_misses_no_package() -> None:
    # The default search: $PATH plus the system directories (dockerd lives in sbin).
    assert missing_packages(ENGINE_PACKAGES) == []
