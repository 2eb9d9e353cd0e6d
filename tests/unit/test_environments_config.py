"""The environments config's build keys: what an operator gets wrong is refused naming the key
and the fix (no engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.environments.build_cgroup import require_gvisor_steps
from sandbox.environments.config import load_environments_config
from sandbox.errors import EngineError, PolicyError


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "environments.yaml"
    path.write_text(text)
    return load_environments_config(path)


def test_an_allowlist_build_network_reads_its_rules(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "build_network: allowlist\nbuild_allow:\n  - host: deb.debian.org\n    ports: [80]\n"
        "  - domain: '*.pythonhosted.org'\nbuild_pids: 256\n",
    )
    assert config.build_network == "allowlist"  # type: ignore[attr-defined]
    rules = config.build_allow  # type: ignore[attr-defined]
    assert [(r.host, r.domain, r.ports) for r in rules] == [
        ("deb.debian.org", None, (80,)),
        (None, "*.pythonhosted.org", (80, 443)),
    ]
    assert config.build_pids == 256  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("build_network: allowlist\n", ["build_allow", "deb.debian.org"]),
        ("build_allow:\n  - host: pypi.org\n", ["build_network: allowlist", "'none'"]),
        ("build_network: allowlist\nbuild_allow:\n  - port: 80\n", ["build_allow"]),
        ("build_pids: -1\n", ["build_pids"]),
        ("build_network: host\n", ["build_network"]),
        ("build_runtime: runc\n", ["build_runtime", "gvisor", "engine"]),
    ],
)
def test_a_wrong_build_key_is_refused_naming_it(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    with pytest.raises(PolicyError) as refused:
        _load(tmp_path, text)
    message = str(refused.value)
    assert str(tmp_path / "environments.yaml") in message, message
    assert all(word in message for word in words), message


def test_an_engine_without_the_build_runtime_gets_no_gvisor_build() -> None:
    """The refusal names both ways out; the engine `sandbox engine ensure` set up builds."""
    with pytest.raises(EngineError) as refused:
        require_gvisor_steps({"DefaultRuntime": "runc"})
    message = str(refused.value)
    assert "'runc'" in message and "sandbox engine ensure" in message
    assert "build_runtime: engine" in message
    require_gvisor_steps({"DefaultRuntime": "sandbox-build"})
