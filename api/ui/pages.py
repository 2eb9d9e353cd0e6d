"""The console's pages under ``/ui``: overview, executions, tenants, policies, audit, fleet."""

from __future__ import annotations

import asyncio
import datetime as dt
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from sandbox.errors import AuthenticationError, NotFoundError
from sandbox.policy import extends_chain, lint_policy, policy_file
from sandbox.results import ExecStatus
from sandbox.service.tenants import Tenant

from ..deps import CONSOLE_COOKIE, PlatformDep
from .auth import DataTenant, PageTenant, scope_of
from .overview import call_figures, model_figures, overview
from .render import CSP, Markup, data_island, e, link, page, table
from .usage import RunsUsage

router = APIRouter(prefix="/ui", include_in_schema=False)
STATIC = StaticFiles(directory=Path(__file__).with_name("static"))


def _when(stamp: float) -> str:
    return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


# The failure classes of sandbox_calls_total, as the overview labels them (ok aside).
CALL_LABELS = {"ok": "ok", "user": "user code failed", "infra": "infra", "refused": "refused"}


def _figure(value: float | None, unit: str = "s") -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms" if unit == "s" else f"{value:g}"


# ------------------------------------------------------------------ login


def _login_form(message: str = "", status: int = 200) -> HTMLResponse:
    note = f"<p class=error>{e(message)}</p>" if message else ""
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>log in - sandbox console"
        '</title><link rel="icon" href="data:,">'
        '<link rel=stylesheet href="/ui/static/console.css"></head><body><main class=login>'
        f"<h1>sandbox console</h1>{note}"
        '<form method=post action="/ui/login"><label>API key '
        "<input type=password name=key autocomplete=off required></label>"
        "<button type=submit>log in</button></form></main></body></html>"
    )
    return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": CSP})


@router.get("/login")
async def login_form() -> HTMLResponse:
    return _login_form()


@router.post("/login")
async def login(request: Request, platform: PlatformDep) -> Response:
    """Check the posted key; keep it in an HttpOnly SameSite=Strict cookie."""
    form = urllib.parse.parse_qs((await request.body()).decode(errors="replace"))
    key = (form.get("key") or [""])[0]
    try:
        platform.keyring.authenticate(key)
    except AuthenticationError as exc:
        return _login_form(str(exc), 401)
    response = RedirectResponse("/ui", status_code=303)
    response.set_cookie(CONSOLE_COOKIE, key, httponly=True, samesite="strict", path="/")
    return response


@router.get("/logout")
async def logout() -> Response:
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(CONSOLE_COOKIE, path="/")
    return response


# ------------------------------------------------------------------ overview


async def _overview(request: Request, platform: Any, tenant: Tenant) -> dict[str, Any]:
    """The overview's figures for ``tenant``; the runs' model usage for an admin only
    (None otherwise: runs are the operator's)."""
    scope = scope_of(tenant, None)
    usage: RunsUsage = request.app.state.runs_usage
    return {
        **overview(platform, scope),
        "calls": call_figures(request.app.state.calls, scope),
        "model": model_figures(await asyncio.to_thread(usage.totals))
        if tenant.config.admin
        else None,
    }


def _tiles(items: Sequence[tuple[str, str, object]], live: str = "") -> str:
    """A row of figures ``(element id, label, value)``; ``live``: the JSON that updates them."""
    tiles = "".join(
        f"<div class=tile><span class=label>{e(label)}</span>"
        f'<span class=value id="{key}">{e(value)}</span></div>'
        for key, label, value in items
    )
    attribute = f' data-live="{e(live)}"' if live else ""
    return f"<div class=tiles{attribute}>{tiles}</div>"


def _share(count: int, share: float | None) -> str:
    return str(count) if share is None else f"{count} ({100 * share:.1f}%)"


