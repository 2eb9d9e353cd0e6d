"""Placement: best of K eligible hosts, warm idle first, affinity, None when none can serve."""

from __future__ import annotations

import random
from collections import Counter

from sandbox.fleet.placement import HostLoad, choose_host

GROUP = "python:default"


def host(name: str, **overrides: object) -> HostLoad:
    fields: dict[str, object] = {
        "host_id": name,
        "healthy": True,
        "draining": False,
        "slots": 8,
        "busy": 0,
        "idle_warm": {GROUP: 0},
        "queue_depth": 0,
        "starts_in_flight": 0,
        "max_starts_in_flight": 3,
    }
    fields.update(overrides)
    return HostLoad(**fields)  # type: ignore[arg-type]


def picks(hosts: list[HostLoad], n: int = 300, **kwargs: object) -> Counter[str | None]:
    rng = random.Random(7)
    k = int(kwargs.pop("k", 3))  # type: ignore[call-overload]
    chosen = [choose_host(hosts, GROUP, k=k, rng=rng, **kwargs) for _ in range(n)]  # type: ignore[arg-type]
    return Counter(h.host_id if h else None for h in chosen)


def test_a_host_with_an_idle_warm_container_wins_over_an_emptier_cold_one() -> None:
    hosts = [host("warm", busy=6, idle_warm={GROUP: 1}), host("cold", busy=0)]
    assert picks(hosts) == {"warm": 300}


def test_lower_load_per_slot_wins_then_fewer_starts_in_flight() -> None:
    hosts = [host("busy", busy=6), host("queued", busy=2, queue_depth=4), host("light", busy=1)]
    assert picks(hosts) == {"light": 300}
    hosts = [host("starting", starts_in_flight=2), host("calm", starts_in_flight=0)]
    assert picks(hosts) == {"calm": 300}
    # load is per slot: 4 of 16 busy beats 3 of 8
    assert picks([host("big", slots=16, busy=4), host("small", busy=3)]) == {"big": 300}


def test_unhealthy_draining_and_foreign_hosts_are_skipped() -> None:
    hosts = [
        host("down", healthy=False, idle_warm={GROUP: 5}),
        host("draining", draining=True, idle_warm={GROUP: 5}),
        host("other-group", idle_warm={"node:default": 5}),
        host("no-slots", slots=0),
        host("ok", busy=7),
    ]
    assert picks(hosts) == {"ok": 300}


def test_too_many_starts_in_flight_is_skipped_unless_a_warm_container_spares_the_start() -> None:
    hosts = [host("saturated", starts_in_flight=3), host("ok", busy=7)]
    assert picks(hosts) == {"ok": 300}
    hosts = [host("saturated-warm", starts_in_flight=3, idle_warm={GROUP: 1}), host("ok", busy=7)]
    assert picks(hosts) == {"saturated-warm": 300}


def test_none_when_no_host_is_eligible() -> None:
    hosts = [host("down", healthy=False), host("draining", draining=True)]
    assert picks(hosts, n=5) == {None: 5}
    assert choose_host([], GROUP, k=3, rng=random.Random(0)) is None


def test_affinity_keeps_a_tenant_on_its_host_unless_it_is_loaded_more_by_the_margin() -> None:
    # 2 of 8 busy at home against 0 of 8 elsewhere: 0.25 more per slot, within the margin
    hosts = [host("home", busy=2), host("idle", busy=0)]
    assert picks(hosts, affinity="home") == {"home": 300}
    # even against an idle warm container elsewhere: its own container is at home
    warm_elsewhere = [host("home", busy=2), host("idle", idle_warm={GROUP: 1})]
    assert picks(warm_elsewhere, affinity="home") == {"home": 300}
    # 3 of 8 is 0.375 more: over the margin, the best host wins
    loaded = [host("home", busy=3), host("idle", busy=0)]
    assert picks(loaded, affinity="home") == {"idle": 300}
    assert picks(loaded, affinity="home", affinity_margin=0.5) == {"home": 300}
    assert picks(hosts, affinity="home", affinity_margin=0.0) == {"idle": 300}
    # a home whose every slot is busy (open sessions hold its containers) is left, even
    # within the margin
    full = [host("home", slots=2, busy=2), host("idle", slots=2, busy=0)]
    assert picks(full, affinity="home", affinity_margin=1.0) == {"idle": 300}
    # a home that cannot take work is left
    gone = [host("home", healthy=False), host("idle", busy=0)]
    assert picks(gone, affinity="home") == {"idle": 300}
    draining = [host("home", draining=True), host("idle", busy=6)]
    assert picks(draining, affinity="home") == {"idle": 300}
    assert picks(hosts, affinity="unknown") == {"idle": 300}


def test_among_many_hosts_it_samples_k_and_takes_the_best() -> None:
    """With K=1 choices are spread at random; with K=3 the loaded half is mostly avoided."""
    hosts = [host(f"h{i}", busy=7 if i < 50 else 1) for i in range(100)]
    loaded = {f"h{i}" for i in range(50)}

    def share_loaded(k: int) -> float:
        counts = picks(hosts, n=2000, k=k)
        return sum(n for name, n in counts.items() if name in loaded) / 2000

    assert 0.4 < share_loaded(1) < 0.6
    assert share_loaded(3) < 0.2  # 0.5**3 = 0.125 expected


def test_ineligible_samples_are_replaced_by_eligible_hosts() -> None:
    """If most hosts cannot serve, the few that can are still found every time."""
    hosts = [host(f"down{i}", healthy=False) for i in range(97)]
    hosts += [host("a", busy=3), host("b", busy=1), host("c", busy=2)]
    assert picks(hosts) == {"b": 300}


def test_near_saturation_the_one_host_with_room_is_found() -> None:
    hosts = [host(f"full{i}", busy=8, queue_depth=2) for i in range(99)] + [host("free", busy=7)]
    assert picks(hosts) == {"free": 300}
