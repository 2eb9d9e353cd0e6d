import calendar
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_events import generate

WORK = Path(os.environ["WORK"])
STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:(Z)|([+-])(\d{2}):(\d{2}))")


def epoch(text):
    match = STAMP.fullmatch(text)
    if not match:
        return None
    y, mo, d, h, mi, s = (int(x) for x in match.groups()[:6])
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]):
        return None
    if h > 23 or mi > 59 or s > 59:
        return None
    offset = 0
    if not match.group(7):
        oh, om = int(match.group(9)), int(match.group(10))
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * 60 * (1 if match.group(8) == "+" else -1)
    return calendar.timegm((y, mo, d, h, mi, s)) - offset


def reference(text):
    per_user = {}
    for line in text.split("\n")[1:]:
        fields = line.split("\t")
        if len(fields) == 3 and (moment := epoch(fields[0])) is not None:
            per_user.setdefault(fields[1], []).append(moment)
    out = ["user,start,end,events,duration_s"]
    for user in sorted(per_user):
        sessions = []
        for moment in sorted(per_user[user]):
            if sessions and moment - sessions[-1][-1] <= 1800:
                sessions[-1].append(moment)
            else:
                sessions.append([moment])
        for s in sessions:
            first = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s[0]))
            last = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s[-1]))
            out.append(f"{user},{first},{last},{len(s)},{s[-1] - s[0]}")
    return "".join(line + "\n" for line in out)


def sessionize(text):
    return subprocess.run(
        ["bash", str(WORK / "sessionize.sh")],
        input=text,
        capture_output=True,
        text=True,
        cwd=WORK,
        timeout=30,
    )


def test_sessions_file_matches_the_log():
    expected = reference((WORK / "events.tsv").read_text())
    assert expected.count("\n") > 10
    assert (WORK / "sessions.csv").read_text() == expected


@pytest.mark.parametrize(("seed", "size"), [(1, 5), (2, 60), (3, 25), (4, 1)])
def test_script_on_other_logs(seed, size):
    text = generate(seed, size)
    result = sessionize(text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == reference(text)


def test_gaps_offsets_and_invalid_lines():
    text = (
        "timestamp\tuser\tevent\n"
        "2024-03-10T10:30:00+01:00\tana\tb\n"
        "2024-03-10T09:00:00Z\tana\ta\n"
        "2024-03-10T09:30:00Z\tana\tc\n"
        "2024-03-10T10:00:01Z\tana\td\n"
        "2024-03-10T04:00:01-06:00\tana\te\n"
        "2024-02-29T23:50:00-01:00\tbo\tx\n"
        "2024-03-01T01:15:00+00:30\tbo\ty\n"
        "2023-02-29T10:00:00Z\tbo\tbad-date\n"
        "2024-03-10T24:00:00Z\tbo\tbad-hour\n"
        "2024-03-10T09:00:00+1:00\tbo\tbad-offset\n"
        "2024-03-10T09:00:00\tbo\tno-offset\n"
        "2024-03-10T09:00:00Z\tbo\n"
        "2024-03-10T09:00:00Z bo x\n"
    )
    result = sessionize(text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "user,start,end,events,duration_s\n"
        "ana,2024-03-10T09:00:00Z,2024-03-10T09:30:00Z,3,1800\n"
        "ana,2024-03-10T10:00:01Z,2024-03-10T10:00:01Z,2,0\n"
        "bo,2024-03-01T00:45:00Z,2024-03-01T00:50:00Z,2,300\n"
    )