@router.get("")
async def overview_page(
    request: Request, platform: PlatformDep, tenant: PageTenant
) -> HTMLResponse:
    figures = await _overview(request, platform, tenant)
    executions = _tiles(
        (
            ("executions_per_s", "executions/s", f"{figures['executions_per_s']:.2f}"),
            ("p50_s", "latency p50", _figure(figures["p50_s"])),
            ("p99_s", "latency p99", _figure(figures["p99_s"])),
            ("infra_errors", "infra errors (60 s)", figures["infra_errors"]),
            ("queue_depth", "queue depth", figures["queue_depth"]),
            ("executions_recorded", "executions recorded", figures["executions_recorded"]),
        ),
        live="/ui/api/overview",
    )
    calls = figures["calls"]
    call_tiles = _tiles(
        (
            ("calls_count", "calls", calls["count"]),
            *(
                (f"calls_{kind}", label, _share(calls["by_class"][kind], calls["share"][kind]))
                for kind, label in CALL_LABELS.items()
            ),
            ("calls_p50_s", "call latency p50", _figure(calls["p50_s"])),
            ("calls_p99_s", "call latency p99", _figure(calls["p99_s"])),
        )
    )
    model = figures["model"]
    model_tiles = (
        "<h2>model usage of the runs (--runs-dir)</h2>"
        + _tiles(
            (
                ("model_prompt_tokens", "prompt tokens", f"{model['prompt_tokens']:.0f}"),
                (
                    "model_completion_tokens",
                    "completion tokens",
                    f"{model['completion_tokens']:.0f}",
                ),
                ("model_calls", "model calls (evaluations)", f"{model['calls']:.0f}"),
                ("model_cost", "cost", f"{model['cost']:.4f}"),
            )
        )
        if model is not None
        else ""
    )
    groups = table(
        ("policy", "image", "idle", "busy", "starting"),
        [(g["policy"], g["image"], g["idle"], g["busy"], g["starting"]) for g in figures["groups"]],
        body_id="groups",
    )
    body = (
        executions + "<section class=charts><figure><figcaption>executions/s</figcaption>"
        '<svg id=chart-rate class=chart viewBox="0 0 600 160"></svg></figure>'
        "<figure><figcaption>latency p50 / p99 (ms)</figcaption>"
        '<svg id=chart-latency class=chart viewBox="0 0 600 160"></svg></figure></section>'
        "<h2>API calls by class (the last 60 s; the console's own left out)</h2>"
        + call_tiles
        + "<section class=charts><figure><figcaption>calls failed, by class (%)</figcaption>"
        '<svg id=chart-calls class=chart viewBox="0 0 600 160"></svg></figure></section>'
        + model_tiles
        + f"<h2>pool groups</h2>{groups}"
        '<svg id=chart-groups class=chart viewBox="0 0 600 160"></svg>'
        + data_island("overview-data", figures)
    )
    return page("overview", body, active="overview", tenant=tenant.name)


@router.get("/api/overview")
async def overview_data(
    request: Request, platform: PlatformDep, tenant: DataTenant
) -> JSONResponse:
    """The overview's figures, polled by the page every 2 s."""
    return JSONResponse(await _overview(request, platform, tenant))


# ------------------------------------------------------------------ executions


@router.get("/executions")
async def executions_page(
    platform: PlatformDep,
    tenant: PageTenant,
    status: Annotated[str | None, Query(max_length=32)] = None,
    of_tenant: Annotated[str | None, Query(alias="tenant", max_length=64)] = None,
) -> HTMLResponse:
    scope = scope_of(tenant, of_tenant)
    recent = getattr(platform, "recent", None)
    records = recent.select(tenant=scope, status=status or None) if recent is not None else []
    options = "".join(
        f"<option{' selected' if s == status else ''}>{e(s)}</option>" for s in ("", *ExecStatus)
    )
    tenant_field = (
        f'<label>tenant <input name=tenant value="{e(of_tenant)}"></label>'
        if tenant.config.admin
        else ""
    )
    form = (
        f"<form method=get class=filter id=filter><label>status <select name=status>{options}"
        f"</select></label>{tenant_field}<button type=submit>filter</button></form>"
    )
    rows = [
        (
            link(f"/ui/executions/{r.id}", r.id),
            _when(r.time),
            r.tenant,
            Markup(f"<span class='status {e(r.status)}'>{e(r.status)}</span>"),
            r.language,
            r.policy,
            _figure(r.duration_s),
        )
        for r in records
    ]
    listing = table(
        ("id", "finished (UTC)", "tenant", "status", "language", "policy", "duration"),
        rows,
        body_id="executions",
    )
    note = "" if recent is not None else "<p>this service records no executions (a fleet)</p>"
    return page("executions", form + note + listing, active="executions", tenant=tenant.name)


