"""Policy files: reading, ``extends:`` chains, dangerous-key checks and validation
(:func:`parse_policy`, :func:`load_policy`, :func:`load_policy_dir`).
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ValidationError,
)

from sandbox.errors import PolicyError

from .keys import _DANGEROUS_KEYS, _dotted, _KeyPath, _normalise_key, _Origins, _show
from .limits import MAX_EXTENDS_DEPTH, MAX_POLICY_BYTES, POLICY_SUFFIXES
from .messages import _policy_error, config_error
from .model import Policy
from .paths import _allowlist_roots
from .yaml_loader import _load_yaml, load_yaml_mapping

logger = logging.getLogger(__name__)


def _check_raw(data: Any, path: _KeyPath, source: str) -> None:
    """Refuse dangerous keys, nulls and a YAML ``name`` before model validation."""
    if isinstance(data, dict):
        is_env_names = path == ("env", "set")
        for key, value in data.items():
            here = (*path, key)
            if not path and key == "name":
                raise PolicyError(
                    "the policy name comes from the file name and cannot be set in the file; "
                    "remove the key (or rename the file)",
                    source=source,
                    key="name",
                )
            if not is_env_names:
                reason = _DANGEROUS_KEYS.get(_normalise_key(key))
                if reason is not None:
                    raise PolicyError(
                        f"{key!r} is a dangerous setting and is refused: {reason}; remove it",
                        source=source,
                        key=_dotted(here),
                    )
            if value is None:
                raise PolicyError(
                    "has no value (null); give it a value or remove the key",
                    source=source,
                    key=_dotted(here),
                )
            _check_raw(value, here, source)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            if item is None:
                raise PolicyError(
                    "list entry is empty (null); remove it",
                    source=source,
                    key=_dotted((*path, i)),
                )
            _check_raw(item, (*path, i), source)


def read_config_file(
    path: Path, source: str, *, shorten: str = "split it with 'extends' or remove unused keys"
) -> str:
    """Read a policy or config file: a regular file, at most :data:`MAX_POLICY_BYTES`, UTF-8.

    ``shorten`` says how to make a file that is too large smaller.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PolicyError("no such file; check the path", source=source) from None
    except OSError as exc:
        raise PolicyError(f"cannot read the file: {exc.strerror}", source=source) from None
    if not stat.S_ISREG(info.st_mode):
        raise PolicyError("not a regular file; point at a .yaml file", source=source)
    size = info.st_size
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read the file: {exc.strerror}", source=source) from None
    if max(size, len(raw)) > MAX_POLICY_BYTES:
        raise PolicyError(
            f"the file is {max(size, len(raw))} bytes or more; it may be at most "
            f"{MAX_POLICY_BYTES} bytes: {shorten}",
            source=source,
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"the file is not UTF-8 (byte {exc.start}); save it as UTF-8", source=source
        ) from None


_Config = TypeVar("_Config", bound=BaseModel)


def parse_config(text: str, *, source: str, model: type[_Config]) -> _Config:
    """A config file's YAML text validated as ``model`` (hardened YAML, strict keys).

    Raises :class:`~sandbox.errors.PolicyError` naming ``source``, the key and the fix.
    """
    data: dict[str, Any] = load_yaml_mapping(text, source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, source=source, model=model) from None


