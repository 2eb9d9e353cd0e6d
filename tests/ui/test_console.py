"""The console in a real browser (Debian's chromium via Playwright) against a real service.

Screenshots of every page go to ``test-artifacts/ui/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import Service
from tests.ui.browser import Watched, chromium
from tests.ui.conftest import KEYS, api, run

pytestmark = pytest.mark.docker

PAGES = {
    "overview": "/ui",
    "executions": "/ui/executions",
    "tenants": "/ui/tenants",
    "policies": "/ui/policies?a=default&b=strict",
    "audit": "/ui/audit",
    "fleet": "/ui/fleet",
    "evaluations": "/ui/evaluations",
    "training": "/ui/training",
    "quality": "/ui/quality",
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def admin(browser: Browser, console: Service) -> Iterator[Watched]:
    """A fresh browser context logged in as the admin through the login form."""
    context = browser.new_context(base_url=console.url, viewport={"width": 1280, "height": 900})
    watched = Watched(context.new_page())
    watched.page.goto("/ui/executions")
    assert watched.page.url.endswith("/ui/login")  # no cookie yet: the form
    watched.page.fill("input[name=key]", KEYS["admin"])
    watched.page.click("button[type=submit]")
    watched.page.wait_for_url("**/ui")
    yield watched
    context.close()
    assert not watched.errors, watched.errors


def test_every_page_loads_without_console_errors(console: Service, admin: Watched) -> None:
    run(console, "team-a", "print('for the pages')")
    for name, path in PAGES.items():
        admin.page.goto(path)
        expect(admin.page.locator("h1")).to_have_text(name)
        admin.screenshot(name)
    admin.page.goto("/ui/executions")
    admin.page.locator("#executions a").first.click()
    expect(admin.page.locator("h1")).to_contain_text("execution ")
    admin.screenshot("execution-detail")
    assert not admin.errors, admin.errors


def test_overview_updates_live_after_executions(console: Service, admin: Watched) -> None:
    page = admin.page
    page.goto("/ui")
    before = int(page.locator("#executions_recorded").inner_text())
    for i in range(3):
        run(console, "team-b", f"print({i})")
    run(console, "team-b", "raise SystemExit(3)")  # a call whose user code failed
    with api(console, "team-b") as http:  # a refused call
        assert http.post("/v1/run", json={"code": "1", "policy": "no-such"}).status_code == 404
    # No reload: the page's own polling (every 2 s) brings the new figures.
    expect(page.locator("#executions_recorded")).to_have_text(str(before + 4), timeout=10_000)
    expect(page.locator("#p50_s")).not_to_have_text("-")
    assert page.locator("#chart-rate polyline").count() == 1
    assert page.locator("#chart-latency polyline").count() == 2
    assert page.locator("#chart-groups rect.bar").count() >= 3
    # The calls of the last 60 s by class, with each class's share, and their latency.
    some = re.compile(r"^[1-9]\d* \(\d+\.\d%\)$")
    for kind in ("ok", "user", "refused"):
        expect(page.locator(f"#calls_{kind}")).to_have_text(some)
    expect(page.locator("#calls_infra")).to_have_text(re.compile(r"^\d+ \(\d+\.\d%\)$"))
    expect(page.locator("#calls_p99_s")).to_have_text(re.compile(r"^\d+\.\d ms$"))
    expect(page.locator("#chart-calls polyline")).to_have_count(3)
    # The runs' model usage: the training log's tokens; the evaluations called no model.
    expect(page.locator("#model_prompt_tokens")).to_have_text("220")
    expect(page.locator("#model_completion_tokens")).to_have_text("42")
    expect(page.locator("#model_calls")).to_have_text("0")
    expect(page.locator("#model_cost")).to_have_text("0.0000")
    admin.screenshot("overview-live")


def test_executions_filter_by_status(console: Service, admin: Watched) -> None:
    run(console, "team-a", "raise SystemExit(3)")
    run(console, "team-a", "print('fine')")
    page = admin.page
    page.goto("/ui/executions")
    page.select_option("select[name=status]", "nonzero_exit")
    page.click("#filter button")
    page.wait_for_url("**status=nonzero_exit**")
    statuses = page.locator("#executions .status").all_inner_texts()
    assert statuses and set(statuses) == {"nonzero_exit"}
    page.fill("input[name=tenant]", "team-b")
    page.select_option("select[name=status]", "")
    page.click("#filter button")
    page.wait_for_url("**tenant=team-b**")
    tenants = page.locator("#executions td:nth-child(3)").all_inner_texts()
    assert tenants and set(tenants) == {"team-b"}
    admin.screenshot("executions-filtered")


def test_policy_diff_renders(admin: Watched, console: Service) -> None:
    page = admin.page
    page.goto("/ui/policies")
    expect(page.locator("td", has_text="gvisor \u2192 default")).to_have_count(1)
    # Each policy's digest and load time, as /v1/pool gives them.
    with api(console, "admin") as client:
        versions = {v["name"]: v for v in client.get("/v1/pool").json()["policies"]}
    row = page.locator("#policies tr", has_text="strict")
    expect(row).to_contain_text(versions["strict"]["digest"][:12])
    expect(row).to_contain_text(versions["strict"]["loaded_at"])
    page.select_option("select[name=a]", "default")
    page.select_option("select[name=b]", "strict")
    page.click("#diff-form button")
    page.wait_for_url("**a=default&b=strict")
    rows = page.locator("#diff tr")
    assert rows.count() > 0
    expect(page.locator("#diff")).to_contain_text("resources.")
    admin.screenshot("policy-diff")


def _search_audit(page: Page, url_has: str, **fields: str) -> list[tuple[int, str, str]]:
    """Search the audit page with ``fields``; its rows as (id, time, kind)."""
    for name, value in fields.items():
        page.fill(f"#audit-form input[name={name}]", value)
    page.click("#audit-form button")
    page.wait_for_url(re.compile(url_has))
    rows = page.locator("#audit tr")
    return [
        (int(cells[0]), cells[1], cells[3])
        for cells in (rows.nth(i).locator("td").all_inner_texts() for i in range(rows.count()))
    ]


def test_audit_search_by_kind_and_by_time(console: Service, admin: Watched) -> None:
    run(console, "team-a", "print('audited')")
    with api(console, "team-a") as http:
        tests = {"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 1}]}
        judged = http.post("/v1/judge", json={"code": "def f(x):\n    return x\n", "tests": tests})
        assert judged.status_code == 200
    page = admin.page
    page.goto("/ui/audit")
    expect(page.locator("#chain")).to_contain_text("chain intact")
    judgements = _search_audit(page, r"kind=judge", kind="judge")
    assert judgements and {kind for _, _, kind in judgements} == {"judge"}
    judgement, judged_at, _ = judgements[0]  # the newest: the one above
    # From its time on: it, and nothing older; before it: the run made just before, not it.
    since = _search_audit(page, r"kind=&since=\d", kind="", since=judged_at)
    assert judgement in {i for i, _, _ in since}
    assert all(at >= judged_at for _, at, _ in since)
    until = _search_audit(page, r"since=&until=\d", since="", until=judged_at)
    assert until and judgement not in {i for i, _, _ in until}
    assert all(at < judged_at for _, at, _ in until) and until[0][2] == "run"
    admin.screenshot("audit-search")


def test_hostile_stdout_does_not_run_in_the_browser(console: Service, admin: Watched) -> None:
    run(
        console,
        "team-a",
        "print('<script>window.pwned = 1</script><img src=x onerror=\"window.pwned=2\">')",
    )
    page = admin.page
    page.goto("/ui/executions")
    page.locator("#executions a").first.click()
    expect(page.locator("#stdout")).to_contain_text("<script>window.pwned = 1</script>")
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_an_evaluation_report_opens_and_the_gate_compares(admin: Watched) -> None:
    page = admin.page
    page.goto("/ui/evaluations")
    expect(page.locator("#runs tr")).to_have_count(2)
    page.click("text=evals/oracle")
    expect(page.locator("h1")).to_have_text("evaluation evals/oracle")
    expect(page.locator("#summary")).to_contain_text("100.0%")
    # The oracle calls no model: its usage row says so rather than being left out.
    expect(page.locator("#summary tr", has_text="model calls")).to_contain_text("0")
    expect(page.locator("#summary tr", has_text="cost")).to_contain_text("0.0000")
    expect(page.locator("#trials")).to_contain_text("fix-add")
    assert page.locator("#chart-outcomes rect.bar").count() == 1
    admin.screenshot("evaluation-report")
    page.click("text=the full report page")
    expect(page.locator("h1")).to_contain_text("Evaluation of")
    admin.screenshot("evaluation-report-full")
    page.goto("/ui/evaluations")
    page.select_option("select[name=baseline]", "evals/oracle")
    page.select_option("select[name=candidate]", "evals/null")
    page.click("#compare-form button")
    expect(page.locator("#verdict")).to_contain_text("verdict:")
    expect(page.locator("#compare-tasks")).to_contain_text("fix-add")
    admin.screenshot("evaluation-compare")


def test_training_curves_are_drawn(admin: Watched) -> None:
    admin.page.goto("/ui/training")
    expect(admin.page.locator("h2")).to_have_text("train/demo")
    expect(admin.page.locator("main")).to_contain_text("220 prompt, 42 completion; cost: none")
    assert admin.page.locator("svg[data-curve] polyline").count() == 3


def test_a_quality_report_is_listed(admin: Watched) -> None:
    admin.page.goto("/ui/quality")
    expect(admin.page.locator("h2")).to_have_text("quality/star-import")
    expect(admin.page.locator("main")).to_contain_text("[warning] star-import")
    admin.screenshot("quality-report")
