"""Request ids, JSON logs, traces and call classes, on a real ``sandbox serve``.

One service for the module, started with ``--log-format json --access-log
--otel-endpoint`` pointing at an OTLP/HTTP collector this test runs on loopback.
Its log file (stdout and stderr) is read back line by line; the spans are the
protobuf the service posted, decoded.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import docker
import httpx
import pytest
import yaml

from sandbox.backends.docker import LABEL_MANAGED, LABEL_OWNER
from tests.conftest import REPO, Service, metric
from tests.otlp_collector import Collector, ReceivedSpan, collector

pytestmark = pytest.mark.docker

JSON_KEYS = {"ts", "level", "logger", "message", "request_id", "tenant"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Collector]]:
    policies = tmp_path_factory.mktemp("obs-policies")
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    policy["pool"] = {"warm": 1, "max": 2}
    (policies / "default.yaml").write_text(yaml.safe_dump(policy))
    with (
        collector() as (spans, endpoint),
        Service(
            "--log-format",
            "json",
            "--access-log",
            "--otel-endpoint",
            endpoint,
            policies=policies,
            log_dir=policies,
            env={"OTEL_BSP_SCHEDULE_DELAY": "100"},
        ) as svc,
    ):
        yield svc, spans


def log_lines(svc: Service) -> list[dict[str, Any]]:
    """Every line the service wrote, each parsed as JSON (a line that is not fails the test)."""
    entries = []
    for line in svc.log().splitlines():
        if line.strip():
            entry = json.loads(line)
            assert set(entry) >= JSON_KEYS, line
            entries.append(entry)
    return entries


def lines_of(svc: Service, request_id: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        mine = [e for e in log_lines(svc) if e["request_id"] == request_id]
        if any(e["logger"] == "uvicorn.access" for e in mine) or time.monotonic() > deadline:
            return mine
        time.sleep(0.1)


def run(svc: Service, code: str, request_id: str | None = None, **body: Any) -> httpx.Response:
    headers = {"X-Request-ID": request_id} if request_id is not None else {}
    return httpx.post(f"{svc.url}/v1/run", json={"code": code, **body}, headers=headers, timeout=60)


def test_a_request_id_is_returned_and_on_every_line_of_its_call(
    traced: tuple[Service, Collector],
) -> None:
    svc, _ = traced
    response = run(svc, "print(1)", "obs-test.0001")
    assert response.status_code == 200 and response.json()["status"] == "ok"
    assert response.headers["x-request-id"] == "obs-test.0001"
    mine = lines_of(svc, "obs-test.0001")
    access = [e for e in mine if e["logger"] == "uvicorn.access"]
    assert len(access) == 1, mine
    assert "POST /v1/run" in access[0]["message"] and access[0]["tenant"] == "anonymous"
    log_lines(svc)  # start-up, uvicorn and the platform's own lines are JSON too


@pytest.mark.parametrize("presented", ["has space", "x" * 65, "semi;colon", ""])
def test_an_unsafe_request_id_is_replaced_by_a_fresh_one(
    traced: tuple[Service, Collector], presented: str
) -> None:
    svc, _ = traced
    response = httpx.get(f"{svc.url}/healthz", headers={"X-Request-ID": presented})
    given = response.headers["x-request-id"]
    assert given != presented and len(given) == 32 and int(given, 16) >= 0
    assert lines_of(svc, given), "the fresh id is the one logged"


def trace_of(spans: list[ReceivedSpan], request_id: str) -> list[ReceivedSpan]:
    roots = [
        s for s in spans if s.name == "request" and s.attributes.get("request_id") == request_id
    ]
    return [s for s in spans if roots and s.trace_id == roots[0].trace_id]


def test_spans_of_a_run_reach_the_collector_with_their_attributes(
    traced: tuple[Service, Collector],
) -> None:
    svc, spans = traced
    assert run(svc, "print(2)", "obs-trace-run").json()["stdout"] == "2\n"
    wanted = {"request", "execution", "lease", "queue_wait", "reset"}
    trace = spans.wait_for(lambda s: wanted <= {x.name for x in trace_of(s, "obs-trace-run")})
    by_name = {s.name: s for s in trace_of(trace, "obs-trace-run")}
    request, execution = by_name["request"], by_name["execution"]
    assert request.service == "sandbox" and request.parent_span_id == ""
    assert request.attributes["route"] == "/v1/run" and request.attributes["status"] == 200
    assert request.attributes["class"] == "ok" and request.attributes["tenant"] == "anonymous"
    assert execution.parent_span_id == request.span_id
    assert {k: execution.attributes[k] for k in ("tenant", "policy", "language", "status")} == {
        "tenant": "anonymous",
        "policy": "default",
        "language": "python",
        "status": "ok",
    }
    assert by_name["lease"].parent_span_id == execution.span_id
    assert by_name["queue_wait"].parent_span_id == by_name["lease"].span_id
    assert by_name["reset"].attributes["status"] == "clean"


def test_a_judgement_has_its_judge_span(traced: tuple[Service, Collector]) -> None:
    svc, spans = traced
    judged = httpx.post(
        f"{svc.url}/v1/judge",
        json={"code": "print(1)", "tests": {"kind": "io", "cases": [{"expected_stdout": "2"}]}},
        headers={"X-Request-ID": "obs-trace-judge"},
        timeout=60,
    )
    assert judged.json()["error_class"] == "wrong_answer"
    trace = spans.wait_for(lambda s: "judge" in {x.name for x in trace_of(s, "obs-trace-judge")})
    judge = next(s for s in trace_of(trace, "obs-trace-judge") if s.name == "judge")
    assert judge.attributes["status"] == "wrong_answer"
    assert judge.attributes["language"] == "python" and judge.attributes["policy"] == "default"
    request = next(s for s in trace_of(trace, "obs-trace-judge") if s.name == "request")
    assert request.attributes["class"] == "user" and request.attributes["route"] == "/v1/judge"


def calls(svc: Service, kind: str) -> float:
    text = httpx.get(f"{svc.url}/metrics").text
    return metric(text, "sandbox_calls_total", route="/v1/run", **{"class": kind})


def owned_containers(pid: int) -> list[Any]:
    client = docker.from_env()
    prefix = f"{socket.gethostname()}:{pid}:"
    listed = client.containers.list(filters={"label": f"{LABEL_MANAGED}=1"}, ignore_removed=True)
    return [c for c in listed if c.labels.get(LABEL_OWNER, "").startswith(prefix)]


def busy(svc: Service) -> int:
    return sum(group["busy"] for group in httpx.get(f"{svc.url}/v1/pool").json()["groups"])


def test_failures_are_counted_by_class(traced: tuple[Service, Collector]) -> None:
    svc, _ = traced
    before = {kind: calls(svc, kind) for kind in ("ok", "user", "refused", "infra")}

    assert run(svc, "raise ValueError('boom')").json()["status"] == "nonzero_exit"
    assert run(svc, "print(1)", policy="no-such-policy").status_code == 404
    assert httpx.post(f"{svc.url}/v1/run", json={"language": "python"}).status_code == 422

    # An infrastructure failure for real: the sandbox's container killed mid-run.
    answer: dict[str, httpx.Response] = {}
    sleeper = threading.Thread(
        target=lambda: answer.update(r=run(svc, "import time; time.sleep(30)", "obs-infra"))
    )
    sleeper.start()
    deadline = time.monotonic() + 20
    while busy(svc) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the program is running
    for container in owned_containers(svc.process.pid):
        container.kill()
    sleeper.join(60)
    assert answer["r"].json()["status"] == "infra_error", answer["r"].text

    after = {kind: calls(svc, kind) for kind in ("ok", "user", "refused", "infra")}
    assert after["user"] - before["user"] == 1
    assert after["refused"] - before["refused"] == 2
    assert after["infra"] - before["infra"] == 1
    assert after["ok"] == before["ok"]
    # The failure's own log lines carry its request id, from deep in the platform.
    loggers = {e["logger"] for e in lines_of(svc, "obs-infra")}
    assert {"sandbox.core.execution", "uvicorn.access"} <= loggers, loggers


def test_latency_is_observed_per_route(traced: tuple[Service, Collector]) -> None:
    svc, _ = traced
    text = httpx.get(f"{svc.url}/metrics").text
    assert metric(text, "sandbox_call_seconds_count", route="/v1/run") >= 1
    assert metric(text, "sandbox_call_seconds_count", route="/healthz") >= 1
