import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
HERE = Path(__file__).resolve().parent


def go(*args, cwd):
    return subprocess.run(["go", *args], cwd=cwd, capture_output=True, text=True, timeout=170)


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    """The workspace module with the agent's test files swapped for the hidden ones."""
    copy = tmp_path_factory.mktemp("go") / "taskq"
    shutil.copytree(WORK, copy, symlinks=True)
    for test_file in copy.rglob("*_test.go"):
        test_file.unlink()
    for hidden in (HERE / "gotests").rglob("*_test.go"):
        target = copy / hidden.relative_to(HERE / "gotests")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(hidden, target)
    return copy


def test_vet_and_hidden_go_tests(module):
    result = go("vet", "./...", cwd=module)
    assert result.returncode == 0, result.stdout + result.stderr
    result = go("test", "-count=1", "./...", cwd=module)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    for package in ("taskq/task", "taskq/store", "taskq/query"):
        assert f"ok  \t{package}" in result.stdout, result.stdout


def test_the_workspace_tests_pass_too(tmp_path):
    copy = tmp_path / "own"
    shutil.copytree(WORK, copy, symlinks=True)
    result = go("test", "-count=1", "./...", cwd=copy)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


@pytest.fixture(scope="module")
def taskq(module):
    result = go("build", "-o", str(module / "taskq-bin"), "./cmd/taskq", cwd=module)
    assert result.returncode == 0, result.stderr
    return module / "taskq-bin"


def cli(taskq, db, *args):
    return subprocess.run(
        [str(taskq), "-db", str(db), *args], capture_output=True, text=True, timeout=30
    )


def test_command_line(taskq, tmp_path):
    db = tmp_path / "tasks.json"
    assert cli(taskq, db, "add", "-tag", "home", "water", "plants").stdout == "added 1\n"
    assert cli(taskq, db, "add", "-priority", "5", "-tag", "home", "pay", "rent").stdout == (
        "added 2\n"
    )
    assert cli(taskq, db, "add", "-priority", "1", "someday").stdout == "added 3\n"
    bad = cli(taskq, db, "add", "-priority", "9", "nope")
    assert bad.returncode != 0 and bad.stdout == ""
    assert cli(taskq, db, "done", "2").stdout == "done 2\n"
    assert cli(taskq, db, "list").stdout == (
        "  2 [x] P5 pay rent #home\n  1 [ ] P3 water plants #home\n  3 [ ] P1 someday\n"
    )
    assert cli(taskq, db, "list", "!done", "priority>=2").stdout == (
        "  1 [ ] P3 water plants #home\n"
    )
    saved = json.loads(db.read_text())
    assert sorted(t["priority"] for t in saved["tasks"]) == [1, 3, 5]
    assert cli(taskq, db, "list", "priority~3").returncode != 0


def test_command_line_reads_old_files(taskq, tmp_path):
    db = tmp_path / "old.json"
    db.write_text('{"next_id": 2, "tasks": [{"id": 1, "title": "legacy", "done": false}]}')
    assert cli(taskq, db, "list").stdout == "  1 [ ] P3 legacy\n"
