import calendar
import datetime
import os
import random
import re
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])

MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
BAD_DATES = ["2023-02-30", "31/04/2023", "not a date", "", "Febr 3, 2023", "2023-13-01", "20231301"]


def written(rng, d):
    """A date in one of the input forms."""
    kind = rng.randrange(6)
    name = MONTH_NAMES[d.month - 1]
    name = name[:3] if rng.random() < 0.5 else name
    if kind == 0:
        return d.isoformat()
    if kind == 1:
        return rng.choice([f"{d.day:02d}/{d.month:02d}/{d.year}", f"{d.day}/{d.month}/{d.year}"])
    if kind == 2:
        return f"{d.year}/{d.month:02d}/{d.day:02d}"
    if kind == 3:
        return f"{rng.choice([name, name.lower(), name.upper()])} {d.day}, {d.year}"
    if kind == 4:
        day = f"{d.day:02d}" if rng.random() < 0.3 else str(d.day)
        return f"{day} {rng.choice([name, name.lower()])} {d.year}"
    return d.strftime("%Y%m%d")


def gen(seed, n):
    """A messy export of n rows."""
    rng = random.Random(seed)
    users = [
        f"{rng.choice(['ann', 'bob', 'cho', 'dev', 'eve', 'fay', 'gus', 'hal'])}{i}"
        f"@{rng.choice(['example.com', 'mail.org', 'corp.net'])}"
        for i in range(n // 2)
    ]
    rows = ["email,signup_date,plan"]
    for _ in range(n):
        email = rng.choice(users)
        email = rng.choice([email, email.upper(), email.title(), f"  {email} ", email])
        date = written(rng, datetime.date(2023, 1, 1) + datetime.timedelta(rng.randint(0, 500)))
        dice = rng.random()
        if dice < 0.04:
            date = rng.choice(BAD_DATES)
        elif dice < 0.06:
            email = rng.choice(["", "no-at-sign.example.com", "a@b@c"])
        plan = rng.choice(["Pro", " pro", "FREE", "", "team ", "Team", "pro"])
        pad = rng.choice(["", " "])
        rows.append(f"{email},{pad}{date}{pad},{plan}")
    return "\r\n".join(rows) + "\r\n"


NAMES = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
NAMES.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})


def to_date(text):
    patterns = [
        (r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})", False),
        (r"(?P<d>\d{1,2})/(?P<m>\d{1,2})/(?P<y>\d{4})", False),
        (r"(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})", False),
        (r"(?P<m>[A-Za-z]+) (?P<d>\d{1,2}), (?P<y>\d{4})", True),
        (r"(?P<d>\d{1,2}) (?P<m>[A-Za-z]+) (?P<y>\d{4})", True),
        (r"(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})", False),
    ]
    for pattern, named in patterns:
        match = re.fullmatch(pattern, text)
        if match:
            month = NAMES.get(match["m"].lower()) if named else int(match["m"])
            try:
                return datetime.date(int(match["y"]), month or 0, int(match["d"]))
            except ValueError:
                return None
    return None


def reference(text):
    kept = {}
    for index, line in enumerate(text.splitlines()[1:]):
        if line.count(",") < 2:
            continue
        email, rest = line.split(",", 1)
        date, plan = (part.strip() for part in rest.rsplit(",", 1))
        email = email.strip().lower()
        if email.count("@") != 1 or email.startswith("@") or email.endswith("@"):
            continue
        day = to_date(date)
        if day is None:
            continue
        if email not in kept or (day, index) < kept[email][:2]:
            kept[email] = (day, index, plan.lower() or "free")
    rows = sorted((day, email, plan) for email, (day, _, plan) in kept.items())
    return "email,signup_date,plan\n" + "".join(f"{e},{d.isoformat()},{p}\n" for d, e, p in rows)


def normalize(text):
    return subprocess.run(
        ["bash", str(WORK / "normalize.sh")],
        input=text.encode(),
        capture_output=True,
        cwd=WORK,
        timeout=30,
    )


def test_clean_file_matches_the_raw_export():
    raw = (WORK / "raw" / "signups.csv").read_bytes().decode()
    assert (WORK / "clean" / "signups.csv").read_bytes() == reference(raw).encode()


@pytest.mark.parametrize(("seed", "size"), [(1, 40), (2, 300), (3, 120)])
def test_script_on_other_exports(seed, size):
    text = gen(seed, size)
    if seed == 3:
        text = text.replace("\r\n", "\n")
    result = normalize(text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == reference(text)


def test_each_date_form_and_the_rules():
    text = (
        "email,signup_date,plan\r\n"
        "A@x.io,2024-03-05,Pro\r\n"
        "b@x.io ,05/03/2024, \r\n"
        "c@x.io,5/3/2024,TEAM\r\n"
        "d@x.io,2024/03/05,pro\r\n"
        "e@x.io,MARCH 5, 2024,pro\r\n".replace("MARCH 5, 2024", "March 6; 2024")
        + "f@x.io,mar 7, 2024,x\r\n"
        "g@x.io, 7 March 2024 ,x\r\n"
        "h@x.io,07 mAr 2024,x\r\n"
        "i@x.io,20240229,x\r\n"
        "j@x.io,20230229,x\r\n"
        "k@x.io,2024-3-5,x\r\n"
        "l@@x.io,2024-03-05,x\r\n"
        "@x.io,2024-03-05,x\r\n"
        "a@x.io,2024-03-04,late-but-earlier\r\n"
        "a@x.io,2024-03-04,tie-loses\r\n"
        "m@x.io,Sept 1, 2024,x\r\n"
        "n@x.io,1 Dec 2023,x\r\n"
    )
    result = normalize(text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == (
        "email,signup_date,plan\n"
        "n@x.io,2023-12-01,x\n"
        "i@x.io,2024-02-29,x\n"
        "a@x.io,2024-03-04,late-but-earlier\n"
        "b@x.io,2024-03-05,free\n"
        "c@x.io,2024-03-05,team\n"
        "d@x.io,2024-03-05,pro\n"
        "f@x.io,2024-03-07,x\n"
        "g@x.io,2024-03-07,x\n"
        "h@x.io,2024-03-07,x\n"
    )
