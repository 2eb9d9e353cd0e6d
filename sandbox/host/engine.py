"""Make sure a Docker engine runs on this machine, with gVisor registered.

:func:`ensure_engine` is idempotent. An engine that already answers is left
running; only the two gVisor runtimes are added to it when missing (merged into
``/etc/docker/daemon.json`` and loaded with ``SIGHUP``, which restarts nothing).
Without an engine, and as root, it installs the missing Debian packages
(``docker.io``, ``runsc``, ``debootstrap``), registers the runtimes and starts
``dockerd`` in the background (these machines have no systemd), then waits
until it answers.

Runtimes registered:

``runsc``
    gVisor with ``--network=none``: sandboxes that have no network at all.
``runsc-net``
    gVisor with its own network stack, for policies with a network allowlist.
``sandbox-build``
    The engine's default runtime (``default-runtime``, set when daemon.json names
    none or ``runc``): a tenant's build steps (the containers under the cgroup
    parent ``/sandbox-build/gvisor-<token>``, which only the service sets) run under
    gVisor, every other container created without a runtime under runc
    (``build-runtime.sh``, installed at :data:`BUILD_RUNTIME_PATH`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import docker
import requests
from docker.constants import DEFAULT_DOCKER_API_VERSION
from docker.errors import DockerException
from docker.utils import kwargs_from_env

from sandbox.errors import EngineError
from sandbox.host.files import write_text_atomic

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]

DAEMON_JSON = Path("/etc/docker/daemon.json")
DOCKERD_LOG = Path("/var/log/sandbox-dockerd.log")
DOCKERD_PIDFILE = Path("/var/run/docker.pid")
CONTAINERD_PIDFILE = Path("/var/run/docker/containerd/containerd.pid")
LOCAL_SOCKET = "unix:///var/run/docker.sock"

RUNSC_PATH = "/usr/bin/runsc"
RUNTIME_RUNSC = "runsc"
RUNTIME_RUNSC_NET = "runsc-net"
RUNTIME_BUILD = "sandbox-build"
#: gVisor for root sessions: the root file system writable, its writes held in the
#: sandbox's memory (so the memory limit is their quota); with and without a network.
RUNTIME_RUNSC_ROOT = "runsc-root"
RUNTIME_RUNSC_ROOT_NET = "runsc-root-net"
ROOT_OVERLAY = "--overlay2=root:memory"
BUILD_RUNTIME_PATH = Path("/usr/local/lib/sandbox/build-runtime")
BUILD_RUNTIME_SOURCE = Path(__file__).with_name("build-runtime.sh")
SANDBOX_RUNTIMES: Mapping[str, Mapping[str, Any]] = {
    RUNTIME_RUNSC: {"path": RUNSC_PATH, "runtimeArgs": ["--network=none"]},
    RUNTIME_RUNSC_NET: {"path": RUNSC_PATH},
    RUNTIME_RUNSC_ROOT: {"path": RUNSC_PATH, "runtimeArgs": ["--network=none", ROOT_OVERLAY]},
    RUNTIME_RUNSC_ROOT_NET: {"path": RUNSC_PATH, "runtimeArgs": [ROOT_OVERLAY]},
    RUNTIME_BUILD: {"path": str(BUILD_RUNTIME_PATH)},
}
#: The engine's default runtime is set to ours when daemon.json names none of these.
REPLACEABLE_DEFAULTS = ("runc", "io.containerd.runc.v2")

#: Debian package -> the program whose presence says it is installed.
ENGINE_PACKAGES: Mapping[str, str] = {
    "docker.io": "dockerd",
    "runsc": "runsc",
    "debootstrap": "debootstrap",
}

ENGINE_START_TIMEOUT_S = 60.0
RUNTIME_RELOAD_TIMEOUT_S = 15.0
PING_TIMEOUT_S = 5
APT_TIMEOUT_S = 900.0
_POLL_INTERVAL_S = 0.25
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_STARTED: list[subprocess.Popen[bytes]] = []


# --------------------------------------------------------------------------- public


def ensure_engine(*, progress: Progress = logger.info) -> None:
    """Make sure a Docker engine answers, with the ``runsc`` runtimes registered.

    Idempotent: a running engine is left running (the runtimes are added with a
    reload when missing). Starting one needs root; otherwise :class:`EngineError`
    says what to do.
    """
    info = _engine_info()
    if info is not None:
        progress(f"Docker engine {info.get('ServerVersion', '?')} is running")
        _ensure_runtimes(info, progress)
        return

    _refuse_remote_host()
    if not _is_root():
        raise EngineError(
            "no Docker engine answers and starting one needs root: run "
            "`sudo .venv/bin/sandbox engine ensure` (or `sudo make setup`), or start "
            "dockerd yourself and make its socket reachable"
        )

    install_missing_packages(ENGINE_PACKAGES, progress=progress)
    install_build_runtime(progress=progress)
    merge_daemon_json(progress=progress)

    # Installing docker.io may have started an engine (where policy-rc.d allows it).
    info = _engine_info()
    if info is not None:
        progress(f"Docker engine {info.get('ServerVersion', '?')} is running")
        _ensure_runtimes(info, progress)
        return

    pid = _local_dockerd_pid()
    if pid is not None:
        progress(f"dockerd (pid {pid}) is running but does not answer yet; waiting")
    else:
        pid = _start_dockerd(progress)
    info = _wait_for_engine(pid, ENGINE_START_TIMEOUT_S)
    progress(f"Docker engine {info.get('ServerVersion', '?')} answers (dockerd pid {pid})")
    _ensure_runtimes(info, progress)  # a dockerd that predates the merge needs a reload


def engine_status() -> dict[str, Any]:
    """Describe the engine without changing anything (for ``sandbox engine status``)."""
    info = _engine_info()
    status: dict[str, Any] = {
        "running": info is not None,
        "docker_host": os.environ.get("DOCKER_HOST", LOCAL_SOCKET),
        "dockerd_pid": _local_dockerd_pid(),
        "daemon_json": str(DAEMON_JSON),
        "dockerd_log": str(DOCKERD_LOG),
        "missing_packages": missing_packages(ENGINE_PACKAGES),
    }
    if info is not None:
        runtimes = sorted(info.get("Runtimes") or {})
        status.update(
            server_version=info.get("ServerVersion"),
            storage_driver=info.get("Driver"),
            cgroup_version=info.get("CgroupVersion"),
            runtimes=runtimes,
            default_runtime=info.get("DefaultRuntime"),
            missing_runtimes=_missing_runtimes(info),
        )
    return status


def docker_client(*, timeout: float = 60) -> docker.DockerClient:
    """A docker-py client for the engine, or :class:`EngineError` if none answers."""
    try:
        client = docker.DockerClient.from_env(timeout=int(timeout))
        client.ping()
    except (DockerException, requests.exceptions.RequestException, OSError) as exc:
        raise EngineError(
            f"the Docker engine does not answer ({exc}); run `sandbox engine ensure`"
        ) from exc
    return client


def missing_packages(packages: Mapping[str, str], *, path: str | None = None) -> list[str]:
    """The Debian packages of ``packages`` (name -> program) whose program is absent.

    A program counts when it is an executable on ``path`` (default: ``$PATH`` and the
    system directories, where root's ``sbin`` programs such as dockerd live).
    """
    search = os.pathsep.join([os.environ.get("PATH", ""), _SYSTEM_PATH]) if path is None else path
    return [pkg for pkg, program in packages.items() if shutil.which(program, path=search) is None]


def install_missing_packages(
    packages: Mapping[str, str], *, progress: Progress = logger.info, path: str | None = None
) -> list[str]:
    """Install with apt the packages (name -> program) whose program is absent.

    Returns the packages installed; nothing runs when none is missing. Needs root
    when anything is missing. ``path`` is where programs are looked for (see
    :func:`missing_packages`).
    """
    missing = missing_packages(packages, path=path)
    if not missing:
        return []
    command = "apt-get install -y " + " ".join(missing)
    if not _is_root():
        raise EngineError(f"missing Debian packages {missing}; install them as root: {command}")
    if shutil.which("apt-get", path=_SYSTEM_PATH) is None:
        raise EngineError(f"missing {missing} and this machine has no apt-get; install them")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    progress(f"installing {' '.join(missing)} with apt-get (takes a minute)")
    _run_logged(["apt-get", "update"], env=env, what="apt-get update")
    _run_logged(["apt-get", "install", "-y", *missing], env=env, what=command)
    still = missing_packages(packages, path=path)
    if still:
        raise EngineError(f"{command} succeeded but {still} still lack their programs")
    return missing


def merge_daemon_json(*, path: Path = DAEMON_JSON, progress: Progress = logger.info) -> bool:
    """Add the sandbox runtimes to dockerd's config; every other key is kept.

    Returns whether the file changed. A runtime of the same name that the
    operator configured differently is left alone (with a warning). A file
    that is not a JSON object is refused rather than overwritten.
    """
    config: dict[str, Any] = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if text.strip():
            try:
                loaded = json.loads(text)
            except json.JSONDecodeError as exc:
                raise EngineError(
                    f"{path} is not valid JSON ({exc}); fix it by hand (the sandbox "
                    f"merges its runtimes into it and will not overwrite it)"
                ) from exc
            if not isinstance(loaded, dict):
                raise EngineError(f"{path} must hold a JSON object; fix it by hand")
            config = loaded
    runtimes = config.get("runtimes", {})
    if not isinstance(runtimes, dict):
        raise EngineError(f'{path}: "runtimes" must be a JSON object; fix it by hand')
    added = []
    for name, spec in SANDBOX_RUNTIMES.items():
        if name not in runtimes:
            runtimes[name] = dict(spec)
            added.append(name)
        elif runtimes[name] != dict(spec):
            logger.warning(
                "%s: runtime %r is configured as %s, not %s; leaving it as it is",
                path,
                name,
                runtimes[name],
                dict(spec),
            )
    default = config.get("default-runtime")
    if not _default_is_ours(default):
        logger.warning(
            "%s: default-runtime is %r, so tenants' build steps are not run under gVisor "
            "and builds are refused (unless the environments config says build_runtime: "
            "engine); set it to %r",
            path,
            default,
            RUNTIME_BUILD,
        )
    elif default != RUNTIME_BUILD:
        config["default-runtime"] = RUNTIME_BUILD
        added.append("default-runtime")
    if not added:
        return False
    config["runtimes"] = runtimes
    write_text_atomic(path, json.dumps(config, indent=2, sort_keys=True) + "\n", mode=0o644)
    progress(f"added {added} to {path}")
    return True


def install_build_runtime(
    *, path: Path = BUILD_RUNTIME_PATH, progress: Progress = logger.info
) -> bool:
    """Install :data:`RUNTIME_BUILD`'s program (``build-runtime.sh`` with this machine's
    runc and runsc) at ``path``; returns whether it changed."""
    runc = shutil.which("runc", path=_SYSTEM_PATH)
    if runc is None:
        raise EngineError("runc is not installed (docker.io depends on it): apt-get install runc")
    text = BUILD_RUNTIME_SOURCE.read_text(encoding="utf-8")
    text = text.replace("@RUNC@", runc).replace("@RUNSC@", RUNSC_PATH)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text, mode=0o755)
    progress(f"installed the build runtime {path}")
    return True


# --------------------------------------------------------------------------- internals


def _is_root() -> bool:
    return os.geteuid() == 0


def _is_local_host() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return host in ("", LOCAL_SOCKET, "unix://var/run/docker.sock")


def _refuse_remote_host() -> None:
    if not _is_local_host():
        raise EngineError(
            f"DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer; start that engine, "
            "or unset DOCKER_HOST to let the sandbox start a local one"
        )


def _engine_answers() -> bool:
    """Whether ``/_ping`` answers (unversioned, so no API version is negotiated)."""
    try:
        # An explicit version keeps the constructor from contacting the engine.
        probe = docker.APIClient(
            version=DEFAULT_DOCKER_API_VERSION,
            timeout=PING_TIMEOUT_S,
            **kwargs_from_env(),
        )
    except (DockerException, OSError):
        return False
    try:
        return bool(probe.get(probe.base_url + "/_ping", timeout=PING_TIMEOUT_S).ok)
    except (DockerException, requests.exceptions.RequestException, OSError):
        return False
    finally:
        probe.close()


def _engine_info() -> dict[str, Any] | None:
    """``docker info`` of the engine, or None when it does not answer."""
    if not _engine_answers():
        return None
    try:
        client = docker.DockerClient.from_env(timeout=PING_TIMEOUT_S)
    except (DockerException, requests.exceptions.RequestException, OSError):
        return None
    try:
        info: dict[str, Any] = client.info()
        return info
    except (DockerException, requests.exceptions.RequestException, OSError):
        return None
    finally:
        client.close()


def _missing_runtimes(info: Mapping[str, Any]) -> list[str]:
    """The runtimes the engine lacks, with ``default-runtime`` when it is not ours but
    daemon.json says it is (or leaves it to us)."""
    present = info.get("Runtimes") or {}
    missing = [name for name in SANDBOX_RUNTIMES if name not in present]
    if info.get("DefaultRuntime") != RUNTIME_BUILD and _default_is_ours(_configured_default()):
        missing.append("default-runtime")
    return missing


def _default_is_ours(default: object) -> bool:
    """Whether a daemon.json ``default-runtime`` is ours, or one we replace with ours."""
    return default is None or default in (RUNTIME_BUILD, *REPLACEABLE_DEFAULTS)


def _configured_default(path: Path = DAEMON_JSON) -> object:
    """daemon.json's ``default-runtime`` (None when it names none or cannot be read)."""
    try:
        config = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return None
    return config.get("default-runtime") if isinstance(config, dict) else None


