"""A request body's ``priority_class`` (api/deps.py): checked as the header is, bound in its
place, a 422 when the header names another class; ignored by a single host."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from api.deps import bind_body_class, bind_priority_class
from sandbox.errors import ForbiddenError, InvalidRequestError, QuotaError
from sandbox.fleet.admission import _CLASS, Admission
from sandbox.fleet.config import parse_fleet_config
from sandbox.service.tenants import Keyring, TenantConfig, hash_key

CONFIG = "tenants:\n  trainer: {default_class: training, max_class: evaluation}\n"


def connection(**headers: str) -> SimpleNamespace:
    return SimpleNamespace(headers=headers)


def fleet() -> SimpleNamespace:
    return SimpleNamespace(admission=Admission(parse_fleet_config(CONFIG), lambda: None))


def test_the_body_class_is_bound_and_checked_as_the_header_is() -> None:
    platform = fleet()
    _CLASS.set("training")  # what the header dependency bound (the tenant's default)
    bind_body_class(connection(), platform, "trainer", "evaluation", "batch")  # type: ignore[arg-type]
    assert _CLASS.get() == "evaluation"
    with pytest.raises(InvalidRequestError, match="unknown class 'vip'"):
        bind_body_class(connection(), platform, "trainer", "vip", "run")  # type: ignore[arg-type]
    with pytest.raises(ForbiddenError, match="up to 'evaluation'"):
        bind_body_class(connection(), platform, "trainer", "interactive", "run")  # type: ignore[arg-type]
    bind_body_class(connection(), platform, "trainer", None, "run")  # type: ignore[arg-type]
    assert _CLASS.get() == "evaluation"  # left out: the header's (or the default) stays


def test_a_body_and_a_header_naming_two_classes_is_a_422_naming_both() -> None:
    same = connection(**{"X-Priority-Class": "training"})
    bind_body_class(same, fleet(), "trainer", "training", "run")  # type: ignore[arg-type]
    other = connection(**{"X-Priority-Class": "training"})
    with pytest.raises(InvalidRequestError) as refused:
        bind_body_class(other, fleet(), "trainer", "evaluation", "run")  # type: ignore[arg-type]
    assert "'evaluation'" in str(refused.value) and "'training'" in str(refused.value)
    assert "X-Priority-Class" in str(refused.value)


def test_a_single_host_ignores_the_field_as_it_ignores_the_header() -> None:
    single = SimpleNamespace()  # a Platform has no admission
    header = connection(**{"X-Priority-Class": "training"})
    bind_body_class(header, single, "anyone", "no-such-class", "run")  # type: ignore[arg-type]


async def test_the_header_class_is_bound_without_spending_the_tenants_rate() -> None:
    keyring = Keyring([TenantConfig(tenant="trainer", key_sha256=hash_key("k" * 20), rate_per_s=1)])
    platform = SimpleNamespace(keyring=keyring, admission=fleet().admission)
    request = SimpleNamespace(
        app=SimpleNamespace(state=SimpleNamespace(platform=platform)),
        headers={"x-api-key": "k" * 20},
        url=SimpleNamespace(path="/v1/run"),
    )
    await bind_priority_class(request)  # type: ignore[arg-type]
    assert _CLASS.get() == "training"  # the tenant's default class
    keyring.authenticate("k" * 20)  # the request's one token is still there for its endpoint
    with pytest.raises(QuotaError):
        keyring.authenticate("k" * 20)
