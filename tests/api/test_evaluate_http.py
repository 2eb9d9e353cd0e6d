"""``POST /v1/evaluate`` over real HTTP when the pool is full or a container dies.

One service with one container and no waiting room: every item of a batch has to
wait its turn, and the one container is the one a test can kill.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import docker
import httpx
import pytest

from sandbox.host.labels import LABEL_OWNER
from tests.conftest import Service, metric, one_container_service

ADD_TESTS = {
    "kind": "function",
    "entry_point": "add",
    "cases": [{"args": [1, 2], "expected": 3}, {"args": [-4, 4], "expected": 0}],
}


def item(code: str, item_id: str) -> dict[str, Any]:
    return {"id": item_id, "language": "python", "code": code, "tests": ADD_TESTS}


def slow_add(seconds: float) -> str:
    return f"import time\n\n\ndef add(a, b):\n    time.sleep({seconds})\n    return a + b\n"


@pytest.fixture(scope="module")
def one_container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One container, no waiting room."""
    with one_container_service(tmp_path_factory.mktemp("evaluate-one-container")) as svc:
        yield svc


def stream(url: str, body: dict[str, Any]) -> Iterator[tuple[float, dict[str, Any]]]:
    """Each NDJSON line of a batch with the time it arrived (seconds from the request)."""
    started = time.monotonic()
    with (
        httpx.Client(base_url=url, timeout=180) as client,
        client.stream("POST", "/v1/evaluate", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line:
                yield time.monotonic() - started, json.loads(line)


def test_a_full_pool_makes_items_wait_not_fail(one_container: Service) -> None:
    """Six items, one container, no waiting room: all are judged, none is refused."""
    items = [item(slow_add(0.2), f"i{n}") for n in range(6)]
    lines = [line for _, line in stream(one_container.url, {"items": items, "concurrency": 6})]
    summary = lines[-1]
    assert summary["done"] and summary["errors"] == 0, lines
    assert summary["judged"] == 6 and summary["all_passed"] == 6, summary
    assert all(line["result"]["reward"] == 1.0 for line in lines[:-1]), lines


def test_items_stream_back_as_they_finish(one_container: Service) -> None:
    """The fast item's line arrives long before the slow item (and the batch) ends."""
    body = {"items": [item(slow_add(0), "fast"), item(slow_add(4), "slow")], "concurrency": 1}
    arrivals = list(stream(one_container.url, body))
    (fast_at, fast), (slow_at, slow) = arrivals[0], arrivals[1]
    assert fast["id"] == "fast" and slow["id"] == "slow", arrivals
    assert slow_at - fast_at > 3, arrivals


def test_a_container_killed_mid_batch_is_infra_never_zero(
    one_container: Service, docker_client: docker.DockerClient
) -> None:
    """The item whose container died gets reward null and error_class infra; the summary
    and /metrics count it apart; the other items are judged normally."""
    with httpx.Client(base_url=one_container.url, timeout=60) as client:
        metrics_before = client.get("/metrics").text
    prefix = f":{one_container.process.pid}:"
    killed = threading.Event()

    def kill_the_busy_container() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for container in docker_client.containers.list():
                if prefix in container.labels.get(LABEL_OWNER, ""):
                    top = container.top(ps_args="-eo pid,uid")["Processes"] or []
                    if any(row[1] == "10001" for row in top):  # the candidate runs
                        container.kill()
                        killed.set()
                        return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_the_busy_container)
    killer.start()
    body = {"items": [item(slow_add(30), "doomed"), item(slow_add(0), "fine")], "concurrency": 1}
    lines = [line for _, line in stream(one_container.url, body)]
    killer.join()
    assert killed.is_set(), "the judged container was never seen running"
    by_id = {line["id"]: line for line in lines[:-1]}
    doomed = by_id["doomed"]["result"]
    assert doomed["reward"] is None and doomed["error_class"] == "infra", doomed
    assert by_id["fine"]["result"]["reward"] == 1.0, by_id["fine"]
    summary = lines[-1]
    assert summary["infra_errors"] == 1 and summary["judged"] == 2, summary
    assert summary["mean_reward"] == 1.0, summary  # the lost item is left out, not a 0
    with httpx.Client(base_url=one_container.url, timeout=60) as client:
        after = client.get("/metrics").text
    judged_infra = "sandbox_judgements_total"
    assert metric(after, judged_infra, error_class="infra") == (
        metric(metrics_before, judged_infra, error_class="infra") + 1
    )
    assert metric(after, "sandbox_infra_errors_total") > metric(
        metrics_before, "sandbox_infra_errors_total"
    )
