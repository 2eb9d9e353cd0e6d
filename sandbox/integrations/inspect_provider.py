"""An inspect_ai sandbox provider over the service's sessions: ``sandbox="sandbox-platform"``.

Each sample gets one session (``POST /v1/sessions``) of the configured image and
policy (or, when given, a task ``environment``); every call goes over HTTP
through :class:`~sandbox.client.AsyncSandboxClient`, never to Docker. Commands
run as the sandbox user in ``/workspace``, under the policy's limits. Files
travel through ``exec`` (any path the sandbox user may write or read works):
writes in chunks below the service's stdin cap, reads in pieces as large as the
policy's output limit, each going on where the last stopped. Sessions end in
``sample_cleanup``; ``task_cleanup`` ends what a cancelled sample left;
``cli_cleanup`` (``inspect sandbox cleanup sandbox-platform``) ends the sessions
a crashed run left, found in the tenant's session listing and the provider's
ledger (see :class:`Ledger`).

Configuration: a :class:`PlatformSandboxConfig`, or a YAML/JSON file holding
its fields; ``url`` and ``api_key`` default to ``$SANDBOX_URL`` and
``$SANDBOX_API_KEY``. This is the only module that imports inspect_ai (the
``inspect`` extra).
"""

from __future__ import annotations

import base64
import errno
import json
import logging
import os
import secrets
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import yaml
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.client import DEFAULT_URL, AsyncSandboxClient
from sandbox.core.execution import MAX_STDIN_BYTES
from sandbox.errors import (
    InvalidRequestError,
    NotFoundError,
    SandboxError,
    ServiceUnreachableError,
)
from sandbox.policy.limits import MAX_TIME_S, MIN_TIME_S
from sandbox.results import ExecStatus, RunResult

logger = logging.getLogger(__name__)

PROVIDER = "sandbox-platform"
WORKDIR = "/workspace"
SANDBOX_USER = "sandbox"
URL_ENV = "SANDBOX_URL"
API_KEY_ENV = "SANDBOX_API_KEY"
LEDGER_ENV = "SANDBOX_INSPECT_LEDGER"
# Raw bytes per write chunk: base64 of it stays below the service's stdin cap.
CHUNK_BYTES = (MAX_STDIN_BYTES // 4) * 3 - 4096
STAGE_DIR = "/tmp"
SIGNAL_EXIT_BASE = 128
MISSING_COMMAND_EXIT = 127

# Writes stdin (base64) to argv[1], truncating first when argv[2] == "w"; an OSError
# comes back as "errno strerror" on stderr with exit 3.
_WRITE = """
import base64, os, sys
path, mode = sys.argv[1], sys.argv[2]
try:
    if mode == "w" and os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if mode == "w" else "ab") as out:
        out.write(base64.b64decode(sys.stdin.buffer.read()))
except OSError as exc:
    sys.stderr.write(f"{exc.errno} {exc.strerror}")
    sys.exit(3)
"""

# Streams argv[1] from byte argv[2] to stdout (the policy's output limit may cut it: the
# caller goes on from where it stopped), its size first on stderr. Exit 3: an OSError as
# for _WRITE; exit 4: the file is larger than argv[3].
_READ = """
import os, sys
path, offset, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        sys.stderr.write(str(size))
        sys.stderr.flush()
        if size > limit:
            sys.exit(4)
        f.seek(offset)
        while block := f.read(1 << 20):
            sys.stdout.buffer.write(block)
except OSError as exc:
    sys.stderr.write(f"{exc.errno} {exc.strerror}")
    sys.exit(3)
"""

# Runs "$@" with stdin from the staged file $1, removed first (the open descriptor keeps it).
_STDIN_FROM = 'exec 0<"$1" && rm -f -- "$1" && shift && exec "$@"'


class PlatformSandboxConfig(BaseModel):
    """Where the service is and what each sample's session is made of."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        default_factory=lambda: os.environ.get(URL_ENV, DEFAULT_URL),
        description=f"The service's base URL (default: ${URL_ENV}, else {DEFAULT_URL}).",
    )
    api_key: str | None = Field(
        default_factory=lambda: os.environ.get(API_KEY_ENV),
        description=f"The tenant's API key (default: ${API_KEY_ENV}).",
        repr=False,
    )
    image: str = "python"
    policy: str = "default"
    environment: str | None = Field(
        default=None, description="A task environment id from POST /v1/environments."
    )
    http_timeout_s: float = Field(default=120.0, gt=0)

    @classmethod
    def load(cls, config: SandboxEnvironmentConfigType | None) -> PlatformSandboxConfig:
        """The config inspect passed: a model, a YAML/JSON file's path, or none (defaults)."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, BaseModel):
            raise ValueError(
                f"{PROVIDER}: the sandbox config is a {type(config).__name__}; "
                f"give a PlatformSandboxConfig or the path of a YAML file"
            )
        path = Path(config)
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"{PROVIDER}: cannot read the sandbox config {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: a {PROVIDER} config is a mapping of {sorted(cls.model_fields)}"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"key {'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()
            )
            raise ValueError(
                f"{path}: {problems} (keys: {', '.join(sorted(cls.model_fields))})"
            ) from exc

    def client(self) -> AsyncSandboxClient:
        return AsyncSandboxClient(self.url, api_key=self.api_key, timeout=self.http_timeout_s)


