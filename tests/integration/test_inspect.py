"""The inspect_ai provider against a real service with real containers and the real package.

inspect_ai's own conformance suite (``inspect_ai.util._sandbox.self_check``) runs on
one session of the ``sandbox-platform`` provider; the checks the platform cannot
pass by design are strict xfails (:data:`KNOWN_FAILURES`, also in the README).
An ``eval()`` with the ``mockllm`` model and the ``bash`` tool runs end to end,
and sessions are closed however a run ends (an error, a crash).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import SandboxUnavailableError, sandbox
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
from inspect_ai.util._sandbox.self_check import *  # noqa: F403  (the checks, collected here)

from sandbox.client import AsyncSandboxClient
from sandbox.integrations.inspect_provider import (
    LEDGER_ENV,
    PROVIDER,
    Ledger,
    PlatformSandboxConfig,
    PlatformSandboxEnvironment,
)
from sandbox.service.tenants import hash_key, new_key
from sandbox.telemetry.audit import code_hash
from tests.conftest import REPO, Service

pytestmark = pytest.mark.docker

KEY = new_key()
OTHER_KEY = new_key()
CHECK_POLICY = "inspect-check"
# Checks the platform cannot pass, by design; each reason is in the README's "Inspect".
KNOWN_FAILURES: dict[str, str] = {
    "test_exec_as_user": "sessions run only as the sandbox uid: there is no root to add a user",
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A keyed service whose policies are the default, the example ``inspect`` policy and
    ``inspect-check`` (that one with the variables the env check passes allowed)."""
    root = tmp_path_factory.mktemp("inspect")
    policies = root / "policies"
    policies.mkdir()
    shutil.copy(REPO / "policies" / "default.yaml", policies)
    shutil.copy(REPO / "examples" / "inspect" / "inspect.yaml", policies)
    (policies / f"{CHECK_POLICY}.yaml").write_text(
        "extends: inspect\nenv: {allow: [CUSTOM_ENV_VAR_1, CUSTOM_ENV_VAR_2]}\n"
    )
    keys = root / "keys.yaml"
    entries = [
        {"tenant": "inspect", "key_sha256": hash_key(KEY)},
        {"tenant": "other", "key_sha256": hash_key(OTHER_KEY)},
    ]
    keys.write_text(yaml.safe_dump({"keys": entries}))
    svc = Service(
        "--keys",
        str(keys),
        "--warm",
        CHECK_POLICY,
        policies=policies,
        log_dir=root,
        env={"SANDBOX_STATE_DIR": str(root / "state")},
    )
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


@pytest.fixture(scope="module", autouse=True)
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The provider's ledger in a directory of this module's own."""
    path = tmp_path_factory.mktemp("ledger")
    before = os.environ.get(LEDGER_ENV)
    os.environ[LEDGER_ENV] = str(path)
    yield path
    if before is None:
        del os.environ[LEDGER_ENV]
    else:
        os.environ[LEDGER_ENV] = before


@pytest.fixture(scope="module")
def config(service: Service) -> PlatformSandboxConfig:
    return PlatformSandboxConfig(url=service.url, api_key=KEY, policy=CHECK_POLICY)


def open_sessions(service: Service, key: str = KEY) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"}
    response = httpx.get(f"{service.url}/v1/sessions", headers=headers, timeout=30)
    response.raise_for_status()
    listed: list[dict[str, Any]] = response.json()
    return listed


@pytest.fixture(scope="module")
async def shared_env(config: PlatformSandboxConfig) -> AsyncIterator[PlatformSandboxEnvironment]:
    """One session for every check, as inspect's own runner shares one sandbox."""
    await PlatformSandboxEnvironment.task_init("self-check", config)
    environments = await PlatformSandboxEnvironment.sample_init("self-check", config, {})
    environment = environments["default"]
    assert isinstance(environment, PlatformSandboxEnvironment)
    yield environment
    await PlatformSandboxEnvironment.sample_cleanup("self-check", config, environments, False)


