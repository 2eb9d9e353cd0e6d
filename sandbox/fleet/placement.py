"""Where an execution runs: best of K sampled hosts on their load (:func:`choose_host`).

As E2B places sandboxes: sample K eligible hosts, score them on fresh load figures and take
the best, which spreads work nearly as well as looking at every host for a fraction of the
cost (and without herding onto the one host that looked emptiest a moment ago).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .config import DEFAULT_AFFINITY_MARGIN, DEFAULT_STARTS_PER_HOST


@dataclass(frozen=True, slots=True)
class HostLoad:
    """One host's load as the router last heard it.

    ``idle_warm`` maps each group (image and policy) the host serves to its idle warm
    containers there (0 for a group it serves with none warm); a group missing from it
    is one the host does not serve.
    """

    host_id: str
    healthy: bool
    draining: bool
    slots: int
    busy: int
    idle_warm: Mapping[str, int] = field(default_factory=dict)
    queue_depth: int = 0
    starts_in_flight: int = 0
    max_starts_in_flight: int = DEFAULT_STARTS_PER_HOST


def eligible(host: HostLoad, group: str) -> bool:
    """Whether ``host`` may take an execution of ``group`` now.

    Healthy, not draining, serving the group, and below its bound of container starts in
    flight unless an idle warm container spares it a start.
    """
    warm = host.idle_warm.get(group)
    return (
        warm is not None
        and host.healthy
        and not host.draining
        and host.slots > 0
        and (warm > 0 or host.starts_in_flight < host.max_starts_in_flight)
    )


def _has_room(host: HostLoad, group: str) -> bool:
    """An idle warm container for the group, or a free slot nobody queues for."""
    return host.idle_warm[group] > 0 or host.busy + host.queue_depth < host.slots


def _load(host: HostLoad) -> float:
    """Executions running or queued per slot."""
    return (host.busy + host.queue_depth) / host.slots


def _score(host: HostLoad, group: str) -> tuple[int, float, int]:
    """Lower is better: an idle warm container, then load per slot, then starts in flight."""
    return (0 if host.idle_warm[group] > 0 else 1, _load(host), host.starts_in_flight)


def choose_host(
    hosts: Sequence[HostLoad],
    group: str,
    *,
    k: int,
    rng: random.Random,
    affinity: str | None = None,
    affinity_margin: float = DEFAULT_AFFINITY_MARGIN,
) -> HostLoad | None:
    """The best of ``k`` eligible hosts sampled at random, or ``None`` if none is eligible.

    When none of the sampled hosts has room (an idle warm container for the group, or a
    free slot with no queue), the best host with room is taken if there is one: near
    saturation the few free slots are found instead of queueing behind a busy host.
    ``affinity`` names the host where a tenant has its containers: it is kept when it is
    eligible, has a slot that is not busy, and its load per slot is at most the chosen
    host's plus ``affinity_margin``.
    """
    best = _best(hosts, group, k, rng)
    if affinity is not None and best is not None and best.host_id != affinity:
        home = next((h for h in hosts if h.host_id == affinity), None)
        if (
            home is not None
            and eligible(home, group)
            and home.busy < home.slots
            and _load(home) <= _load(best) + affinity_margin
        ):
            return home
    return best


def _best(hosts: Sequence[HostLoad], group: str, k: int, rng: random.Random) -> HostLoad | None:
    candidates: Sequence[HostLoad]
    if len(hosts) > k:
        candidates = [h for h in rng.sample(hosts, k) if eligible(h, group)]
        if len(candidates) < k:  # some sampled hosts cannot serve: sample among those that can
            able = [h for h in hosts if eligible(h, group)]
            candidates = able if len(able) <= k else rng.sample(able, k)
    else:
        candidates = [h for h in hosts if eligible(h, group)]
    if not candidates:
        return None
    best = min(candidates, key=lambda h: _score(h, group))
    if _has_room(best, group) or len(candidates) == len(hosts):
        return best
    # None sampled can start it now: near saturation, find the few hosts that can
    roomy = [h for h in hosts if _has_room(h, group) and eligible(h, group)]
    return min(roomy, key=lambda h: _score(h, group)) if roomy else best
