"""A request body's ``priority_class`` (api/deps.py): checked as the header is, bound in its
place, a 422 when the header names another class; ignored by a single host."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from api.deps import bind_body_class
from sandbox.errors import ForbiddenError, InvalidRequestError
from sandbox.fleet.admission import _CLASS, Admission
from sandbox.fleet.config import parse_fleet_config

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
