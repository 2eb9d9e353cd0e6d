"""``/openenv/{task}`` (api/routers/openenv.py) against a real ``sandbox serve``: OpenEnv's
WebSocket and HTTP protocols drive episodes whose reward the hidden tests decide.

OpenEnv's client package (``openenv-core``) imports fastmcp and gradio, too heavy for the
shared venv, so :class:`EnvClient` below speaks its protocol with the same ``websockets``
client, as meta-pytorch/OpenEnv ``src/openenv/core/env_client.py`` (openenv-core 0.3.0)
does::

    self._ws_url = f"{convert_to_ws_url(base_url)}/ws"
    self._ws = await ws_connect(self._ws_url, open_timeout=..., max_size=..., ...)
    # reset(**kwargs):  {"type": "reset", "data": kwargs}
    # step(action):     {"type": "step", "data": self._step_payload(action)}
    # state():          {"type": "state"}
    # a reply {"type": "error", "data": {...}} raises RuntimeError(f"Server error: ...")
    # result: StepResult(observation=data.get("observation", {}),
    #                    reward=data.get("reward"), done=data.get("done", False))
    # disconnect():     send {"type": "close"}, then ws.close()

and the HTTP calls are those of OpenEnv's server (``env_server/http_server.py``): ``POST
/reset`` with a ``ResetRequest`` body, ``POST /step`` with ``{"action": {...}}``, ``GET
/state``, ``GET /health``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from sandbox.client import SandboxClient
from sandbox.service.tenants import hash_key, new_key

from ..conftest import REPO, Service
from .test_episodes import make_task

pytestmark = pytest.mark.docker


class EnvClient:
    """OpenEnv's ``EnvClient`` protocol (see the module docstring)."""

    def __init__(self, base_url: str, **connect_kwargs: Any) -> None:
        self.ws_url = base_url.replace("http://", "ws://", 1).rstrip("/") + "/ws"
        self.connect_kwargs = connect_kwargs
        self.ws: ClientConnection | None = None

    async def __aenter__(self) -> EnvClient:
        self.ws = await connect(self.ws_url, open_timeout=10, **self.connect_kwargs)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.disconnect()

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.ws is not None
        await self.ws.send(json.dumps(message))
        response: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), 120))
        if response.get("type") == "error":
            data = response.get("data", {})
            raise RuntimeError(f"Server error: {data.get('message')} (code: {data.get('code')})")
        return response

    async def reset(self, **kwargs: Any) -> dict[str, Any]:
        return (await self._send_and_receive({"type": "reset", "data": kwargs}))["data"]

    async def step(self, action: dict[str, Any]) -> dict[str, Any]:
        return (await self._send_and_receive({"type": "step", "data": action}))["data"]

    async def state(self) -> dict[str, Any]:
        return (await self._send_and_receive({"type": "state"}))["data"]

    async def disconnect(self) -> None:
        if self.ws is not None:
            await self.ws.send(json.dumps({"type": "close"}))
            await self.ws.close()
            self.ws = None


@pytest.fixture(scope="module")
def task(service: Service, tmp_path_factory: pytest.TempPathFactory) -> str:
    with SandboxClient(service.url) as client:
        return client.upload_task(make_task(tmp_path_factory.mktemp("openenv"), 41)).task


@pytest.fixture(scope="module")
def http(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=120) as client:
        yield client


