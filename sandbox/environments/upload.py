"""An uploaded build context or task directory: a tar archive (optionally gzip-compressed),
checked member by member and unpacked by this module itself.

Nothing here relies on :mod:`tarfile` or on the interpreter's patch level (its ``data``
filter has had bypasses: CVE-2025-4517, -4138, -4330, links chained past ``PATH_MAX``).
The archive is read twice, streamed, with bounded memory:

1. A scan of the raw 512-byte headers (gzip inflated a chunk at a time, and never past
   a cap on the inflated bytes, so a gzip bomb is refused without inflating it). Every
   member is checked before anything is written: only regular files, directories and
   symbolic links that stay inside; a relative, normalised name (no ``..``, no absolute
   path, no NUL, bounded length and depth); no set-id bits on files; no member twice, none
   below a file or a link. A PAX extended header or a GNU long-name/long-link header is
   refused when it declares more than :data:`MAX_META_HEADER_BYTES` *before* it is read;
   the sizes the headers declare are summed against the limit before any data is read.
2. The write: each directory made here (``mkdir`` at a directory descriptor, reopened
   with ``O_NOFOLLOW``), each file created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` in it, modes
   0644/0755 only. Symbolic links are made last, so nothing is ever written through one.

Links: hard links are refused (store the file itself). A symbolic link is kept only
when its target is relative and, resolved lexically through the archive's other links
(at most :data:`MAX_LINK_HOPS`), stays inside the archive; nothing in the archive may sit
below it. Compressed formats other than gzip are refused. Every refusal names the
member, the limit and what to change.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from sandbox.errors import InvalidRequestError, PayloadTooLargeError

from .build import MAX_CONTEXT_FILES

BLOCK: Final = 512
MAX_META_HEADER_BYTES: Final = 64 << 10
"""The most one PAX extended header or GNU long-name/long-link header may declare."""
MAX_META_BYTES: Final = 16 << 20
"""The most all such headers of one archive may take together (headers included)."""
MAX_NAME_BYTES: Final = 1024
MAX_COMPONENT_BYTES: Final = 255
MAX_DEPTH: Final = 64
MAX_LINK_HOPS: Final = 40
_CHUNK: Final = 1 << 16
_GZIP_MAGIC: Final = b"\x1f\x8b"
_OTHER_COMPRESSIONS: Final = (
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"\x1f\x9d", "compress (.Z)"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)
_REGULAR: Final = (b"0", b"\x00", b"7")
_META: Final = {
    b"x": "PAX extended header",
    b"g": "PAX global header",
    b"L": "GNU long-name header",
    b"K": "GNU long-link header",
}
_KINDS: Final = {
    b"1": "a hard link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a FIFO",
    b"S": "a GNU sparse file",
    b"V": "a volume label",
    b"M": "a multi-volume continuation",
    b"D": "a GNU dump directory",
    b"N": "an old GNU long name",
}
_FILE_BITS: Final = 0o7777
_SPECIAL_BITS: Final = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Parts = tuple[str, ...]


class _Refused(Exception):
    """The archive cannot be read as a tar (a malformed header, a truncated stream)."""


@dataclass(frozen=True)
class _Member:
    """One header as this module reads it (after any PAX or GNU long-name header)."""

    index: int
    name: str
    kind: bytes
    size: int
    mode: int
    linkname: str


def _nts(field: bytes) -> bytes:
    return field.split(b"\x00", 1)[0]


def _number(field: bytes) -> int:
    """A numeric header field: octal text, or GNU base-256 (never negative)."""
    if field[0] & 0x80:
        if field[0] == 0xFF:
            raise _Refused("a header holds a negative number")
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    text = _nts(field).strip(b" ")
    if text.strip(b"01234567"):
        raise _Refused(f"a header holds {bytes(field)!r} where an octal number belongs")
    return int(text, 8) if text else 0


def _checksum_ok(block: bytes) -> bool:
    """The header's checksum field matches its bytes (summed unsigned, or signed as some
    old tars did), the field itself counted as spaces."""
    try:
        stated = _number(block[148:156])
    except _Refused:
        return False
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    if stated == unsigned:
        return True
    rest = block[:148] + block[156:]
    high = len(rest) - len(rest.translate(None, bytes(range(128, 256))))
    return stated == unsigned - 256 * high


def _padded(size: int) -> int:
    return -size % BLOCK


class _Stream:
    """The tar bytes of ``body`` in order, gzip inflated a chunk at a time; refused when
    more than ``limit`` bytes would come out."""

    def __init__(self, body: bytes, limit: int, refuse_past: str) -> None:
        self._body = memoryview(body)
        self._gzip = body[:2] == _GZIP_MAGIC
        self._fed = 0  # body bytes handed on (to the inflater, or out as they are)
        self._inflater = zlib.decompressobj(wbits=31)
        self.produced = 0
        self._limit = limit
        self._refuse_past = refuse_past

    def _next(self, want: int) -> bytes | memoryview:
        """Up to ``want`` bytes (fewer only at the end; empty at the end)."""
        if not self._gzip:
            piece = self._body[self._fed : self._fed + want]
            self._fed += len(piece)
            return self._count(piece)
        while True:
            inflater = self._inflater
            if inflater.eof:  # a gzip member ended: another may follow (anything else: the end)
                start = self._fed - len(inflater.unused_data)
                if self._body[start : start + 2] != _GZIP_MAGIC:
                    return b""
                self._inflater = inflater = zlib.decompressobj(wbits=31)
                self._fed = start
            data: bytes | memoryview = inflater.unconsumed_tail
            if not data:
                data = self._body[self._fed : self._fed + _CHUNK]
                self._fed += len(data)
                if not data:
                    raise _Refused("the gzip stream ends early (a truncated upload?)")
            try:
                out = inflater.decompress(data, want)
            except zlib.error as exc:
                raise _Refused(f"the gzip stream is corrupt ({exc})") from None
            if out:
                return self._count(out)

    def _count(self, piece: bytes | memoryview) -> bytes | memoryview:
        self.produced += len(piece)
        if self.produced > self._limit:
            raise PayloadTooLargeError(self._refuse_past)
        return piece

    def read(self, size: int) -> bytes:
        """Exactly ``size`` bytes (``size`` is small: a header, or capped metadata)."""
        return b"".join(bytes(piece) for piece in self.pieces(size))

    def block(self) -> bytes | None:
        """The next 512-byte block; None at the very end of the stream."""
        first = self._next(BLOCK)
        if not first:
            return None
        if len(first) == BLOCK:
            return bytes(first)
        return bytes(first) + self.read(BLOCK - len(first))

    def pieces(self, size: int) -> Iterator[bytes | memoryview]:
        """``size`` bytes, a bounded chunk at a time."""
        left = size
        while left:
            piece = self._next(min(left, _CHUNK))
            if not piece:
                raise _Refused("the archive ends in the middle of a member (truncated?)")
            left -= len(piece)
            yield piece

    def skip(self, size: int) -> None:
        for _ in self.pieces(size):
            pass


class _Reader:
    """The members of one archive, read header by header (``what`` names it in messages)."""

    def __init__(self, body: bytes, *, max_bytes: int, what: str) -> None:
        self.what = what
        self._meta_total = 0
        limit = max_bytes + (MAX_CONTEXT_FILES + 2) * 2 * BLOCK + MAX_META_BYTES
        self.stream = _Stream(
            body,
            limit,
            f"the {what} inflates to more than {limit >> 20} MB of tar (its files may "
            f"take {max_bytes >> 20} MB); a gzip bomb is not unpacked: send the files only",
        )

    def _meta(self, kind: bytes, size: int, index: int, after: str | None) -> bytes:
        label = _META[kind]
        where = f"after member {after!r}" if after else "at the start"
        if size > MAX_META_HEADER_BYTES:
            raise PayloadTooLargeError(
                f"the {self.what}'s {label} {where} (before member #{index + 1}) declares "
                f"{size} bytes; at most {MAX_META_HEADER_BYTES} are read: pack it again "
                "without such long metadata (names up to 1024 bytes, e.g. tar --format=gnu)"
            )
        self._meta_total += BLOCK + size + _padded(size)
        if self._meta_total > MAX_META_BYTES:
            raise PayloadTooLargeError(
                f"the {self.what}'s PAX and GNU long-name headers take more than "
                f"{MAX_META_BYTES >> 20} MB together ({label} {where}); pack it again with "
                "plain headers (tar --format=gnu)"
            )
        data = self.stream.read(size)
        self.stream.skip(_padded(size))
        return data

    def _pax(self, data: bytes, after: str | None) -> dict[str, str]:
        """The records of a PAX header (``LEN KEY=VALUE\\n`` each)."""
        records: dict[str, str] = {}
        pos = 0
        while pos < len(data) and data[pos] != 0:
            space = data.find(b" ", pos, pos + 20)
            digits = data[pos:space] if space > pos else b""
            if not digits.isdigit():
                raise _Refused(f"a PAX header after {after!r} is malformed")
            end = pos + int(digits)
            record = data[space + 1 : end]
            if end > len(data) or end <= space or not record.endswith(b"\n"):
                raise _Refused(f"a PAX header after {after!r} is malformed")
            key, eq, value = record[:-1].partition(b"=")
            if not eq:
                raise _Refused(f"a PAX header after {after!r} is malformed")
            try:
                records[key.decode()] = value.decode()
            except UnicodeDecodeError:
                raise _Refused(f"a PAX header after {after!r} is not UTF-8") from None
            pos = end
        return records

    def members(self) -> Iterator[_Member]:
        """Each member in order; the caller reads (``stream.pieces``) or leaves its data."""
        stream = self.stream
        self._meta_total = 0
        pax: dict[str, str] = {}
        long_name: bytes | None = None
        long_link: bytes | None = None
        index = 0
        after: str | None = None
        while True:
            block = stream.block()
            if block is None:
                if index == 0 and not pax and stream.produced == 0:
                    raise _Refused("the body is empty")
                return  # a tar without its end-of-archive blocks: what it holds is whole
            if not block.strip(b"\x00"):
                return  # the end-of-archive marker; whatever follows is never read
            if not _checksum_ok(block):
                at = f"after member {after!r}" if after else "at the start"
                raise _Refused(f"the header {at} has a wrong checksum: this is no tar archive")
            kind = block[156:157]
            size = _number(block[124:136])
            if kind in _META:
                data = self._meta(kind, size, index, after)
                if kind == b"x":
                    pax.update(self._pax(data, after))
                elif kind == b"g":
                    shared = self._pax(data, after)  # git archive's commit id: a comment
                    if shared.keys() & {"path", "linkpath", "size"}:
                        raise InvalidRequestError(
                            f"the {self.what} has a PAX global header that renames or resizes "
                            "every member; pack it again without one (tar --format=gnu)"
                        )
                elif kind == b"L":
                    long_name = _nts(data)
                else:
                    long_link = _nts(data)
                continue
            raw = long_name if long_name is not None else _nts(block[0:100])
            if long_name is None and block[257:263] == b"ustar\x00" and _nts(block[345:500]):
                raw = _nts(block[345:500]) + b"/" + raw
            name = pax["path"] if "path" in pax else self._text(raw, "name", index, after)
            linkname = ""
            if kind in (b"1", b"2"):
                link = long_link if long_link is not None else _nts(block[157:257])
                linkname = pax.get("linkpath") or self._text(link, "link target", index, after)
            if "size" in pax:
                if not pax["size"].isdigit():
                    raise _Refused(f"member {name!r} has a PAX size that is no number")
                size = int(pax["size"])
            if any(key.startswith("GNU.sparse.") for key in pax):
                kind = b"S"
            if kind == b"\x00" and name.endswith("/"):
                kind = b"5"  # an old tar's directory
            data_end = stream.produced + (size + _padded(size) if kind in _REGULAR else 0)
            yield _Member(index, name, kind, size, _number(block[100:108]), linkname)
            stream.skip(data_end - stream.produced)  # what the caller did not read
            index += 1
            after = name
            pax, long_name, long_link = {}, None, None

    def _text(self, raw: bytes, what: str, index: int, after: str | None) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError:
            where = f"after {after!r}" if after else "the first"
            raise InvalidRequestError(
                f"member #{index + 1} of the {self.what} ({where}) has a {what} that is not "
                f"UTF-8 ({raw[:60]!r}); rename it"
            ) from None


@dataclass
class _Plan:
    """What the scan found: the tree to make, checked whole before anything is written."""

    kinds: dict[Parts, str]
    links: dict[Parts, str]


def _parts(member: _Member, what: str) -> Parts:
    """The member's normalised relative path (``()`` for the archive's root folder)."""
    name = member.name
    label = f"the {what}'s member {name[:200]!r}"
    if "\x00" in name:
        raise InvalidRequestError(f"{label} has a NUL byte in its name; rename it")
    if name.startswith("/"):
        raise InvalidRequestError(
            f"{label} has an absolute name; pack the files relative to the folder "
            "(tar -C folder -cf - .)"
        )
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise InvalidRequestError(
            f"{label} climbs out with '..'; pack the files relative to the folder "
            "(tar -C folder -cf - .)"
        )
    if len(name.encode()) > MAX_NAME_BYTES or len(parts) > MAX_DEPTH:
        raise InvalidRequestError(
            f"{label} has a name over {MAX_NAME_BYTES} bytes or {MAX_DEPTH} folders deep; "
            "shorten it"
        )
    if any(len(p.encode()) > MAX_COMPONENT_BYTES for p in parts):
        raise InvalidRequestError(
            f"{label} has a part of its name over {MAX_COMPONENT_BYTES} bytes; shorten it"
        )
    return parts


def _kind(member: _Member, what: str) -> str:
    """``file``, ``dir`` or ``link``; anything else is refused naming the member."""
    label = f"the {what}'s member {member.name[:200]!r}"
    if member.kind in _REGULAR:
        if member.mode & _SPECIAL_BITS:
            raise InvalidRequestError(
                f"{label} has mode {member.mode & _FILE_BITS:#o}: set-uid, set-gid and sticky "
                "bits are not taken; clear them (chmod ug-s,-t) and pack it again"
            )
        return "file"
    if member.kind in (b"5", b"2"):
        if member.size:
            raise InvalidRequestError(
                f"{label} is a directory or link that declares {member.size} bytes of data; "
                "this is no tar archive a tar tool writes"
            )
        return "dir" if member.kind == b"5" else "link"
    if member.kind == b"1":
        raise InvalidRequestError(
            f"{label} is a hard link (to {member.linkname[:200]!r}); links are not taken: "
            "store the file itself (tar --hard-dereference)"
        )
    described = _KINDS.get(member.kind, f"of type {member.kind!r}")
    raise InvalidRequestError(
        f"{label} is {described}; only regular files, folders and symbolic links inside "
        f"the {what} are taken: leave it out"
    )


def _inside(path: Parts, target: str, links: dict[Parts, str]) -> bool:
    """Whether the link ``path`` -> ``target``, resolved lexically through ``links`` (which
    may chain), stays inside the archive's root."""
    if not target or target.startswith("/") or "\x00" in target:
        return False
    stack = list(path[:-1])
    pending = target.split("/")
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return False
            stack.pop()
            continue
        stack.append(part)
        further = links.get(tuple(stack))
        if further is not None:
            hops += 1
            if hops > MAX_LINK_HOPS or not further or further.startswith("/"):
                return False
            stack.pop()
            pending = further.split("/") + pending
    return True