@pytest.fixture
def sandbox_env(
    request: pytest.FixtureRequest, shared_env: PlatformSandboxEnvironment
) -> PlatformSandboxEnvironment:
    """The fixture inspect's self_check checks take; known failures become strict xfails."""
    reason = KNOWN_FAILURES.get(request.node.originalname)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    return shared_env


def test_every_known_failure_names_a_check() -> None:
    import inspect_ai.util._sandbox.self_check as self_check

    assert set(KNOWN_FAILURES) <= set(self_check.__all__)
    readme = (REPO / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in KNOWN_FAILURES)


def test_the_entry_point_registers_the_provider() -> None:
    """pyproject's ``inspect_ai`` entry point names the module that registers the provider."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    module = pyproject["project"]["entry-points"]["inspect_ai"]["sandbox-platform"]
    assert module == PlatformSandboxEnvironment.__module__
    assert registry_find_sandboxenv(PROVIDER) is PlatformSandboxEnvironment


def test_a_config_file_with_an_unknown_key_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "sandbox.yaml"
    path.write_text("url: http://127.0.0.1:1\nimage: python\npolicy_name: inspect\n")
    with pytest.raises(ValueError, match=r"sandbox\.yaml: key policy_name: Extra inputs"):
        PlatformSandboxConfig.load(str(path))
    with pytest.raises(ValueError, match="cannot read the sandbox config"):
        PlatformSandboxConfig.load(str(tmp_path / "missing.yaml"))


def test_the_example_config_file_loads() -> None:
    loaded = PlatformSandboxConfig.load(str(REPO / "examples" / "inspect" / "sandbox.yaml"))
    assert (loaded.image, loaded.policy, loaded.environment) == ("python", "inspect", None)


async def test_a_sample_runs_in_a_built_environment(
    config: PlatformSandboxConfig, tmp_path: Path
) -> None:
    """``environment`` goes into the session request: the sample's sandbox is a session in
    that built environment (a file its Dockerfile made is there); an id the service never
    built is refused by name."""
    (tmp_path / "Dockerfile").write_text(
        "FROM sandbox-python\nRUN echo built-for-inspect > /opt/inspect-marker\n"
    )
    async with AsyncSandboxClient(config.url, api_key=KEY, timeout=300) as client:
        built = await client.build_environment(tmp_path)
    in_environment = config.model_copy(update={"environment": built["environment"]})
    environments = await PlatformSandboxEnvironment.sample_init("t", in_environment, {})
    try:
        result = await environments["default"].exec(["cat", "/opt/inspect-marker"])
        assert (result.returncode, result.stdout) == (0, "built-for-inspect\n"), result
    finally:
        await PlatformSandboxEnvironment.sample_cleanup("t", in_environment, environments, False)
    unknown = config.model_copy(update={"environment": "env-123"})
    with pytest.raises((ValueError, LookupError), match="no environment 'env-123'"):
        await PlatformSandboxEnvironment.sample_init("t", unknown, {})


def _config_file(tmp_path: Path, service: Service, policy: str = "inspect") -> Path:
    path = tmp_path / "sandbox.yaml"
    path.write_text(yaml.safe_dump({"url": service.url, "image": "python", "policy": policy}))
    return path


def test_an_eval_with_mockllm_and_bash_runs_in_our_sandbox(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bash tool's call runs in a session of ours: its output has our uid and a file it
    wrote, the service's audit has the command, and no session is left open."""
    monkeypatch.setenv("SANDBOX_API_KEY", KEY)
    before = {s["id"] for s in open_sessions(service)}
    marker = secrets.token_hex(8)
    command = f"echo {marker} > proof.txt && id -u && cat /workspace/proof.txt"
    outputs = [
        ModelOutput.for_tool_call("mockllm/model", "bash", {"command": command}),
        ModelOutput.from_content("mockllm/model", "done"),
    ]
    for output in outputs:  # else mockllm counts tokens with tiktoken, which downloads
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    task = Task(
        dataset=[Sample(input="prove where you run", target="done")],
        solver=[use_tools([bash(timeout=60)]), generate()],
        sandbox=(PROVIDER, str(_config_file(tmp_path, service))),
    )
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    assert log.samples is not None
    tool_messages = [m for m in log.samples[0].messages if m.role == "tool"]
    assert [m.text.split() for m in tool_messages] == [["10001", marker]]
    audit = httpx.get(
        f"{service.url}/v1/audit",
        params={"kind": "session"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    ).json()
    ran = [r for r in audit if r["code_sha256"] == code_hash(f"bash --login -c {command}")]
    assert len(ran) == 1 and ran[0]["verdict"] == "ok" and ran[0]["policy"] == "inspect"
    assert {s["id"] for s in open_sessions(service)} == before


@solver
def _fail_after_using_the_sandbox() -> Any:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await sandbox().exec(["touch", "started"])
        raise RuntimeError("the solver failed on purpose")

    return solve


def test_a_failing_sample_still_closes_its_session(service: Service, tmp_path: Path) -> None:
    config = PlatformSandboxConfig(url=service.url, api_key=KEY, policy="inspect")
    task = Task(
        dataset=[Sample(input="x")],
        solver=[_fail_after_using_the_sandbox()],
        sandbox=(PROVIDER, config),
    )
    before = {s["id"] for s in open_sessions(service)}
    [log] = eval(task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "error" and "on purpose" in str(log.error)
    assert {s["id"] for s in open_sessions(service)} == before


async def test_task_cleanup_closes_what_no_sample_cleanup_closed(
    config: PlatformSandboxConfig, service: Service
) -> None:
    before = {s["id"] for s in open_sessions(service)}
    for _ in range(2):
        await PlatformSandboxEnvironment.sample_init("left-open", config, {})
    assert len({s["id"] for s in open_sessions(service)} - before) == 2
    await PlatformSandboxEnvironment.task_cleanup("left-open", config, cleanup=True)
    assert {s["id"] for s in open_sessions(service)} == before


CRASH = """
import asyncio, os, sys
from sandbox.integrations.inspect_provider import PlatformSandboxConfig, PlatformSandboxEnvironment
config = PlatformSandboxConfig(url=sys.argv[1], api_key=sys.argv[2], policy="inspect")
envs = asyncio.run(PlatformSandboxEnvironment.sample_init("crashing", config, {}))
print(envs["default"].session_id, flush=True)
os._exit(9)  # no cleanup of any kind
"""


async def test_cli_cleanup_closes_the_sessions_a_crashed_run_left(
    service: Service, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the crashed run's sessions go: not the tenant's other sessions, nor another
    tenant's session of the same id space."""
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH, service.url, KEY],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert crashed.returncode == 9, crashed.stderr
    left = crashed.stdout.strip()
    mine_before = {s["id"] for s in open_sessions(service)}
    assert left in mine_before and left in set(Ledger())
    headers = {"Authorization": f"Bearer {KEY}"}
    manual = httpx.post(
        f"{service.url}/v1/sessions", json={"policy": "inspect"}, headers=headers, timeout=60
    ).json()["id"]
    monkeypatch.setenv("SANDBOX_URL", service.url)
    monkeypatch.setenv("SANDBOX_API_KEY", KEY)

    await PlatformSandboxEnvironment.cli_cleanup(None)

    after = {s["id"] for s in open_sessions(service)}
    assert left not in after and manual in after
    assert left not in set(Ledger())
    await PlatformSandboxEnvironment.cli_cleanup(manual)
    assert manual not in {s["id"] for s in open_sessions(service)}


async def test_another_tenants_provider_cannot_reach_the_session(
    shared_env: PlatformSandboxEnvironment, service: Service
) -> None:
    """Another tenant's key finds no such session: its commands report the sandbox
    unavailable (a tool error, not the command's output), its reads find nothing."""
    other = PlatformSandboxEnvironment(
        shared_env.config.model_copy(update={"api_key": OTHER_KEY}), shared_env.session_id
    )
    with pytest.raises(SandboxUnavailableError, match="no session"):
        await other.exec(["true"])
    with pytest.raises(LookupError):
        await other.read_file("anything")
    assert json.dumps(open_sessions(service, OTHER_KEY)) == "[]"
