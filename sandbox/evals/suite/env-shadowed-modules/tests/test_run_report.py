import csv
import io
import json
import os
import random
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
SENSORS = [
    ("t1", "boiler temperature", 95.0),
    ("t2", "return temperature", 70.0),
    ("p1", "pressure (bar)", 2.5),
]


def lcg_sample(rows, k, seed):
    state, chosen = seed & 0xFFFFFFFF, set()
    k = min(k, len(rows))
    while len(chosen) < k:
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        chosen.add(state % len(rows))
    return [row for index, row in enumerate(rows) if index in chosen]


def expected(csv_text, name):
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    summary = {"source": name, "sensors": {}}
    lines = []
    for sensor_id, label, limit in SENSORS:
        values = [float(r["value"]) for r in rows if r["sensor"] == sensor_id]
        if not values:
            continue
        info = {
            "label": label,
            "count": len(values),
            "mean": round(statistics.fmean(values), 3),
            "median": statistics.median(values),
            "alert": max(values) > limit,
        }
        summary["sensors"][sensor_id] = info
        flag = "  ALERT" if info["alert"] else ""
        lines.append(f"{sensor_id:<6} {label:<18} n={info['count']:<4} mean={info['mean']}{flag}")
    summary["spot_checks"] = [r["id"] for r in lcg_sample(rows, 4, 20240310)]
    lines.append(f"spot checks: {' '.join(summary['spot_checks'])}")
    return "".join(line + "\n" for line in lines), summary


def measurements(seed):
    rng = random.Random(seed)
    rows = ["id,sensor,value"]
    for i in range(rng.randint(3, 80)):
        sensor = rng.choice(["t1", "t2", "p1", "zz"])
        value = {"t1": rng.uniform(50, 99), "t2": rng.uniform(30, 75), "p1": rng.uniform(0.5, 2.7)}
        rows.append(f"r{i:03d},{sensor},{value.get(sensor, 0.0):.2f}")
    return "\n".join(rows) + "\n"


@pytest.fixture
def project(tmp_path):
    project = tmp_path / "sensor report"
    shutil.copytree(WORK, project, symlinks=True)
    shutil.rmtree(project / "out", ignore_errors=True)
    return project


def run(project, csv_path, cwd):
    return subprocess.run(
        ["bash", str(project / "run.sh"), str(csv_path)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )


def test_shipped_measurements_from_the_project_directory(project):
    result = run(project, "data/measurements.csv", project)
    text = (WORK / "data" / "measurements.csv").read_text()
    stdout, summary = expected(text, "measurements.csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout == stdout
    assert json.loads((project / "out" / "summary.json").read_text()) == summary


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_measurements_from_elsewhere(project, tmp_path, seed):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data = elsewhere / f"batch-{seed}.csv"
    text = measurements(seed)
    data.write_text(text)
    result = run(project, data, elsewhere)
    stdout, summary = expected(text, data.name)
    assert result.returncode == 0, result.stderr
    assert result.stdout == stdout
    assert json.loads((project / "out" / "summary.json").read_text()) == summary
    assert [p.name for p in (project / "out").iterdir()] == ["summary.json"]