class Ledger:
    """The sessions this machine's inspect runs opened and did not close yet, one empty
    file per session under ``$SANDBOX_INSPECT_LEDGER`` (default
    ``~/.cache/sandbox-platform/inspect-sessions``), so a crashed run's sessions can be
    told from the tenant's other sessions."""

    def __init__(self, root: Path | None = None) -> None:
        default = Path.home() / ".cache" / "sandbox-platform" / "inspect-sessions"
        self.root = root or Path(os.environ.get(LEDGER_ENV, default))

    def add(self, session_id: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / session_id).touch()

    def remove(self, session_id: str) -> None:
        (self.root / session_id).unlink(missing_ok=True)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(p.name for p in self.root.iterdir()) if self.root.is_dir() else [])


def _os_error(stderr: str, file: str) -> OSError:
    """The builtin OSError subclass (PermissionError, ...) a helper's ``errno strerror`` names."""
    code, _, message = stderr.strip().partition(" ")
    number = int(code) if code.isdigit() else errno.EIO
    return OSError(number, message or os.strerror(number), file)


def _output(result: RunResult) -> tuple[str, str]:
    return (
        result.stdout_bytes().decode(errors="replace"),
        result.stderr_bytes().decode(errors="replace"),
    )


def _human(size: int) -> str:
    return f"{size // 1024**2} MiB" if size >= 1024**2 else f"{size} bytes"


