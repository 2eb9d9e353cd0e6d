"""The console's pages over runs on disk: evaluations (reports, the gate), training, quality.

Runs are found below the directory ``sandbox serve --runs-dir`` names (default
``./runs``), a few levels deep: an evaluation run has ``results.jsonl`` or
``run.json``, a training run ``metrics.jsonl``, a quality check ``quality.json``.
A run is only ever opened by the name it was found under, never by a path from
the request. Runs are the operator's: these pages are for admin keys.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from sandbox.errors import ForbiddenError, NotFoundError, SandboxError
from sandbox.evals.compare import compare_runs
from sandbox.evals.report import build_report, render_html
from sandbox.rl.plots import read_metrics

from .auth import PageTenant
from .render import Markup, data_island, e, link, page, table

router = APIRouter(prefix="/ui", include_in_schema=False)

DEFAULT_RUNS_DIR = Path("runs")
MAX_DEPTH = 3
MARKERS = {
    "evaluation": ("results.jsonl", "run.json"),
    "training": ("metrics.jsonl",),
    "quality": ("quality.json",),
}
CURVES = ("reward", "pass_rate", "held_out_pass_rate")
# The evaluator's own report page: inline styles and SVG, nothing that runs.
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"


def find_runs(root: Path, kind: str) -> dict[str, Path]:
    """Runs of ``kind`` below ``root``, by their path relative to it."""
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    level = [root]
    for _ in range(MAX_DEPTH + 1):
        deeper = []
        for directory in level:
            if any((directory / marker).is_file() for marker in MARKERS[kind]):
                found[directory.relative_to(root).as_posix() or "."] = directory
            else:
                deeper.extend(sorted(p for p in directory.iterdir() if p.is_dir()))
        level = deeper
    return dict(sorted(found.items()))


def _root(request: Request) -> Path:
    root: Path = getattr(request.app.state, "runs_dir", DEFAULT_RUNS_DIR)
    return root


def _admin_only(tenant: Any) -> None:
    if not tenant.config.admin:
        raise ForbiddenError("runs on disk are the operator's: log in with an admin key")


def _run(request: Request, kind: str, name: str) -> Path:
    runs = find_runs(_root(request), kind)
    if name not in runs:
        raise NotFoundError(f"no {kind} run {name!r} under {_root(request)}; known: {sorted(runs)}")
    return runs[name]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _none_found(request: Request, what: str) -> str:
    return f"<p>no {what} under {e(_root(request).resolve())} (sandbox serve --runs-dir DIR)</p>"


# ------------------------------------------------------------------ evaluations


@router.get("/evaluations")
async def evaluations_page(request: Request, tenant: PageTenant) -> HTMLResponse:
    _admin_only(tenant)
    runs = find_runs(_root(request), "evaluation")
    rows = []
    for name, path in runs.items():
        try:
            report = await asyncio.to_thread(build_report, path)
        except SandboxError as exc:
            rows.append((name, "-", "-", "-", str(exc)))
            continue
        run, metrics = report["run"], report["metrics"]
        rows.append(
            (
                link(f"/ui/evaluations/report?run={name}", name),
                (run.get("agent") or {}).get("name", "-"),
                _pct(metrics.get("pass_rate")),
                f"{run['finished_trials']} / {run['expected_trials']}",
                "complete" if run["complete"] else "incomplete",
            )
        )
    options = "".join(f"<option>{e(n)}</option>" for n in runs)
    compare = (
        "<h2>compare (the gate)</h2><form method=get action=/ui/evaluations/compare "
        f"class=filter id=compare-form><label>baseline <select name=baseline>{options}</select>"
        f"</label><label>candidate <select name=candidate>{options}</select></label>"
        "<button type=submit>compare</button></form>"
    )
    body = (
        table(("run", "agent", "pass rate", "trials", "state"), rows, body_id="runs") + compare
        if runs
        else _none_found(request, "evaluation runs")
    )
    return page("evaluations", body, active="evaluations", tenant=tenant.name)


RunName = Annotated[str, Query(max_length=500)]


def _tokens(usage: dict[str, Any]) -> str:
    """A run's model tokens: total, and prompt / completion where the report has them."""
    total = usage.get("total_tokens", 0)
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    split = f" ({prompt} prompt, {completion} completion)" if prompt is not None else ""
    return f"{total}{split}"


async def _report(request: Request, tenant: Any, run: str) -> dict[str, Any]:
    _admin_only(tenant)
    return await asyncio.to_thread(build_report, _run(request, "evaluation", run))


