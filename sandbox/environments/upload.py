"""An uploaded build context: a tar archive (optionally gzip-compressed), unpacked safely.

Members are unpacked with :func:`tarfile.data_filter` (no absolute paths, no
``..``, no links out of the folder, no devices, no set-id bits); the sizes the
headers state are summed first, so an archive that would unpack past the limit
is refused (413) before any of it is written.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path, PurePosixPath

from sandbox.errors import InvalidRequestError, PayloadTooLargeError

from .build import MAX_CONTEXT_FILES


def unpack_context(
    archive: bytes, target: Path, *, max_bytes: int, what: str = "build context"
) -> None:
    """Unpack ``archive`` (a ``what``: the error messages name it) into the folder ``target``
    (which must exist)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
            members = []
            total = 0
            for member in tar:
                total += member.size
                members.append(member)
                if total > max_bytes or len(members) > MAX_CONTEXT_FILES:
                    raise PayloadTooLargeError(
                        f"the {what} unpacks to more than {max_bytes >> 20} MB or "
                        f"{MAX_CONTEXT_FILES} files, the most that is taken"
                        + (
                            " (max_context_mb); leave out what the Dockerfile does not COPY"
                            if what == "build context"
                            else ""
                        )
                    )
            tar.extractall(target, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, PayloadTooLargeError):
            raise
        raise InvalidRequestError(
            f"the body is not a readable tar archive ({exc}); send the {what} as "
            "application/x-tar (optionally gzip-compressed)"
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
