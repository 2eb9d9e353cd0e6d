"""The fleet scheduling config: refusals name the file, the key and the fix; class lookups."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.errors import ForbiddenError, InvalidRequestError, PolicyError, status_and_code
from sandbox.fleet.config import (
    DEFAULT_K,
    FleetConfig,
    load_fleet_config,
)

TENANTS = """\
tenants:
  team-a: {weight: 2, default_class: evaluation, max_class: evaluation}
  team-b: {weight: 4, max_class: training}
"""


def refusal(tmp_path: Path, text: str) -> PolicyError:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as caught:
        load_fleet_config(path)
    assert caught.value.source == str(path)
    assert str(path) in str(caught.value)
    return caught.value


def test_no_file_is_the_built_in_default() -> None:
    config = load_fleet_config(None)
    assert config == FleetConfig()
    assert set(config.classes) == {"interactive", "evaluation", "training"}
    assert config.top_class == "interactive"
    assert config.placement.k == DEFAULT_K
    assert config.health.missed_heartbeats == 3


def test_a_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(TENANTS + "placement: {k: 2}\nqueue: {max_waiting: 50}\n")
    config = load_fleet_config(path)
    assert config.placement.k == 2
    assert config.queue.max_waiting == 50
    assert config.settings_for("team-a").weight == 2
    assert config.settings_for("nobody") == config.tenant_defaults


def test_unknown_key_names_the_key_and_the_close_match(tmp_path: Path) -> None:
    error = refusal(tmp_path, "tenants:\n  team-a: {wieght: 2}\n")
    assert error.key == "tenants.team-a.wieght"
    assert "did you mean 'weight'" in error.reason


def test_unknown_top_level_section(tmp_path: Path) -> None:
    error = refusal(tmp_path, "placment: {k: 3}\n")
    assert error.key == "placment"
    assert "did you mean 'placement'" in error.reason


def test_a_quoted_number_is_refused(tmp_path: Path) -> None:
    error = refusal(tmp_path, "placement: {k: '3'}\n")
    assert error.key == "placement.k"
    assert "without quotes" in error.reason


def test_a_value_out_of_bounds_names_the_bound(tmp_path: Path) -> None:
    error = refusal(tmp_path, "queue: {max_waiting: 0}\n")
    assert error.key == "queue.max_waiting"
    assert "at least 1" in error.reason


def test_unknown_class_in_a_tenants_default(tmp_path: Path) -> None:
    error = refusal(tmp_path, "tenants:\n  team-a: {default_class: trainig}\n")
    assert error.key == "tenants.team-a.default_class"
    assert "unknown class 'trainig'" in error.reason
    assert "interactive, evaluation, training" in error.reason


def test_max_class_below_default_class(tmp_path: Path) -> None:
    error = refusal(
        tmp_path, "tenants:\n  team-a: {default_class: interactive, max_class: training}\n"
    )
    assert error.key == "tenants.team-a.max_class"
    assert "below default_class" in error.reason


def test_unknown_class_as_a_kinds_default(tmp_path: Path) -> None:
    error = refusal(tmp_path, "default_class: {batch: bulk}\n")
    assert error.key == "default_class.batch"


def test_two_classes_with_one_weight(tmp_path: Path) -> None:
    text = (
        "classes:\n  fast: {weight: 5, max_wait_s: 1}\n  slow: {weight: 5, max_wait_s: 9}\n"
        "default_class: {run: fast, session: fast, batch: slow}\n"
    )
    error = refusal(tmp_path, text)
    assert error.key == "classes.slow.weight"


def test_a_bad_tenant_name_and_an_empty_class_list(tmp_path: Path) -> None:
    error = refusal(tmp_path, "tenants:\n  'team a': {weight: 1}\n")
    assert error.key == "tenants.team a"
    assert "rename it" in error.reason
    error = refusal(tmp_path, "classes: {}\n")
    assert error.key == "classes"
    assert "at least 1" in error.reason


def test_the_hardened_yaml_loader_refuses_tags(tmp_path: Path) -> None:
    error = refusal(tmp_path, "placement: {k: !!int 3}\n")
    assert "tags are refused" in error.reason


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no such file"):
        load_fleet_config(tmp_path / "absent.yaml")


def test_a_file_too_large_is_refused(tmp_path: Path) -> None:
    error = refusal(tmp_path, "# " + "x" * 70_000 + "\nplacement: {k: 3}\n")
    assert "at most 65536 bytes" in error.reason


def test_class_defaults_per_kind_of_request() -> None:
    config = FleetConfig()
    assert config.resolve_class("anyone", None, "run") == "interactive"
    assert config.resolve_class("anyone", None, "session") == "interactive"
    assert config.resolve_class("anyone", None, "batch") == "training"
    assert config.resolve_class("anyone", "evaluation", "batch") == "evaluation"


def test_tenant_default_and_ceiling() -> None:
    config = FleetConfig.model_validate(
        {
            "tenants": {
                "team-a": {"default_class": "evaluation", "max_class": "evaluation"},
                "team-b": {"max_class": "training"},
            }
        }
    )
    assert config.resolve_class("team-a", None, "batch") == "evaluation"
    # unnamed, the kind's default is lowered to the ceiling rather than refused
    assert config.resolve_class("team-b", None, "session") == "training"


def test_unknown_class_is_a_422_naming_the_field() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        FleetConfig().resolve_class("anyone", "urgent", "run")
    assert status_and_code(caught.value)[0] == 422
    assert "priority_class" in str(caught.value)
    assert "interactive" in str(caught.value)


def test_a_class_above_the_tenants_ceiling_is_a_403() -> None:
    config = FleetConfig.model_validate({"tenants": {"team-b": {"max_class": "training"}}})
    with pytest.raises(ForbiddenError) as caught:
        config.resolve_class("team-b", "interactive", "run")
    assert status_and_code(caught.value)[0] == 403
    assert "'training'" in str(caught.value)


def test_tenant_quotas_fall_back_to_the_fleet_wide_ones() -> None:
    config = FleetConfig.model_validate(
        {"quotas": {"max_concurrent_per_tenant": 7}, "tenants": {"team-a": {"max_concurrent": 2}}}
    )
    assert config.max_concurrent("team-a") == 2
    assert config.max_concurrent("team-b") == 7


def test_the_config_is_frozen() -> None:
    config = FleetConfig()
    with pytest.raises(ValueError):
        config.placement = config.placement  # type: ignore[misc]
