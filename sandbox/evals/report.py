"""The report of a run: JSON for machines, one self-contained HTML page for people.

The page has no external asset (no script, stylesheet, font or image to fetch):
inline CSS and inline SVG charts of the pass rate (with its standard error) per
category, per difficulty and per task, pass@k and pass^k against k, the
outcomes of every trial, usage, and the infrastructure errors apart.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sandbox.errors import NotFoundError
from sandbox.host.files import write_text_atomic

from .metrics import OUTCOME_ORDER, summarize
from .runner import RunDir

__all__ = ["build_report", "render_html", "write_reports"]

REPORT_FORMAT: Final = 1
OUTCOME_COLOURS: Final = {
    "passed": "#2f9e5f",
    "failed": "#d94848",
    "agent_timeout": "#e8891c",
    "budget_exhausted": "#cfae1d",
    "test_timeout": "#8a5cf0",
    "infra_error": "#9aa0a6",
}
OUTCOME_LABELS: Final = {
    "passed": "passed",
    "failed": "failed",
    "agent_timeout": "agent timeout",
    "budget_exhausted": "budget exhausted",
    "test_timeout": "test timeout",
    "infra_error": "infra error",
}


def build_report(run_dir: Path | str) -> dict[str, Any]:
    """The report of a run directory, JSON-ready."""
    run = RunDir(Path(run_dir))
    meta = run.read_meta()
    latest = run.latest()
    if meta is None and not latest:
        raise NotFoundError(f"{run.path}: no run.json or results.jsonl; is it a run directory?")
    meta = meta or {}
    records = sorted(latest.values(), key=lambda r: (str(r["task"]), int(r["epoch"])))
    expected = len(meta.get("tasks") or {}) * int(meta.get("epochs") or 0)
    return {
        "format": REPORT_FORMAT,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "run": {
            "dir": str(run.path),
            "agent": meta.get("agent", {}),
            "epochs": meta.get("epochs"),
            "tasks": len(meta.get("tasks") or {}),
            "created_at": meta.get("created_at"),
            "updated_at": meta.get("updated_at"),
            "expected_trials": expected,
            "finished_trials": len(records),
            "complete": expected > 0 and len(records) >= expected,
        },
        "metrics": summarize(records),
        "infra_errors": [
            {"task": r["task"], "epoch": r["epoch"], "error": r.get("error")}
            for r in records
            if r.get("outcome") == "infra_error"
        ],
        "environments": _environments(records),
        "trials": [
            {
                "task": r["task"],
                "epoch": r["epoch"],
                "outcome": r.get("outcome"),
                "steps": r.get("steps"),
                "tokens": (r.get("tokens") or {}).get("total_tokens", 0),
                "agent_s": r.get("agent_s"),
                "total_s": r.get("total_s"),
                "tests_passed": r.get("tests_passed"),
                "reason": _why(r),
                "error": r.get("error"),
                "trajectory": r.get("trajectory"),
                "environment": (r.get("environment") or {}).get("id"),
            }
            for r in records
        ],
    }


def _environments(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each task environment the trials ran in (the agent's, a separate verifier's): its
    build (time, log, notes) and reuse."""
    found: dict[str, dict[str, Any]] = {}
    for record, key in itertools.product(records, ("environment", "verifier_environment")):
        env = record.get(key)
        if not env:
            continue
        entry = found.setdefault(
            env["id"],
            {
                "id": env["id"],
                "image": env.get("image"),
                "tasks": [],
                "build_seconds": None,
                "build_log": env.get("build_log"),
                "trials": 0,
                "cached_trials": 0,
                "notes": env.get("notes", []),
            },
        )
        if record["task"] not in entry["tasks"]:
            entry["tasks"].append(record["task"])
        entry["trials"] += 1
        if env.get("cached"):
            entry["cached_trials"] += 1
        else:
            entry["build_seconds"] = env.get("build_seconds")
    return sorted(found.values(), key=lambda e: str(e["id"]))


