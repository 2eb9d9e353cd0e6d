"""The alert rules in deploy/prometheus: promtool checks them and runs their unit tests.

``make setup`` installs promtool (Debian's ``prometheus`` package); without it these fail.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

PROMETHEUS = REPO / "deploy" / "prometheus"


def promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary is not None, (
        "promtool is not installed: `make setup` installs it (apt-get install prometheus)"
    )
    return subprocess.run(
        [binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_rules_and_config_pass_promtool_check() -> None:
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout
    config = promtool("check", "config", "prometheus.yml")
    assert config.returncode == 0, config.stdout + config.stderr


def test_rule_unit_tests_pass() -> None:
    tested = promtool("test", "rules", "alerts_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_for_severity_and_annotations() -> None:
    for rule in rules():
        assert rule.get("for"), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}, rule["alert"]


def test_every_alert_is_tested_firing_and_silent() -> None:
    cases = yaml.safe_load((PROMETHEUS / "alerts_test.yml").read_text())["tests"]
    firing, silent = set(), set()
    for case in cases:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    names = {rule["alert"] for rule in rules()}
    assert firing == names
    assert silent == names


def test_a_wrong_rule_fails_its_unit_test(tmp_path: Path) -> None:
    """The unit tests tell a rule that never fires from a right one."""
    text = (PROMETHEUS / "alerts.yml").read_text()
    broken = text.replace("expr: sandbox_audit_chain_ok == 0", "expr: sandbox_audit_chain_ok < 0")
    assert broken != text
    (tmp_path / "alerts.yml").write_text(broken)
    shutil.copy(PROMETHEUS / "alerts_test.yml", tmp_path)
    tested = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert tested.returncode != 0
    assert "alertname: SandboxAuditChainBroken" in tested.stdout + tested.stderr
