import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])


def canonical_line(offset, chunk):
    cells = ""
    for i in range(16):
        cells += f"{chunk[i]:02x} " if i < len(chunk) else "   "
        if i == 7:
            cells += " "
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
    return f"{offset:08x}  {cells} |{text}|"


def reference(data, skip=0, length=None, squeeze=True):
    shown = data[skip:]
    if length is not None:
        shown = shown[:length]
    lines, previous, squeezing = [], None, False
    for start in range(0, len(shown), 16):
        chunk = shown[start : start + 16]
        if squeeze and len(chunk) == 16 and chunk == previous:
            if not squeezing:
                lines.append("*")
            squeezing = True
        else:
            lines.append(canonical_line(skip + start, chunk))
            squeezing = False
        previous = chunk if len(chunk) == 16 else None
    if shown:
        lines.append(f"{skip + len(shown):08x}")
    return "".join(line + "\n" for line in lines)


@pytest.fixture(scope="module")
def hexd(tmp_path_factory):
    project = tmp_path_factory.mktemp("build") / "hexd"
    shutil.copytree(WORK, project, symlinks=True)
    for built in [*project.rglob("*.o"), project / "hexd"]:
        built.unlink(missing_ok=True)
    result = subprocess.run(["make"], cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return project / "hexd"


def run(hexd, *args, stdin=b""):
    return subprocess.run([str(hexd), *args], input=stdin, capture_output=True, timeout=30)


def random_data(rng, size):
    out = bytearray()
    while len(out) < size:
        kind = rng.random()
        if kind < 0.3:
            out += bytes([rng.randrange(256)]) * rng.randint(1, 70)
        elif kind < 0.5:
            out += b"0123456789abcdef" * rng.randint(1, 4)
        else:
            out += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    return bytes(out[:size])


def test_readme_example(hexd):
    result = run(hexd, stdin=b"Hello, world!\n\x00\xffABC")
    assert result.returncode == 0
    assert result.stdout.decode() == (
        "00000000  48 65 6c 6c 6f 2c 20 77  6f 72 6c 64 21 0a 00 ff  |Hello, world!...|\n"
        "00000010  41 42 43                                          |ABC|\n"
        "00000013\n"
    )


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 15, 16, 17, 32, 33, 255, 256])
def test_sizes_around_line_boundaries(hexd, size):
    data = bytes((i * 37 + 11) % 256 for i in range(size))
    assert run(hexd, "-v", stdin=data).stdout.decode() == reference(data, squeeze=False)
    assert run(hexd, stdin=data).stdout.decode() == reference(data)


def test_squeezing_repeated_lines(hexd, tmp_path):
    data = b"A" * 16 * 5 + b"B" * 16 + b"B" * 16 + b"A" * 16 + b"A" * 20
    path = tmp_path / "rep.bin"
    path.write_bytes(data)
    assert run(hexd, str(path)).stdout.decode() == (
        "00000000  41 41 41 41 41 41 41 41  41 41 41 41 41 41 41 41  |AAAAAAAAAAAAAAAA|\n"
        "*\n"
        "00000050  42 42 42 42 42 42 42 42  42 42 42 42 42 42 42 42  |BBBBBBBBBBBBBBBB|\n"
        "*\n"
        "00000070  41 41 41 41 41 41 41 41  41 41 41 41 41 41 41 41  |AAAAAAAAAAAAAAAA|\n"
        "*\n"
        "00000090  41 41 41 41                                       |AAAA|\n"
        "00000094\n"
    )
    assert run(hexd, "-v", str(path)).stdout.decode() == reference(data, squeeze=False)


@pytest.mark.parametrize("seed", range(12))
def test_random_inputs_and_options(hexd, tmp_path, seed):
    rng = random.Random(seed)
    data = random_data(rng, rng.randint(0, 2000))
    args, skip, length, squeeze = [], 0, None, True
    if rng.random() < 0.6:
        skip = rng.randint(0, len(data) + 20)
        args += ["-s", hex(skip) if rng.random() < 0.5 else str(skip)]
    if rng.random() < 0.6:
        length = rng.randint(0, 600)
        args += ["-n", hex(length) if rng.random() < 0.5 else str(length)]
    if rng.random() < 0.3:
        squeeze = False
        args.insert(0, "-v")
    expected = reference(data, skip, length, squeeze)
    if seed % 2:
        path = tmp_path / "in.bin"
        path.write_bytes(data)
        result = run(hexd, *args, str(path))
    else:
        result = run(hexd, *args, stdin=data)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == expected, args


def test_skip_past_the_end_and_zero_length_print_nothing(hexd):
    assert run(hexd, "-s", "100", stdin=b"x" * 50).stdout == b""
    assert run(hexd, "-n", "0", stdin=b"x" * 50).stdout == b""
    assert run(hexd, stdin=b"").stdout == b""


def test_large_stream_from_a_pipe(hexd):
    data = random_data(random.Random(99), 200_000)
    result = run(hexd, "-s", "0x1003", "-n", "150000", stdin=data)
    assert result.stdout.decode() == reference(data, 0x1003, 150000)


@pytest.mark.parametrize(
    "args",
    [["-x"], ["-s", "abc"], ["-n", "-5"], ["-s", "10q"], ["-n", ""], ["-s", "0x"], ["a", "b"]],
)
def test_usage_errors(hexd, args):
    result = run(hexd, *args, stdin=b"data")
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr


def test_unreadable_file(hexd, tmp_path):
    result = run(hexd, str(tmp_path / "missing"))
    assert result.returncode == 1
    assert result.stdout == b""
