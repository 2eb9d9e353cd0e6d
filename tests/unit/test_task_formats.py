"""Loading Harbor and Terminal-Bench tasks: the fields mapped, every refusal named, rewards judged.

Tasks are written into tmp directories (and, where the harbor venv is installed,
made by the real ``harbor init``); nothing here needs Docker.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sandbox.evals.formats import load_task, load_tasks, task_format
from sandbox.evals.formats.layout import translate_paths
from sandbox.evals.reward_files import MAX_REWARD_BYTES, judge_rewards
from sandbox.evals.tasks import TaskError
from tests.conftest import REPO, harbor_bin

FORMATS = REPO / "tests" / "data" / "formats"


def harbor_task(tmp_path: Path, toml_extra: str = "", *, name: str = "t") -> Path:
    """fix-greeting with ``toml_extra`` appended to its task.toml."""
    target = tmp_path / name
    shutil.copytree(FORMATS / "harbor" / "fix-greeting", target)
    with (target / "task.toml").open("a") as out:
        out.write(toml_extra)
    return target


def refusal(path: Path) -> TaskError:
    with pytest.raises(TaskError) as caught:
        load_task(path)
    return caught.value


def test_formats_are_told_apart() -> None:
    assert task_format(FORMATS / "harbor" / "fix-greeting") == "harbor"
    assert task_format(FORMATS / "terminal-bench" / "tb-sum-numbers") == "terminal-bench"
    assert task_format(REPO / "tests" / "data" / "tasks" / "fix-add") == "sandbox"
    assert [t.id for t in load_tasks(FORMATS / "harbor")] == ["count-words", "fix-greeting"]


def test_harbor_fields_are_mapped() -> None:
    task = load_task(FORMATS / "harbor" / "fix-greeting")
    assert task.judged_by_reward and task.format == "harbor"
    assert task.config.agent.timeout_s == 120 and task.config.tests.timeout_s == 60
    assert (task.config.category, task.config.difficulty, task.config.tags) == (
        "bugfix",
        "easy",
        ["python"],
    )
    assert task.files == {
        "greet.py": (FORMATS / "harbor/fix-greeting/environment/app/greet.py").read_bytes()
    }
    env = task.environment
    assert env is not None and env.image == "sandbox-python" and env.dockerfile is None
    assert (env.resources.cpus, env.resources.memory_mb, env.build_timeout_s) == (1, 512, 300)
    assert "export GREETING_NAME=Ada;" in task.config.tests.command
    assert "/workspace/greet.py" in task.config.instruction
    test_sh = task.tests["test.sh"].decode()
    assert (
        "/judge/tests/test_outputs.py" in test_sh and "/judge/logs/verifier/reward.txt" in test_sh
    )


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ("\n[environment.extra]\nx = 1\n", "environment.extra", "unknown key 'extra'"),
        ("\ncpu = 2\n", "environment.cpu", "did you mean 'cpus'"),
        ("\ngpus = 1\n", "environment.gpus", "no GPUs"),
        ('\nos = "windows"\n', "environment.os", "linux"),
        ('\n[environment.env]\nTOKEN = "${HOST_TOKEN}"\n', "environment.env.TOKEN", "host"),
        ('\n[[environment.mcp_servers]]\nname = "x"\n', "environment.mcp_servers", "MCP"),
        ('\n[environment.env]\n"A;rm" = "x"\n', "environment.env.A;rm", "variable name"),
        ('\nmemory = "lots"\n', "environment.memory", "size"),
        ("\nstorage_mb = -5\n", "environment.storage_mb", "greater than 0"),
    ],
)
def test_environment_keys_are_refused_by_name(
    tmp_path: Path, extra: str, key: str, words: str
) -> None:
    error = refusal(harbor_task(tmp_path, extra))
    assert error.key == key, error
    assert words in str(error)
    assert error.source.endswith("task.toml")


@pytest.mark.parametrize(
    ("replace", "key", "words"),
    [
        ('schema_version = "1.4"', "schema_version", "2.0"),
        ("timeout_sec = 120.0", "agent.user", "sandbox uid"),
        ('environment_mode = "shared"', "verifier.user", "judge uid"),
        ("[task]", "steps", "multi-step"),
    ],
)
def test_unsupported_sections_are_refused_by_name(
    tmp_path: Path, replace: str, key: str, words: str
) -> None:
    target = harbor_task(tmp_path)
    toml = (target / "task.toml").read_text()
    injected = {
        "schema_version": 'schema_version = "2.0"',
        "agent.user": 'timeout_sec = 120.0\nuser = "ubuntu"',
        "verifier.user": 'environment_mode = "shared"\nuser = "ubuntu"',
        "steps": '[[steps]]\nname = "one"\n\n[task]',
    }[key]
    (target / "task.toml").write_text(toml.replace(replace, injected, 1))
    error = refusal(target)
    assert error.key == key, error
    assert words in str(error)


def test_other_refusals_name_the_file(tmp_path: Path) -> None:
    target = harbor_task(tmp_path, name="compose")
    (target / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    assert "docker-compose" in str(refusal(target))
    target = harbor_task(tmp_path, name="extra-solution")
    (target / "solution" / "patch.diff").write_text("x")
    assert "patch.diff" in str(refusal(target))
    target = harbor_task(tmp_path, name="trajectory")
    (target / "trajectory.json").write_text("{}")
    assert "trajectory.json" in str(refusal(target))
    target = harbor_task(tmp_path, name="no-test-sh")
    (target / "tests" / "test.sh").unlink()
    assert "test.sh" in str(refusal(target))
    target = harbor_task(tmp_path, name="dup")
    (target / "task.toml").write_text((target / "task.toml").read_text() + "\n[agent]\n")
    assert "invalid TOML" in str(refusal(target))


def test_network_and_legacy_sizes(tmp_path: Path) -> None:
    target = harbor_task(tmp_path)
    toml = (target / "task.toml").read_text()
    toml = toml.replace(
        'network_mode = "no-network"',
        'network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\nmemory = "2G"',
    ).replace("memory_mb = 512\n", "")
    (target / "task.toml").write_text(toml)
    env = load_task(target).environment
    assert env is not None
    assert env.resources.network_allow == ("pypi.org",) and env.resources.memory_mb == 2048
    (target / "task.toml").write_text(
        toml.replace('"allowlist"', '"public"').replace('allowed_hosts = ["pypi.org"]\n', "")
    )
    task = load_task(target)
    assert task.environment is not None and task.environment.resources.network_allow == ()
    assert any("public" in note for note in task.notes)


def test_a_dockerfile_that_builds_needs_its_own_environment(tmp_path: Path) -> None:
    target = harbor_task(tmp_path)
    dockerfile = target / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN apt-get install -y jq\n")
    task = load_task(target)
    assert task.needs_own_environment is not None and "Dockerfile" in task.needs_own_environment
    assert task.environment is not None and task.environment.context == dockerfile.parent
    dockerfile.write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    assert "FROM ubuntu:24.04" in " ".join(load_task(target).notes)


def test_harbor_init_tasks_load_with_a_separate_verifier_of_their_own(tmp_path: Path) -> None:
    """What ``harbor init -t`` writes loads in both verifier modes; ``separate`` builds
    its ``tests/Dockerfile`` as an environment of its own, in whose working directory
    (/app) the tests run, given what ``artifacts`` names (nothing, as Harbor's template)."""
    for mode in ("shared", "separate"):
        subprocess.run(
            [
                str(harbor_bin()),
                "init",
                f"demo/{mode}",
                "-t",
                "--verifier-mode",
                mode,
                "--include-standard-metadata",
                "-o",
                str(tmp_path),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        (tmp_path / mode / "instruction.md").write_text("Print hello.\n")
    shared = load_task(tmp_path / "shared")
    assert shared.format == "harbor" and shared.config.category == "software_engineering"
    assert shared.needs_own_environment is not None  # FROM ubuntu:24.04: needs building
    assert shared.verifier_environment is None
    separate = load_task(tmp_path / "separate")
    verifier = separate.verifier_environment
    assert verifier is not None and verifier.dockerfile == tmp_path / "separate/tests/Dockerfile"
    assert verifier.context == tmp_path / "separate/tests" and verifier.base_policy == "harbor"
    assert separate.artifacts == ()
    assert separate.config.tests.command is not None
    assert separate.config.tests.command.startswith("cd /app && ")
    # Given the working directory as an artifact, it is handed to the verifier's /app.
    config = tmp_path / "separate" / "task.toml"
    config.write_text(config.read_text().replace("artifacts = []", 'artifacts = ["/app"]'))
    assert load_task(tmp_path / "separate").artifacts == ("/app",)
    (tmp_path / "separate" / "tests" / "Dockerfile").write_text("FROM python:3.12-slim\n")
    error = refusal(tmp_path / "separate")
    assert error.key == "artifacts" and "WORKDIR /app" in str(error)


def tb_task(tmp_path: Path) -> Path:
    target = tmp_path / "tb"
    shutil.copytree(FORMATS / "terminal-bench" / "tb-sum-numbers", target)
    return target


def test_terminal_bench_is_mapped_like_harbors_mapper(tmp_path: Path) -> None:
    target = tb_task(tmp_path)
    (target / "Dockerfile").write_text("FROM sandbox-python\nWORKDIR /app\nCOPY . /app/\n")
    task = load_task(target)
    assert task.format == "terminal-bench"
    assert (task.config.agent.timeout_s, task.config.tests.timeout_s) == (120, 60)
    # COPY . takes the context without the task's own files.
    assert set(task.files) == {"numbers.txt", "Dockerfile"}
    test_sh = task.tests["test.sh"].decode()
    assert "/judge/tests/test_outputs.py" in test_sh and "_EXIT_CODE" in test_sh
    assert task.solve_script is not None and b"/workspace/numbers.txt" in task.solve_script


def test_a_terminal_bench_image_that_is_built_leaves_the_tasks_own_files_out(
    tmp_path: Path,
) -> None:
    """Its build context is the task directory: the tests, solution and scripts are left out
    (``COPY .`` would give them to the agent), unless the Dockerfile copies them by name."""
    source = FORMATS / "terminal-bench" / "tb-count-level"
    env = load_task(source).environment
    assert env is not None and env.dockerfile == source / "Dockerfile"
    assert set(env.exclude) == {
        "tests",
        "solution.sh",
        "run-tests.sh",
        "task.yaml",
        "docker-compose.yaml",
        "docker-compose.yml",
    }
    target = tmp_path / "tb"
    shutil.copytree(source, target)
    with (target / "Dockerfile").open("a") as dockerfile:
        dockerfile.write("COPY tests /opt/tests/\n")
    env = load_task(target).environment
    assert env is not None and "tests" not in env.exclude and "solution.sh" in env.exclude


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda t: (t / "task.yaml").write_text((t / "task.yaml").read_text() + "parser: x\n"),
            "unknown key 'parser'",
        ),
        (lambda t: (t / "task.yaml").write_text("descriptions: []\n"), "descriptions"),
        (lambda t: (t / "solution.yaml").write_text("[]\n"), "solution.yaml"),
        (lambda t: (t / "run-tests.sh").unlink(), "run-tests.sh"),
        (
            lambda t: (t / "docker-compose.yaml").write_text(
                "services:\n  client:\n    build: .\n  db:\n    image: postgres\n"
            ),
            "2 services",
        ),
        (
            lambda t: (t / "docker-compose.yaml").write_text(
                "services:\n  client:\n    volumes: ['/etc:/etc']\n"
            ),
            "log mounts",
        ),
        (
            lambda t: (t / "docker-compose.yaml").write_text(
                "services:\n  client:\n    privileged: true\n"
            ),
            "privileged",
        ),
    ],
)
def test_terminal_bench_refusals(tmp_path: Path, change, words: str) -> None:  # type: ignore[no-untyped-def]
    target = tb_task(tmp_path)
    change(target)
    assert words in str(refusal(target))


