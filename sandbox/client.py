"""The SDK: sync and async clients of the HTTP service, over httpx.

    from sandbox.client import SandboxClient
    with SandboxClient("http://127.0.0.1:8000") as client:
        result = client.run("print(sum(range(10)))")
        print(result.status, result.stdout)

Errors come back as the same exception types the service raised (looked up by
the stable error code), so ``except LimitError`` works on both sides. A 429 is
retried after its Retry-After, up to ``max_retries`` times.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import io
import tarfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from sandbox.core.pool import PoolStatus
from sandbox.core.sessions import SessionInfo
from sandbox.environments import ResourceRequest
from sandbox.judge.batches import ItemLine, Summary, parse_lines
from sandbox.judge.judge import JudgeRequest, JudgeResult
from sandbox.policy.limits import MAX_TIME_S
from sandbox.policy.versions import PolicyChanges

from .errors import (
    CapacityError,
    NotFoundError,
    SandboxError,
    SandboxTimeoutError,
    ServiceUnreachableError,
    error_for_code,
)
from .results import EpisodeInfo, EpisodeResult, RunResult, StepResult, TaskInfo

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 3
MAX_RETRY_WAIT_S = 30.0
DEFAULT_BUILD_TIMEOUT_S = 600.0
JUDGE_WAIT_S = 3600.0
"""How long to wait for an episode's hidden tests (their own limit is the task's)."""


def _run_payload(
    code: str,
    language: str,
    stdin: str,
    args: Sequence[str],
    files: Mapping[str, str] | None,
    env: Mapping[str, str] | None,
    policy: str,
    limits: Mapping[str, Any] | None,
    fetch_files: Sequence[str],
) -> dict[str, Any]:
    payload: dict[str, Any] = {"language": language, "code": code, "policy": policy}
    if stdin:
        payload["stdin"] = stdin
    if args:
        payload["args"] = list(args)
    if files:
        payload["files"] = dict(files)
    if env:
        payload["env"] = dict(env)
    if limits:
        payload["limits"] = dict(limits)
    if fetch_files:
        payload["fetch_files"] = list(fetch_files)
    return payload


def _judge_payload(request: JudgeRequest | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(request, JudgeRequest):
        return request.model_dump(mode="json", exclude_none=True)
    return dict(request)


def _evaluate_payload(
    items: Sequence[JudgeRequest | Mapping[str, Any]],
    idempotency_key: str | None,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    payload: dict[str, Any] = {"items": [_judge_payload(item) for item in items], **options}
    if idempotency_key is not None:
        payload["idempotency_key"] = idempotency_key
    return payload


def _raise_for_error(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
        code, message = str(body["code"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "", f"HTTP {response.status_code}: {response.text[:500]}"
    kind = error_for_code(code) if code else SandboxError
    if issubclass(kind, CapacityError):  # the pool's 429 or the tenant's quota
        retry_after = float(response.headers.get("Retry-After", "1") or 1)
        raise kind(message, retry_after=retry_after)
    raise kind(message)


def _retry_wait(exc: CapacityError) -> float:
    return min(max(exc.retry_after, 0.05), MAX_RETRY_WAIT_S)


def _transport_error(exc: httpx.HTTPError, url: str) -> SandboxError:
    if isinstance(exc, httpx.TimeoutException):
        return SandboxTimeoutError(f"the service at {url} did not answer in time: {exc}")
    return ServiceUnreachableError(f"cannot reach the service at {url}: {exc}")


def folder_archive(folder: Path) -> bytes:
    """``folder``'s contents as a gzip-compressed tar rooted at ``.`` (a build context, or
    a tree to unpack in a sandbox); the same bytes for the same files (sorted, no times or
    owners), so a service can cache by content."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(folder.rglob("*")):
            arcname = path.relative_to(folder).as_posix()
            tar.add(path, arcname=arcname, recursive=False, filter=normalise)
    return buffer.getvalue()


