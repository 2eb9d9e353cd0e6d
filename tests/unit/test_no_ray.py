"""Without ``--fleet`` the service imports no Ray (a fresh interpreter, so nothing else did)."""

from __future__ import annotations

import subprocess
import sys


def test_the_single_host_service_imports_no_ray() -> None:
    probe = (
        "import sys\n"
        "from api.app import create_app\n"
        "import sandbox, sandbox.fleet, sandbox.fleet.config, sandbox.fleet.status\n"
        "create_app()\n"
        "print('ray' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