@sandboxenv(name=PROVIDER)
class PlatformSandboxEnvironment(SandboxEnvironment):
    """One session of the service, as an inspect sandbox."""

    _open: dict[str, set[tuple[PlatformSandboxConfig, str]]] = {}  # task -> sessions

    def __init__(self, config: PlatformSandboxConfig, session_id: str) -> None:
        super().__init__()
        self.config = config
        self.session_id = session_id
        self._client = config.client()

    # -- lifecycle -----------------------------------------------------------------

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return PlatformSandboxConfig.model_validate(config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Check the config and that the service answers, before any sample starts."""
        async with PlatformSandboxConfig.load(config).client() as client:
            await client.health()

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        """Open one session for the sample."""
        loaded = PlatformSandboxConfig.load(config)
        async with loaded.client() as client:
            info = await client.create_session(
                image=loaded.image, policy=loaded.policy, environment=loaded.environment
            )
        Ledger().add(info.id)
        cls._open.setdefault(task_name, set()).add((loaded, info.id))
        return {"default": cls(loaded, info.id)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        """Close the sample's sessions, whatever state they are in."""
        for environment in environments.values():
            if not isinstance(environment, cls):
                continue
            try:
                await _close(environment.config, environment.session_id)
            except SandboxError as exc:  # left in the ledger, for cli_cleanup
                logger.warning("could not close session %s: %s", environment.session_id, exc)
                continue
            finally:
                await environment._client.aclose()
            cls._open.get(task_name, set()).discard((environment.config, environment.session_id))

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        """Close the sessions of the task's samples that no sample cleanup closed."""
        if not cleanup:
            return
        for loaded, session_id in sorted(cls._open.pop(task_name, set()), key=lambda s: s[1]):
            await _close(loaded, session_id)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """Close session ``id``, or every session of the tenant (``$SANDBOX_URL``,
        ``$SANDBOX_API_KEY``) that an inspect run on this machine opened and left."""
        config = PlatformSandboxConfig()
        ledger = Ledger()
        if id is not None:
            await _close(config, id)
            return
        async with config.client() as client:
            listed = {info.id for info in await client.sessions()}
        for session_id in ledger:
            if session_id in listed:
                await _close(config, session_id)
            ledger.remove(session_id)

    # -- commands ------------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """Run ``cmd`` in the session as the sandbox user (the only user there is)."""
        if user is not None and user != SANDBOX_USER:
            raise SandboxUserUnsupportedError(
                f"{PROVIDER} runs commands only as {SANDBOX_USER!r} (no root, no other "
                f"users: the policy fixes the uid), not as {user!r}"
            )
        stdin, argv = await self._stdin(input, list(cmd))
        timeout_s = None if timeout is None else min(max(float(timeout), MIN_TIME_S), MAX_TIME_S)
        try:
            result = await self._client.session_exec(
                self.session_id,
                argv,
                stdin=stdin,
                cwd=self._path(cwd) if cwd else None,
                env=env,
                timeout_s=timeout_s,
            )
        except NotFoundError as exc:
            if "not installed" not in str(exc):  # the session is gone (closed, idle, lost)
                raise SandboxUnavailableError(f"session {self.session_id}: {exc}") from exc
            return ExecResult(False, MISSING_COMMAND_EXIT, "", f"{exc}\n")
        except ServiceUnreachableError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        except InvalidRequestError as exc:
            if "Permission denied" in str(exc):
                raise PermissionError(errno.EACCES, str(exc), cmd[0]) from exc
            raise
        stdout, stderr = _output(result)
        if result.status is ExecStatus.TIMEOUT and result.reason == "wall_time":
            raise TimeoutError(f"{shlex.join(cmd)} did not end within {timeout_s or 'its'} s")
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        if result.status is ExecStatus.OUTPUT_LIMIT or max(len(stdout), len(stderr)) > limit:
            size = max(len(stdout), len(stderr))
            raise OutputLimitExceededError(_human(min(size, limit)), stdout[-limit:])
        if result.exit_code is None and result.signal is not None:
            code = SIGNAL_EXIT_BASE + result.signal
        else:
            code = result.exit_code if result.exit_code is not None else 1
        return ExecResult(code == 0, code, stdout, stderr)

    async def _stdin(self, given: str | bytes | None, argv: list[str]) -> tuple[str, list[str]]:
        """Stdin to send inline, or (binary or large) staged in a file the command reads."""
        if given is None or given == "" or given == b"":
            return "", argv
        data = given.encode() if isinstance(given, str) else given
        try:
            text = data.decode()
        except UnicodeDecodeError:
            text = None
        if text is not None and len(data) <= CHUNK_BYTES:
            return text, argv
        staged = f"{STAGE_DIR}/.inspect-stdin-{secrets.token_hex(8)}"
        await self._write(staged, data)
        return "", ["/bin/sh", "-c", _STDIN_FROM, "sh", staged, *argv]

    # -- files ---------------------------------------------------------------------

    async def write_file(self, file: str, contents: str | bytes) -> None:
        """Write ``file`` (relative: to /workspace), making its directories, as the sandbox user."""
        data = contents.encode() if isinstance(contents, str) else contents
        await self._write(self._path(file), data, shown=file)

    async def _write(self, path: str, data: bytes, shown: str | None = None) -> None:
        for start in range(0, max(len(data), 1), CHUNK_BYTES):
            chunk = base64.b64encode(data[start : start + CHUNK_BYTES]).decode("ascii")
            mode = "w" if start == 0 else "a"
            result = await self._client.session_exec(
                self.session_id, ["python3", "-I", "-c", _WRITE, path, mode], stdin=chunk
            )
            if result.status is not ExecStatus.OK:
                raise _os_error(_output(result)[1], shown or path)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        """``file``'s contents; the errors are the builtins inspect expects."""
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        data = b""
        while True:
            argv = ["python3", "-I", "-c", _READ, self._path(file), str(len(data)), str(limit)]
            result = await self._client.session_exec(self.session_id, argv)
            if result.exit_code == 4:
                raise OutputLimitExceededError(
                    SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None
                )
            if result.status not in (ExecStatus.OK, ExecStatus.OUTPUT_LIMIT):
                raise _os_error(_output(result)[1], file)
            got = result.stdout_bytes()
            data += got
            if not got or len(data) >= int(result.stderr_bytes()):
                break
        return data.decode() if text else data

    def _path(self, path: str) -> str:
        return path if path.startswith("/") else f"{WORKDIR}/{path}"

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        """How to reach the session: its exec route (there is no interactive shell)."""
        url = f"{self.config.url}/v1/sessions/{self.session_id}/exec"
        body = json.dumps({"command": "echo hello"})
        auth = f" -H 'Authorization: Bearer ${API_KEY_ENV}'" if self.config.api_key else ""
        return SandboxConnection(
            type=PROVIDER,
            command=f"curl -s -X POST {url}{auth} -H 'Content-Type: application/json' -d '{body}'",
            container=self.session_id,
        )


async def _close(config: PlatformSandboxConfig, session_id: str) -> None:
    async with config.client() as client:
        await client.close_session(session_id)
    Ledger().remove(session_id)
