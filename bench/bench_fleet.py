"""The fleet's scheduling layer at scale, simulated: the real Scheduler and placement code over
synthetic hosts and service times (no Docker, no Ray), side by side in one run.

* Placement: 100 hosts x 4 slots at 90% load (Poisson arrivals, exponential service times,
  the same arrivals and service times for every policy; no admission limit, so placement
  alone decides): p50/p99 queueing delay of best of K against random and round-robin.
* Fair share: tenants with weights 1:2:4 all flooding; Jain's fairness index of their
  served counts divided by their weights, with the weights against without them.
* Priorities: a training flood saturates the fleet while interactive requests arrive at
  5% of capacity: the interactive queueing delay with classes against one class for all.
* Decisions per second of ``choose_host`` at 100 hosts, against a full scan.

Time is virtual: an event loop whose clock jumps to the next timer, so a simulated minute
takes a second or two and the figures do not depend on this machine's load (except the
decisions per second, which are wall-clock).

    .venv/bin/python bench/bench_fleet.py [--seeds 5] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import selectors
import statistics
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save_results
from sandbox.fleet.config import FleetConfig
from sandbox.fleet.placement import HostLoad, choose_host, eligible
from sandbox.fleet.scheduler import Scheduler

GROUP = "python:default"
HOSTS = 100
SLOTS = 4
LOAD = 0.9
SERVICE_S = 1.0


# ---------------------------------------------------------------------- virtual time


class _InstantSelector(selectors.SelectSelector):
    """Never blocks: a wait for a timer moves the loop's clock to it instead."""

    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout:
            self._loop.now += timeout
        return super().select(0)


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_InstantSelector(self))

    def time(self) -> float:
        return self.now


def simulate(main: Callable[[VirtualLoop], Any]) -> Any:
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.close()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------- the synthetic fleet


class Host:
    """A host's slots and local queue; its load as the router sees it."""

    def __init__(self, index: int, loop: VirtualLoop, fleet: Fleet) -> None:
        self.index = index
        self.loop = loop
        self.fleet = fleet
        self.busy = 0
        self.queue: deque[tuple[float, asyncio.Future[float]]] = deque()

    def load(self) -> HostLoad:
        free = SLOTS - self.busy - len(self.queue)
        return HostLoad(
            host_id=f"h{self.index}",
            healthy=True,
            draining=False,
            slots=SLOTS,
            busy=self.busy,
            idle_warm={GROUP: max(0, free)},  # a free slot has a warm container waiting
            queue_depth=len(self.queue),
        )

    def run(self, service_s: float) -> asyncio.Future[float]:
        """Resolves to the time the execution started, when it has finished."""
        done: asyncio.Future[float] = self.loop.create_future()
        if self.busy < SLOTS:
            self._start(service_s, done)
        else:
            self.queue.append((service_s, done))
        self.fleet.changed(self)
        return done

    def _start(self, service_s: float, done: asyncio.Future[float]) -> None:
        self.busy += 1
        started = self.loop.time()
        self.loop.call_later(service_s, self._finish, done, started)

    def _finish(self, done: asyncio.Future[float], started: float) -> None:
        self.busy -= 1
        if self.queue:
            self._start(*self.queue.popleft())
        self.fleet.changed(self)
        done.set_result(started)


class Fleet:
    """Hosts, their current loads, and a placement policy over them."""

    def __init__(self, loop: VirtualLoop, policy: str, rng: random.Random, k: int) -> None:
        self.hosts = [Host(i, loop, self) for i in range(HOSTS)]
        self.loads = [h.load() for h in self.hosts]
        self.policy = policy
        self.rng = rng
        self.k = k
        self._next = itertools.cycle(range(HOSTS))

    def changed(self, host: Host) -> None:
        self.loads[host.index] = host.load()

    def place(self) -> Host:
        if self.policy == "random":
            return self.hosts[self.rng.randrange(HOSTS)]
        if self.policy == "round_robin":
            return self.hosts[next(self._next)]
        chosen = choose_host(self.loads, GROUP, k=self.k, rng=self.rng)
        assert chosen is not None
        return self.hosts[int(chosen.host_id[1:])]


def _config(**overrides: Any) -> FleetConfig:
    return FleetConfig.model_validate(overrides)


# ---------------------------------------------------------------------- scenarios