def gone(http: httpx.Client, episode: str, wait_s: float = 10.0) -> bool:
    """The episode is closed (404) within ``wait_s`` (the server closes it after the socket)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if http.get(f"/v1/episodes/{episode}").status_code == 404:
            return True
        time.sleep(0.1)
    return False


def shell(command: str) -> dict[str, Any]:
    return {"tool": "shell", "arguments": {"command": command}}


def write(content: str) -> dict[str, Any]:
    return {"tool": "write_file", "arguments": {"path": "answer.txt", "content": content}}


async def test_a_websocket_episode_gets_the_sandbox_and_the_tests_reward(
    service: Service, task: str, http: httpx.Client
) -> None:
    async with EnvClient(f"{service.url}/openenv/{task}") as env:
        first = await env.reset()
        assert (first["done"], first["reward"]) == (False, None)
        assert first["observation"]["text"].startswith("value.txt holds")
        assert [t["function"]["name"] for t in first["observation"]["tools"]] == [
            "shell",
            "read_file",
            "write_file",
            "done",
        ]
        episode = first["observation"]["sandbox_episode"]
        seen = await env.step(shell("cat value.txt"))
        assert seen["observation"]["text"].splitlines()[:3] == ["exit_code: 0", "[stdout]", "41"]
        assert (seen["done"], seen["reward"]) == (False, None)
        assert (await env.step(write("42")))["observation"]["text"] == "wrote 2 bytes to answer.txt"
        finished = await env.step({"tool": "done", "arguments": {}})
        assert (finished["done"], finished["reward"]) == (True, 1.0)
        assert finished["observation"]["outcome"] == "passed"
        state = await env.state()
        assert (state["step_count"], state["done"], state["sandbox_episode"]) == (
            2,
            True,
            episode,
        )  # done is no step
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            await env.step({"arguments": {}})
        assert http.get(f"/v1/episodes/{episode}").status_code == 200  # open while connected
    assert gone(http, episode)


async def test_closing_the_socket_closes_the_episode_and_reset_starts_anew(
    service: Service, task: str, http: httpx.Client
) -> None:
    env = EnvClient(f"{service.url}/openenv/{task}")
    await env.__aenter__()
    with pytest.raises(RuntimeError, match="reset first"):
        await env.step(shell("true"))
    first = (await env.reset())["observation"]["sandbox_episode"]
    await env.step(write("7"))
    second = await env.reset(max_steps=2)
    assert gone(http, first)  # a reset closes the connection's previous episode
    assert "answer.txt" not in (await env.step(shell("ls")))["observation"]["text"]
    wrote = await env.step(write("42"))  # the last of its two steps ends the episode
    assert (wrote["done"], wrote["observation"]["steps_left"]) == (True, 0)
    assert (wrote["reward"], wrote["observation"]["outcome"]) == (1.0, "passed")
    assert env.ws is not None
    await env.ws.close()  # no close message: the connection just ends
    assert gone(http, second["observation"]["sandbox_episode"])


def test_http_episodes_are_named_and_kept_between_requests(task: str, http: httpx.Client) -> None:
    base = f"/openenv/{task}"
    assert http.get(f"{base}/health").json() == {"status": "healthy"}
    named = {}
    for name, answer in (("a", "42"), ("b", "7")):
        reset = http.post(f"{base}/reset", json={"episode_id": name, "seed": 3})
        assert reset.status_code == 200, reset.text
        assert reset.json()["observation"]["episode_id"] == name
        named[name] = (reset.json()["observation"]["sandbox_episode"], answer)
    for name, (_, answer) in named.items():  # interleaved: each keeps its own workspace
        body = {"action": write(answer), "episode_id": name}
        assert http.post(f"{base}/step", json=body).json()["reward"] is None
    rewards = {}
    for name in named:
        done = http.post(f"{base}/step", json={"action": {"tool": "done"}, "episode_id": name})
        rewards[name] = (done.json()["done"], done.json()["reward"])
    assert rewards == {"a": (True, 1.0), "b": (True, 0.0)}
    state = http.get(f"{base}/state", params={"episode_id": "a"}).json()
    assert (state["episode_id"], state["step_count"], state["done"]) == ("a", 1, True)

    latest = http.post(f"{base}/reset").json()["observation"]  # no body, no name: its id
    assert latest["episode_id"] == latest["sandbox_episode"]
    seen = http.post(f"{base}/step", json={"action": shell("cat value.txt")})  # the latest
    assert "41" in seen.json()["observation"]["text"]
    mcp_style = {"tool_name": "read_file", "arguments": json.dumps({"path": "value.txt"})}
    read = http.post(f"{base}/step", json={"action": mcp_style}).json()["observation"]
    assert read["text"].strip() == "41" and read["steps"] == 2
    assert http.get(f"{base}/state").json()["episode_id"] == latest["episode_id"]

    again = http.post(f"{base}/reset", json={"episode_id": "a"}).json()["observation"]
    assert again["sandbox_episode"] != named["a"][0]
    assert http.get(f"/v1/episodes/{named['a'][0]}").status_code == 404  # replaced: closed

    missing = http.post(f"{base}/step", json={"action": shell("true"), "episode_id": "zz"})
    assert missing.status_code == 404 and "reset first" in missing.json()["message"]
    assert http.get("/openenv/cli-calc/health").json() == {"status": "healthy"}  # shipped
    assert http.get("/openenv/no-such-task/health").status_code == 404
    assert http.post("/openenv/no-such-task/reset").status_code == 404
    for episode in (
        *(e for e, _ in named.values()),
        again["sandbox_episode"],
        latest["sandbox_episode"],
    ):
        http.delete(f"/v1/episodes/{episode}")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str]]:
    root = tmp_path_factory.mktemp("openenv-keys")
    key = new_key()
    keys = root / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [{"tenant": "t", "key_sha256": hash_key(key)}]}))
    svc = Service("--keys", str(keys), env={"SANDBOX_STATE_DIR": str(root / "state")})
    try:
        svc.wait_ready()
        yield svc, key
    finally:
        svc.stop()


async def test_the_api_keys_guard_both_protocols(
    keyed: tuple[Service, str], tmp_path: Path
) -> None:
    svc, key = keyed
    with SandboxClient(svc.url, api_key=key) as client:
        task = client.upload_task(make_task(tmp_path, 5)).task
    base = f"{svc.url}/openenv/{task}"
    async with httpx.AsyncClient(timeout=120) as http:
        assert (await http.post(f"{base}/reset")).status_code == 401
        assert (await http.get(f"{base}/health")).status_code == 401
        ok = await http.get(f"{base}/health", headers={"X-API-Key": key})
        assert ok.json() == {"status": "healthy"}
    for kwargs in ({}, {"additional_headers": {"Authorization": "Bearer nope"}}):
        with pytest.raises(InvalidStatus):
            await EnvClient(base, **kwargs).__aenter__()
    browser = {"origin": "http://evil.example", "additional_headers": {"X-API-Key": key}}
    with pytest.raises(InvalidStatus):  # a web page may not drive a sandbox
        await EnvClient(base, **browser).__aenter__()
    # the key in the URL (HTTP Basic), as OpenEnv's client sends it from its base URL
    async with EnvClient(base.replace("http://", f"http://key:{key}@", 1)) as env:
        result = await env.reset()
        assert "value.txt" in result["observation"]["text"]
        seen = await env.step(shell("cat value.txt"))
        assert "5" in seen["observation"]["text"].splitlines()


# ------------------------------------------------------------- OpenEnv's own client package

OPENENV_VENV = Path(os.environ.get("OPENENV_VENV", REPO / ".venv-openenv"))
OPENENV_SCRIPT = """
import json, sys
from openenv.core import GenericEnvClient

