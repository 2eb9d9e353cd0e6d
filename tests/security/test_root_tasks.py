"""Harbor tasks that need root, judged for real under gVisor (``runsc-root``).

A task of Harbor's ordinary shape whose ``tests/test.sh`` writes a fresh input into
``/app/logs`` (a directory of the image, root's) fails as the judge uid and passes its
oracle with ``[verifier] user = "root"``, as in Harbor; a null agent fails it. A root
agent (``[agent] user = "root"``) writes ``/etc`` and is judged in a fresh root
session given its ``/app``. A root agent that plants a ``python3`` on the ``PATH``,
a ``sitecustomize``, a reward file and then kills every process of its container
(its runner included) is judged ``failed``, reward 0: not passed, not an infra error;
so is one that replaces ``tar`` so that the hand-over's archive carries a ``python3``
for the verifier's ``/usr/local/bin``: it is unpacked as the sandbox uid, which cannot
write there, and the verifier keeps the image's.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from sandbox.evals import NullAgent, OracleAgent
from sandbox.evals.formats import load_tasks
from sandbox.service.platform import Platform
from tests.integration.eval_runs import by_task, run_tasks

pytestmark = pytest.mark.docker

DOCKERFILE = "FROM sandbox-python\nWORKDIR /app\nRUN mkdir -p /app/logs && chmod 755 /app/logs\n"
# Writes the day's log, as a verifier of this shape does, then runs the agent's script.
LOG_TEST = """#!/bin/bash
printf 'ok\\nERROR disk\\nok\\nERROR net\\n' > /app/logs/app.log || exit 1
got=$(python3 /app/summarize.py /app/logs/app.log)
[ "$got" = "2" ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
LOG_SOLVE = """#!/bin/bash
cat > /app/summarize.py <<'PY'
import sys
print(sum(1 for line in open(sys.argv[1]) if line.startswith("ERROR")))
PY
"""
ROOT_AGENT_TEST = """#!/bin/bash
[ "$(cat /app/uid.txt)" = "0" ] && [ "$(cat /app/motd.txt)" = "patched" ] \\
  && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
ROOT_AGENT_SOLVE = """#!/bin/bash
set -e
echo patched > /etc/motd
id -u > /app/uid.txt
cp /etc/motd /app/motd.txt
"""
# Everything a root agent could try on the judge if it were judged where it worked.
STEER_SOLVE = """#!/bin/bash
printf '#!/bin/sh\\necho 2\\n' > /usr/local/bin/python3 && chmod 755 /usr/local/bin/python3
echo 'open("/logs/verifier/reward.txt", "w").write("1")' \\
  > /usr/lib/python3/dist-packages/sitecustomize.py
mkdir -p /logs/verifier /judge/logs/verifier
echo 1 > /logs/verifier/reward.txt; echo 1 > /judge/logs/verifier/reward.txt
kill -9 -1
"""
# The hand-over's archive is made in the agent's container: a root agent decides what
# comes out (here a python3 that prints the expected answer, outside the work dirs).
FORGED_ARCHIVE_SOLVE = """#!/bin/bash
set -e
mkdir -p /tmp/forged/usr/local/bin
printf '#!/bin/sh\\necho 2\\n' > /tmp/forged/usr/local/bin/python3
chmod 755 /tmp/forged/usr/local/bin/python3
printf '#!/bin/sh\\nexec /usr/bin/tar -cf - -C /tmp/forged usr\\n' > /usr/local/bin/tar
chmod 755 /usr/local/bin/tar
"""


def harbor_task(root: Path, name: str, *, test: str, solve: str, extra: str = "") -> Path:
    task = root / name
    for folder in ("environment", "tests", "solution"):
        (task / folder).mkdir(parents=True)
    (task / "task.toml").write_text(
        'schema_version = "1.4"\n\n[verifier]\ntimeout_sec = 120.0\n'
        f"{extra}\n[agent]\ntimeout_sec = 120.0\n"
        + ('user = "root"\n' if name.startswith("root-") else "")
        + '\n[environment]\nnetwork_mode = "no-network"\n'
    )
    (task / "instruction.md").write_text(f"{name}: see the tests.\n")
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (task / "tests" / "test.sh").write_text(test)
    (task / "solution" / "solve.sh").write_text(solve)
    return task


@pytest.fixture(scope="module", autouse=True)
def _needs_runsc_root() -> None:
    if "runsc-root" not in docker.from_env().info().get("Runtimes", {}):
        pytest.skip("this engine has no runsc-root runtime (make setup registers it)")


async def test_root_tests_and_root_agents_pass_their_oracle_and_fail_a_null_agent(
    platform: Platform, tmp_path: Path
) -> None:
    tasks_dir = tmp_path / "tasks"
    harbor_task(tasks_dir, "logs-as-judge", test=LOG_TEST, solve=LOG_SOLVE)
    harbor_task(tasks_dir, "logs-as-root", test=LOG_TEST, solve=LOG_SOLVE, extra='user = "root"')
    harbor_task(tasks_dir, "root-agent", test=ROOT_AGENT_TEST, solve=ROOT_AGENT_SOLVE)
    tasks = load_tasks(tasks_dir)
    by_id = {task.id: task for task in tasks}
    assert by_id["logs-as-root"].verifier_environment is not None
    assert by_id["logs-as-root"].verifier_environment.root
    assert by_id["logs-as-root"].environment is not None
    assert not by_id["logs-as-root"].environment.root  # the agent stays the sandbox uid
    assert by_id["root-agent"].environment is not None and by_id["root-agent"].environment.root

    oracle = by_task(await run_tasks(platform, tasks, OracleAgent(), tmp_path / "oracle"))
    null = by_task(await run_tasks(platform, tasks, NullAgent(), tmp_path / "null"))
    # As the judge uid, the verifier cannot write the image's /app/logs: what the issue saw.
    judge = oracle["logs-as-judge"]
    assert judge["outcome"] == "failed", judge
    assert "Permission denied" in judge["tests"]["stderr_tail"], judge["tests"]
    for name in ("logs-as-root", "root-agent"):
        passed = oracle[name]
        assert passed["outcome"] == "passed", (name, passed.get("error"), passed["tests"])
        assert passed["tests"]["reward"] == 1.0
        failed = null[name]
        assert failed["outcome"] == "failed", (name, failed.get("error"), failed["tests"])
        assert failed["tests"]["reward"] == 0.0


async def test_a_root_agent_cannot_steer_its_judge_nor_turn_its_failure_into_an_infra_error(
    platform: Platform, tmp_path: Path
) -> None:
    task_dir = harbor_task(tmp_path / "tasks", "root-steer", test=LOG_TEST, solve=STEER_SOLVE)
    (task,) = load_tasks(task_dir)
    record = by_task(await run_tasks(platform, [task], OracleAgent(), tmp_path / "run"))[task.id]
    assert record["outcome"] == "failed", record
    assert record["tests"]["reward"] == 0.0, record["tests"]
    assert "container ended" in record.get("agent_error", ""), record
    notes = record["verifier_environment"]["notes"]
    assert any("were not handed to the verifier" in note for note in notes), notes


async def test_a_root_agent_forging_the_hand_over_archive_lands_nothing_outside_the_work(
    platform: Platform, tmp_path: Path
) -> None:
    task_dir = harbor_task(
        tmp_path / "tasks", "root-forge", test=LOG_TEST, solve=FORGED_ARCHIVE_SOLVE
    )
    (task,) = load_tasks(task_dir)
    record = by_task(await run_tasks(platform, [task], OracleAgent(), tmp_path / "run"))[task.id]
    assert record["outcome"] == "failed", record
    # Its work dir emptied and nothing unpacked: test.sh stops before writing a reward.
    assert record["tests"]["reward"] in (None, 0.0), record["tests"]
    notes = record["verifier_environment"]["notes"]
    assert any("were not handed to the verifier" in note for note in notes), notes
