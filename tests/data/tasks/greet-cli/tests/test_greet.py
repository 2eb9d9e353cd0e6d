import os
import subprocess

WORK = os.environ["WORK"]


def greet(*args):
    result = subprocess.run(
        ["bash", os.path.join(WORK, "greet.sh"), *args],
        cwd=WORK,
        capture_output=True,
        text=True,
        timeout=5,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_with_name():
    assert greet("Ada") == "hello, Ada\n"


def test_default():
    assert greet() == "hello, world\n"
