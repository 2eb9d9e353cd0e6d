"""The Harbor provider end to end: the real ``harbor`` CLI, its own ``oracle`` and ``nop``
agents, Harbor-format tasks (``tests/data/harbor``), our service on loopback.

``harbor`` needs Python >= 3.12, so it runs as a subprocess from the venv ``make setup``
makes (``.venv-harbor``; ``$SANDBOX_HARBOR_VENV`` points elsewhere), with this checkout first on
its path. Each trial must run in a session of our service under the ``harbor`` policy,
and every session must be closed when Harbor is done.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, Service, harbor_bin

pytestmark = pytest.mark.docker

TASKS = REPO / "tests" / "data" / "harbor"
CONFIGS = {p.parent.name: tomllib.loads(p.read_text()) for p in TASKS.glob("*/task.toml")}
TASK_NAMES = sorted(CONFIGS)
# A separate verifier runs in a second session of its own.
SESSIONS_PER_RUN = sum(
    2 if c["verifier"].get("environment_mode") == "separate" else 1 for c in CONFIGS.values()
)
IMPORT_PATH = "sandbox.integrations.harbor:SandboxEnvironment"
HARBOR_TIMEOUT_S = 600


def harbor(
    service: Service, tasks: Path, agent: str, jobs: Path
) -> subprocess.CompletedProcess[str]:
    """``harbor run`` on ``tasks`` (a task or a folder of them) with our environment."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of litellm's price list
        "COLUMNS": "250",  # the refusal messages unwrapped
    }
    command = [
        str(harbor_bin()),
        "run",
        "--path", str(tasks),
        "--agent", agent,
        "--env", IMPORT_PATH,
        "--ek", f"url={service.url}",
        "--jobs-dir", str(jobs),
        "--n-concurrent", "4",
        "--yes",
        "--quiet",
    ]  # fmt: skip
    return subprocess.run(
        command, env=env, cwd=jobs, capture_output=True, text=True, timeout=HARBOR_TIMEOUT_S
    )