@router.get("/evaluations/report")
async def evaluation_report(request: Request, tenant: PageTenant, run: RunName) -> HTMLResponse:
    report = await _report(request, tenant, run)
    facts, metrics = report["run"], report["metrics"]
    outcomes = metrics.get("outcomes", {})
    usage = metrics.get("usage", {})
    summary = table(
        ("", ""),
        [
            ("agent", (facts.get("agent") or {}).get("name", "-")),
            ("pass rate", _pct(metrics.get("pass_rate"))),
            ("standard error", _pct(metrics.get("stderr"))),
            ("trials", f"{facts['finished_trials']} of {facts['expected_trials']}"),
            ("outcomes", ", ".join(f"{k} {v}" for k, v in outcomes.items())),
            ("infra errors", len(report["infra_errors"])),
            ("model calls", usage.get("model_calls", 0)),
            ("tokens", _tokens(usage)),
            (
                "cost",
                f"{usage.get('cost', 0.0):.4f} ({usage.get('cost_per_trial', 0.0):.4f} a trial)",
            ),
        ],
        body_id="summary",
    )
    trials = table(
        ("task", "epoch", "outcome", "steps", "tokens", "total s", "reason"),
        [
            (
                t["task"],
                t["epoch"],
                t["outcome"],
                t["steps"],
                t["tokens"],
                t["total_s"],
                t["reason"],
            )
            for t in report["trials"]
        ],
        body_id="trials",
    )
    bars = [{"label": k, "values": [v]} for k, v in outcomes.items()]
    body = (
        f"<p>{link(f'/ui/evaluations/report.html?run={run}', 'the full report page')}</p>"
        + summary
        + '<svg id=chart-outcomes class=chart viewBox="0 0 600 160" data-bars=outcomes-data>'
        "</svg>"
        + data_island("outcomes-data", {"bars": bars, "names": ["trials"]})
        + "<h2>trials</h2>"
        + trials
    )
    return page(f"evaluation {run}", body, active="evaluations", tenant=tenant.name)


@router.get("/evaluations/report.html")
async def evaluation_report_page(
    request: Request, tenant: PageTenant, run: RunName
) -> HTMLResponse:
    """The evaluator's own self-contained report page (``sandbox eval report``)."""
    report = await _report(request, tenant, run)
    return HTMLResponse(render_html(report), headers={"Content-Security-Policy": REPORT_CSP})


@router.get("/evaluations/compare")
async def evaluation_compare(
    request: Request,
    tenant: PageTenant,
    baseline: RunName,
    candidate: RunName,
) -> HTMLResponse:
    _admin_only(tenant)
    base = _run(request, "evaluation", baseline)
    cand = _run(request, "evaluation", candidate)
    result = (await asyncio.to_thread(compare_runs, base, cand)).as_dict()
    verdict = (
        f"<p class={'error' if result['regression'] else 'ok'} id=verdict>"
        f"verdict: {e(result['verdict'])}</p>"
    )
    facts = table(
        ("", ""),
        [
            ("baseline", f"{baseline}: {_pct(result['baseline_rate'])}"),
            ("candidate", f"{candidate}: {_pct(result['candidate_rate'])}"),
            ("delta", _pct(result["delta"])),
            ("p (regression)", result["p_regression"]),
            ("p (improvement)", result["p_improvement"]),
            ("alpha / min drop", f"{result['alpha']} / {result['min_drop']}"),
            ("method", result["method"]),
        ],
    )
    tasks = table(
        ("task", "baseline passes / n", "candidate passes / n", "delta"),
        [
            (
                t["task"],
                f"{t['baseline']['passes']} / {t['baseline']['n']}",
                f"{t['candidate']['passes']} / {t['candidate']['n']}",
                _pct(t["delta"]),
            )
            for t in result["tasks"]
        ],
        body_id="compare-tasks",
    )
    return page("compare", verdict + facts + tasks, active="evaluations", tenant=tenant.name)


# ------------------------------------------------------------------ training


@router.get("/training")
async def training_page(request: Request, tenant: PageTenant) -> HTMLResponse:
    _admin_only(tenant)
    runs = find_runs(_root(request), "training")
    sections = []
    for i, (name, path) in enumerate(runs.items()):
        records = await asyncio.to_thread(read_metrics, path / "metrics.jsonl")
        series = [
            {"name": key, "values": [r.get(key) for r in records]}
            for key in CURVES
            if any(r.get(key) is not None for r in records)
        ]
        tokens = {
            kind: sum(int(r.get(f"{kind}_tokens") or 0) for r in records)
            for kind in ("prompt", "completion")
        }
        sections.append(
            f"<h2>{e(name)}</h2><p>{len(records)} steps, the model's tokens: "
            f"{tokens['prompt']} prompt, {tokens['completion']} completion; "
            "cost: none (the trainer's model is local: nothing is paid per token)</p>"
            f'<svg class=chart viewBox="0 0 600 160" data-curve=curve-{i}></svg>'
            + data_island(f"curve-{i}", series)
        )
    body = "".join(sections) or _none_found(request, "training runs (metrics.jsonl)")
    return page("training", body, active="training", tenant=tenant.name)


# ------------------------------------------------------------------ quality


@router.get("/quality")
async def quality_page(request: Request, tenant: PageTenant) -> HTMLResponse:
    _admin_only(tenant)
    sections = []
    for name, path in find_runs(_root(request), "quality").items():
        data = json.loads((path / "quality.json").read_text())
        counts = ", ".join(f"{k} {v}" for k, v in data.get("counts", {}).items())
        rows = [
            (
                item["key"],
                item["kind"],
                item["category"],
                Markup(f"<span class='status {e(item['status'])}'>{e(item['status'])}</span>"),
                Markup(
                    "<br>".join(
                        e(f"[{f['severity']}] {f['check']}: {f['message']}")
                        for f in item["findings"]
                    )
                ),
            )
            for item in data.get("items", [])
        ]
        sections.append(
            f"<h2>{e(name)}</h2><p>{e(counts)}</p>"
            + table(("item", "kind", "category", "status", "findings"), rows)
        )
    body = "".join(sections) or _none_found(request, "quality reports (quality.json)")
    return page("quality", body, active="quality", tenant=tenant.name)
