"""The program that runs inside every sandbox container (standard library only).

It is copied into each image at /opt/sandbox/runner and started as
``python3 -m runner``; see ``__main__`` for the protocol.
"""

import sys

# Modules a plain ``python3 script.py`` has loaded before the script starts.
# Every other module the runner imported is dropped from ``sys.modules`` before
# user code runs, so that a local ``json.py`` or ``resource.py`` is imported
# exactly as under a fresh interpreter. ``python3 -m runner`` has also imported runpy
# and this package, which ``python3 script.py`` has not (a user's ``runner.py`` must be
# importable).
BASELINE_MODULES = frozenset(sys.modules) - {"runpy", __name__}
