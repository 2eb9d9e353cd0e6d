import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_readings import generate

WORK = Path(os.environ["WORK"])


def reference(files):
    lines = ["# nightly report", "## files"]
    stats = {}
    for name in sorted(files):
        rows = files[name].splitlines()[1:]
        lines.append(f"{name} {len(rows)}")
        for row in rows:
            sensor, _, value = row.split(",")
            sensor = sensor[7:] if sensor.lower().startswith("sensor-") else sensor
            stats.setdefault(sensor.lower(), []).append(int(value))
    lines.append("## sensors")
    for name in sorted(stats):
        values = stats[name]
        ordered, n = sorted(values), len(values)
        median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
        lines.append(
            f"{name:<8} count={n} min={min(values)} max={max(values)} "
            f"mean={sum(values) / n:.2f} median={median:.1f}"
        )
    return "".join(line + "\n" for line in lines)


@pytest.fixture
def project(tmp_path):
    project = tmp_path / "job"
    shutil.copytree(WORK, project, symlinks=True)
    (project / "data" / "reports" / "nightly.txt").unlink(missing_ok=True)
    return project


def run_job(project, cwd):
    return subprocess.run(
        ["bash", str(project / "nightly" / "run_nightly.sh")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def incoming(project):
    folder = project / "data" / "incoming"
    return {p.name: p.read_text() for p in folder.glob("readings-*.csv")}


def test_the_job_is_still_a_script_with_env_conf_and_awk():
    script = (WORK / "nightly" / "run_nightly.sh").read_text()
    assert "env.conf" in script
    assert (WORK / "nightly" / "env.conf").is_file()


def test_report_for_the_shipped_readings(project):
    result = run_job(project, project)
    assert result.returncode == 0, result.stderr
    report = (project / "data" / "reports" / "nightly.txt").read_text()
    assert report == reference(incoming(project))


@pytest.mark.parametrize(("seed", "days"), [(1, 2), (2, 5), (3, 1)])
def test_report_for_other_readings_from_another_directory(project, tmp_path, seed, days):
    for old in (project / "data" / "incoming").glob("*.csv"):
        old.unlink()
    files = generate(seed, days)
    for name, text in files.items():
        (project / "data" / "incoming" / name).write_text(text)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    for _ in range(2):
        result = run_job(project, elsewhere)
        assert result.returncode == 0, result.stderr
        assert (project / "data" / "reports" / "nightly.txt").read_text() == reference(files)
    scratch = project / "tmp" / "nightly"
    assert not scratch.exists() or list(scratch.iterdir()) == []
