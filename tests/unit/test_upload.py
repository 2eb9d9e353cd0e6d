"""``unpack_context`` on hostile and honest archives, without a service (the same archives
go over HTTP in ``tests/security/test_uploads.py``).

The builders here make the archives an untrusted tenant would send; each test asserts
that nothing lands outside the target and that the refusal names the member."""

from __future__ import annotations

import gzip
import io
import os
import stat
import subprocess
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox.client import folder_archive
from sandbox.environments.upload import (
    MAX_CONTEXT_FILES,
    MAX_META_HEADER_BYTES,
    unpack_context,
)
from sandbox.errors import InvalidRequestError, PayloadTooLargeError

GiB = 1 << 30
STEPS = "abcdefghijklmnop"


def _info(name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def archive(*entries: tuple[tarfile.TarInfo, bytes | None], compress: bool = False) -> bytes:
    """A tar (gzip-compressed with ``compress``) of ``(info, data)`` entries, as written."""
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer, mode="w:gz" if compress else "w", format=tarfile.PAX_FORMAT
    ) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def files(contents: dict[str, bytes], compress: bool = False) -> bytes:
    return archive(*((_info(n), d) for n, d in contents.items()), compress=compress)


def symlink(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    return _info(name, tarfile.SYMTYPE, linkname=target), None


def hardlink(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    return _info(name, tarfile.LNKTYPE, linkname=target), None


def directory(name: str) -> tuple[tarfile.TarInfo, None]:
    return _info(name, tarfile.DIRTYPE), None


def realpath_overflow(dest_len: int, up: int) -> bytes:
    """CVE-2025-4517's shape (CPython's ``test_realpath_limit_attack``): symlinks whose
    expansion passes ``PATH_MAX``, so ``os.path.realpath`` stops resolving and the ``data``
    filter sees a path inside; then ``escape`` (``up`` folders above the target) and a file
    written through it, ``escape/newfile``, and a hard link to ``escape/flag``."""
    component = "d" * ((4096 - dest_len - 1) // (len(STEPS) + 1))
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = []
    path = ""
    for step in STEPS:
        entries.append(directory(os.path.join(path, component)))
        entries.append(symlink(os.path.join(path, step), component))
        path = os.path.join(path, component)
    linkpath = os.path.join(*STEPS, "l" * 254)
    entries.append(symlink(linkpath, os.path.join(*[".."] * len(STEPS))))
    entries.append(symlink("escape", linkpath + "/.." * up))
    entries.append(hardlink("flaglink", "escape/flag"))
    entries.append((_info("escape/newfile"), b"written outside\n"))
    return archive(*entries)


def _zeros_gzip(total: int) -> bytes:
    """``total`` zero bytes as concatenated gzip members (cheap to make, ~1/1000 the size)."""
    chunk = 64 << 20
    member = gzip.compress(b"\0" * min(chunk, total), compresslevel=9, mtime=0)
    whole, rest = divmod(total, chunk)
    tail = gzip.compress(b"\0" * rest, mtime=0) if rest else b""
    return member * whole + tail


def meta_bomb(kind: bytes, declared: int) -> bytes:
    """A gzip stream: a ``kind`` header (PAX ``x``, GNU long-name ``L``) declaring
    ``declared`` bytes, and that many zero bytes after it, then a file."""
    header = _info("././@meta", kind, size=declared).tobuf(
        tarfile.GNU_FORMAT if kind in (b"L", b"K") else tarfile.USTAR_FORMAT,
        "utf-8",
        "surrogateescape",
    )
    return (
        gzip.compress(header, mtime=0)
        + _zeros_gzip(declared)
        + gzip.compress(files({"Dockerfile": b"FROM x\n"}), mtime=0)
    )


def gzip_bomb(members: int, each: int) -> bytes:
    """``members`` files of ``each`` zero bytes, honest headers, gzip-compressed."""
    compressor = zlib.compressobj(9, wbits=31)
    out = []
    zeros = b"\0" * each
    for i in range(members):
        header = _info(f"zeros{i}", size=each).tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")
        out.append(compressor.compress(header))
        out.append(compressor.compress(zeros))
    out.append(compressor.compress(b"\0" * 1024) + compressor.flush())
    return b"".join(out)


def many_files(count: int) -> bytes:
    return archive(*((_info(f"f{i}"), b"") for i in range(count)), compress=True)


# -- honest archives ---------------------------------------------------------------------


def listing(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = f"{stat.S_IMODE(path.stat().st_mode):o} {path.read_bytes()[:20]!r}"
    return out


def test_an_honest_build_context_unpacks_with_its_modes_and_inside_links(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "app" / "sub").mkdir(parents=True)
    (source / "Dockerfile").write_text("FROM python:3.13-slim\n")
    (source / "app" / "run.sh").write_text("#!/bin/sh\n")
    (source / "app" / "run.sh").chmod(0o775)
    (source / "app" / "sub" / "data.txt").write_text("data")
    (source / "empty").mkdir()
    (source / "alias").symlink_to("app/sub")
    (source / "app" / "sub" / "up").symlink_to("../run.sh")
    target = tmp_path / "out"
    target.mkdir()
    unpack_context(folder_archive(source), target, max_bytes=1 << 20)
    assert listing(target) == {
        "Dockerfile": "644 b'FROM python:3.13-sli'",
        "alias": "-> app/sub",
        "app": "dir",
        "app/run.sh": "755 b'#!/bin/sh\\n'",
        "app/sub": "dir",
        "app/sub/data.txt": "644 b'data'",
        "app/sub/up": "-> ../run.sh",
        "empty": "dir",
    }


@pytest.mark.parametrize("fmt", ["gnu", "posix", "ustar"])
def test_what_gnu_tar_writes_unpacks(tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "src"
    # ustar holds at most 100 bytes of name after a 155-byte prefix; gnu and pax go longer.
    part = "b" * (90 if fmt == "ustar" else 120)
    deep = source / "a" / part / "c"
    deep.mkdir(parents=True)
    leaf = "long-name-" * (9 if fmt == "ustar" else 12)
    (deep / leaf).write_text("x")
    (source / "top").write_text("y")
    body = subprocess.run(
        ["tar", f"--format={fmt}", "-czf", "-", "."], cwd=source, capture_output=True, check=True
    ).stdout
    target = tmp_path / "out"
    target.mkdir()
    unpack_context(body, target, max_bytes=1 << 20)
    assert (target / "top").read_text() == "y"
    assert (target / "a" / part / "c" / leaf).read_text() == "x"


def test_an_empty_archive_unpacks_to_nothing(tmp_path: Path) -> None:
    unpack_context(archive(), tmp_path, max_bytes=1 << 20)
    assert not list(tmp_path.iterdir())


# -- hostile archives: nothing written, the member named ----------------------------------


def refused(
    tmp_path: Path, body: bytes, *, max_bytes: int = 1 << 20, error: type = InvalidRequestError
) -> str:
    target = tmp_path / "outer" / "target"
    target.mkdir(parents=True)
    with pytest.raises(error) as caught:
        unpack_context(body, target, max_bytes=max_bytes, what="task directory")
    assert not list(target.iterdir()), "something was written before the refusal"
    assert [p.name for p in target.parent.iterdir()] == ["target"]
    return str(caught.value)


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        ([symlink("evil", "../../etc")], "'evil' is a symbolic link to '../../etc'"),
        ([symlink("evil", "/etc")], "'evil' is a symbolic link to '/etc'"),
        ([symlink("a", "b"), symlink("b", "a")], "chains more than"),
        ([symlink("sub/x", "."), symlink("y", "sub/x/../..")], "'y' is a symbolic link"),
        ([symlink("d", "."), (_info("d/file"), b"x")], "'d/file' sits below 'd'"),
        ([(_info("d/file"), b"x"), symlink("d", ".")], "'d' appears twice"),
        ([hardlink("pw", "/etc/passwd")], "'pw' is a hard link (to '/etc/passwd')"),
        ([(_info("f"), b"1"), hardlink("g", "f")], "'g' is a hard link"),
        ([(_info("/tmp/abs"), b"x")], "'/tmp/abs' has an absolute name"),
        ([(_info("../up"), b"x")], "'../up' climbs out with '..'"),
        ([(_info("a/../../up"), b"x")], "'a/../../up' climbs out"),
        ([(_info("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None)], "'dev' is a character"),
        ([(_info("blk", tarfile.BLKTYPE), None)], "'blk' is a block device"),
        ([(_info("fifo", tarfile.FIFOTYPE), None)], "'fifo' is a FIFO"),
        ([(_info("su", mode=0o4755), b"#!/bin/sh\n")], "'su' has mode 0o4755"),
        ([(_info("sg", mode=0o2755), b"x")], "set-uid, set-gid and sticky"),
        ([(_info("f"), b"1"), (_info("f"), b"2")], "'f' appears twice"),
        ([(_info("f"), b"1"), (_info("f/g"), b"2")], "'f/g' sits below 'f'"),
        ([(_info("d/g"), b"1"), (_info("d"), b"2")], "'d' appears twice"),
        ([(_info("x" * 300), b"1")], "over 255 bytes"),
        ([(_info("/".join(["d"] * 70)), b"1")], "64 folders deep"),
        # non-ASCII, so the name travels in a PAX path record, where a NUL survives
        ([(_info("nul\x00namé"), b"1")], "NUL byte"),
    ],
)
def test_hostile_members_are_refused_by_name(
    tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]], needle: str
) -> None:
    assert needle in refused(tmp_path, archive(*entries))


def test_the_realpath_overflow_chain_writes_nothing_outside(tmp_path: Path) -> None:
    target = tmp_path / "outer" / "target"
    body = realpath_overflow(len(str(target)), up=1)
    message = refused(tmp_path, body)
    # refused by the name's length before its links are looked at
    assert "member" in message and ("link" in message or "1024 bytes" in message), message
    assert not (tmp_path / "outer" / "newfile").exists()


@pytest.mark.parametrize(("kind", "label"), [(b"x", "PAX extended"), (b"L", "GNU long-name")])
def test_a_huge_meta_header_is_refused_before_it_is_read(
    tmp_path: Path, kind: bytes, label: str
) -> None:
    body = meta_bomb(kind, 64 << 20)  # 64 MB of it really follows (inflated: never)
    message = refused(tmp_path, body, error=PayloadTooLargeError)
    assert f"{label} header at the start" in message
    assert f"declares {64 << 20} bytes; at most {MAX_META_HEADER_BYTES}" in message


def test_a_gzip_bomb_is_refused_at_the_limit(tmp_path: Path) -> None:
    message = refused(
        tmp_path, gzip_bomb(8, 1 << 20), max_bytes=4 << 20, error=PayloadTooLargeError
    )
    assert "unpacks to more than 4 MB" in message and "'zeros4' declares" in message


def test_one_member_declaring_more_than_the_limit(tmp_path: Path) -> None:
    header = _info("huge", size=GiB).tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")
    message = refused(tmp_path, header, error=PayloadTooLargeError)
    assert f"'huge' declares {GiB} bytes" in message


def test_too_many_files(tmp_path: Path) -> None:
    message = refused(tmp_path, many_files(MAX_CONTEXT_FILES + 1), error=PayloadTooLargeError)
    assert f"{MAX_CONTEXT_FILES} files" in message


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: b"BZh91AY&SY" + b"\0" * 600, "compressed with bzip2"),
        (lambda: b"\xfd7zXZ\x00" + b"\0" * 600, "compressed with xz"),
        (lambda: b"\x28\xb5\x2f\xfd" + b"\0" * 600, "compressed with zstd"),
        (lambda: b"not a tar at all", "not a readable tar archive"),
        (lambda: b"", "the body is empty"),
        (lambda: files({"f": b"x" * 5000})[:1536], "truncated"),
        (lambda: gzip.compress(files({"f": b"x" * 5000}))[:-30], "not a readable tar"),
        (lambda: b"x" * 512, "wrong checksum"),
    ],
)
def test_unreadable_bodies(tmp_path: Path, make: Callable[[], bytes], needle: str) -> None:
    assert needle in refused(tmp_path, make())
