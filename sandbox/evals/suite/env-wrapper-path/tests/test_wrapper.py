import filecmp
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
ORIGINAL = Path(__file__).resolve().parent / "original" / "greport"


def make_executable(root):
    for sub in ("bin", "libexec"):
        for path in (root / sub).iterdir():
            path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def installed(tmp_path):
    """The workspace's greport copied under a path with spaces, executable as in a checkout."""
    home = tmp_path / "opt dir" / "my tools" / "greport"
    shutil.copytree(WORK / "greport", home, symlinks=True)
    make_executable(home)
    inputs = tmp_path / "input files"
    inputs.mkdir()
    (inputs / "a b.txt").write_text("alpha beta\ngamma\n")
    (inputs / "c.txt").write_text("x\n\ny z w\n")
    elsewhere = tmp_path / "somewhere else"
    elsewhere.mkdir()
    return home, inputs, elsewhere


def expected(args, cwd):
    """What the original engine prints with the original configuration and templates."""
    return subprocess.run(
        [
            "python3",
            str(ORIGINAL / "libexec" / "greport-core"),
            "--config",
            str(ORIGINAL / "etc" / "greport.conf"),
            "--templates",
            str(ORIGINAL / "share" / "templates"),
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


def run(command, args, cwd):
    return subprocess.run(
        [str(command), *args], cwd=cwd, capture_output=True, text=True, timeout=30
    )


ARGS = [
    ["--title", "Weekly text stats", "../input files/a b.txt", "../input files/c.txt"],
    ["--template", "compact", "--title", "  two  spaces ", "../input files/c.txt"],
]


@pytest.mark.parametrize("args", ARGS)
def test_direct_call_from_another_directory(installed, args):
    home, _, elsewhere = installed
    want = expected(args, elsewhere)
    assert want.count("\n") >= 2
    result = run(home / "bin" / "greport", args, elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout == want


@pytest.mark.parametrize("args", ARGS)
def test_call_through_a_symlink_elsewhere(installed, tmp_path, args):
    home, _, elsewhere = installed
    bin_dir = tmp_path / "user bin"
    bin_dir.mkdir()
    link = bin_dir / "greport"
    link.symlink_to(home / "bin" / "greport")
    relative = bin_dir / "greport-rel"
    relative.symlink_to(os.path.relpath(link, bin_dir))
    for command in (link, relative):
        result = run(command, args, elsewhere)
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected(args, elsewhere)


def test_relative_invocation_from_the_installation_parent(installed):
    home, inputs, _ = installed
    args = ["--title", "rel", str(inputs / "a b.txt")]
    result = run(Path("greport") / "bin" / "greport", args, home.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected(args, home.parent)


def test_only_the_wrapper_changed():
    for sub in ("libexec/greport-core", "etc/greport.conf", "share/templates/default.txt"):
        assert filecmp.cmp(WORK / "greport" / sub, ORIGINAL / sub, shallow=False), sub
