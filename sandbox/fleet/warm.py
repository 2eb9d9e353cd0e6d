"""Elastic warm pools (:class:`WarmSizer`); when to ask for more hosts (:class:`AutoscaleAdvisor`).

A group (image and policy) needs about as many warm containers as requests arrive while
one container starts (Little's law: ``arrival rate x start time``), plus a margin. The
sizer measures both per group: the arrival rate as an exponentially weighted rate over
``warm.rate_window_s``, the start time as a moving average of measured starts
(``warm.initial_start_s`` until the first). A group with no arrival for
``warm.idle_after_s`` shrinks to ``warm.min_per_group``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .config import AutoscaleSettings, WarmSettings

START_TIME_SMOOTHING: Final = 0.2
"""Weight of the newest measured start in the moving average of start times."""


@dataclass(slots=True)
class _Group:
    rate: float = 0.0
    last_arrival: float | None = None
    start_s: float | None = None


class WarmSizer:
    """Warm targets per group, from measured arrivals and container starts."""

    def __init__(
        self, settings: WarmSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._groups: dict[str, _Group] = {}

    def record_arrival(self, group: str) -> None:
        """One request for ``group`` arrived."""
        state = self._groups.setdefault(group, _Group())
        now = self._clock()
        tau = self._settings.rate_window_s
        state.rate = self._decayed(state, now) + 1.0 / tau
        state.last_arrival = now

    def record_start(self, group: str, seconds: float) -> None:
        """A container of ``group`` took ``seconds`` to start and become ready."""
        state = self._groups.setdefault(group, _Group())
        if state.start_s is None:
            state.start_s = seconds
        else:
            state.start_s += START_TIME_SMOOTHING * (seconds - state.start_s)

    def arrival_rate(self, group: str) -> float:
        """Requests per second for ``group``, as measured now."""
        state = self._groups.get(group)
        return 0.0 if state is None else self._decayed(state, self._clock())

    def start_time(self, group: str) -> float:
        """Seconds a container of ``group`` takes to start, as measured."""
        state = self._groups.get(group)
        if state is None or state.start_s is None:
            return self._settings.initial_start_s
        return state.start_s

    def target(self, group: str, maximum: int) -> int:
        """Warm containers to keep for ``group``: Little's law plus the margin, in bounds.

        ``maximum`` is the policy's bound (its pool ``max``); the floor is
        ``warm.min_per_group``, and an idle group gets just the floor.
        """
        floor = min(self._settings.min_per_group, maximum)
        state = self._groups.get(group)
        now = self._clock()
        if state is None or state.last_arrival is None:
            return floor
        if now - state.last_arrival > self._settings.idle_after_s:
            return floor
        wanted = math.ceil(self._decayed(state, now) * self.start_time(group))
        return max(floor, min(maximum, wanted + self._settings.margin))

    def refill_allowed(self, load: float, in_flight: int) -> bool:
        """Whether to start one more warm refill now.

        ``load`` is the host's busy share of its execution slots (0..1), ``in_flight`` the
        refills already starting: above ``warm.refill_throttle_load`` refills go one at a time.
        """
        return load < self._settings.refill_throttle_load or in_flight == 0

    def _decayed(self, state: _Group, now: float) -> float:
        if state.last_arrival is None:
            return 0.0
        elapsed = max(0.0, now - state.last_arrival)
        return state.rate * math.exp(-elapsed / self._settings.rate_window_s)


class ElasticWarm:
    """A host pool's :class:`~sandbox.core.pool.RefillHook`: measured starts go to the
    sizer, and refills are throttled on the host's busy share of its ``slots()``."""

    def __init__(self, sizer: WarmSizer, slots: Callable[[], int]) -> None:
        self.sizer = sizer
        self.slots = slots

    def started(self, policy: str, seconds: float) -> None:
        self.sizer.record_start(policy, seconds)

    def may_refill(self, policy: str, busy: int, starting: int) -> bool:
        return self.sizer.refill_allowed(busy / max(1, self.slots()), starting)


@dataclass(frozen=True, slots=True)
class ScaleRequest:
    """Ask the autoscaler for ``add_hosts`` more hosts (``total_hosts`` in all)."""

    add_hosts: int
    total_hosts: int
    queue_length: int
    above_for_s: float


class AutoscaleAdvisor:
    """Says when the fleet-wide queue stayed above its threshold long enough, and by how much.

    Feed it the queue length regularly (:meth:`observe`); at most one request per
    ``autoscale.cooldown_s``.
    """

    def __init__(
        self, settings: AutoscaleSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._above_since: float | None = None
        self._last_request: float | None = None

    def observe(self, queue_length: int, *, hosts: int, slots_per_host: int) -> ScaleRequest | None:
        """A :class:`ScaleRequest` when it is time to grow the fleet, else ``None``.

        Asks for enough hosts to run the queue at once (``queue / slots_per_host``), at
        least one and at most ``autoscale.max_step_hosts``.
        """
        settings = self._settings
        now = self._clock()
        if not settings.enabled or queue_length <= settings.queue_threshold:
            self._above_since = None
            return None
        if self._above_since is None:
            self._above_since = now
        above_for = now - self._above_since
        if above_for < settings.sustain_s:
            return None
        if self._last_request is not None and now - self._last_request < settings.cooldown_s:
            return None
        self._last_request = now
        add = max(1, min(settings.max_step_hosts, math.ceil(queue_length / max(1, slots_per_host))))
        return ScaleRequest(
            add_hosts=add, total_hosts=hosts + add, queue_length=queue_length, above_for_s=above_for
        )