def _why(record: Mapping[str, Any]) -> str | None:
    """Why a trial did not pass, in words."""
    outcome = record.get("outcome")
    tests = record.get("tests") or {}
    if outcome == "agent_timeout":
        why = "the agent ran out of time"
    elif outcome == "budget_exhausted":
        why = f"the agent used all its {record.get('steps')} steps"
    elif outcome == "test_timeout":
        why = "the hidden tests did not finish in time"
    else:
        return tests.get("reason") or record.get("error")
    if record.get("tests_passed"):
        why += " (the tests passed all the same)"
    return why


def write_reports(
    run_dir: Path | str, *, json_path: Path | None = None, html_path: Path | None = None
) -> dict[str, Any]:
    """Write ``report.json`` and ``report.html`` (into the run directory by default)."""
    report = build_report(run_dir)
    json_path = json_path or Path(run_dir) / "report.json"
    html_path = html_path or Path(run_dir) / "report.html"
    for path, text in (
        (json_path, json.dumps(report, indent=2, sort_keys=True) + "\n"),
        (html_path, render_html(report)),
    ):
        write_text_atomic(path, text)
    return report


# ------------------------------------------------------------------------------ HTML

_CSS: Final = """
:root{--ink:#1d2330;--muted:#687083;--line:#e3e6ec;--bg:#f6f7f9;--card:#fff;--accent:#3a6df0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,Helvetica,Arial,
sans-serif;color:var(--ink);background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:28px 22px 60px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:34px 0 10px}
.sub{color:var(--muted);margin:0 0 22px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px}
.card .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:26px;font-weight:650;margin-top:2px}
.card .s{color:var(--muted);font-size:12px}
.panel{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px;
overflow-x:auto}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
@media (max-width:800px){.grid2{grid-template-columns:1fr}}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12px}
th.n{text-align:right}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.dot{display:inline-block;width:13px;height:13px;border-radius:3px;margin-right:2px}
.legend span{display:inline-flex;align-items:center;margin-right:14px;font-size:12px;
color:var(--muted)}
.legend .dot{margin-right:5px}
.err{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;
white-space:pre-wrap;word-break:break-word}
.ok{color:#2f9e5f}.bad{color:#d94848}
footer{color:var(--muted);font-size:12px;margin-top:40px}
svg text{font-family:inherit}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.2f} h"


def _rate_colour(value: float) -> str:
    """Red through amber to green."""
    value = min(1.0, max(0.0, value))
    if value < 0.5:
        a, b, t = (217, 72, 72), (232, 170, 40), value / 0.5
    else:
        a, b, t = (232, 170, 40), (47, 158, 95), (value - 0.5) / 0.5
    r, g, bl = (round(x + (y - x) * t) for x, y in zip(a, b, strict=True))
    return f"#{r:02x}{g:02x}{bl:02x}"


def _bar_chart(
    rows: Sequence[tuple[str, float | None, float | None, str]], *, compact: bool = False
) -> str:
    """Horizontal bars of rates in [0, 1] with +-SE whiskers: (label, rate, se, note)."""
    if not rows:
        return '<p class="sub">nothing to show</p>'
    label_w, bar_w, note_w = (100, 190, 120) if compact else (190, 420, 110)
    row_h, top = 24, 20
    width = label_w + bar_w + note_w
    height = top + row_h * len(rows) + 8
    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" role="img">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = label_w + tick * bar_w
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 6}" '
            'stroke="#e3e6ec" stroke-width="1"/>'
            f'<text x="{x:.1f}" y="{top - 8}" font-size="10" fill="#687083" '
            f'text-anchor="middle">{int(tick * 100)}%</text>'
        )
    for i, (label, rate, se, note) in enumerate(rows):
        y = top + i * row_h
        limit = 14 if compact else 28
        shown = label if len(label) <= limit else label[: limit - 1] + "…"
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 16}" font-size="12" fill="#1d2330" '
            f'text-anchor="end"><title>{_e(label)}</title>{_e(shown)}</text>'
        )
        parts.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{bar_w}" height="{row_h - 8}" '
            'fill="#f0f2f5" rx="3"/>'
        )
        if rate is None:
            parts.append(
                f'<text x="{label_w + 6}" y="{y + 16}" font-size="11" fill="#687083">'
                "no scored trial</text>"
            )
            continue
        w = max(2.0, max(0.0, min(1.0, rate)) * bar_w)  # a sliver shows a zero
        tip = (
            f"{label}: {_pct(rate)}"
            + (f" ± {_pct(se)}" if se else "")
            + (f" ({note})" if note else "")
        )
        parts.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" '
            f'fill="{_rate_colour(rate)}" rx="3"><title>{_e(tip)}</title></rect>'
        )
        if se:
            lo = label_w + max(0.0, rate - se) * bar_w
            hi = label_w + min(1.0, rate + se) * bar_w
            mid = y + row_h / 2
            parts.append(
                f'<path d="M{lo:.1f} {mid:.1f}H{hi:.1f}M{lo:.1f} {mid - 4:.1f}V{mid + 4:.1f}'
                f'M{hi:.1f} {mid - 4:.1f}V{mid + 4:.1f}" stroke="#1d2330" stroke-width="1.2" '
                'fill="none" opacity=".55"/>'
            )
        parts.append(
            f'<text x="{label_w + bar_w + 8}" y="{y + 16}" font-size="12" fill="#1d2330">'
            f"{_e(_pct(rate))}"
            + (f'<tspan fill="#687083" font-size="10"> {_e(note)}</tspan>' if note else "")
            + "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _outcome_bar(outcomes: Mapping[str, int]) -> str:
    total = sum(outcomes.values())
    if not total:
        return ""
    width, height = 900, 28
    parts = [f'<svg viewBox="0 0 {width} {height}" width="100%" role="img">']
    x = 0.0
    for name in [*OUTCOME_ORDER, *sorted(set(outcomes) - set(OUTCOME_ORDER))]:
        count = outcomes.get(name, 0)
        if not count:
            continue
        w = width * count / total
        colour = OUTCOME_COLOURS.get(name, "#555")
        parts.append(
            f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="{height}" fill="{colour}">'
            f"<title>{_e(OUTCOME_LABELS.get(name, name))}: {count}</title></rect>"
        )
        if w > 44:
            parts.append(
                f'<text x="{x + w / 2:.1f}" y="18" font-size="12" fill="#fff" '
                f'text-anchor="middle">{count}</text>'
            )
        x += w
    parts.append("</svg>")
    legend = "".join(
        f'<span><i class="dot" style="background:{OUTCOME_COLOURS.get(n, "#555")}"></i>'
        f"{_e(OUTCOME_LABELS.get(n, n))} {outcomes[n]}</span>"
        for n in [*OUTCOME_ORDER, *sorted(set(outcomes) - set(OUTCOME_ORDER))]
        if outcomes.get(n)
    )
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _k_chart(at_k: Mapping[str, float], hat_k: Mapping[str, float]) -> str:
    ks = sorted(int(k) for k in at_k)
    if len(ks) < 2:
        return '<p class="sub">pass@k needs at least 2 epochs.</p>'
    width, height, left, bottom, top, right = 420, 200, 40, 28, 12, 16
    plot_w, plot_h = width - left - right, height - top - bottom

    def xy(k: int, v: float) -> tuple[float, float]:
        x = left + (k - ks[0]) / (ks[-1] - ks[0]) * plot_w
        return x, top + (1 - v) * plot_h

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" role="img">'
    ]
    for tick in (0, 0.5, 1.0):
        _, y = xy(ks[0], tick)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e3e6ec"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" fill="#687083" '
            f'text-anchor="end">{int(tick * 100)}%</text>'
        )
    for k in ks:
        x, _ = xy(k, 0)
        parts.append(
            f'<text x="{x:.1f}" y="{height - 10}" font-size="10" fill="#687083" '
            f'text-anchor="middle">{k}</text>'
        )
    for series, colour, name in ((at_k, "#3a6df0", "pass@k"), (hat_k, "#d94848", "pass^k")):
        points = [xy(k, float(series[str(k)])) for k in ks]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for k, (x, y) in zip(ks, points, strict=True):
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>{name} k={k}: '
                f"{_pct(float(series[str(k)]))}</title></circle>"
            )
    parts.append("</svg>")
    legend = (
        '<div class="legend"><span><i class="dot" style="background:#3a6df0"></i>pass@k: at '
        'least one of k tries passes</span><span><i class="dot" style="background:#d94848">'
        "</i>pass^k: all k tries pass</span></div>"
    )
    return "".join(parts) + legend


def _group_rows(groups: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Any, Any, str]]:
    return [
        (
            name,
            g["pass_rate"],
            g["stderr"],
            f"{g['passes']}/{g['scored_trials']}",
        )
        for name, g in groups.items()
    ]


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page."""
    run = report["run"]
    m = report["metrics"]
    agent = run.get("agent") or {}
    usage = m["usage"]
    title = f"Evaluation of {agent.get('name', 'an agent')}"
    rate, se = m.get("pass_rate"), m.get("stderr")
    at_k, hat_k = m.get("pass_at_k", {}), m.get("pass_hat_k", {})
    k_max = max((int(k) for k in at_k), default=0)
    cards = [
        ("pass rate", _pct(rate), f"± {_pct(se)} standard error" if se is not None else ""),
        (
            "trials",
            f"{m['scored_trials']}",
            f"scored, of {m['trials']} · {m['tasks']} tasks x {run.get('epochs') or '?'} epochs",
        ),
        (
            f"pass@{k_max}" if k_max else "pass@k",
            _pct(at_k.get(str(k_max))) if k_max else "-",
            f"pass^{k_max} {_pct(hat_k.get(str(k_max)))}" if k_max else "",
        ),
        ("infra errors", str(m["infra_errors"]), "left out of every score"),
        (
            "tokens",
            f"{usage['total_tokens']:,}",
            f"{usage['tokens_per_trial']:,.0f} per trial · {usage['model_calls']} model calls",
        ),
        (
            "time",
            _seconds(usage["trial_s"]),
            f"agent {_seconds(usage['agent_s_per_trial'])} per trial",
        ),
    ]
    card_html = "".join(
        f'<div class="card"><div class="k">{_e(k)}</div><div class="v">{_e(v)}</div>'
        f'<div class="s">{_e(s)}</div></div>'
        for k, v, s in cards
    )
    task_rows = [
        (
            t["task"],
            t["pass_rate"],
            None,
            f"{t['passes']}/{t['n']}" + (" (+infra)" if t["outcomes"].get("infra_error") else ""),
        )
        for t in sorted(m["per_task"], key=lambda t: (-(t["pass_rate"] or -1), t["task"]))
    ]
    table_rows = []
    for t in m["per_task"]:
        dots = "".join(
            f'<i class="dot" style="background:{OUTCOME_COLOURS.get(o, "#555")}" '
            f'title="epoch {_e(e)}: {_e(OUTCOME_LABELS.get(o, o))}"></i>'
            for e, o in t["epochs"].items()
        )
        table_rows.append(
            f"<tr><td>{_e(t['task'])}</td><td>{_e(t['category'])}</td>"
            f"<td>{_e(t['difficulty'])}</td><td>{dots}</td>"
            f'<td class="n">{_e(_pct(t["pass_rate"], 0))}</td>'
            f'<td class="n">{t["steps_mean"]:.1f}</td>'
            f'<td class="n">{t["tokens_mean"]:,.0f}</td>'
            f'<td class="n">{_e(_seconds(t["agent_s_mean"]))}</td></tr>'
        )
    failures = [
        t for t in report.get("trials", []) if t.get("outcome") not in ("passed", "infra_error")
    ]
    failure_rows = "".join(
        f"<tr><td>{_e(t['task'])}</td><td class='n'>{_e(t['epoch'])}</td>"
        f"<td><i class='dot' style='background:{OUTCOME_COLOURS.get(str(t['outcome']), '#555')}'>"
        f"</i>{_e(OUTCOME_LABELS.get(str(t['outcome']), t['outcome']))}</td>"
        f"<td class='err'>{_e(t.get('reason') or t.get('error') or '')}</td>"
        f"<td class='err'>{_e(t.get('trajectory') or '')}</td></tr>"
        for t in failures[:500]
    )
    infra_rows = "".join(
        f"<tr><td>{_e(i['task'])}</td><td class='n'>{_e(i['epoch'])}</td>"
        f"<td class='err'>{_e(i.get('error') or '')}</td></tr>"
        for i in report.get("infra_errors", [])
    )
    k_rows = "".join(
        f"<tr><td>{k}</td><td class='n'>{_e(_pct(at_k[k]))}</td>"
        f"<td class='n'>{_e(_pct(hat_k[k]))}</td></tr>"
        for k in sorted(at_k, key=int)
    )
    agent_detail = ", ".join(f"{k}={v}" for k, v in agent.items() if k != "name" and v is not None)
    complete = (
        ""
        if run.get("complete")
        else (
            f" · <b>incomplete</b>: {run.get('finished_trials')} of {run.get('expected_trials')} "
            "trials finished"
        )
    )
    sections = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">{_e(agent_detail)}{" · " if agent_detail else ""}run '
        f"{_e(run.get('dir'))} · generated {_e(report.get('generated_at'))}{complete}</p>",
        f'<div class="cards">{card_html}</div>',
        "<h2>Outcomes of all trials</h2>",
        f'<div class="panel">{_outcome_bar(m["outcomes"])}</div>',
        '<div class="grid2"><div>',
        "<h2>Pass rate by category</h2>",
        f'<div class="panel">{_bar_chart(_group_rows(m["by_category"]), compact=True)}</div>',
        "</div><div>",
        "<h2>Pass rate by difficulty</h2>",
        f'<div class="panel">{_bar_chart(_group_rows(m["by_difficulty"]), compact=True)}</div>',
        "</div></div>",
        "<h2>Pass rate by task</h2>",
        f'<div class="panel">{_bar_chart(task_rows)}</div>',
        '<div class="grid2"><div>',
        "<h2>pass@k and pass^k</h2>",
        f'<div class="panel">{_k_chart(at_k, hat_k)}</div>',
        "</div><div>",
        "<h2>&nbsp;</h2>",
        '<div class="panel"><table><tr><th>k</th><th class="n">pass@k</th>'
        '<th class="n">pass^k</th></tr>'
        f"{k_rows}</table></div>",
        "</div></div>",
        "<h2>Tasks</h2>",
        '<div class="panel"><table><tr><th>task</th><th>category</th><th>difficulty</th>'
        '<th>epochs</th><th class="n">pass</th><th class="n">steps</th><th class="n">tokens'
        '</th><th class="n">agent time</th></tr>'
        f"{''.join(table_rows)}</table></div>",
    ]
    if failure_rows:
        sections += [
            "<h2>Trials that did not pass</h2>",
            '<div class="panel"><table><tr><th>task</th><th class="n">epoch</th><th>outcome</th>'
            f"<th>why</th><th>trajectory</th></tr>{failure_rows}</table></div>",
        ]
    sections += [
        "<h2>Infrastructure errors (not scored)</h2>",
        '<div class="panel">'
        + (
            "<table><tr><th>task</th><th class='n'>epoch</th><th>error</th></tr>"
            f"{infra_rows}</table>"
            if infra_rows
            else '<p class="ok">none</p>'
        )
        + "</div>",
        "<footer>Pass rate: mean over tasks of each task's pass fraction; ± its standard "
        "error over tasks. pass@k = 1 - C(n-c,k)/C(n,k), pass^k = C(c,k)/C(n,k), averaged over "
        "tasks. Infrastructure errors are excluded from every score.</footer>",
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>"
        + "\n".join(sections)
        + "</main></body></html>\n"
    )
