"""The Dockerfile reader: every image a build reads is resolved, and what it cannot read as a
builder would is refused (an image reference must not hide from it)."""

from __future__ import annotations

import pytest

from sandbox.environments.dockerfile import FINAL_STAGE, rewrite_from_lines
from sandbox.errors import InvalidRequestError

ALLOWED = {
    "sandbox-python": "sandbox-python:cafe",
    "sandbox-env:0123456789ab": "sandbox-env:0123456789ab",
}


def resolve(image: str) -> str:
    if image not in ALLOWED:
        raise InvalidRequestError(f"FROM {image}: refused")
    return ALLOWED[image]


def rewrite(text: str, **args: str) -> tuple[str, list[str]]:
    out = rewrite_from_lines(text, resolve=resolve, build_args=args, source="Dockerfile")
    return out.text, [written for written, _ in out.bases]


def test_from_and_copy_from_an_image_are_resolved_stages_are_not() -> None:
    text, bases = rewrite(
        "FROM sandbox-python AS build\nRUN make\n"
        "FROM sandbox-python\nCOPY --from=build /out /out\nCOPY --from=0 /a /a\n"
        "COPY --from=sandbox-env:0123456789ab /data /data\n"
    )
    assert bases == ["sandbox-python", "sandbox-python", "sandbox-env:0123456789ab"]
    assert "FROM sandbox-python:cafe AS build\n" in text
    assert f"FROM sandbox-python:cafe AS {FINAL_STAGE}\n" in text
    assert "COPY --from=build /out /out\n" in text and "COPY --from=0 /a /a\n" in text


@pytest.mark.parametrize(
    ("dockerfile", "refusal"),
    [
        # Another tenant's environment, or any image not allowed, by either instruction.
        ("FROM sandbox-env:ffffffffffff\n", "refused"),
        ("FROM sandbox-python\nCOPY --from=sandbox-env:ffffffffffff / /x\n", "refused"),
        ("FROM sandbox-python\nCOPY --from=registry.example/x:1 / /x\n", "refused"),
        ("FROM sandbox-python\nCOPY \\\n  --from=busybox / /x\n", "on the COPY line"),
        # Ways a builder reads a FROM that a naive reader does not.
        ("# escape=`\nFROM sandbox-python\nRUN echo `\nFROM busybox\n", "parser directive"),
        ("# syntax=docker/dockerfile:1\nFROM sandbox-python\n", "parser directive"),
        ("\ufeffFROM busybox\n", "byte-order mark"),
        ("FROM sandbox-python\nRUN echo \\\x0c\nFROM busybox\n", "control character"),
        ("FROM sandbox-python\nRUN <<EOF\necho \\\nEOF\nFROM busybox\n", "here-documents"),
        ("FROM sandbox-python\nONBUILD COPY --from=busybox / /x\n", "ONBUILD"),
        (
            "FROM sandbox-python\nRUN --mount=type=bind,from=busybox,target=/b ls /b\n",
            "flags on RUN",
        ),
        ("FROM sandbox-python\nRUN --network=host true\n", "flags on RUN"),
        # ADD of a URL is fetched by the builder from the host's own network.
        ("FROM sandbox-python\nADD http://127.0.0.1:8000/admin /x\n", "host's own network"),
        (
            'FROM sandbox-python\nADD ["https://169.254.169.254/latest", "/x"]\n',
            "host's own network",
        ),
        ("FROM sandbox-python\nADD git@example.com:a/b.git /src\n", "host's own network"),
        ("FROM sandbox-python\nADD \\\n  http://127.0.0.1/ /x\n", "host's own network"),
        ("FROM \\\n  busybox\n", "on one line"),
    ],
)
def test_what_could_hide_an_image_is_refused(dockerfile: str, refusal: str) -> None:
    with pytest.raises(InvalidRequestError, match=refusal):
        rewrite(dockerfile)


def test_a_directive_after_the_first_instruction_is_a_comment() -> None:
    text, bases = rewrite("FROM sandbox-python\n# escape=`\nRUN true\n")
    assert bases == ["sandbox-python"] and "# escape=`" in text


def test_comments_and_blank_lines_inside_a_continued_instruction() -> None:
    text, bases = rewrite(
        "FROM sandbox-python\nRUN echo a \\\n# a comment\n\n  && echo b\nCOPY x /x\n"
    )
    assert bases == ["sandbox-python"] and "COPY x /x" in text


def test_build_args_and_global_arg_defaults_reach_from() -> None:
    _, bases = rewrite("ARG IMG=sandbox-nothing\nFROM ${IMG}\n", IMG="sandbox-python")
    assert bases == ["sandbox-python"]
    with pytest.raises(InvalidRequestError, match=r"\$OTHER, which has no value"):
        rewrite("FROM $OTHER\n")
