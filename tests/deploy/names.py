"""Metric names used by deploy/ (the Grafana dashboard, the alert rules), and exported."""

from __future__ import annotations

import json
import re

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO

DEPLOY = REPO / "deploy"
#: Series Prometheus makes itself for each scrape, not in any /metrics.
SCRAPE_SERIES = frozenset({"up"})
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
     "unless", "offset", "inf", "nan"}
)  # fmt: skip
_IDENTIFIER = re.compile(r"(?<![\w$.:])[a-zA-Z_:][a-zA-Z0-9_:]*(?![\w(])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, labels (in ``{}`` or a ``by``/``without``/``on`` list), strings, durations or
    Grafana's ``$variables``."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges and subqueries
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    return {name for name in _IDENTIFIER.findall(expr) if name.lower() not in _KEYWORDS}


def used_names() -> dict[str, set[str]]:
    """Each metric name in the dashboard and the alert rules, with where it is used."""
    where: dict[str, set[str]] = {}
    dashboard = json.loads((DEPLOY / "grafana" / "dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in metric_names(target["expr"]):
                where.setdefault(name, set()).add(f"dashboard panel {panel['title']!r}")
    groups = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
    for rule in (rule for group in groups for rule in group["rules"]):
        for name in metric_names(rule["expr"]):
            where.setdefault(name, set()).add(f"alert {rule['alert']}")
    return where


def sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def missing(used: dict[str, set[str]], exported: set[str]) -> dict[str, set[str]]:
    return {name: places for name, places in used.items() if name not in exported}
