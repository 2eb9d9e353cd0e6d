"""The Grafana dashboard and the alert rules use only metrics the service exports.

A real ``sandbox serve`` makes a few executions and a judgement; every metric name in the
dashboard's expressions and the alert rules must then be among the samples of its
``/metrics`` (the fleet's own names against a fleet's, in tests/fleet/test_fleet.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sandbox.service.platform import STATE_DIR_ENV
from tests.conftest import Service, metric
from tests.deploy.names import SCRAPE_SERIES, metric_names, missing, sample_names, used_names


def test_metric_names_of_promql() -> None:
    assert metric_names(
        "histogram_quantile(0.99, sum by (le) (rate(sandbox_execution_seconds_bucket"
        "[$__rate_interval])))"
    ) == {"sandbox_execution_seconds_bucket"}
    assert metric_names(
        'sum without (class) (a_total{state=~"lost|x"}) / on (instance) b > 1e-9 and time() - c'
    ) == {"a_total", "b", "c"}


JUDGED = {
    "code": "def f(x):\n    return x + 1\n",
    "tests": {"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 2}]},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service that walks its audit chain every half second, with a queue bound of 7."""
    state = tmp_path_factory.mktemp("deploy-state")
    with Service(
        "--audit-verify-interval", "0.5", "--max-waiting", "7",
        log_dir=state, env={STATE_DIR_ENV: str(state)},
    ) as svc:  # fmt: skip
        yield svc


@pytest.mark.docker
def test_every_metric_the_dashboard_and_alerts_use_is_exported(served: Service) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as http:
        for code in ("print('hi')", "import sys; sys.exit(3)", "print(6 * 7)"):
            assert http.post("/v1/run", json={"code": code}).status_code == 200
        assert http.post("/v1/judge", json=JUDGED).status_code == 200  # judgements' series
        text = http.get("/metrics").text
    used = used_names()
    single_host = {n: p for n, p in used.items() if not n.startswith("sandbox_fleet_")}
    assert missing(single_host, sample_names(text) | SCRAPE_SERIES) == {}
    assert any(name.startswith("sandbox_fleet_") for name in used)  # checked on a fleet
    assert metric(text, "sandbox_executions_total") >= 3
    assert metric(text, "sandbox_judgements_total", error_class="none") >= 1
    assert metric(text, "sandbox_execution_seconds_count") >= 3
    assert metric(text, "sandbox_pool_max_waiting") == 7
    assert metric(text, "sandbox_audit_chain_ok") == 1
