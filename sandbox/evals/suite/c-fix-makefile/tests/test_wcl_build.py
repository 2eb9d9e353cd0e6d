import hashlib
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
SOURCES = {
    "src/main.c": "d9c76a0ccfbb9e25911fa123b1ca6b91cd6272e859c9a37aafecd0906ec5107b",
    "src/counts.c": "b46dedecf489fc034fad0d763357374e0aca439e37a0351a70dbcb370ea87e49",
    "src/report.c": "b473a6ead6de48fec51cb6bb8952b6594fb8a236f58df73e0d07bb7e1f97060e",
    "include/counts.h": "86a863b2265f2abe7a3d685b8f27447ab216b5a8debdf962c40e89cd6c35b151",
    "include/version.h": "cdab674dbb7812ed140c6ed93b97257a98b4618274b5f7f421b0d7b81bdbc277",
}


def make(project, *args):
    return subprocess.run(["make", *args], cwd=project, capture_output=True, text=True, timeout=120)


def fresh_copy(tmp_path):
    project = tmp_path / "wcl"
    shutil.copytree(WORK, project, symlinks=True)
    for built in [*project.rglob("*.o"), project / "wcl"]:
        built.unlink(missing_ok=True)
    return project


@pytest.fixture
def built(tmp_path):
    project = fresh_copy(tmp_path)
    result = make(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (project / "wcl").is_file()
    return project


def wc(data):
    words, in_word = 0, False
    for byte in data:
        if byte in b" \t\n\v\f\r":
            in_word = False
        elif not in_word:
            in_word, words = True, words + 1
    return data.count(b"\n"), words, len(data)


def line(counts, name=None):
    text = "{:7d} {:7d} {:7d}".format(*counts)
    return text + (f" {name}" if name is not None else "") + "\n"


def test_sources_are_unchanged():
    for path, digest in SOURCES.items():
        assert hashlib.sha256((WORK / path).read_bytes()).hexdigest() == digest, path


def test_counts_match_wc(built, tmp_path):
    rng = random.Random(7)
    alphabet = b"ab \n\t\r\x0b\x0c\xff\x00x"
    files = []
    for i in range(4):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 3000)))
        path = tmp_path / f"in{i}.bin"
        path.write_bytes(data)
        files.append((path, data))
        out = subprocess.run(
            [str(built / "wcl")], input=data, capture_output=True, timeout=10
        ).stdout.decode()
        assert out == line(wc(data))
    out = subprocess.run(
        [str(built / "wcl"), *(str(p) for p, _ in files)], capture_output=True, text=True
    ).stdout
    totals = [0, 0, 0]
    expected = ""
    for path, data in files:
        counts = wc(data)
        expected += line(counts, str(path))
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
    assert out == expected + line(tuple(totals), "total")


def test_version_and_missing_file(built):
    out = subprocess.run([str(built / "wcl"), "--version"], capture_output=True, text=True)
    assert out.stdout == "wcl 1.4.2\n"
    out = subprocess.run([str(built / "wcl"), "no-such-file"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "no-such-file" in out.stderr


def test_up_to_date_build_does_nothing(built):
    assert make(built, "-q").returncode == 0
    before = {p: p.stat().st_mtime_ns for p in built.rglob("*.o")}
    assert make(built).returncode == 0
    assert {p: p.stat().st_mtime_ns for p in built.rglob("*.o")} == before


def age_everything(project):
    now = time.time()
    for path in project.rglob("*"):
        if path.is_file():
            stamp = now - 200 if path.suffix in (".c", ".h") else now - 100
            os.utime(path, (stamp, stamp))
    return now


@pytest.mark.parametrize(
    ("touched", "rebuilt"),
    [
        ("src/report.c", {"report"}),
        ("include/version.h", {"main"}),
        ("include/counts.h", {"main", "counts", "report"}),
    ],
)
def test_rebuilds_exactly_what_depends_on_a_change(built, touched, rebuilt):
    now = age_everything(built)
    os.utime(built / touched, (now - 50, now - 50))
    assert make(built, "-q").returncode != 0
    result = make(built)
    assert result.returncode == 0, result.stderr
    objects = {p.stem: p.stat().st_mtime for p in built.rglob("*.o")}
    assert {"main", "counts", "report"} <= set(objects)
    assert {name for name, mtime in objects.items() if mtime > now - 90} == rebuilt
    assert (built / "wcl").stat().st_mtime > now - 90
    assert make(built, "-q").returncode == 0


def test_parallel_build_from_scratch(tmp_path):
    project = fresh_copy(tmp_path)
    result = make(project, "-j4")
    assert result.returncode == 0, result.stderr
    out = subprocess.run([str(project / "wcl")], input=b"a b\n", capture_output=True)
    assert out.stdout.decode() == line((1, 2, 4))


def test_clean_removes_objects_and_program(built):
    result = make(built, "clean")
    assert result.returncode == 0, result.stderr
    assert not (built / "wcl").exists()
    assert list(built.rglob("*.o")) == []
    assert make(built).returncode == 0
    assert (built / "wcl").is_file()
