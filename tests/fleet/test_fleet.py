"""The fleet end to end: three Ray nodes, a host agent on each, one API in front.

Real Ray (``ray.cluster_utils.Cluster`` on loopback), real Docker, real HTTP. The
tests run in file order: the frozen-host test stops an agent for a few seconds (and
lets it go on), the failover test removes a node and the drain test drains what is
left, so they come last.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sandbox.fleet.config import DEFAULT_QUEUE
from sandbox.host.labels import LABEL_OWNER, owner_alive
from tests.conftest import SANDBOX_BIN, Service, metric
from tests.deploy.names import SCRAPE_SERIES, missing, sample_names, used_names

from .conftest import KEYS, client

pytestmark = pytest.mark.docker

ITEMS = 300


def item(i: int, delay_s: float = 0.0) -> dict[str, Any]:
    """A small function-test item: two in three are right, one in three is wrong; its
    program first sleeps ``delay_s``."""
    body = "x + 1" if i % 3 else "x - 1"
    pause = f"import time\ntime.sleep({delay_s})\n" if delay_s else ""
    return {
        "id": f"item-{i}",
        "code": f"{pause}def f(x):\n    return {body}\n",
        "tests": {
            "kind": "function",
            "entry_point": "f",
            "cases": [{"args": [i], "expected": i + 1}],
        },
    }


def expected_reward(i: int) -> float:
    return 1.0 if i % 3 else 0.0


def evaluate(
    http: httpx.Client, n: int, *, concurrency: int, **headers: str
) -> list[dict[str, Any]]:
    body = {"items": [item(i) for i in range(n)], "concurrency": concurrency}
    with http.stream("POST", "/v1/evaluate", json=body) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line) for line in response.iter_lines() if line.strip()]


def verdicts(lines: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    return {
        line["index"]: (
            line["result"]["reward"],
            line["result"]["passed"],
            line["result"]["total"],
            line["result"]["error_class"],
        )
        for line in lines[:-1]
    }


class Streamed:
    """An /v1/evaluate batch read in a thread: its lines as they come, and when it ended."""

    def __init__(
        self, http: httpx.Client, n: int, concurrency: int, delay_s: float = 0.0, **headers: str
    ) -> None:
        self.lines: list[dict[str, Any]] = []
        self.done = threading.Event()
        self.error: BaseException | None = None
        body = {"items": [item(i, delay_s) for i in range(n)], "concurrency": concurrency}

        def read() -> None:
            try:
                with http.stream("POST", "/v1/evaluate", json=body, headers=headers) as response:
                    for line in response.iter_lines():
                        if line.strip():
                            self.lines.append(json.loads(line))
            except BaseException as exc:
                self.error = exc
            finally:
                self.done.set()

        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()

    def wait_for(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.lines) < count and not self.done.is_set():
            assert time.monotonic() < deadline, f"only {len(self.lines)} lines"
            time.sleep(0.05)

    def result(self, timeout: float = 300) -> list[dict[str, Any]]:
        self.thread.join(timeout)
        assert self.done.is_set() and self.error is None, self.error
        return self.lines


def fleet_status(http: httpx.Client) -> dict[str, Any]:
    response = http.get("/v1/fleet")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture(scope="module")
def single_host_verdicts(fleet_dir: Path) -> dict[int, tuple[Any, ...]]:
    """The same batch on the plain single-host service (same policies)."""
    svc = Service(policies=fleet_dir / "policies", log_dir=fleet_dir)
    try:
        svc.wait_ready()
        with httpx.Client(base_url=svc.url, timeout=300) as http:
            return verdicts(evaluate(http, ITEMS, concurrency=8))
    finally:
        svc.stop()


def test_a_batch_is_spread_over_every_host_with_the_single_host_verdicts(
    fleet: Service, single_host_verdicts: dict[int, tuple[Any, ...]]
) -> None:
    with client(fleet) as http:
        before = http.get("/metrics").text
        lines = evaluate(http, ITEMS, concurrency=24)
        after = http.get("/metrics").text
        status = fleet_status(http)
    summary = lines[-1]
    assert summary["done"] and summary["items"] == ITEMS and summary["errors"] == 0
    assert verdicts(lines) == single_host_verdicts
    assert sorted(verdicts(lines)) == list(range(ITEMS))
    hosts = [h["name"] for h in status["hosts"]]
    assert len(hosts) == 3 and status["healthy"] == 3
    per_host = {
        name: metric(after, "sandbox_fleet_routed_total", host=name, kind="judge")
        - metric(before, "sandbox_fleet_routed_total", host=name, kind="judge")
        for name in hosts
    }
    assert sum(per_host.values()) == ITEMS
    assert all(count > 0 for count in per_host.values()), per_host


def test_run_judge_and_sessions_work_unchanged_through_the_fleet(fleet: Service) -> None:
    with client(fleet) as http:
        ran = http.post("/v1/run", json={"code": "print(6 * 7)"})
        assert ran.status_code == 200 and ran.json()["stdout"] == "42\n"
        judged = http.post("/v1/judge", json=item(1))
        assert judged.status_code == 200 and judged.json()["reward"] == 1.0
        compat = http.post("/run_code", json={"code": "print('hi')", "language": "python"})
        assert compat.status_code == 200 and compat.json()["run_result"]["stdout"] == "hi\n"
        created = http.post("/v1/sessions", json={"files": {"a.txt": "hello"}})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        out = http.post(
            f"/v1/sessions/{sid}/exec", json={"command": "cat a.txt; echo more >> a.txt"}
        )
        assert out.status_code == 200 and out.json()["stdout"] == "hello"
        read = http.get(f"/v1/sessions/{sid}/files", params={"path": "a.txt"})
        assert read.status_code == 200 and read.json()["content_base64"] == "aGVsbG9tb3JlCg=="
        assert http.get(f"/v1/sessions/{sid}").json()["commands"] == 1
        assert http.delete(f"/v1/sessions/{sid}").status_code == 204
        assert http.get(f"/v1/sessions/{sid}").status_code == 404
        assert http.get("/v1/pool").json()["groups"][0]["policy"] == "default"


def test_every_host_agent_runs_at_its_nodes_niceness_not_rays_worker_niceness(
    fleet: Service,
) -> None:
    with client(fleet) as http:
        hosts = [h for h in fleet_status(http)["hosts"] if h["state"] == "healthy"]
    assert hosts
    for host in hosts:
        pid = int(host["owner"].split(":")[1])  # the agent's process (its owner label)
        raylet = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        node = os.getpriority(os.PRIO_PROCESS, raylet)
        threads = {}
        for tid in map(int, os.listdir(f"/proc/{pid}/task")):
            with contextlib.suppress(ProcessLookupError):
                threads[tid] = os.getpriority(os.PRIO_PROCESS, tid)
        assert set(threads.values()) == {node}, (host["name"], node, threads)


def test_metrics_gather_every_host_under_its_host_label(fleet: Service) -> None:
    """After runs on each host, /metrics has each host's samples (one HELP/TYPE per family)."""
    with client(fleet) as http:
        hosts = [h["name"] for h in fleet_status(http)["hosts"]]
        deadline = time.monotonic() + 120
        while True:  # runs 8 at once spread over every host (affinity keeps c1 at home)
            text = http.get("/metrics").text
            ran = {h: metric(text, "sandbox_executions_total", host=h) for h in hosts}
            if all(ran.values()):
                break
            assert time.monotonic() < deadline, ran
            with ThreadPoolExecutor(8) as threads:
                codes = threads.map(
                    lambda _: http.post("/v1/run", json={"code": "print(1)"}).status_code,
                    range(24),
                )
                assert set(codes) == {200}
        response = http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    families = list(text_string_to_metric_families(text))  # the text format parses
    declared = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(declared) == len(set(declared)), "a family is declared twice"
    by_name = {f.name: f for f in families}
    for host in hosts:  # executions and pool gauges come from every host, labelled
        assert metric(text, "sandbox_executions_total", host=host, status="ok") > 0, host
        assert metric(text, "sandbox_execution_seconds_count", host=host) > 0, host
        assert any(
            s.labels.get("host") == host for s in by_name["sandbox_pool_containers"].samples
        ), host
    assert {s.labels["host"] for s in by_name["sandbox_executions"].samples} == set(hosts)
    # the router's own: per-host placements, the queue per class, autoscale requests
    assert {s.labels["class"] for s in by_name["sandbox_fleet_queued"].samples} == {
        "interactive",
        "evaluation",
        "training",
    }
    assert "sandbox_fleet_autoscale_requests" in by_name
    assert all("host" in s.labels for s in by_name["sandbox_fleet_routed"].samples)
    assert metric(text, "sandbox_fleet_queue_max") == DEFAULT_QUEUE
    for host in hosts:  # what the alert rules read of each host
        for family in ("sandbox_pool_start_failures", "sandbox_pool_max_waiting"):
            assert any(s.labels.get("host") == host for s in by_name[family].samples), family
    # Every name deploy/ uses, but the audit chain's (walked with --audit-verify-interval);
    # the infra error alert reads judgements too: one is made whatever ran before.
    with client(fleet) as http:
        assert http.post("/v1/judge", json=item(1)).status_code == 200
        text = http.get("/metrics").text
    used = {n: p for n, p in used_names().items() if not n.startswith("sandbox_audit_chain_")}
    assert missing(used, sample_names(text) | SCRAPE_SERIES) == {}


