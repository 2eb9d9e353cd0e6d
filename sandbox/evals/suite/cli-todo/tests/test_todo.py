import os
import random
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
TOOL = WORK / "todo.py"
ORDER = {"high": 0, "normal": 1, "low": 2}


def run(*args, cwd=WORK, env=None):
    environment = {k: v for k, v in os.environ.items() if k != "TODO_DB"}
    environment.update(env or {})
    return subprocess.run(
        ["python3", str(TOOL), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=20,
    )


class Model:
    def __init__(self):
        self.items = {}
        self.next_id = 1

    def add(self, text, priority="normal", due=None):
        self.items[self.next_id] = {"text": text, "priority": priority, "due": due, "done": False}
        self.next_id += 1
        return f"added {self.next_id - 1}\n"

    def listing(self, show_all=False):
        rows = [(i, it) for i, it in self.items.items() if show_all or not it["done"]]
        rows.sort(
            key=lambda p: (ORDER[p[1]["priority"]], p[1]["due"] is None, p[1]["due"] or "", p[0])
        )
        return "".join(
            f"{i:>3} [{'x' if it['done'] else ' '}] {it['priority']:<6} {it['due'] or '-':<10} "
            f"{it['text']}\n"
            for i, it in rows
        )


def test_the_tool_exists():
    assert TOOL.is_file()


def test_the_documented_session(tmp_path):
    db = str(tmp_path / "t.json")
    assert run("--db", db, "list").stdout == ""
    assert (
        run("--db", db, "add", "pay rent", "--priority", "high", "--due", "2024-05-01").stdout
        == "added 1\n"
    )
    assert run("--db", db, "add", "water plants").stdout == "added 2\n"
    assert run("--db", db, "list").stdout == (
        "  1 [ ] high   2024-05-01 pay rent\n  2 [ ] normal -          water plants\n"
    )
    assert run("--db", db, "done", "1").stdout == "done 1\n"
    assert run("--db", db, "list").stdout == "  2 [ ] normal -          water plants\n"
    assert run("--db", db, "list", "--all").stdout == (
        "  1 [x] high   2024-05-01 pay rent\n  2 [ ] normal -          water plants\n"
    )


@pytest.mark.parametrize("seed", range(2))
def test_random_sessions_match_the_model(seed, tmp_path):
    rng = random.Random(seed)
    model = Model()
    db = str(tmp_path / "db.json")
    words = ["buy milk", "call Ana", "fix bike", "écrire", "read 'Dune'", "x  y"]
    for _ in range(18):
        action = rng.random()
        if action < 0.45 or not model.items:
            text = rng.choice(words)
            args = ["add", text]
            priority = rng.choice(["low", "normal", "high", None])
            due = rng.choice([None, "2024-01-31", "2023-12-01", "2024-02-29", "2025-07-04"])
            if priority:
                args += ["--priority", priority]
            if due:
                args += ["--due", due]
            expected = model.add(text, priority or "normal", due)
            result = run("--db", db, *args)
        elif action < 0.65:
            item = rng.choice(list(model.items))
            model.items[item]["done"] = True
            expected = f"done {item}\n"
            result = run("--db", db, "done", str(item))
        elif action < 0.8:
            item = rng.choice(list(model.items))
            del model.items[item]
            expected = f"removed {item}\n"
            result = run("--db", db, "rm", str(item))
        else:
            show_all = rng.random() < 0.5
            expected = model.listing(show_all)
            result = run("--db", db, "list", *(["--all"] if show_all else []))
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected
    assert run("--db", db, "list", "--all").stdout == model.listing(True)


def test_ids_are_never_reused(tmp_path):
    db = str(tmp_path / "db.json")
    run("--db", db, "add", "a")
    run("--db", db, "add", "b")
    assert run("--db", db, "rm", "2").stdout == "removed 2\n"
    assert run("--db", db, "add", "c").stdout == "added 3\n"
    assert run("--db", db, "rm", "1").returncode == 0
    assert run("--db", db, "rm", "3").returncode == 0
    assert run("--db", db, "add", "d").stdout == "added 4\n"


def test_database_location_from_environment_and_default(tmp_path):
    env_db = tmp_path / "env" / "todo-env.json"
    env_db.parent.mkdir()
    assert run("add", "from env", env={"TODO_DB": str(env_db)}).stdout == "added 1\n"
    assert env_db.exists()
    assert "from env" in run("list", env={"TODO_DB": str(env_db)}).stdout
    cwd = tmp_path / "here"
    cwd.mkdir()
    assert run("add", "local", cwd=cwd).stdout == "added 1\n"
    assert (cwd / "todo.json").exists()
    assert run("list", cwd=cwd).stdout == "  1 [ ] normal -          local\n"
    flag_db = tmp_path / "flag.json"
    assert run("--db", str(flag_db), "list", env={"TODO_DB": str(env_db)}).stdout == ""


def test_ordering_by_priority_due_and_id(tmp_path):
    db = str(tmp_path / "db.json")
    run("--db", db, "add", "low later", "--priority", "low", "--due", "2024-03-01")
    run("--db", db, "add", "normal none")
    run("--db", db, "add", "high none", "--priority", "high")
    run("--db", db, "add", "normal soon", "--due", "2024-02-01")
    run("--db", db, "add", "high soon", "--priority", "high", "--due", "2024-12-31")
    run("--db", db, "add", "normal none 2", "--priority", "normal")
    assert run("--db", db, "list").stdout == (
        "  5 [ ] high   2024-12-31 high soon\n"
        "  3 [ ] high   -          high none\n"
        "  4 [ ] normal 2024-02-01 normal soon\n"
        "  2 [ ] normal -          normal none\n"
        "  6 [ ] normal -          normal none 2\n"
        "  1 [ ] low    2024-03-01 low later\n"
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["done", "9"], 1),
        (["rm", "9"], 1),
        (["add", "x", "--priority", "urgent"], 2),
        (["add", "x", "--due", "2024-02-30"], 2),
        (["add", "x", "--due", "31/01/2024"], 2),
        (["add"], 2),
        (["done"], 2),
    ],
)
def test_errors_change_nothing(args, status, tmp_path):
    db = tmp_path / "db.json"
    run("--db", str(db), "add", "keep me")
    before = db.read_bytes()
    result = run("--db", str(db), *args)
    assert result.returncode == status
    assert result.stderr.strip()
    assert db.read_bytes() == before
