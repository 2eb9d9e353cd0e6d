"""A Harbor environment over this service's sessions: ``harbor run --env
sandbox.integrations.harbor:SandboxEnvironment`` runs each trial in one of our sandboxes.

Needs the ``harbor`` package (Python >= 3.12; ``make setup`` makes ``.venv-harbor`` with
it and this package, the ``harbor`` extra), so it is imported only from there. Each
trial is one session (``POST /v1/sessions``, policy ``harbor`` unless ``--ek
policy=...``): ``exec`` is a session command, files travel as base64 on a command's
stdin (uploads) or through ``/tmp`` and ``GET /v1/sessions/{id}/files`` (downloads),
and ``stop`` closes the session.

The task's environment: on a service with per-task environments (``POST
/v1/environments``), ``environment/`` is sent as a tar build context (or the task's
``docker_image`` by name) and the session starts from the environment it answers with,
under the task's resource request. On a service without them, only a task whose
environment is one of our built-in images runs: a Dockerfile that is a single ``FROM
sandbox-python`` or ``FROM sandbox-polyglot`` (any tag), or ``docker_image`` naming one;
anything else is refused before a sandbox is taken, saying why.

Every command runs as the sandbox uid, whatever user Harbor asks for; the root file
system is read-only, and ``/logs``, ``/tests`` and ``/solution`` (Harbor's fixed paths)
are the ``harbor`` policy's tmpfs mounts (only ``/logs`` under ``harbor-verifier``, for
a separate verifier whose image bundles ``/tests``). Sandboxes have no network: a task asking for
the public internet is refused unless ``--ek allow_offline=true``.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import uuid
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import (
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)
from harbor.environments.options import EnvironmentOptions
from harbor.models.task.config import NetworkMode, NetworkPolicy
from pydantic import Field

from sandbox.client import DEFAULT_URL, AsyncSandboxClient, folder_archive
from sandbox.core.argv import shell_command
from sandbox.integrations.rewards import KEY_ENV, URL_ENV
from sandbox.results import ExecStatus, RunResult

ENVIRONMENT_TYPE = "sandbox-platform"
ENVIRONMENTS_PATH = "/v1/environments"
BUILTIN_IMAGES = {"sandbox-python": "python", "sandbox-polyglot": "polyglot"}
DIRECT_READ_ROOTS = ("/workspace/", "/tmp/")  # what GET /v1/sessions/{id}/files reads
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SandboxEnvironmentOptions(EnvironmentOptions):
    """What ``--ek key=value`` may set."""

    url: str = Field(
        default_factory=lambda: os.environ.get(URL_ENV, DEFAULT_URL),
        description=f"The service's address (default ${URL_ENV}, else {DEFAULT_URL}).",
    )
    api_key: str | None = Field(
        default_factory=lambda: os.environ.get(KEY_ENV),
        description=f"An API key of the service (default ${KEY_ENV}).",
    )
    policy: str = Field(default="harbor", description="The policy sessions run under.")
    bundled_tests_policy: str = Field(
        default="harbor-verifier",
        description="The policy of a separate verifier whose image bundles /tests.",
    )
    allow_offline: bool = Field(
        default=False,
        description="Run tasks that ask for public network without any network.",
    )


def builtin_image(dockerfile: str | None, docker_image: str | None) -> tuple[str | None, str]:
    """``(our image, "")`` when the environment is one of our built-in images, else
    ``(None, why not)``: a Dockerfile must be one ``FROM`` of one (comments aside)."""
    if docker_image is not None:
        name = docker_image.split(":", 1)[0]
        if name in BUILTIN_IMAGES:
            return BUILTIN_IMAGES[name], ""
        return None, f"docker_image {docker_image!r} is not one of {sorted(BUILTIN_IMAGES)}"
    lines = [
        line.strip()
        for line in (dockerfile or "").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    words = lines[0].split() if lines else []
    if len(words) != 2 or words[0].upper() != "FROM":
        return None, "its first instruction is not a plain `FROM <image>`"
    name = words[1].split(":", 1)[0]
    if name not in BUILTIN_IMAGES:
        return None, f"it builds FROM {words[1]!r}, not one of {sorted(BUILTIN_IMAGES)}"
    if len(lines) > 1:
        return None, f"it has instructions beyond its FROM ({lines[1].split()[0]} ...)"
    return BUILTIN_IMAGES[name], ""


class SandboxEnvironment(BaseEnvironment):
    """One Harbor trial environment: one session of the sandbox service."""

    options_model = SandboxEnvironmentOptions
    options: SandboxEnvironmentOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client: AsyncSandboxClient | None = None
        self._session_id: str | None = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return ENVIRONMENT_TYPE

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        """No network is all a sandbox offers; no host mounts, GPUs, compose or streams."""
        return EnvironmentCapabilities(disable_internet=True)

    @classmethod
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        return EnvironmentResourceCapabilities(
            cpu_limit=True, memory_limit=True, fractional_cpus=True
        )

    @property
    def _dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"

    def _validate_definition(self) -> None:
        compose = self.environment_dir / "docker-compose.yaml"
        if compose.exists():
            raise ValueError(
                f"{compose}: multi-container (compose) environments are not supported by the "
                f"{ENVIRONMENT_TYPE} environment; give the task one environment/Dockerfile"
            )
        if self.task_env_config.docker_image is None and not self._dockerfile.is_file():
            raise FileNotFoundError(
                f"{self._dockerfile}: no Dockerfile, and task.toml's [environment] names no "
                "docker_image; add one of them"
            )

    def validate_network_policy_support(self, network_policy: NetworkPolicy | None = None) -> None:
        """Harbor's checks, and a public network refused: sandboxes here have none."""
        policy = network_policy or self.network_policy
        if policy.network_mode == NetworkMode.PUBLIC and not self.options.allow_offline:
            raise ValueError(
                f"task {self.environment_name!r} asks for network_mode 'public', but "
                f"{ENVIRONMENT_TYPE} sandboxes have no network: set network_mode = "
                "'no-network' in task.toml's [environment], or pass --ek allow_offline=true "
                "to run it without network"
            )
        super().validate_network_policy_support(network_policy)

    def _connected(self) -> tuple[AsyncSandboxClient, str]:
        if self._client is None or self._session_id is None:
            raise RuntimeError(f"the {ENVIRONMENT_TYPE} environment is not started")
        return self._client, self._session_id

    @property
    def _policy(self) -> str:
        # Harbor uploads no tests exactly when the verifier's image bundles them at /tests.
        bundled = not self._enable_environment_dir_upload
        return self.options.bundled_tests_policy if bundled else self.options.policy

    async def _session_spec(self, client: AsyncSandboxClient) -> dict[str, Any]:
        """The session to ask for: a per-task environment, or one of our images."""
        docker_image = self.task_env_config.docker_image
        dockerfile = None if docker_image else self._dockerfile.read_text()
        if ENVIRONMENTS_PATH in await client.api_paths():
            timeout = self.task_env_config.build_timeout_sec
            if docker_image is not None:
                built = await client.image_environment(docker_image, build_timeout_s=timeout)
            else:
                built = await client.build_environment(
                    self.environment_dir, build_timeout_s=timeout
                )
            self.logger.debug(f"environment {built.get('environment')}: {built}")
            resources = {
                "cpus": self._effective_cpus,
                "memory_mb": self._effective_memory_mb,
                "storage_mb": self._effective_storage_mb,
            }
            return {
                "environment": built["environment"],
                "policy": self._policy,
                "resources": {k: v for k, v in resources.items() if v is not None},
            }
        image, why = builtin_image(dockerfile, docker_image)
        if image is None:
            source = "task.toml" if docker_image else str(self._dockerfile)
            raise RuntimeError(
                f"{source}: the service at {client.base_url} has no per-task environments "
                f"({ENVIRONMENTS_PATH}), so it runs only tasks whose environment is one of its "
                f"images (a Dockerfile that is just `FROM sandbox-python` or `FROM "
                f"sandbox-polyglot`), and {why}"
            )
        self.logger.debug(
            f"no {ENVIRONMENTS_PATH} on the service: image {image!r}, resources not applied"
        )
        return {"image": image, "policy": self._policy}

    async def start(self, force_build: bool) -> None:
        """Open the session (``force_build`` changes nothing: builds are cached by content)."""
        client = AsyncSandboxClient(self.options.url, api_key=self.options.api_key)
        try:
            spec = await self._session_spec(client)
            self._session_id = (await client.create_session(**spec)).id
        except BaseException:
            await client.aclose()
            raise
        self._client = client
        await self.ensure_dirs(self._mount_targets(writable_only=True))  # /logs/agent, ...
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        """Close the session (whatever ``delete`` says: a sandbox is never kept)."""
        client, self._client = self._client, None
        session_id, self._session_id = self._session_id, None
        if client is None:
            return
        try:
            if session_id is not None:
                await client.close_session(session_id)
        finally:
            await client.aclose()

    async def _run(
        self,
        command: str,
        *,
        stdin: str = "",
        cwd: str | None = None,
        timeout_sec: int | None = None,
    ) -> RunResult:
        client, session_id = self._connected()
        result = await client.session_exec(
            session_id,
            command,
            stdin=stdin,
            cwd=cwd,
            timeout_s=float(timeout_sec) if timeout_sec else None,
        )
        if result.status is ExecStatus.TIMEOUT:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        if result.status is ExecStatus.INFRA_ERROR:
            raise RuntimeError(f"the sandbox failed running a command: {result.error}")
        return result

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run ``command`` with ``bash -c`` as the sandbox uid (``user`` is not applied)."""
        exports = []
        for name, value in (self._merge_env(env) or {}).items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"environment variable name {name!r} is not a shell name")
            exports.append(f"export {name}={shlex.quote(value)}\n")
        result = await self._run(
            "".join(exports) + command,
            cwd=cwd or self.task_env_config.workdir,
            timeout_sec=timeout_sec,
        )
        if result.exit_code is not None:
            code = result.exit_code
        else:
            code = 128 + result.signal if result.signal else 1
        return ExecResult(
            stdout=result.stdout,
            stderr=result.stderr,
            return_code=code,
        )

    async def _unpack(self, data: bytes, command: str) -> None:
        result = await self._run(command, stdin=base64.b64encode(data).decode("ascii"))
        if result.exit_code != 0:
            raise RuntimeError(f"upload failed ({command!r}): {result.stderr.strip()[-500:]}")

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = shlex.quote(target_path)
        await self._unpack(
            Path(source_path).read_bytes(),
            f'mkdir -p -- "$(dirname -- {target})" && base64 -d > {target}',
        )

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        target = shlex.quote(target_dir)
        await self._unpack(
            folder_archive(Path(source_dir)),
            f"mkdir -p -- {target} && base64 -d | tar -xzf - -C {target}",
        )

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Read ``source_path`` (copied to /tmp first unless below /workspace or /tmp)."""
        client, session_id = self._connected()
        readable = source_path
        if not source_path.startswith(DIRECT_READ_ROOTS):
            readable = f"/tmp/.hb-download-{uuid.uuid4().hex}"
            copied = await self._run(shell_command("cp", paths=(source_path, readable)))
            if copied.exit_code != 0:
                raise FileNotFoundError(f"{source_path}: {copied.stderr.strip()}")
        try:
            data = await client.session_file(session_id, readable)
        finally:
            if readable != source_path:
                await self._run(shell_command("rm", "-f", paths=(readable,)))
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Through a tar archive in /tmp (Harbor's own transfer)."""
        await self.download_dir_with_exclusions(
            source_dir=source_dir, target_dir=target_dir, exclude=[]
        )
