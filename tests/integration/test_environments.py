"""Per-task environments against the real engine: building, the cache, aliases, refusals,
the build time limit, garbage collection, and the derived policy (lowered, root gated)."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.environments import EnvironmentBuilder, EnvironmentSpec, ResourceRequest
from sandbox.environments.config import EnvironmentsConfig, parse_environments_config
from sandbox.environments.derive import ROOT_NOTE, check_root, derive_policy, runsc_registered
from sandbox.environments.gc import collect
from sandbox.errors import InvalidRequestError, PolicyError, SandboxTimeoutError
from sandbox.evals import NullAgent, OracleAgent, build_report, load_task, run_eval
from sandbox.host.images import base_tag, resolve_image
from sandbox.policy import load_policy_dir
from sandbox.service.platform import Platform
from tests.conftest import REPO

pytestmark = pytest.mark.docker

ALIASES = {"ubuntu:24.04": "sandbox-base", "python:3.13-slim": "sandbox-python"}
POLICIES = load_policy_dir(REPO / "policies")
TENANT = "tenant-a"


@pytest.fixture
def builder(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[EnvironmentBuilder]:
    """A builder with the README's aliases; the images it built are removed afterwards."""
    built = EnvironmentBuilder(tmp_path / "store", EnvironmentsConfig(image_aliases=ALIASES))
    yield built
    for record in built.records.all():
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(record.image, force=True)


