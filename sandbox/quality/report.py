"""The check's report: a table for the terminal, a JSON file and a standalone HTML page."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Final

from .check import QualityReport
from .model import FAILING, ItemResult, Severity

__all__ = ["render_html", "render_table", "write_reports"]

COLUMNS: Final = (
    "schema",
    "reference",
    "consistency",
    "control",
    "probe",
    "determinism",
    "duplicate",
)
SHORT: Final = {"ok": "ok", "warning": "warn", "loophole": "HOLE", "broken": "BROKEN", "info": "ok"}


def _runs(item: ItemResult) -> str:
    scored = [r for r in item.references if r.passed is not None]
    if not scored:
        return "-"
    return f"{sum(1 for r in scored if r.passed)}/{len(scored)}"


def _probes(item: ItemResult) -> str:
    if not item.probes:
        return "-"
    held = sum(1 for p in item.probes.values() if p.passed is False)
    return f"{held}/{len(item.probes)}"


def render_table(report: QualityReport) -> str:
    """One row per item, then every broken, loophole and warning finding, then the totals."""
    rows = [["item", "kind", "ref", "probes held", *COLUMNS, "status"]]
    for item in report.items:
        rows.append(
            [
                item.key,
                item.kind,
                _runs(item),
                _probes(item),
                *(SHORT[item.column(c)] for c in COLUMNS),
                item.status.upper() if item.status in FAILING else item.status,
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    details = []
    for item in report.items:
        for finding in item.findings:
            if finding.severity is not Severity.INFO:
                details.append(
                    f"  {item.key}: [{finding.severity}] {finding.check}: {finding.message}"
                )
    if details:
        lines += ["", "findings:", *details]
    if report.distribution:
        lines += ["", "difficulty (observed) by category:"]
        for category, buckets in sorted(report.distribution.items()):
            lines.append(
                f"  {category}: " + ", ".join(f"{name} {count}" for name, count in buckets.items())
            )
    counts = report.counts()
    lines += [
        "",
        f"{counts['items']} item(s): {counts['ok']} ok, {counts['warning']} with warnings, "
        f"{counts['loophole']} with loopholes, {counts['broken']} broken "
        f"({report.seconds:.0f} s)",
    ]
    return "\n".join(lines)


_STYLE: Final = """
body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.ok { background: #e8f6e8; } .warning { background: #fff6d6; }
.loophole { background: #ffd9c9; } .broken { background: #ffc9c9; }
details { margin: 0.5em 0; } code { font-size: 12px; }
"""


def _cell(text: str, css: str = "") -> str:
    return f'<td class="{css}">{html.escape(text)}</td>'


def _trials(title: str, trials: dict[str, Any]) -> str:
    if not trials:
        return ""
    rows = "".join(
        "<tr>"
        + _cell(t["label"])
        + _cell(str(t["passed"]), "warning" if t["passed"] is None else "")
        + _cell(t["outcome"])
        + _cell(t.get("reason") or "")
        + _cell(f"{t['seconds']:.1f} s")
        + "</tr>"
        for t in trials.values()
    )
    return (
        f"<h4>{html.escape(title)}</h4><table><tr><th>run</th><th>passed</th><th>outcome</th>"
        f"<th>reason</th><th>time</th></tr>{rows}</table>"
    )


def render_html(data: dict[str, Any]) -> str:
    """A standalone page from the JSON report."""
    counts = data["counts"]
    summary = ", ".join(f"{name} {count}" for name, count in counts.items())
    head = "".join(f"<th>{c}</th>" for c in ("item", "kind", "category", "status", "findings"))
    rows = []
    sections = []
    for item in data["items"]:
        findings = "<br>".join(
            html.escape(f"[{f['severity']}] {f['check']}: {f['message']}") for f in item["findings"]
        )
        rows.append(
            f"<tr>{_cell(item['key'])}{_cell(item['kind'])}{_cell(item['category'])}"
            f"{_cell(item['status'], item['status'])}<td>{findings}</td></tr>"
        )
        references = {f"{r['label']}": r for r in item["references"]}
        sections.append(
            f"<details><summary>{html.escape(item['key'])} ({item['status']})</summary>"
            + _trials("reference runs", references)
            + _trials("negative controls", item["controls"])
            + _trials("probes", item["probes"])
            + "</details>"
        )
    distribution = "".join(
        f"<tr>{_cell(category)}" + "".join(_cell(str(n)) for n in buckets.values()) + "</tr>"
        for category, buckets in sorted(data["difficulty"].items())
    )
    difficulty = (
        "<h2>Observed difficulty</h2><table><tr><th>category</th><th>too easy</th>"
        f"<th>informative</th><th>too hard</th></tr>{distribution}</table>"
        if distribution
        else ""
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Quality check</title>"
        f"<style>{_STYLE}</style></head><body><h1>Quality check</h1>"
        f"<p>{html.escape(', '.join(data['paths']))}: {html.escape(summary)} "
        f"({data['seconds']:.0f} s, started {html.escape(data['started_at'])})</p>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>{difficulty}"
        f"<h2>Runs</h2>{''.join(sections)}</body></html>\n"
    )


def write_reports(report: QualityReport, *, json_path: Path, html_path: Path) -> dict[str, Any]:
    """Write the JSON and HTML reports; returns the JSON data."""
    data = report.as_dict()
    for path in (json_path, html_path):
        path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    html_path.write_text(render_html(data))
    return data
