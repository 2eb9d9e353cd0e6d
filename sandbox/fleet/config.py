"""The fleet scheduling config: priority classes, tenants' shares and classes, quotas, placement,
health, warm pools and autoscaling (:class:`FleetConfig`, :func:`load_fleet_config`).

A YAML file validated as strictly as a policy (unknown keys, wrong types and values out of
bounds are refused with the file, the dotted key and the fix); without a file the built-in
defaults below apply. Every bound is a named constant of this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from sandbox.core.validation import CLASS_NAME_PATTERN
from sandbox.errors import ForbiddenError, InvalidRequestError
from sandbox.policy import KeyedValueError, parse_config, read_config_file
from sandbox.service.tenants import TenantName

NAME_PATTERN: Final = CLASS_NAME_PATTERN
MAX_CLASSES: Final = 16
MAX_TENANTS: Final = 10_000
MIN_WEIGHT: Final = 1
MAX_CLASS_WEIGHT: Final = 1_000_000
MAX_TENANT_WEIGHT: Final = 10_000
MIN_MAX_WAIT_S: Final = 0.1
MAX_MAX_WAIT_S: Final = 86_400.0
MAX_QUEUE: Final = 10_000_000
DEFAULT_QUEUE: Final = 100_000
MIN_DRAIN_WINDOW_S: Final = 1.0
MAX_DRAIN_WINDOW_S: Final = 3600.0
DEFAULT_DRAIN_WINDOW_S: Final = 10.0
MAX_CONCURRENT: Final = 1_000_000
DEFAULT_MAX_CONCURRENT_PER_TENANT: Final = 4096
MAX_STARTS_IN_FLIGHT: Final = 1000
DEFAULT_STARTS_PER_HOST: Final = 3
DEFAULT_STARTS_PER_TENANT: Final = 32
MAX_K: Final = 32
DEFAULT_K: Final = 3
MAX_AFFINITY_MARGIN: Final = 100.0
DEFAULT_AFFINITY_MARGIN: Final = 0.25
MIN_HEARTBEAT_S: Final = 0.05
MAX_HEARTBEAT_S: Final = 300.0
DEFAULT_HEARTBEAT_S: Final = 1.0
MAX_MISSED_HEARTBEATS: Final = 100
DEFAULT_MISSED_HEARTBEATS: Final = 3
MAX_WARM: Final = 10_000
DEFAULT_WARM_MARGIN: Final = 1
DEFAULT_WARM_MIN: Final = 1
DEFAULT_REFILL_THROTTLE_LOAD: Final = 0.8
MIN_WINDOW_S: Final = 0.1
MAX_WINDOW_S: Final = 86_400.0
DEFAULT_RATE_WINDOW_S: Final = 10.0
DEFAULT_IDLE_AFTER_S: Final = 60.0
MIN_START_S: Final = 0.001
MAX_START_S: Final = 600.0
DEFAULT_START_S: Final = 0.5
MAX_AUTOSCALE_QUEUE: Final = 10_000_000
DEFAULT_AUTOSCALE_QUEUE: Final = 100
DEFAULT_AUTOSCALE_SUSTAIN_S: Final = 30.0
DEFAULT_AUTOSCALE_COOLDOWN_S: Final = 60.0
MAX_AUTOSCALE_STEP: Final = 1000
DEFAULT_AUTOSCALE_STEP: Final = 4

RequestKind = Literal["run", "session", "batch"]
"""What a request is, for its default class: a single run or judgement, a session, a batch."""

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
_Seconds = Annotated[float, Field(ge=MIN_WINDOW_S, le=MAX_WINDOW_S, allow_inf_nan=False)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PriorityClass(_Section):
    """A class of work: the higher its weight, the earlier it is served."""

    weight: int = Field(ge=MIN_WEIGHT, le=MAX_CLASS_WEIGHT)
    max_wait_s: float = Field(ge=MIN_MAX_WAIT_S, le=MAX_MAX_WAIT_S, allow_inf_nan=False)


class DefaultClasses(_Section):
    """The class a request of each kind gets when neither it nor its tenant names one."""

    run: Name = "interactive"
    session: Name = "interactive"
    batch: Name = "training"


class TenantSettings(_Section):
    """A tenant's fair-share weight, classes and quotas (``None``: the fleet-wide value)."""

    weight: int = Field(default=1, ge=MIN_WEIGHT, le=MAX_TENANT_WEIGHT)
    default_class: Name | None = None
    max_class: Name | None = None
    max_concurrent: int | None = Field(default=None, ge=1, le=MAX_CONCURRENT)
    max_starts_in_flight: int | None = Field(default=None, ge=1, le=MAX_STARTS_IN_FLIGHT)


