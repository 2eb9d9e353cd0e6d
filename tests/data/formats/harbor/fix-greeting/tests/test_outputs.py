import os
import subprocess


def test_greets_with_comma_and_bang():
    name = os.environ["GREETING_NAME"]
    out = subprocess.run(
        ["python3", "/app/greet.py", name], capture_output=True, text=True, check=True
    ).stdout
    assert out == f"Hello, {name}!\n"


def test_runs_from_the_working_directory():
    assert os.path.exists("greet.py")
