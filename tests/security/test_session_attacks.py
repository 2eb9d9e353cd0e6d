"""Attacks on a session through its HTTP API, against a real service and real containers.

Each attack is a request a client (or an agent driving a session) can send: a path
meant to reach a command inside the sandbox as an option, a file written through a
link to a directory the sandbox may not write, a working directory it may not
enter. The safe outcome asserted each time: a 4xx naming what is wrong, nothing
changed in the workspace or outside it, and the session still answering. Under
runc and under gVisor (the shipped ``gvisor`` policy).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.docker

FILES = {"keep.txt": "kept", "src/app.py": "print('app')\n", "-d/inside.txt": "dash"}
LINKS = {
    "etc-link": "/etc",
    "runner-link": "/opt/sandbox/runner",
    "judge-link": "/judge",
    "proc-link": "/proc/1",  # the runner's: root's, unreadable to the sandbox uid
}


@pytest.fixture(params=["default", "gvisor"])
def session(http: httpx.Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A session with a few files and links out of the workspace, closed afterwards."""
    links = " && ".join(f"ln -s {target} {name}" for name, target in LINKS.items())
    created = http.post(
        "/v1/sessions",
        json={"policy": request.param, "files": FILES, "setup": f"{links} && printf x > plain"},
    )
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    try:
        yield session_id
    finally:
        assert http.delete(f"/v1/sessions/{session_id}").status_code == 204


def exec_(http: httpx.Client, session_id: str, **body: Any) -> httpx.Response:
    return http.post(f"/v1/sessions/{session_id}/exec", json=body)


def workspace(http: httpx.Client, session_id: str) -> list[str]:
    """Every entry of /workspace with its type and contents, as the session itself sees it."""
    listed = exec_(
        http,
        session_id,
        command="find . -mindepth 1 -printf '%y %p ' "
        "-exec sh -c '[ -f \"$0\" ] && cat \"$0\"; true' {} \\; -printf '\\n' | sort",
    )
    assert listed.status_code == 200, listed.text
    assert listed.json()["exit_code"] == 0, listed.json()
    return str(listed.json()["stdout"]).splitlines()


def assert_alive(http: httpx.Client, session_id: str, before: list[str]) -> None:
    """The session answers, and its workspace is exactly what it was."""
    assert workspace(http, session_id) == before
    ran = exec_(http, session_id, command=["echo", "alive"])
    assert ran.status_code == 200, ran.text
    assert ran.json()["stdout"] == "alive\n"


@pytest.mark.parametrize("path", ["-delete", "-fprint", "--help", "-L"])
def test_a_listed_path_is_never_an_option(http: httpx.Client, session: str, path: str) -> None:
    """``?path=-delete`` once reached ``find`` as its ``-delete`` and emptied the workspace."""
    before = workspace(http, session)
    listed = http.get(f"/v1/sessions/{session}/dir", params={"path": path})
    assert listed.status_code == 404, listed.text
    assert listed.json()["code"] == "not_found"
    assert_alive(http, session, before)


def test_a_directory_whose_name_starts_with_a_dash_is_listed(
    http: httpx.Client, session: str
) -> None:
    listed = http.get(f"/v1/sessions/{session}/dir", params={"path": "-d"})
    assert listed.status_code == 200, listed.text
    assert listed.json() == [{"name": "inside.txt", "kind": "file", "size": 4}]
    absolute = http.get(f"/v1/sessions/{session}/dir", params={"path": "/workspace/src/../-d"})
    assert absolute.json() == listed.json()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("etc-link/evil", "etc-link/evil"),
        ("runner-link/evil.py", "runner-link/evil.py"),
        ("judge-link/evil", "judge-link/evil"),
        ("plain/below", "plain"),
    ],
)
def test_writing_where_the_sandbox_may_not_is_a_422(
    http: httpx.Client, session: str, path: str, why: str
) -> None:
    """A PUT through a link to a read-only or foreign directory, or below a file."""
    before = workspace(http, session)
    put = http.put(f"/v1/sessions/{session}/files", json={"files": {path: "pwned"}})
    assert put.status_code == 422, put.text
    assert put.json()["code"] == "invalid_request"
    assert why in put.json()["message"]
    assert_alive(http, session, before)
    # Nothing was written outside, as root sees it either.
    for target in ("/etc/evil", "/opt/sandbox/runner/evil.py", "/judge/evil"):
        seen = exec_(http, session, command=["test", "-e", target])
        assert seen.json()["exit_code"] == 1, target


@pytest.mark.parametrize(
    "cwd", ["/judge", "/nonexistent", "/workspace/plain", "/workspace/judge-link"]
)
def test_a_working_directory_it_cannot_enter_is_a_422(
    http: httpx.Client, session: str, cwd: str
) -> None:
    before = workspace(http, session)
    ran = exec_(http, session, command=["pwd"], cwd=cwd)
    assert ran.status_code == 422, ran.text
    assert ran.json()["code"] == "invalid_request"
    assert cwd in ran.json()["message"]
    assert_alive(http, session, before)


def test_a_program_that_cannot_be_executed_is_a_422(http: httpx.Client, session: str) -> None:
    """A file without its exec bit, or a directory, as the command: the client's mistake."""
    before = workspace(http, session)
    for command in (["./keep.txt"], ["./src"]):
        ran = exec_(http, session, command=command)
        assert ran.status_code == 422, ran.text
        assert ran.json()["code"] == "invalid_request"
        assert command[0] in ran.json()["message"]
    assert_alive(http, session, before)


@pytest.mark.parametrize(
    "path", ["proc-link/environ", "etc-link/passwd", "/workspace/judge-link/x", "plain/x"]
)
def test_reading_through_a_link_or_below_a_file_is_a_404(
    http: httpx.Client, session: str, path: str
) -> None:
    """The runner reads as root: a link on the way would hand it the runner's own
    environment (gVisor once followed a link opened O_DIRECTORY | O_NOFOLLOW)."""
    before = workspace(http, session)
    read = http.get(f"/v1/sessions/{session}/files", params={"path": path})
    assert read.status_code == 404, read.text
    assert read.json()["code"] == "not_found"
    assert "symlink refused" in read.json()["message"]  # a file where a directory was expected too
    assert_alive(http, session, before)


@pytest.mark.parametrize("path", ["/judge", "judge-link", "proc-link", "plain"])
def test_listing_what_the_sandbox_cannot_see_is_harmless(
    http: httpx.Client, session: str, path: str
) -> None:
    before = workspace(http, session)
    listed = http.get(f"/v1/sessions/{session}/dir", params={"path": path})
    assert listed.status_code in (200, 404), listed.text
    if listed.status_code == 200:  # find does not follow the link, nor list a file
        assert listed.json() == []
    assert_alive(http, session, before)


def test_a_session_created_with_a_file_below_a_file_is_a_422(http: httpx.Client) -> None:
    created = http.post("/v1/sessions", json={"files": {"a": "1", "a/b": "2"}})
    assert created.status_code == 422, created.text
    assert created.json()["code"] == "invalid_request"
    assert "a/b" in created.json()["message"]