def _process_name(pid: int) -> str | None:
    """The command name of a live process (None for no process or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, _, rest = stat.partition("(")[2].rpartition(")")
    return None if rest.split()[:1] == ["Z"] else name


def _is_dockerd(pid: int) -> bool:
    return _process_name(pid) == "dockerd"


def _remove_stale_pidfile(pidfile: Path, name: str) -> None:
    """Delete a pid file whose process is gone (left by a killed daemon)."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    if _process_name(pid) != name:
        logger.info("removing the stale pid file %s (pid %d is not %s)", pidfile, pid, name)
        with contextlib.suppress(OSError):
            pidfile.unlink()


def _local_dockerd_pid() -> int | None:
    """Pid of the local dockerd (from its pid file, else by scanning /proc)."""
    try:
        pid = int(DOCKERD_PIDFILE.read_text().strip())
        if _is_dockerd(pid):
            return pid
    except (OSError, ValueError):
        pass
    # Only a dockerd of this mount namespace (not one inside a container) is ours.
    try:
        own_ns = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return None
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_dockerd(int(entry.name)):
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / "mnt") == own_ns:
                    found.append(int(entry.name))
    return found[0] if len(found) == 1 else None


def _ensure_runtimes(info: Mapping[str, Any], progress: Progress) -> None:
    """Register missing runtimes (and the default one) with a running engine, when we
    may signal it; the build runtime's program is brought up to date either way."""
    pid = _local_dockerd_pid() if _is_local_host() and _is_root() else None
    if pid is not None:
        install_build_runtime(progress=progress)
    missing = _missing_runtimes(info)
    if not missing:
        return
    if pid is None:
        logger.warning(
            "the running Docker engine lacks %s, so gVisor policies and tenants' builds "
            'will fail; add %s (and "default-runtime": %r) to its daemon.json, install '
            "%s and reload it (as root on the engine's machine: `sandbox engine ensure`)",
            missing,
            dict(SANDBOX_RUNTIMES),
            RUNTIME_BUILD,
            BUILD_RUNTIME_PATH,
        )
        return
    install_missing_packages({"runsc": "runsc"}, progress=progress)
    merge_daemon_json(progress=progress)
    progress(f"reloading dockerd (pid {pid}) to register {missing}")
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + RUNTIME_RELOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        current = _engine_info()
        if current is not None and not _missing_runtimes(current):
            progress(f"dockerd registered the runtimes {missing}")
            return
        time.sleep(_POLL_INTERVAL_S)
    raise EngineError(
        f"dockerd (pid {pid}) did not register the runtimes {missing} after a reload; "
        f"check {DAEMON_JSON} and dockerd's log (for a dockerd the sandbox started: "
        f"{DOCKERD_LOG})"
    )


