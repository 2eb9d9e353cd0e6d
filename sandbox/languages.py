"""How each language's program is written into the sandbox and run."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidRequestError


@dataclass(frozen=True)
class Language:
    """One language: the image that has it, the file the code goes in, the command that runs it."""

    name: str
    image: str
    source_file: str
    run: tuple[str, ...]


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", image="python", source_file="main.py", run=("python3", "main.py")),
        Language("bash", image="python", source_file="main.sh", run=("bash", "main.sh")),
    )
}


def get_language(name: str) -> Language:
    """The language called ``name``; a clear error listing the known ones otherwise."""
    try:
        return LANGUAGES[name]
    except KeyError:
        known = ", ".join(sorted(LANGUAGES))
        raise InvalidRequestError(f"unknown language {name!r}; use one of: {known}") from None