class QueueSettings(_Section):
    """The bound of the fleet-wide wait queue, and the window its drain rate is measured over."""

    max_waiting: int = Field(default=DEFAULT_QUEUE, ge=1, le=MAX_QUEUE)
    drain_window_s: float = Field(
        default=DEFAULT_DRAIN_WINDOW_S,
        ge=MIN_DRAIN_WINDOW_S,
        le=MAX_DRAIN_WINDOW_S,
        allow_inf_nan=False,
    )


class Quotas(_Section):
    """Fleet-wide limits: executions per tenant, container starts in flight per host and tenant."""

    max_concurrent_per_tenant: int = Field(
        default=DEFAULT_MAX_CONCURRENT_PER_TENANT, ge=1, le=MAX_CONCURRENT
    )
    max_starts_in_flight_per_host: int = Field(
        default=DEFAULT_STARTS_PER_HOST, ge=1, le=MAX_STARTS_IN_FLIGHT
    )
    max_starts_in_flight_per_tenant: int = Field(
        default=DEFAULT_STARTS_PER_TENANT, ge=1, le=MAX_STARTS_IN_FLIGHT
    )


class PlacementSettings(_Section):
    """How many hosts each placement samples (best of K), and how much more loaded (per slot)
    a tenant's host may be than the best of them and still keep the tenant."""

    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_K)
    affinity_margin: float = Field(
        default=DEFAULT_AFFINITY_MARGIN, ge=0, le=MAX_AFFINITY_MARGIN, allow_inf_nan=False
    )


class HealthSettings(_Section):
    """Heartbeats: how often a host reports, how many missed put it out of rotation."""

    heartbeat_interval_s: float = Field(
        default=DEFAULT_HEARTBEAT_S, ge=MIN_HEARTBEAT_S, le=MAX_HEARTBEAT_S, allow_inf_nan=False
    )
    missed_heartbeats: int = Field(
        default=DEFAULT_MISSED_HEARTBEATS, ge=1, le=MAX_MISSED_HEARTBEATS
    )


class WarmSettings(_Section):
    """Elastic warm pools: Little's law plus a margin, a floor, and the refill throttle."""

    margin: int = Field(default=DEFAULT_WARM_MARGIN, ge=0, le=MAX_WARM)
    min_per_group: int = Field(default=DEFAULT_WARM_MIN, ge=0, le=MAX_WARM)
    refill_throttle_load: float = Field(
        default=DEFAULT_REFILL_THROTTLE_LOAD, gt=0, le=1, allow_inf_nan=False
    )
    rate_window_s: _Seconds = DEFAULT_RATE_WINDOW_S
    idle_after_s: _Seconds = DEFAULT_IDLE_AFTER_S
    initial_start_s: float = Field(
        default=DEFAULT_START_S, ge=MIN_START_S, le=MAX_START_S, allow_inf_nan=False
    )


class AutoscaleSettings(_Section):
    """When to ask Ray's autoscaler for more ``sandbox_host``: a queue that stays long."""

    enabled: bool = True
    queue_threshold: int = Field(default=DEFAULT_AUTOSCALE_QUEUE, ge=1, le=MAX_AUTOSCALE_QUEUE)
    sustain_s: float = Field(
        default=DEFAULT_AUTOSCALE_SUSTAIN_S, ge=0, le=MAX_WINDOW_S, allow_inf_nan=False
    )
    cooldown_s: float = Field(
        default=DEFAULT_AUTOSCALE_COOLDOWN_S, ge=0, le=MAX_WINDOW_S, allow_inf_nan=False
    )
    max_step_hosts: int = Field(default=DEFAULT_AUTOSCALE_STEP, ge=1, le=MAX_AUTOSCALE_STEP)


def _default_classes() -> dict[str, PriorityClass]:
    return {
        "interactive": PriorityClass(weight=100, max_wait_s=5.0),
        "evaluation": PriorityClass(weight=10, max_wait_s=60.0),
        "training": PriorityClass(weight=1, max_wait_s=300.0),
    }