def _start_dockerd(progress: Progress) -> int:
    """Start dockerd in its own session, logging to :data:`DOCKERD_LOG`."""
    dockerd = shutil.which("dockerd", path=_SYSTEM_PATH)
    if dockerd is None:
        raise EngineError("dockerd is not installed; run `apt-get install -y docker.io`")
    # Pid files left by a dockerd that was killed would stop or mislead the new one.
    _remove_stale_pidfile(DOCKERD_PIDFILE, "dockerd")
    _remove_stale_pidfile(CONTAINERD_PIDFILE, "containerd")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    progress(f"starting dockerd (log: {DOCKERD_LOG})")
    with open(DOCKERD_LOG, "ab") as log:
        proc = subprocess.Popen(
            [dockerd],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, "PATH": os.pathsep.join([_SYSTEM_PATH, os.environ.get("PATH", "")])},
        )
    # Kept so that it is reaped (and its exit seen) while this process lives.
    _STARTED.append(proc)
    return proc.pid


def _wait_for_engine(pid: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = _engine_info()
        if info is not None:
            return info
        for proc in _STARTED:
            proc.poll()
        if not _is_dockerd(pid):
            raise EngineError(
                f"dockerd (pid {pid}) exited before answering; see {DOCKERD_LOG}:\n"
                + _tail(DOCKERD_LOG)
            )
        if time.monotonic() >= deadline:
            raise EngineError(
                f"dockerd (pid {pid}) did not answer within {timeout:.0f} s; see {DOCKERD_LOG}:\n"
                + _tail(DOCKERD_LOG)
            )
        time.sleep(_POLL_INTERVAL_S)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except OSError:
        return "(no log)"


def _run_logged(argv: list[str], *, env: Mapping[str, str], what: str) -> None:
    """Run a command, its output to the debug log; EngineError with the tail on failure."""
    tail: deque[str] = deque(maxlen=20)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None
    watchdog = threading.Timer(APT_TIMEOUT_S, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            tail.append(line)
            logger.debug("%s: %s", argv[0], line.rstrip())
        code = proc.wait()
    finally:
        watchdog.cancel()
    if code != 0:
        raise EngineError(f"`{what}` failed (exit {code}):\n" + "".join(tail))