def _scan(reader: _Reader, max_bytes: int) -> _Plan:
    """Check every member (nothing is written); the plan of the tree."""
    what = reader.what
    kinds: dict[Parts, str] = {(): "dir"}
    links: dict[Parts, str] = {}
    total = 0
    limits = f"{max_bytes >> 20} MB or {MAX_CONTEXT_FILES} files, the most that is taken" + (
        " (max_context_mb); leave out what the Dockerfile does not COPY"
        if what == "build context"
        else "; leave out what the task does not need"
    )
    for member in reader.members():
        parts = _parts(member, what)
        kind = _kind(member, what)
        label = f"the {what}'s member {member.name[:200]!r}"
        if kind == "file":
            total += member.size
            if total > max_bytes:
                raise PayloadTooLargeError(
                    f"the {what} unpacks to more than {limits} ({label} declares "
                    f"{member.size} bytes)"
                )
        if not parts:
            if kind != "dir":
                raise InvalidRequestError(f"{label} names the folder itself; rename it")
            continue
        for depth in range(1, len(parts)):
            above = kinds.get(parts[:depth])
            if above in ("file", "link"):
                raise InvalidRequestError(
                    f"{label} sits below {'/'.join(parts[:depth])!r}, which the archive makes "
                    f"a {'symbolic link' if above == 'link' else 'file'}; nothing is written "
                    "through a link or into a file: pack the real folder"
                )
            if above is None:
                kinds[parts[:depth]] = "implied"
        earlier = kinds.get(parts)
        if earlier is not None and not (kind == "dir" and earlier in ("dir", "implied")):
            raise InvalidRequestError(
                f"{label} appears twice (as a {earlier}, then as a {kind}); a member is never "
                "overwritten: pack each path once"
            )
        kinds[parts] = kind
        if kind == "link":
            links[parts] = member.linkname
        if len(kinds) > MAX_CONTEXT_FILES + 1 or member.index >= MAX_CONTEXT_FILES:
            raise PayloadTooLargeError(f"the {what} unpacks to more than {limits}")
    for path, target in links.items():
        if not _inside(path, target, links):
            raise InvalidRequestError(
                f"the {what}'s member {'/'.join(path)[:200]!r} is a symbolic link to "
                f"{target[:200]!r}, which leads out of the {what} (or chains more than "
                f"{MAX_LINK_HOPS} links); only relative links that stay inside are taken: "
                "store the file itself (tar -h / --dereference)"
            )
    return _Plan(kinds, links)