@router.get("/executions/{execution_id}")
async def execution_page(
    execution_id: int, platform: PlatformDep, tenant: PageTenant
) -> HTMLResponse:
    recent = getattr(platform, "recent", None)
    record = recent.get(execution_id) if recent is not None else None
    if record is None or (not tenant.config.admin and record.tenant != tenant.name):
        raise NotFoundError(f"no recent execution {execution_id} (the console keeps the last ones)")
    facts = table(
        ("field", "value"),
        [
            ("tenant", record.tenant),
            ("finished (UTC)", _when(record.time)),
            ("status", record.status),
            ("exit code", record.exit_code),
            ("language", record.language),
            ("policy", record.policy),
            ("duration", _figure(record.duration_s)),
            ("wall", _figure(record.usage.wall_s)),
            ("cpu", _figure(record.usage.cpu_s)),
            ("peak memory (bytes)", record.usage.peak_memory_bytes),
        ],
    )
    outputs = "".join(
        f"<h2>{name}{' (cut)' if cut else ''}</h2><pre id={name}>{e(text)}</pre>"
        for name, text, cut in (
            ("stdout", record.stdout_preview, record.stdout_truncated),
            ("stderr", record.stderr_preview, record.stderr_truncated),
        )
    )
    return page(f"execution {record.id}", facts + outputs, active="executions", tenant=tenant.name)


# ------------------------------------------------------------------ tenants


@router.get("/tenants")
async def tenants_page(platform: PlatformDep, tenant: PageTenant) -> HTMLResponse:
    shown = [t for t in platform.keyring.tenants() if tenant.config.admin or t.name == tenant.name]
    held_by = getattr(platform.pool, "held", None)  # None on a fleet: held per host
    opened_by = getattr(platform.sessions, "sessions_of", None)
    usage: list[dict[str, Any]] = []
    for t in {t.name: t for t in shown}.values():
        quotas = platform.keyring.quotas(t.name)
        held = held_by(t.name) if held_by is not None else 0
        opened = len(opened_by(t.name)) if opened_by is not None else 0
        usage.append(
            {
                "tenant": t.name,
                "requests": t.in_flight,
                "held": held,
                "max_concurrency": quotas.max_concurrency,
                "sessions": opened,
                "max_sessions": quotas.max_sessions,
                "rate_per_s": t.config.rate_per_s,
                "admin": t.config.admin,
            }
        )
    rows = [
        (
            u["tenant"],
            u["requests"],
            f"{u['held']} / {u['max_concurrency'] or 'no limit'}",
            f"{u['sessions']} / {u['max_sessions'] or 'no limit'}",
            u["rate_per_s"] or "no limit",
            "yes" if u["admin"] else "",
        )
        for u in usage
    ]
    refusals_ring = getattr(platform, "refusals", None)
    refused = refusals_ring.select(scope_of(tenant, None)) if refusals_ring is not None else []
    body = (
        table(
            (
                "tenant",
                "requests running",
                "sandboxes held / quota",
                "sessions / quota",
                "rate/s",
                "admin",
            ),
            rows,
        )
        + '<svg id=chart-quotas class=chart viewBox="0 0 600 160"></svg>'
        + data_island("tenants-data", usage)
        + "<h2>recent refusals</h2>"
        + table(
            ("time (UTC)", "tenant", "status", "code", "path", "message"),
            [(_when(r.time), r.tenant, r.status, r.code, r.path, r.message) for r in refused],
            body_id="refusals",
        )
    )
    return page("tenants", body, active="tenants", tenant=tenant.name)


# ------------------------------------------------------------------ policies


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