class FleetConfig(_Section):
    """The whole fleet scheduling config; ``FleetConfig()`` is the built-in default."""

    classes: Mapping[Name, PriorityClass] = Field(
        default_factory=_default_classes, min_length=1, max_length=MAX_CLASSES
    )
    default_class: DefaultClasses = DefaultClasses()
    tenant_defaults: TenantSettings = TenantSettings()
    tenants: Mapping[TenantName, TenantSettings] = Field(
        default_factory=dict, max_length=MAX_TENANTS
    )
    queue: QueueSettings = QueueSettings()
    quotas: Quotas = Quotas()
    placement: PlacementSettings = PlacementSettings()
    health: HealthSettings = HealthSettings()
    warm: WarmSettings = WarmSettings()
    autoscale: AutoscaleSettings = AutoscaleSettings()

    _resolved: dict[str, TenantSettings] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check_classes(self) -> FleetConfig:
        seen: dict[int, str] = {}
        for name, klass in self.classes.items():
            if klass.weight in seen:
                raise KeyedValueError(
                    f"class {name!r} has the weight of class {seen[klass.weight]!r}; give each "
                    "class its own weight (the higher, the earlier it is served)",
                    "classes",
                    name,
                    "weight",
                )
            seen[klass.weight] = name
        for kind in ("run", "session", "batch"):
            self._check_known(getattr(self.default_class, kind), "default_class", kind)
        self._check_tenant(self.tenant_defaults, "tenant_defaults")
        for name in self.tenants:
            self._check_tenant(self.settings_for(name), "tenants", name)
        return self

    def _check_known(self, klass: str | None, *key: str) -> None:
        if klass is not None and klass not in self.classes:
            raise KeyedValueError(
                f"unknown class {klass!r}; the classes are {', '.join(self.classes)} "
                "(name one of them, or add it under 'classes')",
                *key,
            )

    def _check_tenant(self, settings: TenantSettings, *key: str) -> None:
        self._check_known(settings.default_class, *key, "default_class")
        self._check_known(settings.max_class, *key, "max_class")
        default, ceiling = settings.default_class, settings.max_class
        if default is not None and ceiling is not None and self.rank(default) > self.rank(ceiling):
            raise KeyedValueError(
                f"max_class {ceiling!r} is below default_class {default!r}; "
                "raise max_class or lower default_class",
                *key,
                "max_class",
            )

    def rank(self, klass: str) -> int:
        """The class's weight: higher is served earlier."""
        return self.classes[klass].weight

    @property
    def top_class(self) -> str:
        """The class served first."""
        return max(self.classes, key=self.rank)

    def settings_for(self, tenant: str) -> TenantSettings:
        """A tenant's settings: its own keys over ``tenant_defaults``."""
        own = self.tenants.get(tenant)
        if own is None:
            return self.tenant_defaults
        cached = self._resolved.get(tenant)  # a private attribute: slower than the lookup above
        if cached is not None:
            return cached
        update = {key: getattr(own, key) for key in own.model_fields_set}
        merged = self.tenant_defaults.model_copy(update=update)
        self._resolved[tenant] = merged
        return merged

    def max_concurrent(self, tenant: str) -> int:
        """The tenant's fleet-wide limit of concurrent executions."""
        own = self.settings_for(tenant).max_concurrent
        return own if own is not None else self.quotas.max_concurrent_per_tenant

    def max_starts_in_flight(self, tenant: str) -> int:
        """The tenant's fleet-wide limit of container creations in flight."""
        own = self.settings_for(tenant).max_starts_in_flight
        return own if own is not None else self.quotas.max_starts_in_flight_per_tenant

    def resolve_class(self, tenant: str, requested: str | None, kind: RequestKind) -> str:
        """The class a request runs in.

        A named class must exist (else :class:`InvalidRequestError`, 422) and be at most the
        tenant's ``max_class`` (else :class:`ForbiddenError`, 403). Unnamed, it is the tenant's
        ``default_class``, else the default for ``kind``, lowered to ``max_class`` if above it.
        """
        settings = self.settings_for(tenant)
        ceiling = settings.max_class or self.top_class
        if requested is not None:
            if requested not in self.classes:
                raise InvalidRequestError(
                    f"priority_class: unknown class {requested!r}; use one of "
                    f"{', '.join(self.classes)} or leave it out for the default"
                )
            if self.rank(requested) > self.rank(ceiling):
                raise ForbiddenError(
                    f"priority_class: tenant {tenant!r} may use classes up to {ceiling!r}, not "
                    f"{requested!r}; ask for {ceiling!r} or lower, or ask an operator to raise "
                    "the tenant's max_class"
                )
            return requested
        chosen = settings.default_class or getattr(self.default_class, kind)
        return chosen if self.rank(chosen) <= self.rank(ceiling) else ceiling


def parse_fleet_config(text: str, *, source: str = "<string>") -> FleetConfig:
    """Validate fleet config YAML text; raises :class:`~sandbox.errors.PolicyError`."""
    return parse_config(text, source=source, model=FleetConfig)


def load_fleet_config(path: str | Path | None = None) -> FleetConfig:
    """Read and validate a fleet config file (``None``: the built-in default).

    Raises :class:`~sandbox.errors.PolicyError` naming the file, the key and the fix.
    """
    if path is None:
        return FleetConfig()
    source = str(path)
    text = read_config_file(Path(path), source, shorten="remove unused keys or tenants")
    return parse_fleet_config(text, source=source)
