"""The library's layout: imports run one way down the layers, and public names stay put.

Each folder of ``sandbox/`` is one layer. A module may import its own layer and the
layers below it, never one above (lazy imports inside functions count too). The
names users import (``sandbox.__all__``, ``sandbox.client``, ``sandbox.rewards`` and
the file path verl's ``custom_reward_function.path`` names) are imported here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

import sandbox
from sandbox.evals.tasks import SHIPPED_TASK_DIRS

PACKAGE = Path(sandbox.__file__).resolve().parent

# Lowest first. A layer may import any layer of a lower rank, and its own.
RANKS: dict[str, int] = {
    "runner": 0,
    "errors": 1,
    "results": 1,
    "languages": 2,
    "policy": 3,
    "telemetry": 3,
    "host": 3,
    "backends": 4,
    "environments": 4,
    "core": 5,
    "judge": 6,
    "service": 7,
    "fleet": 8,
    "client": 9,
    "integrations": 10,
    "evals": 10,
    "rl": 11,
    "quality": 11,
    "cli": 12,
    # facades: the package's public names, and the stable reward-function path
    "__init__": 13,
    "rewards": 13,
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if SHIPPED_TASK_DIRS & set(rel.parts):  # shipped evaluation tasks are data
            continue
        found.append((".".join(p for p in rel.parts if p != "__init__"), path))
    return found


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if target != "sandbox" else [f"sandbox.{a.name}" for a in node.names]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "sandbox"]


def test_every_top_level_module_and_folder_has_a_layer() -> None:
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    names = {n for n in names if not n.startswith((".", "_")) or n == "__init__"}
    names.discard("py")  # py.typed, if present
    assert names - set(RANKS) == set(), "give the new module or folder a rank in RANKS"


def test_imports_run_one_way_down_the_layers() -> None:
    upward = []
    for module, path in _modules():
        mine = RANKS[_layer(module)]
        for line, target in _imports(module, path):
            theirs = RANKS[_layer(target)]
            if theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a core module importing the service is caught."""
    planted = tmp_path / "pool.py"
    planted.write_text("from sandbox.service.platform import Platform\n")
    imports = _imports("sandbox.core.pool", planted)
    assert imports == [(1, "sandbox.service.platform")]
    assert RANKS[_layer(imports[0][1])] > RANKS[_layer("sandbox.core.pool")]


@pytest.mark.parametrize("name", sandbox.__all__)
def test_every_public_name_imports_from_the_package(name: str) -> None:
    assert getattr(sandbox, name) is not None


def test_the_names_trainer_configs_and_the_sdk_use() -> None:
    from sandbox.client import AsyncSandboxClient, SandboxClient
    from sandbox.rewards import compute_score, trl_reward

    assert SandboxClient is sandbox.SandboxClient
    assert AsyncSandboxClient is sandbox.AsyncSandboxClient
    rewards = importlib.import_module("sandbox.integrations.rewards")
    assert compute_score is rewards.compute_score
    assert trl_reward is rewards.trl_reward


def test_verls_reward_path_loads_by_file_name() -> None:
    """verl imports ``custom_reward_function.path`` as a file, outside the package."""
    path = PACKAGE / "rewards.py"
    spec = importlib.util.spec_from_file_location("custom_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.compute_score)
    assert module.compute_score is importlib.import_module("sandbox.rewards").compute_score