class _Dirs:
    """Descriptors of the folders made under the root (the last one kept open)."""

    def __init__(self, root: Path) -> None:
        self.root = os.open(root, _DIR_FLAGS)
        self._last: tuple[Parts, int] | None = None

    def open(self, parts: Parts) -> int:
        if not parts:
            return self.root
        if self._last is not None and self._last[0] == parts:
            return self._last[1]
        fd = os.dup(self.root)
        try:
            for part in parts:
                # made for an earlier member when it exists; O_NOFOLLOW below refuses a link
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        self._close_last()
        self._last = (parts, fd)
        return fd

    def _close_last(self) -> None:
        if self._last is not None:
            os.close(self._last[1])
            self._last = None

    def close(self) -> None:
        self._close_last()
        os.close(self.root)


def _write(reader: _Reader, plan: _Plan, target: Path) -> None:
    """Make the planned tree under ``target``: folders, files, then links."""
    dirs = _Dirs(target)
    try:
        for member in reader.members():
            parts = _parts(member, reader.what)
            kind = plan.kinds.get(parts)
            if kind == "dir":
                dirs.open(parts)
            elif kind == "file":
                mode = 0o755 if member.mode & 0o100 else 0o644
                fd = os.open(parts[-1], _FILE_FLAGS, 0o600, dir_fd=dirs.open(parts[:-1]))
                try:
                    for piece in reader.stream.pieces(member.size):
                        view = memoryview(piece)
                        while view:
                            view = view[os.write(fd, view) :]
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
        for path, link in sorted(plan.links.items()):
            os.symlink(link, path[-1], dir_fd=dirs.open(path[:-1]))
    finally:
        dirs.close()


