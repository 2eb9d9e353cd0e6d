import csv
import io
import os
import random
import shutil
import stat
import subprocess
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])


def totals_text(text):
    totals = defaultdict(Decimal)
    for row in csv.DictReader(io.StringIO(text)):
        totals[row["region"]] += int(row["units"]) * Decimal(row["unit_price"])
    lines = [
        f"{region:<12}{total:>12.2f}"
        for region, total in sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    ]
    lines.append(f"{'TOTAL':<12}{sum(totals.values(), Decimal()):>12.2f}")
    return "".join(line + "\n" for line in lines)


def report_text(name, text):
    rows = sum(1 for line in text.splitlines()[1:] if line)
    rule = "=" * 30 + "\n"
    return f"Sales report for {name}\n{rule}{totals_text(text)}{rule}rows: {rows}\n"


@pytest.fixture
def project(tmp_path):
    """The workspace copy, with the executable bits a checkout would have."""
    project = tmp_path / "project"
    shutil.copytree(WORK, project, symlinks=True)
    for script in ("tools/report.sh", "tools/summarize.py"):
        path = project / script
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return project


def other_sales(seed):
    rng = random.Random(seed)
    rows = ["region,product,units,unit_price"]
    for _ in range(rng.randint(1, 30)):
        region = rng.choice(["north", "south", "east", "nord-west", "Zentral"])
        price = rng.choice(["1.05", "3.33", "10", "0.01"])
        rows.append(f"{region},{rng.choice(['a', 'b'])},{rng.randint(0, 99)},{price}")
    return "\n".join(rows) + "\n"


def test_scripts_have_unix_line_endings():
    for script in ("tools/report.sh", "tools/summarize.py"):
        assert b"\r" not in (WORK / script).read_bytes(), script


def test_report_runs_directly_on_the_shipped_data(project):
    result = subprocess.run(
        ["./tools/report.sh", "data/sales.csv"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == report_text("sales.csv", (WORK / "data/sales.csv").read_text())


@pytest.mark.parametrize("seed", [1, 2])
def test_both_scripts_run_directly_on_other_data(project, seed):
    text = other_sales(seed)
    (project / "data" / "other.csv").write_text(text)
    result = subprocess.run(
        ["./tools/report.sh", "data/other.csv"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == report_text("other.csv", text)
    result = subprocess.run(
        ["./tools/summarize.py", "data/other.csv"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == totals_text(text)
