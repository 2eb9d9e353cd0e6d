"""inspect_ai is imported by its provider module alone: the rest of the package needs none."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sandbox

PACKAGE = Path(sandbox.__file__).resolve().parent
PROVIDER = PACKAGE / "integrations" / "inspect_provider.py"


def _imports_inspect_ai(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        if any(name.split(".")[0] == "inspect_ai" for name in names):
            return True
    return False


def test_only_the_provider_module_imports_inspect_ai() -> None:
    importers = [p for p in sorted(PACKAGE.rglob("*.py")) if _imports_inspect_ai(p)]
    assert importers == [PROVIDER]


def test_the_service_and_the_sdk_load_no_inspect_ai() -> None:
    probe = (
        "import sys\n"
        "from api.app import create_app\n"
        "import sandbox, sandbox.client, sandbox.integrations, sandbox.integrations.compat\n"
        "create_app()\n"
        "print('inspect_ai' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
