import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
HERE = Path(__file__).resolve().parent


def reference(text):
    counts = Counter()
    for line in text.splitlines():
        parts = line.split('"')
        if len(parts) < 3:
            continue
        request = parts[1].split()
        after = parts[2].split()
        if len(request) != 3 or not after or not re.fullmatch(r"5\d\d", after[0]):
            continue
        counts[request[1].split("?")[0]] += 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0].encode()))
    return "".join(f"{count} {path}\n" for path, count in ranked[:5])


def run(*args, stdin=None):
    return subprocess.run(
        ["bash", str(WORK / "top_errors.sh"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=WORK,
        timeout=30,
    )


def test_report_matches_the_log():
    expected = reference((WORK / "logs" / "access.log").read_text())
    assert expected.count("\n") == 5
    assert (WORK / "report.txt").read_text() == expected


def test_script_on_the_shipped_log():
    result = run("logs/access.log")
    assert result.returncode == 0, result.stderr
    assert result.stdout == reference((WORK / "logs" / "access.log").read_text())


@pytest.mark.parametrize("name", ["log_a.log", "log_b.log", "log_ties.log", "log_no_errors.log"])
def test_script_on_other_logs(name):
    result = run(str(HERE / name))
    assert result.returncode == 0, result.stderr
    assert result.stdout == reference((HERE / name).read_text())


def test_ties_and_malformed_lines():
    assert run(str(HERE / "log_ties.log")).stdout == ("2 /long/path/here\n1 /D\n1 /a\n1 /b\n1 /c\n")


def test_reads_standard_input():
    text = (HERE / "log_b.log").read_text()
    result = run(stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == reference(text)