def run_harbor(service: Service, tasks: Path, agent: str, jobs: Path) -> list[dict]:
    """A ``harbor run`` that must succeed; the trials' ``result.json`` documents."""
    done = harbor(service, tasks, agent, jobs)
    assert done.returncode == 0, f"harbor run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    trials = [json.loads(p.read_text()) for p in jobs.glob("*/*/result.json")]
    assert trials, f"harbor wrote no trial results:\n{done.stdout[-3000:]}"
    return trials


def _ours(policy: str) -> bool:
    """``harbor``, ``harbor-verifier``, or a policy derived from one for a task environment
    (``harbor.env-<id>``)."""
    return policy.startswith("harbor")


def harbor_sessions_since(http: httpx.Client, since: str) -> set[str]:
    """The sessions under our Harbor policies that ran commands since ``since``, by the
    service's audit log."""
    params = {"kind": "session", "since": since, "limit": 10_000}
    records = http.get("/v1/audit", params=params).json()
    return {r["detail"].split()[1] for r in records if _ours(r["policy"])}


def now() -> str:
    return datetime.now(UTC).isoformat()


def assert_all_closed(http: httpx.Client) -> None:
    assert http.get("/v1/sessions").json() == []
    busy = [g for g in http.get("/v1/pool").json()["groups"] if _ours(g["policy"])]
    assert all(g["busy"] == 0 for g in busy), busy


@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_harbor_agents_are_judged_in_our_sandboxes(
    agent: str, reward: float, service: Service, http: httpx.Client, tmp_path: Path
) -> None:
    """Harbor's oracle solves every task (reward 1), its nop agent none (reward 0), each
    trial in a sandbox of ours, and no session is left open."""
    assert len(TASK_NAMES) >= 3 and len(TASK_NAMES) < SESSIONS_PER_RUN
    since = now()
    trials = run_harbor(service, TASKS, agent, tmp_path)
    by_task = {t["task_name"].split("/")[-1]: t for t in trials}
    assert sorted(by_task) == TASK_NAMES
    for name, trial in by_task.items():
        assert trial["exception_info"] is None, (name, trial["exception_info"])
        assert trial["verifier_result"]["rewards"] == {"reward": reward}, name
    assert len(harbor_sessions_since(http, since)) == SESSIONS_PER_RUN
    assert_all_closed(http)


def _task_copy(tmp_path: Path, *, dockerfile: str | None = None, toml: str = "") -> Path:
    task = tmp_path / "tasks" / "fizzbuzz"
    shutil.copytree(TASKS / "fizzbuzz", task)
    if dockerfile is not None:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    if toml:
        config = task / "task.toml"
        config.write_text(config.read_text().replace('network_mode = "no-network"', toml))
    return task


def _only_exception(service: Service, task: Path, jobs: Path) -> str:
    (trial,) = run_harbor(service, task, "oracle", jobs)
    assert trial["verifier_result"] is None
    info = trial["exception_info"]
    assert info is not None
    return f"{info['exception_type']}: {info['exception_message']}"


def test_a_task_asking_for_public_network_is_refused(
    service: Service, http: httpx.Client, tmp_path: Path
) -> None:
    """Sandboxes have no network: a task asking for it is refused by name before any
    trial starts, and no session is opened."""
    task = _task_copy(tmp_path, toml='network_mode = "public"')
    since = now()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    done = harbor(service, task, "oracle", jobs)
    assert done.returncode != 0
    message = " ".join((done.stdout + done.stderr).split())
    assert "task 'fizzbuzz' asks for network_mode 'public'" in message, message[-3000:]
    assert "allow_offline=true" in message
    assert harbor_sessions_since(http, since) == set()
    assert_all_closed(http)


def test_an_environment_the_service_cannot_provide_is_refused(
    service: Service, http: httpx.Client, tmp_path: Path
) -> None:
    """Without per-task environments, a Dockerfile that is more than one of our images is
    refused before a sandbox is taken, naming the file and why."""
    if "/v1/environments" in http.get("/openapi.json").json()["paths"]:
        pytest.skip("this service builds task environments: the fallback is not used")
    task = _task_copy(tmp_path, dockerfile="FROM sandbox-python\nRUN touch /marker\n")
    since = now()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    message = _only_exception(service, task, jobs)
    assert "environment/Dockerfile" in message and "no per-task environments" in message
    assert "instructions beyond its FROM (RUN" in message
    assert harbor_sessions_since(http, since) == set()
    assert_all_closed(http)


def test_the_environment_does_what_harbor_asks(
    service: Service, http: httpx.Client, tmp_path: Path
) -> None:
    """exec, uploads and downloads as Harbor calls them (``harbor_probe.py``, in the
    Harbor venv): env values reach the command verbatim, exit codes and both streams come
    back, a timeout raises, every byte survives both ways, ``user="root"`` still runs as
    the sandbox uid on a read-only root, a stopped environment runs nothing; and which
    Dockerfiles map onto our images."""
    probe = Path(__file__).with_name("harbor_probe.py")
    python = harbor_bin().with_name("python")
    done = subprocess.run(
        [str(python), str(probe), service.url, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["env_echo"] == 'it\'s $HOME; `x` "y"\n2nd line'
    assert (found["uid"], found["as_root_uid"], found["cwd"]) == ("10001", "10001", "/workspace")
    assert found["exit_7"] == {"stdout": "out\n", "stderr": "err\n", "return_code": 7}
    assert found["timeout"] == "Command timed out after 1 seconds"
    assert found["uploaded_script"] == "ran\n"
    assert found["file_round_trip"] is True and found["dir_round_trip"] is True
    assert found["readonly_root"] != 0
    assert "/logs/nothing-here" in found["missing"] and "No such file" in found["missing"]
    assert found["after_stop"] == "the sandbox-platform environment is not started"
    builtin = found["builtin"]  # what runs on a service without per-task environments
    assert builtin["plain"] == ["python", ""]
    assert builtin["tagged, commented"] == ["polyglot", ""]
    assert builtin["lower-case from"] == ["python", ""]
    assert builtin["other image"] == [
        None,
        "it builds FROM 'ubuntu:24.04', not one of ['sandbox-polyglot', 'sandbox-python']",
    ]
    assert builtin["build steps"] == [None, "it has instructions beyond its FROM (RUN ...)"]
    for name in ("build argument", "empty"):
        assert builtin[name] == [None, "its first instruction is not a plain `FROM <image>`"]
    assert found["builtin_docker_image"] == [
        ["python", ""],
        [None, "docker_image 'x' is not one of ['sandbox-polyglot', 'sandbox-python']"],
    ]
    assert_all_closed(http)


def test_a_task_with_its_own_dockerfile_runs_where_environments_are_built(
    service: Service, http: httpx.Client, tmp_path: Path
) -> None:
    """On a service with per-task environments, a Dockerfile with its own build steps is
    built there and the trial runs in it: the verifier sees what the build made."""
    if "/v1/environments" not in http.get("/openapi.json").json()["paths"]:
        pytest.skip("this service has no per-task environments (POST /v1/environments)")
    task = _task_copy(
        tmp_path,
        dockerfile="FROM sandbox-python\nRUN mkdir -p /opt/data && echo 42 > /opt/data/answer\n",
    )
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        'if [ "$(cat /opt/data/answer)" = 42 ] && [ -f /workspace/fizzbuzz.py ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt\n"
        "else\n"
        "  echo 0 > /logs/verifier/reward.txt\n"
        "fi\n"
    )
    since = now()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (trial,) = run_harbor(service, task, "oracle", jobs)
    assert trial["exception_info"] is None, trial["exception_info"]
    assert trial["verifier_result"]["rewards"] == {"reward": 1.0}
    assert len(harbor_sessions_since(http, since)) == 1
    assert_all_closed(http)


def test_a_verifier_image_with_bundled_tests_runs_where_environments_are_built(
    service: Service, http: httpx.Client, tmp_path: Path
) -> None:
    """``harbor init``'s default: a separate verifier built from ``tests/Dockerfile``,
    which copies the tests into its image. Its session runs under ``harbor-verifier``
    (no tmpfs hiding the image's /tests); oracle passes, nop fails."""
    if "/v1/environments" not in http.get("/openapi.json").json()["paths"]:
        pytest.skip("this service has no per-task environments (POST /v1/environments)")
    task = tmp_path / "tasks" / "shout"
    shutil.copytree(TASKS / "shout", task)
    (task / "tests" / "Dockerfile").write_text("FROM sandbox-python\nCOPY . /tests/\n")
    for agent, reward in (("oracle", 1.0), ("nop", 0.0)):
        since = now()
        jobs = tmp_path / f"jobs-{agent}"
        jobs.mkdir()
        (trial,) = run_harbor(service, task, agent, jobs)
        assert trial["exception_info"] is None, trial["exception_info"]
        assert trial["verifier_result"]["rewards"] == {"reward": reward}
        params = {"kind": "session", "since": since, "limit": 10_000}
        policies = {
            r["policy"].split(".env-")[0] for r in http.get("/v1/audit", params=params).json()
        }
        assert policies == {"harbor", "harbor-verifier"}
    assert_all_closed(http)
