"""Warm pool sizing (Little's law, idle decay, refill throttle) and the autoscale advice."""

from __future__ import annotations

import math

import pytest

from sandbox.fleet.config import AutoscaleSettings, WarmSettings
from sandbox.fleet.warm import AutoscaleAdvisor, WarmSizer

GROUP = "python:default"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def arrivals(sizer: WarmSizer, clock: Clock, rate: float, seconds: float) -> None:
    for _ in range(int(rate * seconds)):
        clock.now += 1.0 / rate
        sizer.record_arrival(GROUP)


def make(**settings: object) -> tuple[WarmSizer, Clock]:
    clock = Clock()
    return WarmSizer(WarmSettings.model_validate(settings), clock=clock), clock


@pytest.mark.parametrize(("rate", "start_s"), [(20.0, 0.5), (100.0, 0.25), (4.0, 2.0)])
def test_the_target_follows_littles_law(rate: float, start_s: float) -> None:
    sizer, clock = make(margin=2, min_per_group=1, rate_window_s=5)
    for _ in range(5):
        sizer.record_start(GROUP, start_s)
    arrivals(sizer, clock, rate, seconds=60)
    assert sizer.arrival_rate(GROUP) == pytest.approx(rate, rel=0.05)
    assert sizer.start_time(GROUP) == pytest.approx(start_s)
    expected = rate * start_s + 2
    assert abs(sizer.target(GROUP, maximum=1000) - expected) <= 1


def test_the_start_time_is_measured() -> None:
    sizer, _ = make(initial_start_s=0.5)
    assert sizer.start_time(GROUP) == 0.5
    sizer.record_start(GROUP, 2.0)
    assert sizer.start_time(GROUP) == 2.0
    for _ in range(50):
        sizer.record_start(GROUP, 1.0)
    assert sizer.start_time(GROUP) == pytest.approx(1.0, abs=0.01)


def test_a_burst_raises_the_target_and_idleness_brings_it_back_to_the_minimum() -> None:
    sizer, clock = make(margin=3, min_per_group=2, rate_window_s=5, idle_after_s=30)
    assert sizer.target(GROUP, maximum=100) == 2
    sizer.record_start(GROUP, 1.0)
    arrivals(sizer, clock, rate=40.0, seconds=20)
    burst = sizer.target(GROUP, maximum=100)
    assert burst >= 35
    clock.now += 10
    cooling = sizer.target(GROUP, maximum=100)
    assert 2 < cooling < burst  # the measured rate decays
    clock.now += 30  # idle: the floor, not the decayed rate plus the margin
    assert sizer.target(GROUP, maximum=100) == 2


def test_the_target_stays_within_the_policys_maximum() -> None:
    sizer, clock = make(margin=5, min_per_group=3)
    arrivals(sizer, clock, rate=200.0, seconds=30)
    assert sizer.target(GROUP, maximum=16) == 16
    assert sizer.target("idle-group", maximum=2) == 2  # the maximum caps the floor too


def test_refills_go_one_at_a_time_under_load() -> None:
    sizer, _ = make(refill_throttle_load=0.8)
    assert sizer.refill_allowed(0.5, in_flight=4)
    assert sizer.refill_allowed(0.9, in_flight=0)
    assert not sizer.refill_allowed(0.9, in_flight=1)


def advisor(**settings: object) -> tuple[AutoscaleAdvisor, Clock]:
    clock = Clock()
    return AutoscaleAdvisor(AutoscaleSettings.model_validate(settings), clock=clock), clock


def test_autoscale_asks_only_after_the_queue_stayed_long_for_sustain_s() -> None:
    scale, clock = advisor(queue_threshold=10, sustain_s=30, cooldown_s=60, max_step_hosts=4)
    assert scale.observe(50, hosts=3, slots_per_host=8) is None
    clock.now = 20
    assert scale.observe(50, hosts=3, slots_per_host=8) is None
    clock.now = 25
    assert scale.observe(5, hosts=3, slots_per_host=8) is None  # dipped: the clock restarts
    clock.now = 26
    assert scale.observe(20, hosts=3, slots_per_host=8) is None
    clock.now = 56
    request = scale.observe(20, hosts=3, slots_per_host=8)
    assert request is not None
    assert (request.add_hosts, request.total_hosts) == (math.ceil(20 / 8), 6)
    assert request.above_for_s == 30


def test_autoscale_is_bounded_per_step_and_waits_out_its_cooldown() -> None:
    scale, clock = advisor(queue_threshold=10, sustain_s=0, cooldown_s=60, max_step_hosts=4)
    first = scale.observe(10_000, hosts=3, slots_per_host=8)
    assert first is not None and first.add_hosts == 4
    clock.now = 30
    assert scale.observe(10_000, hosts=7, slots_per_host=8) is None
    clock.now = 61
    assert scale.observe(10_000, hosts=7, slots_per_host=8) is not None


def test_autoscale_can_be_off() -> None:
    scale, _ = advisor(enabled=False, queue_threshold=1, sustain_s=0)
    assert scale.observe(10_000, hosts=1, slots_per_host=1) is None