for base_url, answer in json.loads(sys.argv[1]):
    result = {}
    with GenericEnvClient(base_url=base_url).sync() as env:
        first = env.reset()
        result["reset"] = [first.observation, first.reward, first.done]
        seen = env.step({"tool": "shell", "arguments": {"command": "cat value.txt"}})
        result["seen"] = seen.observation["text"]
        env.step({"tool": "write_file", "arguments": {"path": "answer.txt", "content": answer}})
        last = env.step({"tool": "done", "arguments": {}})
        result["done"] = [last.reward, last.done, last.observation["outcome"]]
        result["state"] = env.state()
    print(json.dumps(result))
"""


def openenv_client(runs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """OpenEnv's ``GenericEnvClient`` (its ``.sync()`` wrapper) through one episode per
    (base URL, answer), in the venv ``make openenv-venv`` makes (``openenv-core`` imports
    gradio and fastmcp: too heavy for the main venv)."""
    python = OPENENV_VENV / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"{python} is missing: make OpenEnv's venv with `make openenv-venv`")
    done = subprocess.run(
        [str(python), "-c", OPENENV_SCRIPT, json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_openenvs_own_client_drives_episodes(
    task: str, service: Service, keyed: tuple[Service, str], tmp_path: Path
) -> None:
    svc, key = keyed
    with SandboxClient(svc.url, api_key=key) as client:
        keyed_task = client.upload_task(make_task(tmp_path, 41)).task
    # the key in the URL (HTTP Basic): how OpenEnv's client can present one
    keyed_base = f"{svc.url}/openenv/{keyed_task}".replace("http://", f"http://key:{key}@", 1)
    runs = [(f"{service.url}/openenv/{task}", "42"), (f"{service.url}/openenv/{task}", "7")]
    results = openenv_client([*runs, (keyed_base, "42")])
    assert [r["done"] for r in results] == [
        [1.0, True, "passed"],
        [0.0, True, "failed"],
        [1.0, True, "passed"],
    ]
    for result in results:
        observation, first_reward, first_done = result["reset"]
        assert observation["text"].startswith("value.txt holds") and not first_done
        assert first_reward is None and len(observation["tools"]) == 4
        assert result["seen"].splitlines()[:3] == ["exit_code: 0", "[stdout]", "41"]
        assert result["state"]["done"] is True and result["state"]["step_count"] == 2
