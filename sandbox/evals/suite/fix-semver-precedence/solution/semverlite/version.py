"""Versions and their precedence."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"
_PATTERN = re.compile(
    rf"^(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_PRE_ID}(?:\.{_PRE_ID})*))?"
    rf"(?:\+(?P<build>{_BUILD_ID}(?:\.{_BUILD_ID})*))?$"
)


def _identifier_key(identifier: str) -> tuple[int, int, str]:
    # Numeric identifiers compare numerically and below alphanumeric ones.
    if identifier.isdigit():
        return (0, int(identifier), "")
    return (1, 0, identifier)


@dataclass(frozen=True, order=False, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = field(default=())
    build: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def _key(self) -> tuple:
        # A release sorts after all of its pre-releases; a longer set of
        # pre-release identifiers wins when all the preceding ones are equal.
        release = (1,) if not self.prerelease else (0, *map(_identifier_key, self.prerelease))
        return (self.major, self.minor, self.patch, release)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()

    def __le__(self, other: Version) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: Version) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: Version) -> bool:
        return self._key() >= other._key()

    def bump(self, part: str) -> Version:
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ValueError(f"cannot bump {part!r}: use major, minor or patch")


def parse(text: str) -> Version:
    match = _PATTERN.match(text)
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    pre = match.group("pre")
    build = match.group("build")
    return Version(
        int(match.group("major")),
        int(match.group("minor")),
        int(match.group("patch")),
        tuple(pre.split(".")) if pre else (),
        tuple(build.split(".")) if build else (),
    )
