"""The hardened YAML loader: plain data only (no tags, anchors, aliases, merge keys or
duplicate keys; one mapping document; bounded size and nesting). Policies use it, and so
do task files and configs, through :func:`load_yaml_mapping`.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from sandbox.errors import PolicyError

from .keys import _dotted, _KeyPath
from .limits import MAX_POLICY_BYTES, MAX_YAML_NESTING


class _YamlRefusal(Exception):
    def __init__(self, message: str, mark: Any, path: _KeyPath) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.path = path


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML_KINDS: Final = {
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "a date",
    "tag:yaml.org,2002:seq": "a list",
    "tag:yaml.org,2002:map": "a mapping",
}


class _PolicyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` restricted to plain data.

    Refuses tags (even ``!!str``), anchors, aliases, directives, merge keys,
    non-string keys, duplicate keys and nesting deeper than
    :data:`MAX_YAML_NESTING`, naming the key path of each refusal.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._depth = 0

    def fetch_directive(self) -> None:
        raise _YamlRefusal(
            "YAML directives ('%YAML', '%TAG') are refused; remove the line",
            self.get_mark(),
            (),
        )

    def compose_node(self, parent: Any, index: Any) -> Any:
        part: str | int | None = None
        if isinstance(parent, yaml.MappingNode) and isinstance(index, yaml.ScalarNode):
            part = index.value
        elif isinstance(parent, yaml.SequenceNode) and isinstance(index, int):
            part = index
        if part is not None:
            self._path.append(part)
        self._depth += 1
        try:
            return self._compose_checked(parent, index)
        finally:
            self._depth -= 1
            if part is not None:
                self._path.pop()

    def _compose_checked(self, parent: Any, index: Any) -> Any:
        path = tuple(self._path)
        event = self.peek_event()
        if self._depth > MAX_YAML_NESTING:
            raise _YamlRefusal(
                f"nesting is deeper than {MAX_YAML_NESTING} levels; a policy is never that deep",
                event.start_mark,
                path,
            )
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _YamlRefusal(
                "YAML anchors (&name) and aliases (*name) are refused; write the values out",
                event.start_mark,
                path,
            )
        tag = getattr(event, "tag", None)
        if tag is not None:
            if tag.startswith("tag:yaml.org,2002:"):
                tag = "!!" + tag.removeprefix("tag:yaml.org,2002:")
            raise _YamlRefusal(
                f"YAML tags are refused (found {tag!r}): a policy is plain data; remove the tag",
                event.start_mark,
                path,
            )
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.MappingNode):
            self._check_keys(node, path)
        return node

    def _check_keys(self, node: yaml.MappingNode, path: _KeyPath) -> None:
        seen: dict[str, Any] = {}
        for key_node, _value in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _MERGE_TAG:
                raise _YamlRefusal(
                    "merge keys (<<) are refused; write the keys out",
                    key_node.start_mark,
                    path,
                )
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "..."
                kind = _YAML_KINDS.get(key_node.tag, "a " + key_node.tag.rsplit(":", 1)[-1])
                raise _YamlRefusal(
                    f"key {shown!r} is read as {kind}, not a string; quote it or rename it",
                    key_node.start_mark,
                    path,
                )
            key = key_node.value
            if key in seen:
                first = seen[key]
                raise _YamlRefusal(
                    f"duplicate key {key!r} (first at line {first.line + 1}); keep only one",
                    key_node.start_mark,
                    (*path, key),
                )
            seen[key] = key_node.start_mark


def load_yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """Parse one strict YAML document (no tags, aliases, duplicate keys) into a mapping.

    The loader policies use, for other configuration files too (training configs,
    task files); raises :class:`~sandbox.errors.PolicyError` naming ``source``.
    """
    return _load_yaml(text, source)


def _load_yaml(text: str, source: str) -> dict[str, Any]:
    """Parse one policy document into plain data, or raise :class:`PolicyError`."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"the file is {size} bytes; a policy may be at most {MAX_POLICY_BYTES} bytes. "
            "Split it with 'extends' or remove unused keys",
            source=source,
        )
    loader = _PolicyLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.composer.ComposerError as exc:
            if "single document" in str(exc.context or ""):
                mark = exc.problem_mark
                raise PolicyError(
                    f"line {mark.line + 1 if mark else '?'}: the file holds more than one YAML "
                    "document; a policy is exactly one document, so remove the extra '---'",
                    source=source,
                ) from None
            raise
        data = None if node is None else loader.construct_document(node)
    except _YamlRefusal as exc:
        mark = exc.mark
        raise PolicyError(
            f"line {mark.line + 1}, column {mark.column + 1}: {exc.message}",
            source=source,
            key=_dotted(exc.path),
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "cannot be parsed"
        raise PolicyError(
            f"invalid YAML at {where}{problem}; fix the syntax", source=source
        ) from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"invalid YAML: {exc}; fix the file", source=source) from None
    finally:
        loader.dispose()
    if data is None:
        raise PolicyError(
            "the file is empty; write at least one section (e.g. 'extends: default')",
            source=source,
        )
    if not isinstance(data, dict):
        raise PolicyError(
            f"the document is a {type(data).__name__}, not a mapping of keys; start with "
            "keys such as 'resources:'",
            source=source,
        )
    return data