def test_paths_are_translated_only_as_whole_paths() -> None:
    mapping = {"/app": "/workspace", "/tests": "/judge/tests"}
    text = b"cd /app; cat /app/x /apps/y x/app /tests/t.py /tests_old 'in /app'"
    assert translate_paths(text, mapping) == (
        b"cd /workspace; cat /workspace/x /apps/y x/app /judge/tests/t.py /tests_old "
        b"'in /workspace'"
    )
    assert translate_paths(b"\xff/app", mapping) == b"\xff/app"


def test_reward_files_become_verdicts() -> None:
    def verdict(files: dict[str, bytes], errors: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        return judge_rewards(files, errors or {})

    assert verdict({"reward.txt": b"1\n"}).passed
    assert verdict({"reward.txt": b" 1.0 "}).reward == 1.0
    assert not verdict({"reward.txt": b"0.99"}).passed
    assert verdict({"reward.json": b'{"reward": 1, "style": 0}'}).passed
    assert verdict({"reward.json": b'{"a": 1, "b": 0}'}).reward == 0.5
    assert verdict({"reward.json": b"1", "reward.txt": b"0"}).passed  # json wins, as in Harbor
    for bad in (b"[1]", b'{"reward": "1"}', b'{"reward": true}', b"{}", b"NaN", b"nope"):
        assert not verdict({"reward.json": bad}).passed, bad
    assert "empty" in str(verdict({"reward.txt": b"  \n"}).reason)
    assert "bytes" in str(verdict({"reward.txt": b"1" + b" " * MAX_REWARD_BYTES}).reason)
    assert "symlink" in str(verdict({}, {"reward.json": "symlink refused"}).reason)
    assert "wrote no" in str(
        verdict({}, {"reward.json": "not found", "reward.txt": "not found"}).reason
    )