def _find_parent(ref: Any, base_dir: Path | None, source: str) -> Path:
    """Resolve an ``extends`` value to a file next to (or relative to) the child."""
    if not isinstance(ref, str) or not ref.strip():
        raise PolicyError(
            f"must be a policy name or a relative .yaml path, not {_show(ref)}",
            source=source,
            key="extends",
        )
    if base_dir is None:
        raise PolicyError(
            "cannot resolve 'extends' for a policy given as text; load it from a file or pass "
            "base_dir",
            source=source,
            key="extends",
        )
    if "\x00" in ref or ref.startswith("/") or ref.startswith("~"):
        raise PolicyError(
            f"{ref!r} must be a sibling policy name (e.g. 'default') or a relative path",
            source=source,
            key="extends",
        )
    if "/" in ref or ref.endswith(POLICY_SUFFIXES):
        if not ref.endswith(POLICY_SUFFIXES):
            raise PolicyError(
                f"{ref!r}: a relative path must name a .yaml or .yml file",
                source=source,
                key="extends",
            )
        candidate = base_dir / ref
        if not candidate.is_file():
            raise PolicyError(
                f"parent policy {ref!r} not found (looked for {candidate}); fix the name",
                source=source,
                key="extends",
            )
        return candidate
    found = [base_dir / f"{ref}{suffix}" for suffix in POLICY_SUFFIXES]
    existing = [p for p in found if p.is_file()]
    if not existing:
        raise PolicyError(
            f"parent policy {ref!r} not found (looked for {', '.join(map(str, found))}); "
            "fix the name",
            source=source,
            key="extends",
        )
    if len(existing) > 1:
        raise PolicyError(
            f"parent policy {ref!r} is ambiguous ({existing[0].name} and {existing[1].name}); "
            "remove one file",
            source=source,
            key="extends",
        )
    return existing[0]


def _record_origins(data: Any, path: _KeyPath, source: str, origins: _Origins) -> None:
    if path:
        origins[path] = source
    if isinstance(data, dict):
        for key, value in data.items():
            _record_origins(value, (*path, key), source, origins)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; lists and scalars of ``over`` replace ``base``."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _resolve(
    text: str,
    *,
    source: str,
    base_dir: Path | None,
    chain: tuple[str, ...],
    origins: _Origins,
    depth: int = 0,
) -> dict[str, Any]:
    """Load one document and, through ``extends``, its ancestors; merge them.

    ``chain`` holds the resolved paths already on the way (cycle detection),
    ``depth`` the number of ``extends`` hops taken so far.
    """
    data = _load_yaml(text, source)
    _check_raw(data, (), source)
    if "extends" not in data:
        _record_origins(data, (), source, origins)
        return data
    ref = data.pop("extends")
    parent = _find_parent(ref, base_dir, source)
    identity = str(parent.resolve())
    if identity in chain:
        names = " -> ".join(Path(p).name for p in (*chain, identity))
        raise PolicyError(
            f"'extends' forms a cycle ({names}); remove one of the 'extends'",
            source=source,
            key="extends",
        )
    if depth >= MAX_EXTENDS_DEPTH:
        raise PolicyError(
            f"'extends' chains more than {MAX_EXTENDS_DEPTH} files deep; flatten the hierarchy",
            source=source,
            key="extends",
        )
    parent_source = str(parent)
    parent_data = _resolve(
        read_config_file(parent, parent_source),
        source=parent_source,
        base_dir=parent.parent,
        chain=(*chain, identity),
        origins=origins,
        depth=depth + 1,
    )
    _record_origins(data, (), source, origins)
    return _deep_merge(parent_data, data)


def _validate(
    data: dict[str, Any],
    *,
    name: str,
    source: str,
    origins: _Origins,
    mount_allowlist: Sequence[str] | None,
) -> Policy:
    try:
        roots = _allowlist_roots(mount_allowlist)
    except ValueError as exc:
        filesystem = data.get("filesystem")
        if isinstance(filesystem, dict) and filesystem.get("mounts"):
            raise PolicyError(str(exc), source=source, key="filesystem.mounts") from None
        roots = ()
    try:
        return Policy.model_validate({**data, "name": name}, context={"mount_allowlist": roots})
    except ValidationError as exc:
        raise _policy_error(exc, origins, source) from None


