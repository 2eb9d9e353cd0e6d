"""Policy versions: each policy's digest and when it was loaded, and what a reload changes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from .model import Policy


class PolicyVersion(BaseModel):
    """One policy as the service holds it: its name, digest and load time (ISO 8601, UTC)."""

    name: str
    digest: str
    loaded_at: str


class PolicyChange(BaseModel):
    """A policy whose resolved content changed: its digest before and after."""

    name: str
    old_digest: str
    new_digest: str


class PolicyChanges(BaseModel):
    """What replacing one set of policies by another does, name by name."""

    added: list[PolicyVersion] = Field(default_factory=list)
    changed: list[PolicyChange] = Field(default_factory=list)
    removed: list[PolicyVersion] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)

    @property
    def replaced(self) -> set[str]:
        """Names whose old version is gone: the changed and the removed ones."""
        return {c.name for c in self.changed} | {v.name for v in self.removed}


def stamp_versions(
    policies: Mapping[str, Policy],
    previous: Mapping[str, PolicyVersion] | None = None,
    now: datetime | None = None,
) -> dict[str, PolicyVersion]:
    """Versions of ``policies``; one whose digest ``previous`` already holds keeps its time."""
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    versions = {}
    for name in sorted(policies):
        digest = policies[name].digest
        kept = (previous or {}).get(name)
        if kept is None or kept.digest != digest:
            kept = PolicyVersion(name=name, digest=digest, loaded_at=when)
        versions[name] = kept
    return versions


def compare_versions(
    old: Mapping[str, PolicyVersion], new: Mapping[str, PolicyVersion]
) -> PolicyChanges:
    """Which of ``new`` are added, changed or unchanged against ``old``, and which removed."""
    changes = PolicyChanges()
    for name in sorted(new.keys() | old.keys()):
        before, after = old.get(name), new.get(name)
        if before is None and after is not None:
            changes.added.append(after)
        elif after is None and before is not None:
            changes.removed.append(before)
        elif before is not None and after is not None and before.digest != after.digest:
            changes.changed.append(
                PolicyChange(name=name, old_digest=before.digest, new_digest=after.digest)
            )
        else:
            changes.unchanged.append(name)
    return changes