def task(tmp_path: Path, dockerfile: str, **files: str) -> EnvironmentSpec:
    """A task folder holding ``dockerfile`` and ``files``; its spec."""
    folder = tmp_path / f"task-{secrets.token_hex(4)}"
    folder.mkdir()
    (folder / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (folder / name).write_text(text)
    return EnvironmentSpec(dockerfile=folder / "Dockerfile")


def test_a_build_is_cached_by_content_and_not_rebuilt(
    builder: EnvironmentBuilder, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    nonce = secrets.token_hex(8)
    spec = task(
        tmp_path,
        f"FROM python:3.13-slim\nRUN echo {nonce} > /etc/nonce\nCOPY data.txt /srv/data.txt\n"
        "COPY . /srv/context/\nWORKDIR /srv/context\n",
        **{"data.txt": "payload\n", "hidden.txt": "the tests' answer\n"},
    )
    # An excluded entry is neither built in nor hashed (a Terminal-Bench task's own tests).
    spec = spec.model_copy(update={"exclude": ("hidden.txt",)})
    lines: list[str] = []
    first = builder.build(spec, tenant=TENANT, progress=lines.append)
    assert not first.cached and first.record.image == f"sandbox-env:{first.record.environment}"
    assert any("Step 2/" in line and "RUN echo" in line for line in lines), lines
    log = builder.records.log_path(first.record.environment).read_text()
    assert nonce in log and "Successfully tagged" in log
    (spec.dockerfile.parent / "hidden.txt").write_text("changed\n")  # type: ignore[union-attr]
    again: list[str] = []
    second = builder.build(spec, tenant=TENANT, progress=again.append)
    assert second.cached and second.record.environment == first.record.environment
    # Found, not built: no build step ran and the build's log is the first build's.
    assert any("not rebuilt" in line for line in again), again
    assert not any("Step " in line for line in again), again
    assert builder.records.log_path(first.record.environment).read_text() == log
    image = docker_client.images.get(first.record.image)
    assert image.id == docker_client.images.get(second.record.image).id
    # A changed context file is a different environment.
    (spec.dockerfile.parent / "data.txt").write_text("changed\n")  # type: ignore[union-attr]
    third = builder.build(spec, tenant=TENANT)
    assert not third.cached and third.record.environment != first.record.environment
    out = docker_client.containers.run(
        third.record.image,
        ["sh", "-c", "cat /srv/data.txt /etc/nonce; ls -A /srv/context /opt/sandbox-seed"],
        remove=True,
    )
    # The context's copy, and the workspace seeded from it (the WORKDIR), hold the task's
    # files only, not the Dockerfile the platform built or the .dockerignore hiding it.
    listing = "Dockerfile\ndata.txt\n"
    assert out.decode() == (
        f"changed\n{nonce}\n/opt/sandbox-seed:\n{listing}\n/srv/context:\n{listing}"
    )


def test_the_runner_is_layered_in_whatever_the_from(
    builder: EnvironmentBuilder, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    """FROM ubuntu:24.04 (aliased to the python-less debootstrap base) gets python3 and the
    runner when the operator lets builds reach the network; the task's ENTRYPOINT is
    cleared. Without that network (the default) the build is refused, saying why."""
    spec = task(
        tmp_path,
        f'FROM ubuntu:24.04\nRUN echo {secrets.token_hex(4)} > /etc/n\nENTRYPOINT ["false"]\n',
    )
    with pytest.raises(
        InvalidRequestError,
        match="build_network: allowlist with the archive in build_allow, or bridge",
    ):
        builder.build(spec, tenant=TENANT)
    online = EnvironmentsConfig(image_aliases=ALIASES, build_network="bridge")
    builder = EnvironmentBuilder(builder.records.directory, online)
    result = builder.build(spec, tenant=TENANT)
    assert result.record.bases == [base_tag()]
    assert f"FROM ubuntu:24.04 is built from {base_tag()} (image_aliases)" in result.record.notes
    out = docker_client.containers.run(
        result.record.image,
        ["sh", "-c", "python3 -V && ls /opt/sandbox/runner/__main__.py && stat -c %u /workspace"],
        remove=True,
    )
    assert b"Python 3" in out and b"__main__.py" in out and out.strip().endswith(b"10001")


def test_an_image_spec_goes_through_the_aliases(builder: EnvironmentBuilder) -> None:
    result = builder.build(
        EnvironmentSpec(image="docker.io/library/python:3.13-slim"), tenant=TENANT
    )
    assert result.record.bases == [resolve_image("python")]


def test_an_unknown_from_is_refused_before_building(
    builder: EnvironmentBuilder, tmp_path: Path
) -> None:
    spec = task(tmp_path, "FROM ubuntu:24.04 AS one\nFROM nosuch/image:9.9\nCOPY --from=one / /\n")
    with pytest.raises(InvalidRequestError) as refused:
        builder.build(spec, tenant=TENANT)
    message = str(refused.value)
    assert "FROM nosuch/image:9.9" in message and "never pulled" in message
    assert "image_aliases" in message and "docker load" in message
    assert builder.records.all() == []


def test_build_args_reach_the_from_line(builder: EnvironmentBuilder, tmp_path: Path) -> None:
    spec = task(tmp_path, "ARG BASE=python:3.13-slim\nFROM ${BASE}\n")
    assert builder.build(spec, tenant=TENANT).record.bases == [resolve_image("python")]
    bad = spec.model_copy(update={"build_args": {"BASE": "nosuch:1"}})
    with pytest.raises(InvalidRequestError, match="FROM nosuch:1"):
        builder.build(bad, tenant=TENANT)


def test_a_build_past_its_time_limit_is_stopped(
    builder: EnvironmentBuilder, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    nonce = secrets.token_hex(6)
    spec = task(tmp_path, f"FROM python:3.13-slim\nRUN sleep 300 # {nonce}\n")
    spec = spec.model_copy(update={"build_timeout_s": 3.0})
    started = time.monotonic()
    with pytest.raises(SandboxTimeoutError, match="build_timeout_s=3 s"):
        builder.build(spec, tenant=TENANT)
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 20  # the engine removes the step once its client has gone
    while True:
        leftovers = [
            c.id
            for c in docker_client.containers.list(all=True)
            if nonce in " ".join(c.attrs.get("Config", {}).get("Cmd") or [])
        ]
        if not leftovers or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert leftovers == []


def test_a_failing_step_is_refused_with_its_output(
    builder: EnvironmentBuilder, tmp_path: Path
) -> None:
    spec = task(tmp_path, "FROM python:3.13-slim\nRUN echo broken-step >&2; exit 3\n")
    with pytest.raises(InvalidRequestError) as refused:
        builder.build(spec, tenant=TENANT)
    assert "broken-step" in str(refused.value) and "returned a non-zero code: 3" in str(
        refused.value
    )


def test_gc_removes_least_recently_used_first_and_spares_running_images(
    builder: EnvironmentBuilder, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    """A build past the disk budget removes the least recently used environment itself."""

    def spec(name: str) -> EnvironmentSpec:
        blob = f"/{name}-{secrets.token_hex(4)}"
        return task(tmp_path, f"FROM python:3.13-slim\nRUN head -c 2000000 /dev/urandom > {blob}\n")

    a, b = (builder.build(spec(name), tenant=TENANT).record.environment for name in "ab")
    builder.use(a, tenant=TENANT)  # used: b is now the least recently used
    sizes = [r.size_bytes for r in builder.records.all()]
    assert all(size > 2_000_000 for size in sizes), sizes
    # Room for two such environments, not three: building a third goes past it.
    budget_mb = int(2.5 * max(sizes)) >> 20
    small = EnvironmentBuilder(
        builder.records.directory,
        EnvironmentsConfig(image_aliases=ALIASES, disk_budget_mb=budget_mb),
    )
    lines: list[str] = []
    c = small.build(spec("c"), tenant=TENANT, progress=lines.append).record.environment
    assert f"garbage-collected environment {b} (disk budget {budget_mb} MB)" in lines, lines
    assert sorted(r.environment for r in builder.records.all()) == sorted([a, c])
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(f"sandbox-env:{b}")
    # c is used by a running container: it stays even with no budget at all; a goes.
    holder = docker_client.containers.run(
        f"sandbox-env:{c}", ["sleep", "60"], detach=True, remove=True
    )
    try:
        assert collect(builder.records, 0) == [a]
    finally:
        holder.kill()
    assert docker_client.images.get(f"sandbox-env:{c}")
    assert [r.environment for r in builder.records.all()] == [c]


def test_the_config_is_validated_like_a_policy() -> None:
    with pytest.raises(PolicyError) as refused:
        parse_environments_config(
            "image_aliases: {'ubuntu:24.04': sandbox-base}\ndisk_budget: 5\n", source="envs.yaml"
        )
    assert "envs.yaml" in str(refused.value) and "disk_budget" in str(refused.value)
    with pytest.raises(PolicyError, match="not an image reference"):
        parse_environments_config("image_aliases: {'Not An Image': x}\n", source="envs.yaml")
    config = parse_environments_config(
        "image_aliases: {'ubuntu': sandbox-base}\ndisk_budget_mb: 1024\n", source="envs.yaml"
    )
    assert config.alias("docker.io/library/ubuntu:latest") == "sandbox-base"


def test_a_request_above_the_base_is_lowered_with_notes() -> None:
    policy, notes = derive_policy(
        POLICIES["default"],
        ResourceRequest(cpus=8, memory_mb=8192, storage_mb=10, network_allow=("pypi.org",)),
        environment="0123456789ab",
    )
    base = POLICIES["default"]
    assert policy.resources.cpus == base.resources.cpus
    assert policy.resources.memory_mb == base.resources.memory_mb
    assert policy.filesystem.workspace.size_mb == 10  # a lower request is kept
    assert policy.network.mode == "none"
    assert notes == [
        f"cpus 8 was lowered to the base policy's {base.resources.cpus:g}",
        f"memory_mb 8192 was lowered to the base policy's {base.resources.memory_mb}",
        "network access to pypi.org was dropped: base policy 'default' allows no network",
    ]
    # Hardening is the base's: only the request's keys and the pool's warm count differ.
    same = policy.model_dump(exclude={"name", "filesystem", "pool"})
    assert same == base.model_dump(exclude={"name", "filesystem", "pool"})
    assert policy.user == base.user and policy.filesystem.read_only_root


def test_root_needs_gvisor() -> None:
    with pytest.raises(InvalidRequestError, match="never under runc"):
        derive_policy(POLICIES["default"], None, environment="0123456789ab", root=True)
    if not runsc_registered():
        pytest.skip("this engine has no runsc runtime (make setup registers it)")
    policy, notes = derive_policy(POLICIES["gvisor"], None, environment="0123456789ab", root=True)
    assert policy.runtime == "runsc" and notes == [ROOT_NOTE]


def test_root_is_refused_on_a_host_without_runsc() -> None:
    with pytest.raises(InvalidRequestError, match="no runsc runtime"):
        check_root(POLICIES["gvisor"], runsc=lambda: False)


# ------------------------------------------------------------------------------ the evaluator


ENV_TASK_YAML = """\
instruction: |
  /opt/task/base holds a number. Write that number plus one into answer.txt.
environment:
  dockerfile: environment/Dockerfile
  cpus: 8
  memory_mb: 256
agent:
  timeout_s: 60
  max_steps: 5
tests:
  command: 'test "$(agent-run cat answer.txt)" = "$(( $(cat /opt/task/base) + 1 ))"'
  timeout_s: 20
"""


def env_task(root: Path) -> Path:
    folder = root / "plus-one"
    (folder / "environment").mkdir(parents=True)
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM sandbox-python\nRUN mkdir -p /opt/task && echo {secrets.randbelow(1000)} "
        "> /opt/task/base\n"
    )
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text(
        "#!/bin/bash\necho $(( $(cat /opt/task/base) + 1 )) > answer.txt\n"
    )
    (folder / "tests").mkdir()
    (folder / "tests" / "check.txt").write_text("the check is the command\n")
    (folder / "task.yaml").write_text(ENV_TASK_YAML)
    return folder


async def test_eval_runs_a_task_in_its_own_environment(
    tmp_path: Path, platform: Platform, docker_client: docker.DockerClient
) -> None:
    task = load_task(env_task(tmp_path))
    assert task.environment is not None and task.environment.resources.cpus == 8
    runs = {}
    for agent in (OracleAgent(), NullAgent()):
        summary = await run_eval(
            [task],
            agent,
            sessions=platform.sessions,
            policies=platform.policies,
            out=tmp_path / agent.name,
            progress=False,
            available_images=platform.images,
        )
        runs[agent.name] = summary.records[0]
    oracle, null = runs["oracle"], runs["null"]
    assert oracle["outcome"] == "passed", oracle
    assert null["outcome"] == "failed", null
    # Built before the first trial, found cached for the second; the request was lowered.
    assert oracle["environment"]["cached"] is False and null["environment"]["cached"] is True
    assert oracle["environment"]["id"] == null["environment"]["id"]
    assert "cpus 8 was lowered to the base policy's 1" in oracle["environment"]["notes"]
    assert Path(oracle["environment"]["build_log"]).read_text().count("Step ") >= 2
    (built,) = build_report(tmp_path / "oracle")["environments"]
    assert built["id"] == oracle["environment"]["id"] and built["tasks"] == ["plus-one"]
    assert built["build_seconds"] > 0 and built["build_log"] == oracle["environment"]["build_log"]
    docker_client.images.remove(oracle["environment"]["image"], force=True)


def test_a_workdir_over_the_judges_files_stays_read_only(
    builder: EnvironmentBuilder, tmp_path: Path
) -> None:
    """A task cannot get an agent-writable tmpfs over /judge by naming it its WORKDIR."""
    spec = task(tmp_path, f"FROM python:3.13-slim\nWORKDIR /judge/{secrets.token_hex(3)}\n")
    record = builder.build(spec, tenant=TENANT).record
    assert record.seed is None
    assert any("stays read-only" in note and "/judge" in note for note in record.notes)
    policy, _ = derive_policy(
        POLICIES["default"], None, environment=record.environment, seed=record.seed
    )
    assert policy.filesystem.extra_tmpfs == ()
    app = builder.build(
        task(tmp_path, "FROM python:3.13-slim\nWORKDIR /srv/app\n"), tenant=TENANT
    ).record
    assert app.seed == "/srv/app"
    policy, _ = derive_policy(POLICIES["default"], None, environment=app.environment, seed=app.seed)
    assert [t.path for t in policy.filesystem.extra_tmpfs] == ["/srv/app"]


@pytest.mark.parametrize(("runtime", "gvisor"), [("gvisor", True), ("engine", False)])
def test_build_runtime_chooses_the_kernel_a_step_runs_on(
    tmp_path: Path, docker_client: docker.DockerClient, runtime: str, gvisor: bool
) -> None:
    """build_runtime: gvisor (the default) runs every step on gVisor's kernel; engine on the
    engine's default runtime as a stock engine has it (runc: the host's kernel)."""
    config = EnvironmentsConfig(image_aliases=ALIASES, build_runtime=runtime)  # type: ignore[arg-type]
    builder = EnvironmentBuilder(tmp_path / "store", config)
    spec = task(
        tmp_path,
        f"FROM python:3.13-slim\nRUN echo {secrets.token_hex(4)}; cat /proc/version > /kernel\n",
    )
    record = builder.build(spec, tenant=TENANT).record
    try:
        kernel = docker_client.containers.run(record.image, ["cat", "/kernel"], remove=True)
    finally:
        docker_client.images.remove(record.image, force=True)
    host = Path("/proc/version").read_bytes()
    assert (kernel != host) is gvisor, (kernel, host)