@router.get("/policies")
async def policies_page(
    platform: PlatformDep,
    tenant: PageTenant,
    a: Annotated[str | None, Query(max_length=64)] = None,
    b: Annotated[str | None, Query(max_length=64)] = None,
) -> HTMLResponse:
    policies = platform.policies
    directory = platform.settings.policies_dir
    rows = []
    for name in sorted(policies):
        path = policy_file(directory, name)
        chain = [p.stem for p in extends_chain(path)] if path is not None else [name]
        warnings = lint_policy(policies[name])
        version = platform.versions.get(name)
        rows.append(
            (
                name,
                version.digest[:12] if version is not None else "-",
                version.loaded_at if version is not None else "-",
                " \u2192 ".join(chain),
                Markup("<br>".join(e(w) for w in warnings) or "none"),
            )
        )
    listing = table(
        ("policy", "digest", "loaded", "extends chain", "lint warnings"), rows, body_id="policies"
    )
    options = {
        side: "".join(
            f"<option{' selected' if n == chosen else ''}>{e(n)}</option>" for n in sorted(policies)
        )
        for side, chosen in (("a", a), ("b", b))
    }
    form = (
        "<h2>diff</h2><form method=get class=filter id=diff-form>"
        f"<select name=a>{options['a']}</select><select name=b>{options['b']}</select>"
        "<button type=submit>diff</button></form>"
    )
    diff = ""
    if a and b:
        if a not in policies or b not in policies:
            raise NotFoundError(f"unknown policy in the diff; known: {sorted(policies)}")
        left = _flatten(policies[a].model_dump(mode="json", exclude={"name"}))
        right = _flatten(policies[b].model_dump(mode="json", exclude={"name"}))
        changed = [
            (key, left.get(key, "(unset)"), right.get(key, "(unset)"))
            for key in sorted(set(left) | set(right))
            if left.get(key) != right.get(key)
        ]
        diff = f"<p>{len(changed)} settings differ</p>" + table(
            ("setting", a, b), changed, body_id="diff"
        )
    return page("policies", listing + form + diff, active="policies", tenant=tenant.name)


# ------------------------------------------------------------------ audit


@router.get("/audit")
async def audit_page(
    platform: PlatformDep,
    tenant: PageTenant,
    kind: Annotated[str | None, Query(max_length=32)] = None,
    since: Annotated[str | None, Query(max_length=40)] = None,
    until: Annotated[str | None, Query(max_length=40)] = None,
    of_tenant: Annotated[str | None, Query(alias="tenant", max_length=64)] = None,
) -> HTMLResponse:
    scope = scope_of(tenant, of_tenant)
    records = await platform.audit_query(
        tenant=scope, kind=kind or None, since=since or None, until=until or None, limit=200
    )
    verify = getattr(platform.audit, "verify", None)  # None on a fleet: each host's own
    if verify is not None and tenant.config.admin:
        intact, checked, broken = await asyncio.to_thread(verify)
        state = (
            f"<p class=ok id=chain>chain intact: {checked} records verified</p>"
            if intact
            else f"<p class=error id=chain>chain BROKEN at record {e(broken)} "
            f"({checked} checked)</p>"
        )
    else:
        state = "<p id=chain>the chain is verified for admin keys, on a single host</p>"
    fields = "".join(
        f'<label>{name} <input name={name} value="{e(value)}" placeholder="{hint}"></label>'
        for name, value, hint in (
            ("tenant", of_tenant, "any"),
            ("kind", kind, "run, judge, ..."),
            ("since", since, "2026-01-01T00:00:00"),
            ("until", until, "ISO 8601"),
        )
    )
    form = f"<form method=get class=filter id=audit-form>{fields}<button>search</button></form>"
    rows = [
        (r.id, r.time, r.tenant, r.kind, r.policy, r.language, r.verdict, r.duration_s)
        for r in records
    ]
    listing = table(
        ("id", "time", "tenant", "kind", "policy", "language", "verdict", "duration s"),
        rows,
        body_id="audit",
    )
    return page("audit", state + form + listing, active="audit", tenant=tenant.name)


# ------------------------------------------------------------------ fleet


@router.get("/fleet")
async def fleet_page(platform: PlatformDep, tenant: PageTenant) -> HTMLResponse:
    router_ = getattr(platform, "router", None)
    if router_ is not None:
        status = router_.status()
        body = f"<p>{status.healthy} of {len(status.hosts)} hosts healthy</p>" + table(
            ("host", "state", "reason", "in flight", "sessions", "idle", "busy", "starting"),
            [
                (h.name, h.state, h.reason, h.in_flight, h.sessions, h.idle, h.busy, h.starting)
                for h in status.hosts
            ],
            body_id="hosts",
        )
    else:
        figures = overview(platform, None)
        body = "<p>a single host (start the service with --fleet for a fleet)</p>" + table(
            ("host", "policies", "images", "idle", "busy", "starting", "queue"),
            [
                (
                    "this host",
                    ", ".join(platform.policy_names()),
                    ", ".join(f"{k}={v}" for k, v in sorted(platform.images.items())),
                    sum(g["idle"] for g in figures["groups"]),
                    sum(g["busy"] for g in figures["groups"]),
                    sum(g["starting"] for g in figures["groups"]),
                    figures["queue_depth"],
                )
            ],
            body_id="hosts",
        )
    return page("fleet", body, active="fleet", tenant=tenant.name)