def _burst(fleet: Service, tenant: str, n: int) -> tuple[list[int], float]:
    """``n`` concurrent runs of half a second for ``tenant``: their statuses, and the most
    container-creating calls the router had in flight for the tenant meanwhile."""
    statuses: list[int] = []
    peak = [0.0]
    done = threading.Event()

    def watch() -> None:
        with client(fleet) as http:
            while not done.is_set():
                text = http.get("/metrics").text
                gauge = metric(text, "sandbox_fleet_tenant_starts_in_flight", tenant=tenant)
                peak[0] = max(peak[0], gauge)

    def run() -> None:
        with client(fleet, tenant) as http:
            code = "import time; time.sleep(0.5); print(1)"
            statuses.append(http.post("/v1/run", json={"code": code}).status_code)

    watcher = threading.Thread(target=watch)
    watcher.start()
    runs = [threading.Thread(target=run) for _ in range(n)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(120)
    done.set()
    watcher.join(30)
    return statuses, peak[0]


def test_a_tenants_container_starts_are_bounded_fleet_wide(fleet: Service) -> None:
    """``starter`` may have 1 container creation in flight in the whole fleet (the test
    config): a burst over the warm containers waits for it; another tenant does not."""
    with client(fleet) as http:
        waits_before = metric(
            http.get("/metrics").text, "sandbox_fleet_start_waits_total", tenant="starter"
        )
    statuses, peak = _burst(fleet, "starter", 12)
    assert statuses == [200] * 12
    assert peak == 1
    with client(fleet) as http:
        text = http.get("/metrics").text
    assert metric(text, "sandbox_fleet_start_waits_total", tenant="starter") > waits_before
    assert metric(text, "sandbox_fleet_tenant_starts_in_flight", tenant="starter") == 0
    statuses, peak = _burst(fleet, "alice", 12)  # the default bound, 32: several at once
    assert statuses == [200] * 12
    assert peak > 1
    with client(fleet) as http:
        text = http.get("/metrics").text
    assert metric(text, "sandbox_fleet_start_waits_total", tenant="alice") == 0


def test_a_tenant_stays_on_the_host_that_holds_its_containers(fleet: Service) -> None:
    """Affinity: one tenant's runs one after another, on an idle fleet, all go to one host."""
    runs = 15
    with client(fleet) as http:
        deadline = time.monotonic() + 60
        while any(h["busy"] or h["in_flight"] for h in fleet_status(http)["hosts"]):
            assert time.monotonic() < deadline, "the fleet did not go idle"
            time.sleep(0.2)
        hosts = [h["name"] for h in fleet_status(http)["hosts"]]
        before = http.get("/metrics").text
    with client(fleet, "light") as http:
        for _ in range(runs):
            assert http.post("/v1/run", json={"code": "print(1)"}).status_code == 200
    with client(fleet) as http:
        after = http.get("/metrics").text
    per_host = {
        name: metric(after, "sandbox_fleet_routed_total", host=name, kind="run")
        - metric(before, "sandbox_fleet_routed_total", host=name, kind="run")
        for name in hosts
    }
    assert sorted(per_host.values()) == [0, 0, runs], per_host


def test_audit_reads_every_hosts_log_as_one(fleet: Service) -> None:
    """``starter``'s 12 runs went to several hosts: /v1/audit has all 12, newest first."""
    with client(fleet) as http:  # alice is an admin: she may read another tenant's records
        response = http.get("/v1/audit", params={"tenant": "starter", "kind": "run"})
        assert response.status_code == 200, response.text
        records = response.json()
        limited = http.get("/v1/audit", params={"tenant": "starter", "limit": 5}).json()
    assert len(records) == 12 and {r["tenant"] for r in records} == {"starter"}
    times = [r["time"] for r in records]
    assert times == sorted(times, reverse=True)
    assert [r["time"] for r in limited] == times[:5]
    with client(fleet, "light") as http:  # and a tenant reads only its own
        assert {r["tenant"] for r in http.get("/v1/audit").json()} == {"light"}


def test_an_unknown_class_is_422_and_one_above_the_tenants_is_403(fleet: Service) -> None:
    with client(fleet, "trainer") as http:
        unknown = http.post("/v1/run", json={"code": "1"}, headers={"X-Priority-Class": "vip"})
        assert unknown.status_code == 422, unknown.text
        assert "vip" in unknown.json()["message"]
        above = http.post(
            "/v1/run", json={"code": "1"}, headers={"X-Priority-Class": "interactive"}
        )
        assert above.status_code == 403, above.text
        assert "evaluation" in above.json()["message"]  # the tenant's ceiling, named
        body = {"items": [item(1)]}
        refused = http.post("/v1/evaluate", json=body, headers={"X-Priority-Class": "interactive"})
        assert refused.status_code == 403, refused.text
        allowed = http.post(
            "/v1/run", json={"code": "print(1)"}, headers={"X-Priority-Class": "evaluation"}
        )
        assert allowed.status_code == 200 and allowed.json()["stdout"] == "1\n"
        # the same, named in the body (/v1/run, /v1/judge, /v1/evaluate, /v1/sessions)
        bodies = {
            "/v1/run": {"code": "print(1)"},
            "/v1/judge": item(1),
            "/v1/evaluate": {"items": [item(1)]},
            "/v1/sessions": {},
        }
        for path, body in bodies.items():
            unknown = http.post(path, json={**body, "priority_class": "vip"})
            assert unknown.status_code == 422 and "vip" in unknown.json()["message"], path
            above = http.post(path, json={**body, "priority_class": "interactive"})
            assert above.status_code == 403 and "evaluation" in above.json()["message"], path
        both = http.post(
            "/v1/run",
            json={"code": "print(1)", "priority_class": "evaluation"},
            headers={"X-Priority-Class": "training"},
        )
        assert both.status_code == 422, both.text  # two classes named: the message names both
        assert "'evaluation'" in both.json()["message"] and "'training'" in both.json()["message"]
        allowed = http.post("/v1/run", json={"code": "print(2)", "priority_class": "evaluation"})
        assert allowed.status_code == 200 and allowed.json()["stdout"] == "2\n"
        judged = http.post("/v1/judge", json={**item(1), "priority_class": "training"})
        assert judged.status_code == 200 and judged.json()["reward"] == 1.0
        created = http.post("/v1/sessions", json={"priority_class": "evaluation"})
        assert created.status_code == 201, created.text
        assert http.delete(f"/v1/sessions/{created.json()['id']}").status_code == 204


def test_interactive_runs_are_served_while_a_training_batch_saturates_the_fleet(
    fleet: Service,
) -> None:
    """Interactive runs pass the training work queued before them.

    In first-come order a run sent while N training items wait is answered only after
    all N got a slot; served before the classes' order, it is answered after the few
    training items granted while it travels and runs. So the training items served
    between a run's send and its answer are fewer than those queued at its send.
    """
    items = 100
    with client(fleet, "trainer") as trainer, client(fleet, "alice") as alice:
        # trainer's default class: training; 64 at a time over the fleet's 6 slots
        batch = Streamed(trainer, items, concurrency=64, delay_s=0.3)
        batch.wait_for(6)
        for _ in range(3):
            before = fleet_status(alice)["scheduler"]
            queued = before["queued"]["training"]
            assert queued >= 20, before  # saturated: training work is waiting
            ran = alice.post("/v1/run", json={"code": "print('now')"})  # interactive by default
            assert ran.status_code == 200 and ran.json()["stdout"] == "now\n"
            after = fleet_status(alice)["scheduler"]
            served = after["served"]["trainer"] - before["served"]["trainer"]
            assert served < queued, (served, queued)
        assert not batch.done.is_set(), "the interactive runs waited for the batch to drain"
        lines = batch.result()
    assert lines[-1]["items"] == items and lines[-1]["errors"] == 0


def test_tenants_share_the_fleet_by_their_weights(fleet: Service) -> None:
    """light (weight 1) and heavy (weight 3) both flood: served counts over a window are 1:3."""
    with client(fleet, "light") as light, client(fleet, "heavy") as heavy:
        # Enough for both to flood past the window (about 40 + 50 light, 40 + 150 heavy
        # served by its end) and no more: every item is answered before the test ends.
        batches = [Streamed(light, 130, concurrency=64), Streamed(heavy, 270, concurrency=64)]

        def served() -> Counter[str]:
            return Counter(fleet_status(light)["scheduler"]["served"])

        deadline = time.monotonic() + 120
        while (first := served())["light"] + first["heavy"] < 40 or min(first.values()) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        start = first
        while (now := served())["light"] + now["heavy"] - start["light"] - start["heavy"] < 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert all(not b.done.is_set() for b in batches), "a tenant stopped flooding in the window"
        window = {t: now[t] - start[t] for t in ("light", "heavy")}
        for batch in batches:
            batch.result()
    ratio = window["heavy"] / window["light"]
    assert 3 * 0.85 <= ratio <= 3 * 1.15, window


def requested_hosts(cluster: Any) -> int | None:
    """The ``sandbox_host`` bundles of the cluster's pending ``request_resources``, as the
    autoscaler reads them from the GCS (``None`` when none was made)."""
    from ray._raylet import GcsClient
    from ray.autoscaler.v2.utils import is_autoscaler_v2

    gcs = GcsClient(address=cluster.address)
    if is_autoscaler_v2(fetch_from_server=True, gcs_client=gcs):
        from ray.autoscaler.v2.sdk import get_cluster_resource_state

        state = get_cluster_resource_state(gcs)
        requests = [
            (dict(r.request.resources_bundle), r.count)
            for constraint in state.cluster_resource_constraints
            for r in constraint.resource_requests
        ]
        return sum(n * b.get("sandbox_host", 0) for b, n in requests) if requests else None
    raw = gcs.internal_kv_get(b"autoscaler_resource_request", None)  # the v1 autoscaler's key
    return None if raw is None else int(sum(b.get("sandbox_host", 0) for b in json.loads(raw)))


def test_a_queue_that_stays_long_asks_the_autoscaler_for_hosts(
    fleet: Service, cluster: Any
) -> None:
    """Queue over 20 for 1 s (the test config): the router calls request_resources (once:
    the cooldown is 600 s; an earlier test's queue may have been the one), and the cluster
    holds the request (its 3 hosts and at most 4 more)."""
    with client(fleet, "trainer") as http:
        batch = Streamed(http, 300, concurrency=64)
        deadline = time.monotonic() + 60
        while metric(http.get("/metrics").text, "sandbox_fleet_autoscale_requests_total") < 1:
            assert time.monotonic() < deadline and not batch.done.is_set(), "no request made"
            time.sleep(0.2)
        batch.result()
        text = http.get("/metrics").text
    assert metric(text, "sandbox_fleet_autoscale_requests_total") == 1
    assert metric(text, "sandbox_fleet_autoscale_failures_total") == 0
    asked = requested_hosts(cluster)
    assert asked is not None and 3 < asked <= 3 + 4, asked
    assert f"asked Ray's autoscaler for {asked} hosts in all" in fleet.log_path.read_text()


def test_a_burst_raises_warm_targets_and_idleness_brings_them_back(fleet: Service) -> None:
    def targets(http: httpx.Client) -> list[int]:
        return [g["warm_target"] for g in http.get("/v1/pool").json()["groups"]]

    floor = [3]  # one group, the floor of 1 on each of the 3 hosts
    with client(fleet) as http:
        deadline = time.monotonic() + 60
        while targets(http) != floor:  # earlier tests' bursts have gone idle
            assert time.monotonic() < deadline, targets(http)
            time.sleep(0.5)
        burst = Streamed(http, 200, concurrency=32)
        deadline = time.monotonic() + 60
        while (raised := targets(http)) == floor:
            assert time.monotonic() < deadline and not burst.done.is_set(), "no target rose"
            time.sleep(0.1)
        assert raised[0] > floor[0]
        burst.result()
        deadline = time.monotonic() + 60
        while targets(http) != floor:  # idle_after_s of the test config: 4 s
            assert time.monotonic() < deadline, "the warm targets stayed up while idle"
            time.sleep(0.5)


TRAINER = """
import asyncio, json, sys
import ray
from sandbox.core.sessions import Command, SessionSpec
from sandbox.fleet import Fleet
from sandbox.judge.batches import EvaluateRequest
from sandbox.judge.judge import JudgeRequest

async def main():
    items = json.loads(sys.argv[3])
    fleet = await Fleet.connect(policies_dir=sys.argv[2])
    try:
        judged = await fleet.judge(JudgeRequest.model_validate(items[0]))
        lines, summary = await fleet.evaluate(EvaluateRequest.model_validate({"items": items}))
        session = await fleet.create_session(SessionSpec())
        ran = await fleet.exec(session.id, Command(command="echo in-cluster"))
        await fleet.close_session(session.id)
        return {
            "healthy": fleet.status().healthy,
            "judged": judged.reward,
            "rewards": [line.result.reward for line in lines],
            "errors": summary.errors,
            "stdout": ran.stdout.decode(),
        }
    finally:
        await fleet.close()

# loopback only: without _node_ip_address Ray dials the node's own address
ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", log_to_driver=False)
print(json.dumps(asyncio.run(main())))
"""


def test_a_trainer_in_the_cluster_calls_the_fleet_without_http(
    fleet: Service, cluster: Any, fleet_dir: Path
) -> None:
    """``Fleet.connect()`` from a Ray driver: judge, evaluate and a session, no HTTP."""
    import sys

    items = [item(i) for i in range(12)]
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            TRAINER,
            cluster.address,
            str(fleet_dir / "policies"),
            json.dumps(items),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["healthy"] == 3 and got["judged"] == expected_reward(0)
    assert got["rewards"] == [expected_reward(i) for i in range(12)] and got["errors"] == 0
    assert got["stdout"] == "in-cluster\n"


def _sessions_per_host(http: httpx.Client, expected: int) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        hosts = {h["node_id"]: h for h in fleet_status(http)["hosts"]}
        if sum(h["sessions"] for h in hosts.values()) >= expected:
            return hosts
        assert time.monotonic() < deadline, hosts
        time.sleep(0.2)


def _hosts(http: httpx.Client) -> dict[str, dict[str, Any]]:
    return {h["node_id"]: h for h in fleet_status(http)["hosts"]}


def _owned(owner: str) -> list[str]:
    engine = docker.from_env(timeout=60)
    try:
        found = engine.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={owner}"})
        return [c.short_id for c in found]
    finally:
        engine.close()


def test_a_frozen_host_is_lost_by_its_heartbeats_and_its_runs_end_elsewhere(
    fleet: Service,
) -> None:
    """An agent that stops answering (its process stopped: SIGSTOP) misses 3 heartbeats and
    is out of rotation; the batch items waiting on it end at once and run again on another
    host: every item answered once, none scored wrong. Let go on, it comes back."""
    items = 40
    with client(fleet) as http:
        rerouted = metric(http.get("/metrics").text, "sandbox_fleet_rerouted_total")
        batch = Streamed(http, items, concurrency=12, delay_s=0.3)
        deadline = time.monotonic() + 30
        while not (busy := [h for h in _hosts(http).values() if h["in_flight"]]):
            assert time.monotonic() < deadline and not batch.done.is_set(), "nothing ran"
            time.sleep(0.02)
        victim = busy[0]
        pid = int(victim["owner"].split(":")[1])  # the agent's process (its owner label)
        os.kill(pid, signal.SIGSTOP)
        try:
            # The audit log is read from every healthy host: the frozen one is named in a
            # 504 within its heartbeat allowance (or, once lost, left out), never waited on.
            audit = http.get("/v1/audit", timeout=60)
            assert audit.status_code in (200, 504), audit.text
            if audit.status_code == 504:
                assert victim["name"] in audit.json()["message"], audit.text
            lines = batch.result(timeout=120)
            lost = _hosts(http)[victim["node_id"]]
        finally:
            os.kill(pid, signal.SIGCONT)
        assert lost["state"] == "lost" and lost["reason"] == "missed 3 heartbeats", lost
        assert metric(http.get("/metrics").text, "sandbox_fleet_rerouted_total") > rerouted
        indices = Counter(line["index"] for line in lines[:-1])
        assert sorted(indices) == list(range(items)) and set(indices.values()) == {1}
        assert lines[-1]["errors"] == 0
        results = {line["index"]: line["result"] for line in lines[:-1]}
        assert all(r["reward"] == expected_reward(i) for i, r in results.items()), results
        deadline = time.monotonic() + 60
        while _hosts(http)[victim["node_id"]]["state"] != "healthy":
            assert time.monotonic() < deadline, "the host did not come back once let go on"
            time.sleep(0.2)
        assert http.post("/v1/run", json={"code": "print(1)"}).status_code == 200


def test_a_lost_host_loses_nothing_but_its_sessions(fleet: Service, cluster: Any) -> None:
    workers = {node.node_id: node for node in cluster.worker_nodes}
    with client(fleet) as http:
        sessions: list[str] = []
        victim = None
        while victim is None:
            assert len(sessions) < 12, "no session landed on a worker node"
            created = http.post("/v1/sessions", json={})
            assert created.status_code == 201, created.text
            sessions.append(created.json()["id"])
            hosts = _sessions_per_host(http, len(sessions))
            victim = next((h for n, h in hosts.items() if n in workers and h["sessions"]), None)
        assert _owned(victim["owner"]), "the victim host has no containers to lose"

        rerouted = metric(http.get("/metrics").text, "sandbox_fleet_rerouted_total")
        # Items of 0.3 s each: some are surely still running on the victim when it goes.
        batch = Streamed(http, ITEMS, concurrency=16, delay_s=0.3)
        batch.wait_for(30)
        # Remove it while batch items run there (placement may serve the first ones elsewhere).
        deadline = time.monotonic() + 30
        while not _hosts(http)[victim["node_id"]]["in_flight"]:
            assert time.monotonic() < deadline, "no batch item ran on the victim host"
            time.sleep(0.05)
        cluster.remove_node(workers[victim["node_id"]], allow_graceful=False)
        removed = time.monotonic()
        lines = batch.result()
        # items that were running on the lost host were sent again to another one
        assert metric(http.get("/metrics").text, "sandbox_fleet_rerouted_total") > rerouted

        indices = Counter(line["index"] for line in lines[:-1])
        assert sorted(indices) == list(range(ITEMS)) and set(indices.values()) == {1}
        assert lines[-1]["items"] == ITEMS and lines[-1]["errors"] == 0
        wrong = [
            line["index"]
            for line in lines[:-1]
            if line["result"]["reward"] is not None
            and line["result"]["reward"] != expected_reward(line["index"])
        ]
        assert not wrong, f"items scored wrong after the loss: {wrong}"
        unjudged = [line for line in lines[:-1] if line["result"]["reward"] is None]
        assert all(line["result"]["error_class"] == "infra" for line in unjudged)

        answers: Counter[int] = Counter()
        for sid in sessions:
            response = http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"})
            answers[response.status_code] += 1
            if response.status_code == 410:
                assert response.json()["code"] == "session_lost"
                assert victim["name"] in response.json()["message"]
            else:
                assert response.status_code == 200, response.text
        assert answers[410] == victim["sessions"], answers
        lost = next(h for h in fleet_status(http)["hosts"] if h["node_id"] == victim["node_id"])
        assert lost["state"] == "lost" and lost["reason"]
        for sid in sessions:
            http.delete(f"/v1/sessions/{sid}")

    deadline = removed + 60
    while _owned(victim["owner"]):
        assert time.monotonic() < deadline, "the lost host's containers remain after 60 s"
        time.sleep(1)


def _listed_groups(text: str, hosts: list[str]) -> set[tuple[str, str]]:
    """(host, policy) of each group line ``sandbox fleet status`` prints under a host."""
    listed: set[tuple[str, str]] = set()
    current = None
    for line in text.splitlines():
        current = next((h for h in hosts if line.startswith(h + " ")), current)
        if line.startswith("  group ") and current is not None:
            listed.add((current, line.removeprefix("  group ").split(":", 1)[0]))
    return listed


def _routed_judgements(http: httpx.Client, host: str) -> float:
    return metric(http.get("/metrics").text, "sandbox_fleet_routed_total", host=host, kind="judge")


def _drain(fleet: Service, name: str) -> None:
    cli = [str(SANDBOX_BIN), "fleet", "drain", name, "--url", fleet.url, "--key", KEYS["alice"]]
    drained = subprocess.run(cli, capture_output=True, text=True, timeout=400)
    assert drained.returncode == 0, drained.stderr
    assert drained.stdout.strip() == f"{name}: drained", drained.stdout


def test_drain_then_no_healthy_host_is_503_naming_the_hosts(fleet: Service) -> None:
    """Drain every host, the first while a batch runs on it; then a request is 503."""
    key = ["--url", fleet.url, "--key", KEYS["alice"]]
    cli = [str(SANDBOX_BIN), "fleet", "status", *key]
    shown = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    with client(fleet) as http:
        hosts = fleet_status(http)["hosts"]
        healthy = [h for h in hosts if h["state"] == "healthy"]
        assert len(healthy) == 2 and all(h["name"] in shown.stdout for h in healthy)
        # each host's policy groups, as /v1/fleet gives them
        groups = {(h["name"], g["policy"]) for h in hosts for g in h["groups"]}
        assert {(h["name"], "default") for h in healthy} <= groups
        assert _listed_groups(shown.stdout, [h["name"] for h in hosts]) == groups

        first, *rest = healthy
        items = 30
        batch = Streamed(http, items, concurrency=8, delay_s=0.5)
        deadline = time.monotonic() + 30
        while not _hosts(http)[first["node_id"]]["in_flight"]:
            assert time.monotonic() < deadline and not batch.done.is_set(), "nothing ran there"
            time.sleep(0.02)
        seen: list[dict[str, Any]] = []  # the first host while its drain runs
        watching = threading.Event()

        def watch() -> None:
            with client(fleet) as watcher:
                while not watching.is_set():
                    seen.append(_hosts(watcher)[first["node_id"]])
                    time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            _drain(fleet, first["name"])
        finally:
            watching.set()
            watcher.join(30)
        drained_at = time.monotonic()
        routed = _routed_judgements(http, first["name"])
        # runs were in flight there during the drain; they finished there, as judged items
        assert any(h["state"] == "draining" and h["in_flight"] for h in seen), seen[-5:]
        lines = batch.result()
        indices = Counter(line["index"] for line in lines[:-1])
        assert sorted(indices) == list(range(items)) and set(indices.values()) == {1}
        assert lines[-1]["errors"] == 0 and lines[-1]["infra_errors"] == 0
        results = {line["index"]: line["result"] for line in lines[:-1]}
        assert all(r["reward"] == expected_reward(i) for i, r in results.items()), results
        # nothing new was placed there once drained; its containers and its agent are gone
        assert _routed_judgements(http, first["name"]) == routed
        assert not _owned(first["owner"]), "a drained host kept containers"
        deadline = time.monotonic() + 30
        while owner_alive(first["owner"]):  # stopped: its node's sandbox_host is free again
            assert time.monotonic() < deadline, "the drained host's agent still runs"
            time.sleep(0.2)

        for host in rest:
            _drain(fleet, host["name"])
            assert not _owned(host["owner"]), "a drained host kept containers"
        refused = http.post("/v1/run", json={"code": "print(1)"})
        assert refused.status_code == 503, refused.text
        body = refused.json()
        assert body["code"] == "fleet_unavailable"
        for host in fleet_status(http)["hosts"]:
            assert host["name"] in body["message"]
        # the router looked for nodes again since (every 5 heartbeats): no agent is started
        # on a drained node
        time.sleep(max(0.0, drained_at + 6.0 - time.monotonic()))
        again = _hosts(http)[first["node_id"]]
        assert again["state"] == "drained" and again["owner"] == first["owner"], again
        assert len(fleet_status(http)["hosts"]) == len(hosts)


def test_task_environments_are_refused_by_a_fleet_with_501(fleet: Service) -> None:
    with client(fleet) as http:
        built = http.post("/v1/environments", json={"image": "python:3.13-slim"})
        assert built.status_code == 501 and built.json()["code"] == "not_implemented"
        assert "single-host service" in built.json()["message"]
        session = http.post("/v1/sessions", json={"environment": "0123456789ab"})
        assert session.status_code == 501 and "single-host" in session.json()["message"]