def unpack_context(
    archive: bytes, target: Path, *, max_bytes: int, what: str = "build context"
) -> None:
    """Unpack ``archive`` (a ``what``: the error messages name it) into the folder ``target``
    (which must exist, and should be empty); refused (422, or 413 past ``max_bytes`` or
    :data:`MAX_CONTEXT_FILES` members) before anything is written."""
    for magic, name in _OTHER_COMPRESSIONS:
        if archive.startswith(magic):
            raise InvalidRequestError(
                f"the {what} is compressed with {name}; send a plain tar or a gzip-compressed "
                "one (tar -czf)"
            )
    try:
        plan = _scan(_Reader(archive, max_bytes=max_bytes, what=what), max_bytes)
        _write(_Reader(archive, max_bytes=max_bytes, what=what), plan, target)
    except _Refused as exc:
        raise InvalidRequestError(
            f"the body is not a readable tar archive ({exc}); send the {what} as "
            "application/x-tar (optionally gzip-compressed)"
        ) from None
    except FileExistsError as exc:
        raise InvalidRequestError(
            f"the {what} cannot be unpacked: {exc.filename!r} is there already; unpack it "
            "into an empty folder"
        ) from None


def dockerfile_in(context: Path, relative: str) -> Path:
    """The Dockerfile at ``relative`` in ``context``; refused when it climbs out or is absent."""
    rel = PurePosixPath(relative)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise InvalidRequestError(
            f"dockerfile={relative!r}: give a path inside the archive, e.g. 'Dockerfile'"
        )
    path = context.joinpath(*rel.parts)
    if path.is_symlink() or not path.is_file():
        raise InvalidRequestError(
            f"dockerfile={relative!r}: the archive holds no such file; put the Dockerfile at "
            "the archive's root or name its path with ?dockerfile="
        )
    return path
