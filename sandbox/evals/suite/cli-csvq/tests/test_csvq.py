import csv
import io
import json
import os
import random
import re
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
TOOL = WORK / "csvq.py"
NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")


def run(*args, stdin=""):
    return subprocess.run(
        ["python3", str(TOOL), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=WORK,
        timeout=20,
    )


def rows_of(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def num(text):
    return bool(NUMBER.match(text))


def reference(text, where=(), sort=None, desc=False, limit=None, select=None):
    header, records = rows_of(text)
    ops = {
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    for column, op, value in where:

        def keep(r, column=column, op=op, value=value):
            cell = r[column]
            if num(cell) and num(value):
                return ops[op](float(cell), float(value))
            return ops[op](cell, value)

        records = [r for r in records if keep(r)]
    if sort:
        numeric = all(num(r[sort]) for r in records)
        records.sort(key=lambda r: float(r[sort]) if numeric else r[sort], reverse=desc)
    if limit is not None:
        records = records[:limit]
    columns = select or header
    return columns, [[r[c] for c in columns] for r in records]


def as_csv(columns, rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue()


CITIES = ["Oslo", "Lima", "Rome", "Kyiv, UA", 'The "Big" Apple', "Lima", ""]
NAMES = ["ann", "Bob", "cy", "Dee", "eve", "Åsa", "bob"]


def random_csv(rng, n):
    rows = [["id", "name", "city", "qty", "price", "code"]]
    for i in range(n):
        rows.append(
            [
                str(i + 1),
                rng.choice(NAMES),
                rng.choice(CITIES),
                str(rng.randint(-5, 120)),
                rng.choice(["3.50", "10", "-2.25", ".5", "100.0", "7"]),
                rng.choice(["10", "9", "x9", "100", "-", "020"]),
            ]
        )
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


def test_the_tool_exists():
    assert TOOL.is_file()


def test_whole_file_round_trips():
    text = (WORK / "people.csv").read_text()
    result = run("people.csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout == as_csv(*reference(text))


def test_example_query_on_people():
    result = run(
        "people.csv", "--where", "city=London", "--sort", "score", "--desc", "--select", "name,age"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "name,age\nAlan Turing,41\nAda Lovelace,36\n"


def test_string_sort_when_a_value_is_not_numeric():
    result = run("people.csv", "--sort", "score", "--select", "id,score")
    assert result.stdout == "id,score\n6,-\n4,79\n7,85.5\n2,88\n1,91.5\n5,93\n3,97.25\n"


WHERES = [
    ("qty", ">", "50"),
    ("qty", "<=", "7"),
    ("price", ">=", "3.5"),
    ("price", "=", "10"),
    ("city", "=", "Lima"),
    ("city", "!=", "Lima"),
    ("name", ">", "Dee"),
    ("code", "<", "100"),
    ("code", "=", "20"),
    ("city", "=", ""),
    ("city", "=", "Kyiv, UA"),
]


@pytest.mark.parametrize("seed", range(16))
def test_random_queries_match_the_reference(seed):
    rng = random.Random(seed)
    text = random_csv(rng, rng.randint(0, 40))
    where = rng.sample(WHERES, rng.randint(0, 2))
    sort = rng.choice([None, "qty", "price", "name", "code", "city"])
    desc = bool(sort) and rng.random() < 0.5
    limit = rng.choice([None, 0, 1, 5])
    select = rng.choice([None, ["name"], ["price", "id"], ["city", "qty", "name"]])
    args = ["-"] if seed % 2 else []
    for column, op, value in where:
        args += ["--where", f"{column}{op}{value}"]
    if sort:
        args += ["--sort", sort]
    if desc:
        args.append("--desc")
    if limit is not None:
        args += ["--limit", str(limit)]
    if select:
        args += ["--select", ",".join(select)]
    columns, rows = reference(text, where, sort, desc, limit, select)
    result = run(*args, stdin=text)
    assert result.returncode == 0, (args, result.stderr)
    assert result.stdout == as_csv(columns, rows), args
    result = run(*args, "--format", "json", stdin=text)
    assert result.returncode == 0, (args, result.stderr)
    data = json.loads(result.stdout)
    assert data == [dict(zip(columns, row, strict=True)) for row in rows], args
    assert all(list(item) == columns for item in data)


def test_embedded_newlines_and_quotes_survive(tmp_path):
    source = 'k,v\n1,"line one\nline two"\n2,"say ""hi"""\n'
    (tmp_path / "in.csv").write_text(source)
    result = run(str(tmp_path / "in.csv"), "--sort", "k", "--desc")
    assert result.stdout == 'k,v\n2,"say ""hi"""\n1,"line one\nline two"\n'


@pytest.mark.parametrize(
    "args",
    [
        ["--select", "name,nope"],
        ["--where", "nope=1"],
        ["--sort", "nope"],
        ["--where", "no operator here"],
    ],
)
def test_errors_exit_2_with_nothing_on_stdout(args):
    result = run("people.csv", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip()