def _build_request(
    path: str | Path, dockerfile: str, build_timeout_s: float | None
) -> dict[str, Any]:
    """The keyword arguments of ``POST /v1/environments`` for the folder ``path``."""
    params: dict[str, Any] = {"dockerfile": dockerfile}
    if build_timeout_s is not None:
        params["build_timeout_s"] = build_timeout_s
    return {
        "content": folder_archive(Path(path)),
        "params": params,
        "headers": {"Content-Type": "application/x-tar"},
        "timeout": (build_timeout_s or DEFAULT_BUILD_TIMEOUT_S) + 60.0,
    }


def _task_upload(path: str | Path) -> dict[str, Any]:
    """The keyword arguments of ``POST /v1/tasks`` for the task directory ``path``."""
    folder = Path(path)
    return {
        "content": folder_archive(folder),
        "params": {"name": folder.resolve().name},
        "headers": {"Content-Type": "application/x-tar"},
    }


def _episode_payload(
    task: str, max_steps: int | None, timeout_s: float | None, max_output_chars: int | None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"task": task}
    for key, value in (
        ("max_steps", max_steps),
        ("timeout_s", timeout_s),
        ("max_output_chars", max_output_chars),
    ):
        if value is not None:
            payload[key] = value
    return payload


def _session_payload(
    image: str,
    policy: str,
    environment: str | None,
    resources: ResourceRequest | Mapping[str, Any] | None,
    files: Mapping[str, str] | None,
    setup: str | None,
    from_snapshot: str | None,
    env: Mapping[str, str] | None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {"image": image, "policy": policy, "files": dict(files or {})}
    if env:
        payload["env"] = dict(env)
    for key, value in (
        ("environment", environment),
        ("setup", setup),
        ("from_snapshot", from_snapshot),
    ):
        if value is not None:
            payload[key] = value
    if resources is not None:
        payload["resources"] = ResourceRequest.model_validate(resources).model_dump(
            exclude_none=True
        )
    return payload


def _exec_payload(
    command: str | Sequence[str],
    timeout_s: float | None,
    *,
    stdin: str = "",
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The body of ``POST /v1/sessions/{id}/exec``, with only the fields given."""
    payload: dict[str, Any] = {"command": command if isinstance(command, str) else list(command)}
    if stdin:
        payload["stdin"] = stdin
    if cwd is not None:
        payload["cwd"] = cwd
    if env:
        payload["env"] = dict(env)
    if timeout_s is not None:
        payload["timeout_s"] = timeout_s
    return payload


class SandboxClient:
    """Blocking client. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url
        self.max_retries = max_retries
        self._http = httpx.Client(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )

    def _retrying(self, send: Callable[[], T]) -> T:
        """``send()``, again after the server's wait on a 429 (``max_retries`` times)."""
        for attempt in range(self.max_retries + 1):
            try:
                return send()
            except CapacityError as exc:
                if attempt == self.max_retries:
                    raise
                time.sleep(_retry_wait(exc))
            except httpx.HTTPError as exc:
                raise _transport_error(exc, self.base_url) from exc
        raise AssertionError("unreachable")

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        def send() -> httpx.Response:
            response = self._http.request(method, path, **kwargs)
            _raise_for_error(response)
            return response

        return self._retrying(send)

    def run(
        self,
        code: str,
        *,
        language: str = "python",
        stdin: str = "",
        args: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        policy: str = "default",
        limits: Mapping[str, Any] | None = None,
        fetch_files: Sequence[str] = (),
    ) -> RunResult:
        """Run one program (``POST /v1/run``)."""
        payload = _run_payload(code, language, stdin, args, files, env, policy, limits, fetch_files)
        return RunResult.model_validate_json(self._request("POST", "/v1/run", json=payload).content)

    def judge(self, request: JudgeRequest | Mapping[str, Any]) -> JudgeResult:
        """Judge one submission against its hidden tests (``POST /v1/judge``)."""
        payload = _judge_payload(request)
        return JudgeResult.model_validate_json(
            self._request("POST", "/v1/judge", json=payload).content
        )

    def evaluate(
        self,
        items: Sequence[JudgeRequest | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> tuple[list[ItemLine], Summary]:
        """Judge a batch (``POST /v1/evaluate``); items come back in input order."""
        payload = _evaluate_payload(items, idempotency_key, options)

        def send() -> list[str]:
            with self._http.stream("POST", "/v1/evaluate", json=payload) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_error(response)
                return [line for line in response.iter_lines() if line.strip()]

        return parse_lines(self._retrying(send))

    def pool(self) -> PoolStatus:
        """The pool's counts (``GET /v1/pool``)."""
        return PoolStatus.model_validate_json(self._request("GET", "/v1/pool").content)

    def reload_policies(self) -> PolicyChanges:
        """Re-read the service's policy directory (``POST /v1/policies/reload``, admin key):
        what was added, changed, removed, unchanged. A refused set raises ``PolicyError``."""
        return PolicyChanges.model_validate_json(
            self._request("POST", "/v1/policies/reload").content
        )

    def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        body: dict[str, Any] = self._request("GET", "/healthz").json()
        return body

    def fleet(self) -> dict[str, Any]:
        """The fleet's hosts, health and load (``GET /v1/fleet``; 404 on a single host)."""
        body: dict[str, Any] = self._request("GET", "/v1/fleet").json()
        return body

    def drain_host(self, host: str, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Drain a fleet host (``POST /v1/fleet/drain``, admin key): returns once released."""
        payload: dict[str, Any] = {"host": host}
        if timeout_s is not None:
            payload["timeout_s"] = timeout_s
        wait = (timeout_s or 300.0) + 60.0
        body: dict[str, Any] = self._request(
            "POST", "/v1/fleet/drain", json=payload, timeout=wait
        ).json()
        return body

    def build_environment(
        self,
        path: str | Path,
        *,
        dockerfile: str = "Dockerfile",
        build_timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Build the environment whose build context is the folder ``path``
        (``POST /v1/environments``); returns its ``environment`` id, ``image``,
        ``cached``, ``build_seconds``, ``notes`` and ``log_tail``."""
        body: dict[str, Any] = self._request(
            "POST", "/v1/environments", **_build_request(path, dockerfile, build_timeout_s)
        ).json()
        return body

    def delete_environment(self, environment: str) -> None:
        """Stop using an environment built earlier (``DELETE /v1/environments/{id}``)."""
        self._request("DELETE", f"/v1/environments/{environment}")

    def create_session(
        self,
        *,
        image: str = "python",
        policy: str = "default",
        environment: str | None = None,
        resources: ResourceRequest | Mapping[str, Any] | None = None,
        files: Mapping[str, str] | None = None,
        setup: str | None = None,
        from_snapshot: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SessionInfo:
        """Start a session (``POST /v1/sessions``); ``environment`` runs it in a built one
        (``resources`` lowered to ``policy``, ``env`` set for every command)."""
        payload = _session_payload(
            image, policy, environment, resources, files, setup, from_snapshot, env
        )
        response = self._request("POST", "/v1/sessions", json=payload)
        return SessionInfo.model_validate_json(response.content)

    def session_exec(
        self, session_id: str, command: str | Sequence[str], *, timeout_s: float | None = None
    ) -> RunResult:
        """Run one command in a session (``POST /v1/sessions/{id}/exec``)."""
        response = self._request(
            "POST", f"/v1/sessions/{session_id}/exec", json=_exec_payload(command, timeout_s)
        )
        return RunResult.model_validate_json(response.content)

    def close_session(self, session_id: str) -> None:
        """End a session (``DELETE /v1/sessions/{id}``)."""
        self._request("DELETE", f"/v1/sessions/{session_id}")

    def upload_task(self, path: str | Path) -> TaskInfo:
        """Upload a task directory (``POST /v1/tasks``); its ``task`` reference opens episodes."""
        response = self._request("POST", "/v1/tasks", **_task_upload(path))
        return TaskInfo.model_validate_json(response.content)

    def tasks(self) -> list[TaskInfo]:
        """The shipped tasks, then the caller's uploads (``GET /v1/tasks``)."""
        response = self._request("GET", "/v1/tasks")
        return [TaskInfo.model_validate(item) for item in response.json()]

    def delete_task(self, task: str) -> None:
        """Delete an upload of the caller's (``DELETE /v1/tasks/upload:<digest>``)."""
        self._request("DELETE", f"/v1/tasks/{task}")

    def open_episode(
        self,
        task: str,
        *,
        max_steps: int | None = None,
        timeout_s: float | None = None,
        max_output_chars: int | None = None,
    ) -> EpisodeInfo:
        """Start an episode of ``task`` (a shipped id or ``upload:<digest>``;
        ``POST /v1/episodes``): its instruction, tools and budget."""
        payload = _episode_payload(task, max_steps, timeout_s, max_output_chars)
        response = self._request("POST", "/v1/episodes", json=payload)
        return EpisodeInfo.model_validate_json(response.content)

    def episode_step(
        self, episode_id: str, tool: str, arguments: Mapping[str, Any] | str | None = None
    ) -> StepResult:
        """One tool call in the episode (``POST /v1/episodes/{id}/step``)."""
        body = {"tool": tool, "arguments": arguments if arguments is not None else {}}
        wait = MAX_TIME_S + (self._http.timeout.read or DEFAULT_TIMEOUT_S)
        response = self._request("POST", f"/v1/episodes/{episode_id}/step", json=body, timeout=wait)
        return StepResult.model_validate_json(response.content)

    def judge_episode(self, episode_id: str) -> EpisodeResult:
        """Run the hidden tests and end the session (``POST /v1/episodes/{id}/judge``);
        ``reward`` None means the platform failed: drop the episode."""
        response = self._request("POST", f"/v1/episodes/{episode_id}/judge", timeout=JUDGE_WAIT_S)
        return EpisodeResult.model_validate_json(response.content)

    def close_episode(self, episode_id: str) -> None:
        """Forget the episode, closing its session (``DELETE``); one gone is no error."""
        with contextlib.suppress(NotFoundError):
            self._request("DELETE", f"/v1/episodes/{episode_id}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncSandboxClient:
    """Asynchronous client with the methods of :class:`SandboxClient`, and sessions and
    task environments (what the Harbor provider, ``sandbox.integrations.harbor``, uses)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_connections: int = 256,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url
        self.max_retries = max_retries
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=64)
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=timeout, limits=limits, transport=transport
        )

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            try:
                response = await self._http.request(method, path, **kwargs)
                _raise_for_error(response)
                return response
            except CapacityError as exc:
                if attempt == self.max_retries:
                    raise
                await asyncio.sleep(_retry_wait(exc))
            except httpx.HTTPError as exc:
                raise _transport_error(exc, self.base_url) from exc
        raise AssertionError("unreachable")

    async def run(
        self,
        code: str,
        *,
        language: str = "python",
        stdin: str = "",
        args: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        policy: str = "default",
        limits: Mapping[str, Any] | None = None,
        fetch_files: Sequence[str] = (),
    ) -> RunResult:
        """Run one program (``POST /v1/run``)."""
        payload = _run_payload(code, language, stdin, args, files, env, policy, limits, fetch_files)
        response = await self._request("POST", "/v1/run", json=payload)
        return RunResult.model_validate_json(response.content)

    async def judge(self, request: JudgeRequest | Mapping[str, Any]) -> JudgeResult:
        """Judge one submission against its hidden tests (``POST /v1/judge``)."""
        response = await self._request("POST", "/v1/judge", json=_judge_payload(request))
        return JudgeResult.model_validate_json(response.content)

    async def evaluate(
        self,
        items: Sequence[JudgeRequest | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> tuple[list[ItemLine], Summary]:
        """Judge a batch (``POST /v1/evaluate``); items come back in input order."""
        lines = [line async for line in self.evaluate_stream(items, idempotency_key, **options)]
        return parse_lines(lines)

    async def evaluate_stream(
        self,
        items: Sequence[JudgeRequest | Mapping[str, Any]],
        idempotency_key: str | None = None,
        **options: Any,
    ) -> AsyncIterator[str]:
        """The NDJSON lines of a batch as the service sends them (the summary last)."""
        payload = _evaluate_payload(items, idempotency_key, options)
        for attempt in range(self.max_retries + 1):
            try:
                async with self._http.stream("POST", "/v1/evaluate", json=payload) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        _raise_for_error(response)
                    async for line in response.aiter_lines():
                        if line.strip():
                            yield line
                return
            except CapacityError as exc:
                if attempt == self.max_retries:
                    raise
                await asyncio.sleep(_retry_wait(exc))
            except httpx.HTTPError as exc:
                raise _transport_error(exc, self.base_url) from exc

    async def pool(self) -> PoolStatus:
        """The pool's counts (``GET /v1/pool``)."""
        return PoolStatus.model_validate_json((await self._request("GET", "/v1/pool")).content)

    async def api_paths(self) -> set[str]:
        """The paths the service serves (from its OpenAPI document): what this one offers."""
        document = (await self._request("GET", "/openapi.json")).json()
        return set(document.get("paths", {}))

    async def build_environment(
        self,
        path: str | Path,
        *,
        dockerfile: str = "Dockerfile",
        build_timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Build the environment whose build context is the folder ``path`` (``POST
        /v1/environments``; cached by content); returns its ``environment`` id, ``image``,
        ``cached``, ``build_seconds``, ``notes`` and ``log_tail``."""
        params: dict[str, Any] = {"dockerfile": dockerfile}
        headers = {"Content-Type": "application/x-tar"}
        return await self._environment(
            build_timeout_s, content=folder_archive(Path(path)), params=params, headers=headers
        )

    async def delete_environment(self, environment: str) -> None:
        """Stop using an environment built earlier (``DELETE /v1/environments/{id}``)."""
        await self._request("DELETE", f"/v1/environments/{environment}")

    async def image_environment(
        self, image: str, *, build_timeout_s: float | None = None
    ) -> dict[str, Any]:
        """The environment of an image by name (``POST /v1/environments``, JSON), as
        :meth:`build_environment` answers."""
        return await self._environment(build_timeout_s, params={}, json={"image": image})

    async def _environment(
        self, build_timeout_s: float | None, *, params: dict[str, Any], **body: Any
    ) -> dict[str, Any]:
        if build_timeout_s is not None:
            params["build_timeout_s"] = build_timeout_s
        wait = (build_timeout_s or DEFAULT_BUILD_TIMEOUT_S) + 60.0
        response = await self._request(
            "POST", "/v1/environments", params=params, timeout=wait, **body
        )
        answer: dict[str, Any] = response.json()
        return answer

    async def session_exec(
        self,
        session_id: str,
        command: str | Sequence[str],
        *,
        stdin: str = "",
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> RunResult:
        """Run one command in a session (``POST /v1/sessions/{id}/exec``; a string runs
        under ``bash -c``). The HTTP wait is the command's own time limit (else the longest
        a policy allows) plus this client's timeout."""
        payload = _exec_payload(command, timeout_s, stdin=stdin, cwd=cwd, env=env)
        wait = (timeout_s or MAX_TIME_S) + (self._http.timeout.read or DEFAULT_TIMEOUT_S)
        response = await self._request(
            "POST", f"/v1/sessions/{session_id}/exec", json=payload, timeout=wait
        )
        return RunResult.model_validate_json(response.content)

    async def session_file(self, session_id: str, path: str) -> bytes:
        """A file below /workspace or /tmp of a session, as bytes (``GET .../files``)."""
        response = await self._request(
            "GET", f"/v1/sessions/{session_id}/files", params={"path": path}
        )
        return base64.b64decode(response.json()["content_base64"])

    async def close_session(self, session_id: str) -> None:
        """End a session (``DELETE /v1/sessions/{id}``); one already ended is no error."""
        with contextlib.suppress(NotFoundError):
            await self._request("DELETE", f"/v1/sessions/{session_id}")

    async def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        body: dict[str, Any] = (await self._request("GET", "/healthz")).json()
        return body

    async def create_session(
        self,
        *,
        image: str = "python",
        policy: str = "default",
        environment: str | None = None,
        resources: ResourceRequest | Mapping[str, Any] | None = None,
        files: Mapping[str, str] | None = None,
        setup: str | None = None,
        from_snapshot: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SessionInfo:
        """Start a session (``POST /v1/sessions``); ``environment`` runs it in a built one
        (``resources`` lowered to ``policy``, ``env`` set for every command)."""
        payload = _session_payload(
            image, policy, environment, resources, files, setup, from_snapshot, env
        )
        response = await self._request("POST", "/v1/sessions", json=payload)
        return SessionInfo.model_validate_json(response.content)

    async def sessions(self) -> list[SessionInfo]:
        """The caller's open sessions (``GET /v1/sessions``)."""
        response = await self._request("GET", "/v1/sessions")
        return [SessionInfo.model_validate(item) for item in response.json()]

    async def upload_task(self, path: str | Path) -> TaskInfo:
        """Upload a task directory (``POST /v1/tasks``); its ``task`` reference opens episodes."""
        response = await self._request("POST", "/v1/tasks", **_task_upload(path))
        return TaskInfo.model_validate_json(response.content)

    async def tasks(self) -> list[TaskInfo]:
        """The shipped tasks, then the caller's uploads (``GET /v1/tasks``)."""
        response = await self._request("GET", "/v1/tasks")
        return [TaskInfo.model_validate(item) for item in response.json()]

    async def delete_task(self, task: str) -> None:
        """Delete an upload of the caller's (``DELETE /v1/tasks/upload:<digest>``)."""
        await self._request("DELETE", f"/v1/tasks/{task}")

    async def open_episode(
        self,
        task: str,
        *,
        max_steps: int | None = None,
        timeout_s: float | None = None,
        max_output_chars: int | None = None,
    ) -> EpisodeInfo:
        """Start an episode of ``task`` (a shipped id or ``upload:<digest>``;
        ``POST /v1/episodes``): its instruction, tools and budget."""
        payload = _episode_payload(task, max_steps, timeout_s, max_output_chars)
        response = await self._request("POST", "/v1/episodes", json=payload)
        return EpisodeInfo.model_validate_json(response.content)

    async def episode_step(
        self, episode_id: str, tool: str, arguments: Mapping[str, Any] | str | None = None
    ) -> StepResult:
        """One tool call in the episode (``POST /v1/episodes/{id}/step``)."""
        body = {"tool": tool, "arguments": arguments if arguments is not None else {}}
        wait = MAX_TIME_S + (self._http.timeout.read or DEFAULT_TIMEOUT_S)
        response = await self._request(
            "POST", f"/v1/episodes/{episode_id}/step", json=body, timeout=wait
        )
        return StepResult.model_validate_json(response.content)

    async def judge_episode(self, episode_id: str) -> EpisodeResult:
        """Run the hidden tests and end the session (``POST /v1/episodes/{id}/judge``);
        ``reward`` None means the platform failed: drop the episode."""
        response = await self._request(
            "POST", f"/v1/episodes/{episode_id}/judge", timeout=JUDGE_WAIT_S
        )
        return EpisodeResult.model_validate_json(response.content)

    async def close_episode(self, episode_id: str) -> None:
        """Forget the episode, closing its session (``DELETE``); one gone is no error."""
        with contextlib.suppress(NotFoundError):
            await self._request("DELETE", f"/v1/episodes/{episode_id}")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
