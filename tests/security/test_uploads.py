"""Hostile build-context uploads against a real service over loopback HTTP: archives that
would write outside the folder they are unpacked into (``..``, an absolute name, a symbolic
link then a file through it, a hard link to a host file), a gzip bomb and a PAX header that
declares more than it may. Each is refused with a 4xx naming the member, nothing lands on
the host outside the unpack folder, and the service goes on building."""

from __future__ import annotations

import gzip
import io
import secrets
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Service, environments_service

pytestmark = pytest.mark.docker

CONFIG = 'image_aliases:\n  "python:3.13-slim": sandbox-python\nmax_context_mb: 4\n'
DOCKERFILE = b"FROM python:3.13-slim\n"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with environments_service(tmp_path_factory.mktemp("state"), CONFIG) as svc:
        yield svc


def member(name: str, data: bytes = b"x", **fields: object) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in (member("Dockerfile", DOCKERFILE), *members):
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def post(service: Service, body: bytes) -> httpx.Response:
    with httpx.Client(base_url=service.url, timeout=120) as http:
        return http.post(
            "/v1/environments", content=body, headers={"Content-Type": "application/x-tar"}
        )


def test_members_that_would_escape_are_refused_and_write_nothing(service: Service) -> None:
    landing = Path("/tmp") / f"upload-escape-{secrets.token_hex(6)}"
    landing.mkdir()
    try:
        link = tarfile.TarInfo("out")
        link.type, link.linkname = tarfile.SYMTYPE, str(landing)
        hard = tarfile.TarInfo("pw")
        hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/passwd"
        attacks = {
            "'../": archive(member(f"../../../../../../..{landing}/dotdot")),
            "absolute name": archive(member(f"{landing}/absolute")),
            "'out/through-link' sits below 'out'": archive((link, b""), member("out/through-link")),
            "'pw' is a hard link": archive((hard, b"")),
        }
        for needle, body in attacks.items():
            answer = post(service, body)
            assert answer.status_code in (400, 422), (needle, answer.text)
            assert needle in answer.text, (needle, answer.text)
        assert list(landing.iterdir()) == []
    finally:
        for path in landing.iterdir():
            path.unlink()
        landing.rmdir()


def test_a_gzip_bomb_and_a_huge_pax_header_are_refused_without_unpacking(
    service: Service,
) -> None:
    zeros = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=zeros, mode="wb", compresslevel=9) as out,
        tarfile.open(fileobj=out, mode="w|") as tar,
    ):
        dockerfile, text = member("Dockerfile", DOCKERFILE)
        tar.addfile(dockerfile, io.BytesIO(text))
        info = tarfile.TarInfo("zeros")
        info.size = 64 << 20  # 16 times the 4 MB limit, compressed to ~64 KB
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    bomb = post(service, zeros.getvalue())
    assert bomb.status_code == 413, bomb.text
    assert "4 MB" in bomb.text, bomb.text

    pax, data = member("big")
    pax.pax_headers = {"comment": "y" * (1 << 20)}  # a 1 MB extended header
    huge = post(service, archive((pax, data)))
    assert huge.status_code == 413, huge.text
    assert "PAX extended header" in huge.text, huge.text

    ok = post(service, archive(member("notes.txt", b"fine\n")))
    assert ok.status_code == 200, ok.text
