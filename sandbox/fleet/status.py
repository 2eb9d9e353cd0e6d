"""What ``GET /v1/fleet`` and ``sandbox fleet status`` show: each host's state and load."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from sandbox.fleet.scheduler import SchedulerStats


class HostState(StrEnum):
    """Where a host stands: only ``healthy`` hosts take new work."""

    STARTING = "starting"
    HEALTHY = "healthy"
    DRAINING = "draining"
    DRAINED = "drained"
    LOST = "lost"
    FAILED = "failed"


class HostGroup(BaseModel):
    """One policy group on one host: its containers by state, and its warm target."""

    policy: str
    idle: int
    busy: int
    starting: int
    warm_target: int


class HostView(BaseModel):
    """One host, as ``GET /v1/fleet`` and ``sandbox fleet status`` show it."""

    name: str
    node_id: str
    owner: str = Field(description="The owner label on this host's containers.")
    state: HostState
    reason: str
    in_flight: int
    sessions: int
    idle: int
    busy: int
    starting: int
    waiting: int
    routed: int
    seconds_since_heartbeat: float
    groups: list[HostGroup] = Field(
        default_factory=list,
        description="Each policy group on the host (its last heartbeat): idle, busy, starting.",
    )


class FleetStatus(BaseModel):
    """The whole fleet."""

    hosts: list[HostView]
    healthy: int
    scheduler: SchedulerStats | None = Field(
        default=None, description="Slots, the queue per priority class, who runs, who was served."
    )