def placement_run(policy: str, seed: int, seconds: float) -> dict[str, float]:
    """Queueing delay (scheduler wait + host queue) at 90% load under one placement policy."""
    workload = random.Random(seed)
    rate = LOAD * HOSTS * SLOTS / SERVICE_S
    jobs = []
    now = 0.0
    while now < seconds:
        now += workload.expovariate(rate)
        jobs.append((now, workload.expovariate(1.0 / SERVICE_S)))

    async def main(loop: VirtualLoop) -> list[float]:
        scheduler = Scheduler(_config(), clock=loop.time)
        # No admission limit here: this compares placement alone (with the fleet's slot
        # count as the limit, blind placement parks slots in host queues and never recovers)
        scheduler.set_capacity(10 * HOSTS * SLOTS)
        fleet = Fleet(loop, policy, random.Random(seed + 1), k=3)
        delays: list[float] = []

        async def job(arrived: float, service_s: float) -> None:
            async with scheduler.slot("t", "training"):
                started = await fleet.place().run(service_s)
            if arrived > seconds * 0.1:  # past the warm-up
                delays.append(started - arrived)

        tasks = []
        for arrived, service_s in jobs:
            await asyncio.sleep(arrived - loop.time())
            tasks.append(asyncio.create_task(job(arrived, service_s)))
        await asyncio.gather(*tasks)
        return delays

    delays = simulate(main)
    return {
        "p50_ms": percentile(delays, 0.5) * 1000,
        "p99_ms": percentile(delays, 0.99) * 1000,
        "mean_ms": statistics.fmean(delays) * 1000,
        "delayed_share": sum(1 for d in delays if d > 0) / len(delays),
        "jobs": float(len(delays)),
    }


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one has everything."""
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def fairness_run(weighted: bool, seed: int, seconds: float) -> dict[str, float]:
    """Tenants with weights 1:2:4 keep 3x the fleet's slots outstanding each."""
    weights = {"w1": 1, "w2": 2, "w4": 4}
    tenants = {name: {"weight": w if weighted else 1} for name, w in weights.items()}
    service = random.Random(seed)

    async def main(loop: VirtualLoop) -> Counter[str]:
        scheduler = Scheduler(_config(tenants=tenants), clock=loop.time)
        fleet = Fleet(loop, "best_of_k", random.Random(seed + 1), k=3)
        served: Counter[str] = Counter()

        async def client(tenant: str) -> None:
            while loop.time() < seconds:
                async with scheduler.slot(tenant, "training"):
                    await fleet.place().run(service.expovariate(1.0 / SERVICE_S))
                if seconds * 0.1 < loop.time() <= seconds:  # not the warm-up, not the drain
                    served[tenant] += 1

        clients = [
            asyncio.create_task(client(name))
            for name in weights
            for _ in range(3 * HOSTS * SLOTS // len(weights))
        ]
        await asyncio.sleep(0)  # everyone queued: the first grants are shared out too
        scheduler.set_capacity(HOSTS * SLOTS)
        await asyncio.gather(*clients)
        return served

    served = simulate(main)
    shares = [served[name] / weight for name, weight in weights.items()]
    total = sum(served.values())
    return {
        "jain": jain(shares),
        **{f"share_{name}": served[name] / total for name in weights},
    }


def priority_run(classes: bool, seed: int, seconds: float) -> dict[str, float]:
    """Interactive requests at 5% of capacity while the same tenant's training flood saturates
    the fleet (a trainer's own evaluations, say: fair share between tenants cannot help)."""
    workload = random.Random(seed)
    rate = 0.05 * HOSTS * SLOTS / SERVICE_S
    arrivals = []
    now = seconds * 0.1
    while now < seconds:
        now += workload.expovariate(rate)
        arrivals.append(now)

    async def main(loop: VirtualLoop) -> list[float]:
        scheduler = Scheduler(_config(), clock=loop.time)
        scheduler.set_capacity(HOSTS * SLOTS)
        fleet = Fleet(loop, "best_of_k", random.Random(seed + 1), k=3)
        service = random.Random(seed + 2)
        delays: list[float] = []

        async def flood() -> None:
            while loop.time() < seconds:
                async with scheduler.slot("team", "training"):
                    await fleet.place().run(service.expovariate(1.0 / SERVICE_S))

        async def interactive(arrived: float) -> None:
            async with scheduler.slot("team", "interactive" if classes else "training"):
                started = await fleet.place().run(service.expovariate(1.0 / SERVICE_S))
            delays.append(started - arrived)

        floods = [asyncio.create_task(flood()) for _ in range(2 * HOSTS * SLOTS)]
        users = []
        for arrived in arrivals:
            await asyncio.sleep(arrived - loop.time())
            users.append(asyncio.create_task(interactive(arrived)))
        await asyncio.gather(*users, *floods)
        return delays

    delays = simulate(main)
    return {
        "p50_ms": percentile(delays, 0.5) * 1000,
        "p99_ms": percentile(delays, 0.99) * 1000,
    }


def decisions_per_s(how: str, decisions: int = 100_000) -> float:
    """Wall-clock placement decisions per second at 100 hosts with mixed load."""
    rng = random.Random(3)
    loads = [
        HostLoad(
            host_id=f"h{i}",
            healthy=i % 17 != 0,
            draining=i % 23 == 0,
            slots=SLOTS,
            busy=rng.randrange(SLOTS + 1),
            idle_warm={GROUP: rng.randrange(3)},
            queue_depth=rng.randrange(3),
            starts_in_flight=rng.randrange(4),
        )
        for i in range(HOSTS)
    ]
    started = time.perf_counter()
    if how == "best_of_k":
        for _ in range(decisions):
            choose_host(loads, GROUP, k=3, rng=rng)
    else:  # the full scan: every eligible host scored, the best taken
        for _ in range(decisions):
            choose_host([h for h in loads if eligible(h, GROUP)], GROUP, k=HOSTS, rng=rng)
    return decisions / (time.perf_counter() - started)


# ---------------------------------------------------------------------- the report


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def run(seeds: int, seconds: float) -> dict[str, Any]:
    placement = {
        policy: _median([placement_run(policy, seed, seconds) for seed in range(seeds)])
        for policy in ("best_of_k", "random", "round_robin")
    }
    fairness = {
        name: _median([fairness_run(weighted, seed, seconds / 2) for seed in range(seeds)])
        for name, weighted in (("weighted", True), ("unweighted", False))
    }
    priority = {
        name: _median([priority_run(classes, seed, seconds) for seed in range(seeds)])
        for name, classes in (("classes", True), ("one_class", False))
    }
    speed = {how: decisions_per_s(how) for how in ("best_of_k", "full_scan")}
    return {
        "setup": {
            "hosts": HOSTS,
            "slots_per_host": SLOTS,
            "load": LOAD,
            "mean_service_s": SERVICE_S,
            "seeds": seeds,
            "simulated_s": seconds,
            "k": 3,
        },
        "placement": placement,
        "fairness": fairness,
        "priority": priority,
        "decisions_per_s": speed,
    }


def _ratio(theirs: float, ours: float) -> str:
    return f"{theirs / ours:.0f}x" if ours > 0 else "(ours 0)"


def report(outcome: dict[str, Any]) -> str:
    placement, fairness = outcome["placement"], outcome["fairness"]
    priority, speed = outcome["priority"], outcome["decisions_per_s"]
    ours = placement["best_of_k"]
    rows = [
        f"Placement at {LOAD:.0%} load, {HOSTS} hosts x {SLOTS} slots (medians of "
        f"{outcome['setup']['seeds']} seeds), queueing delay:",
        "| placement | p50 ms | p99 ms | mean ms | share delayed | mean ratio (them/us) |",
        "|---|---|---|---|---|---|",
    ]
    for policy, figures in placement.items():
        ratio = _ratio(figures["mean_ms"], ours["mean_ms"]) if policy != "best_of_k" else ""
        rows.append(
            f"| {policy} | {figures['p50_ms']:.1f} | {figures['p99_ms']:.1f} | "
            f"{figures['mean_ms']:.2f} | {figures['delayed_share']:.1%} | {ratio} |"
        )
    rows += [
        "",
        "Fair share, tenants weighted 1:2:4 all flooding:",
        "| scheduler | Jain index (served/weight) | shares w1 / w2 / w4 |",
        "|---|---|---|",
    ]
    for name, figures in fairness.items():
        rows.append(
            f"| {name} | {figures['jain']:.3f} | {figures['share_w1']:.3f} / "
            f"{figures['share_w2']:.3f} / {figures['share_w4']:.3f} |"
        )
    rows += [
        "",
        "Interactive requests (5% of capacity) under a saturating training flood:",
        "| scheduler | p50 ms | p99 ms | p99 ratio (them/us) |",
        "|---|---|---|---|",
    ]
    mine = priority["classes"]
    for name, figures in priority.items():
        ratio = "" if name == "classes" else _ratio(figures["p99_ms"], mine["p99_ms"])
        rows.append(f"| {name} | {figures['p50_ms']:.1f} | {figures['p99_ms']:.1f} | {ratio} |")
    rows += [
        "",
        f"Placement decisions per second at {HOSTS} hosts (wall clock):",
        "| choose_host | decisions/s | us/decision |",
        "|---|---|---|",
    ]
    for how, rate in speed.items():
        rows.append(f"| {how} | {rate:,.0f} | {1e6 / rate:.1f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="runs per scenario (medians)")
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds per run")
    parser.add_argument(
        "--cluster-rounds",
        type=int,
        default=10,
        help="interleaved routing-overhead rounds on the real Ray cluster (0: simulation only)",
    )
    parser.add_argument(
        "--cluster-requests", type=int, default=200, help="requests per round and level"
    )
    args = parser.parse_args()
    outcome = run(args.seeds, args.seconds)
    print(report(outcome))
    if args.cluster_rounds:  # the real-cluster half: routing overhead, 1-3 hosts
        from bench.bench_fleet_cluster import report as cluster_report
        from bench.bench_fleet_cluster import run_cluster

        outcome["cluster"] = run_cluster(args.cluster_rounds, args.cluster_requests)
        print(cluster_report(outcome["cluster"]))
    save_results("bench_fleet", outcome)


if __name__ == "__main__":
    main()
