"""A tiny HTTP request router driven by a YAML rule file (see README.md).

python3 router.py RULES.yaml METHOD PATH [Header:Value ...]   prints the backend
python3 router.py RULES.yaml --check                           validates the rules
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

import yaml

RULE_KEYS = {"name", "backend", "priority", "match"}
MATCH_KEYS = {"methods", "path", "path_regex", "headers"}


class RulesError(Exception):
    pass


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """`**` matches anything (slashes too), `*` anything but a slash; the rest is literal."""
    out = []
    for piece in re.split(r"(\*\*|\*)", pattern):
        if piece == "**":
            out.append(".*")
        elif piece == "*":
            out.append("[^/]*")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out))


@dataclass
class Rule:
    backend: str
    priority: int
    position: int
    name: str = ""
    methods: set[str] | None = None
    path: re.Pattern[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def matches(self, method: str, path: str, headers: dict[str, str]) -> bool:
        if self.methods is not None and method.upper() not in self.methods:
            return False
        if self.path is not None and not self.path.fullmatch(path):
            return False
        return all(headers.get(k) == v for k, v in self.headers.items())


def load_rules(text: str) -> tuple[str, list[Rule]]:
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or set(data) - {"default", "rules"}:
        raise RulesError("the file must be a mapping with 'default' and 'rules'")
    default = data.get("default")
    if not isinstance(default, str) or not default:
        raise RulesError("'default' must name a backend")
    rules = []
    for position, raw in enumerate(data.get("rules") or []):
        where = f"rule {position + 1}"
        if not isinstance(raw, dict) or set(raw) - RULE_KEYS:
            raise RulesError(f"{where}: keys must be among {sorted(RULE_KEYS)}")
        if not isinstance(raw.get("backend"), str):
            raise RulesError(f"{where}: 'backend' is required")
        priority = raw.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise RulesError(f"{where}: 'priority' must be an integer")
        match = raw.get("match") or {}
        if not isinstance(match, dict) or set(match) - MATCH_KEYS:
            raise RulesError(f"{where}: match keys must be among {sorted(MATCH_KEYS)}")
        if "path" in match and "path_regex" in match:
            raise RulesError(f"{where}: use 'path' or 'path_regex', not both")
        rule = Rule(raw["backend"], priority, position, str(raw.get("name", "")))
        if "methods" in match:
            methods = match["methods"]
            if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
                raise RulesError(f"{where}: 'methods' must be a list of method names")
            rule.methods = {m.upper() for m in methods}
        if "path" in match:
            rule.path = glob_to_regex(str(match["path"]))
        if "path_regex" in match:
            try:
                rule.path = re.compile(str(match["path_regex"]))
            except re.error as exc:
                raise RulesError(f"{where}: bad path_regex: {exc}") from None
        headers = match.get("headers") or {}
        if not isinstance(headers, dict):
            raise RulesError(f"{where}: 'headers' must map header names to values")
        rule.headers = {str(k).lower(): str(v) for k, v in headers.items()}
        rules.append(rule)
    rules.sort(key=lambda r: (-r.priority, r.position))
    return default, rules


def route(default: str, rules: list[Rule], method: str, path: str, headers: dict[str, str]) -> str:
    lowered = {k.lower(): v for k, v in headers.items()}
    for rule in rules:
        if rule.matches(method, path, lowered):
            return rule.backend
    return default


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as handle:
            default, rules = load_rules(handle.read())
    except (OSError, yaml.YAMLError, RulesError) as exc:
        print(f"router: {exc}", file=sys.stderr)
        return 1
    if argv[2] == "--check":
        print(f"{len(rules)} rules OK")
        return 0
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    headers = {}
    for item in argv[4:]:
        name, _, value = item.partition(":")
        headers[name.strip()] = value.strip()
    print(route(default, rules, argv[2], argv[3], headers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
