import os
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
TOOL = WORK / "wordfreq.py"


def run(*args, stdin="", cwd=WORK):
    return subprocess.run(
        ["python3", str(TOOL), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=20,
    )


def expected(texts, top=10, ignore_case=False, min_length=1):
    counts = Counter()
    for text in texts:
        for raw in re.findall(r"[A-Za-z0-9']+", text):
            word = raw.strip("'")
            if word and len(word) >= min_length:
                counts[word.lower() if ignore_case else word] += 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "".join(f"{count}\t{word}\n" for word, count in ranked[:top])


VOCABULARY = ["apple", "Apple", "APPLE", "banana", "it's", "'quoted'", "x", "42", "b2b", "zoo"]
NOISE = [" ", "  ", "\n", ", ", ". ", "!", " -- ", "\t", " (", ") ", " é ", "''", " ' "]


def random_text(rng, n):
    parts = []
    for _ in range(n):
        parts.append(rng.choice(VOCABULARY))
        parts.append(rng.choice(NOISE))
    return "".join(parts)


def test_the_tool_exists():
    assert TOOL.is_file()


def test_sample_matches_the_shipped_expectation():
    result = run("-i", "-n", "5", "sample.txt")
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected([(WORK / "sample.txt").read_text()], 5, True)


@pytest.mark.parametrize("seed", range(8))
def test_random_text_from_stdin(seed, tmp_path):
    rng = random.Random(seed)
    text = random_text(rng, rng.randint(5, 200))
    top = rng.randint(1, 12)
    args = ["-n", str(top)]
    ignore_case = seed % 2 == 0
    if ignore_case:
        args.append("--ignore-case")
    min_length = rng.choice([1, 2, 4])
    if min_length > 1:
        args += ["--min-length", str(min_length)]
    result = run(*args, stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected([text], top, ignore_case, min_length)


def test_several_files_and_dash(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("red red blue\nGreen")
    second.write_text("blue BLUE green")
    result = run(str(first), "-", str(second), "--top", "3", stdin="red green")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3\tred\n2\tblue\n2\tgreen\n"
    result = run("-i", str(first), str(second))
    assert result.stdout == "3\tblue\n2\tgreen\n2\tred\n"


def test_default_top_is_ten():
    text = " ".join(f"w{i:02d}" for i in range(30))
    result = run(stdin=text)
    assert result.stdout == "".join(f"1\tw{i:02d}\n" for i in range(10))


def test_apostrophes_and_ties():
    result = run(stdin="'tis 'Tis don't don't' ''' b a c b")
    assert result.stdout == "2\tb\n2\tdon't\n1\tTis\n1\ta\n1\tc\n1\ttis\n"


def test_empty_input():
    result = run(stdin="")
    assert result.returncode == 0
    assert result.stdout == ""


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_top_must_be_positive(bad):
    result = run("-n", bad, stdin="a b")
    assert result.returncode == 2
    assert result.stdout == ""


def test_unreadable_file_is_an_error(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("a a a")
    result = run(str(good), str(tmp_path / "missing.txt"))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "missing.txt" in result.stderr


def test_works_from_another_directory(tmp_path):
    (tmp_path / "t.txt").write_text("one two two")
    result = run("t.txt", cwd=tmp_path)
    assert result.stdout == "2\ttwo\n1\tone\n"