def _parse(
    text: str,
    *,
    name: str,
    source: str,
    base_dir: Path | None,
    mount_allowlist: Sequence[str] | None,
    chain: tuple[str, ...],
) -> Policy:
    origins: _Origins = {}
    data = _resolve(text, source=source, base_dir=base_dir, chain=chain, origins=origins)
    policy = _validate(
        data, name=name, source=source, origins=origins, mount_allowlist=mount_allowlist
    )
    logger.debug("loaded policy %s from %s (digest %s)", policy.name, source, policy.digest[:16])
    return policy


def parse_policy(
    text: str,
    *,
    name: str,
    source: str = "<string>",
    base_dir: Path | None = None,
    mount_allowlist: Sequence[str] | None = None,
) -> Policy:
    """Parse and validate a policy from YAML text.

    ``source`` names the text in error messages; ``base_dir`` is where
    ``extends`` looks for parents (needed only when the text uses it);
    ``mount_allowlist`` overrides :data:`MOUNT_ALLOWLIST_ENV`. Raises
    :class:`~sandbox.errors.PolicyError`.
    """
    return _parse(
        text,
        name=name,
        source=source,
        base_dir=base_dir,
        mount_allowlist=mount_allowlist,
        chain=(),
    )


def _name_from_path(path: Path, source: str) -> str:
    if path.suffix not in POLICY_SUFFIXES:
        raise PolicyError(
            f"a policy file name ends in .yaml or .yml, not {path.suffix or '(nothing)'!r}; "
            "rename the file",
            source=source,
        )
    return path.stem


def load_policy(path: str | Path, *, mount_allowlist: Sequence[str] | None = None) -> Policy:
    """Load ``path`` (``<name>.yaml``), following ``extends``; the name is the file stem.

    Raises :class:`~sandbox.errors.PolicyError`.
    """
    path = Path(path)
    source = str(path)
    name = _name_from_path(path, source)
    text = read_config_file(path, source)
    return _parse(
        text,
        name=name,
        source=source,
        base_dir=path.parent,
        mount_allowlist=mount_allowlist,
        chain=(str(path.resolve()),),
    )


def load_policy_dir(
    directory: str | Path, *, mount_allowlist: Sequence[str] | None = None
) -> dict[str, Policy]:
    """Load every ``*.yaml``/``*.yml`` in ``directory``, keyed by name.

    The first bad file raises :class:`~sandbox.errors.PolicyError`; two files
    with one name (``a.yaml`` and ``a.yml``) are refused.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise PolicyError("not a directory; point at the policies folder", source=str(directory))
    policies: dict[str, Policy] = {}
    for path in sorted(_policy_files(directory)):
        policy = load_policy(path, mount_allowlist=mount_allowlist)
        if policy.name in policies:
            raise PolicyError(
                f"a second policy named {policy.name!r}; keep only one of {policy.name}.yaml "
                f"and {policy.name}.yml",
                source=str(path),
            )
        policies[policy.name] = policy
    return policies


def _policy_files(directory: Path) -> Iterator[Path]:
    for entry in directory.iterdir():
        if entry.suffix in POLICY_SUFFIXES and entry.is_file():
            yield entry


def extends_chain(path: str | Path) -> list[Path]:
    """The policy file at ``path`` then each file it ``extends``, nearest first.

    For a directory that :func:`load_policy_dir` loaded (so the chain is known to be
    sound: no cycle, no missing parent).
    """
    chain = [Path(path)]
    for _ in range(MAX_EXTENDS_DEPTH):
        current = chain[-1]
        data = _load_yaml(read_config_file(current, str(current)), str(current))
        if not isinstance(data, dict) or "extends" not in data:
            break
        chain.append(_find_parent(data["extends"], current.parent, str(current)))
    return chain


def policy_file(directory: str | Path, name: str) -> Path | None:
    """The file in ``directory`` that holds policy ``name``, if any."""
    found = [Path(directory) / f"{name}{suffix}" for suffix in POLICY_SUFFIXES]
    return next((p for p in found if p.is_file()), None)
