import os
import shutil
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
HERE = Path(__file__).resolve().parent


def run(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = tmp_path_factory.mktemp("rb") / "project"
    shutil.copytree(WORK, project, symlinks=True)
    for built in [*project.rglob("*.o"), *project.rglob("*.a"), project / "tests/test_ringbuf"]:
        built.unlink(missing_ok=True)
    return project


def test_header_is_unchanged():
    assert (WORK / "include" / "ringbuf.h").read_text() == (HERE / "original_ringbuf.h").read_text()


def test_the_original_unit_tests_pass_with_make(project):
    shutil.copy(HERE / "visible_test_ringbuf.c", project / "tests" / "test_ringbuf.c")
    result = run(["make", "test"], project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all tests passed" in result.stdout


@pytest.fixture(scope="module")
def checker(project, tmp_path_factory):
    binary = tmp_path_factory.mktemp("bin") / "model_check"
    result = run(
        [
            "gcc",
            "-std=c11",
            "-g",
            "-O1",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            f"-I{project / 'include'}",
            str(HERE / "model_check.c"),
            str(project / "src" / "ringbuf.c"),
            "-o",
            str(binary),
        ],
        project,
    )
    assert result.returncode == 0, result.stderr
    return binary


@pytest.mark.parametrize("seed", [1, 2, 3, 42])
def test_random_calls_match_a_model_under_sanitizers(checker, seed):
    result = run([str(checker), str(seed)], checker.parent)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert result.stdout.strip() == "model ok"
