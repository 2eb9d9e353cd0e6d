"""The zygote's rehearsal of a spare's path: it specialises that code and leaves nothing behind.

Run in a fresh interpreter (the runner's code is plain Python, the host's 3.11 as the
image's): what :func:`sandbox.runner.child._rehearse` leaves is what every spare inherits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import dis, json, os, sys
from sandbox.runner import child
from sandbox.runner.config import Config

# What a spare runs once it has its request; nothing in this interpreter has run them.
SPARE_PATH = (child.Spec.__init__, child.python_script, child._read_request, child._exit_code)

def specialised():
    counts = []
    for function in SPARE_PATH:
        plain = [i.opname for i in dis.get_instructions(function)]
        adaptive = [i.opname for i in dis.get_instructions(function, adaptive=True)]
        counts.append(sum(a != b for a, b in zip(plain, adaptive, strict=True)))
    return counts

def state():
    return {
        "descriptors": sorted(os.listdir("/proc/self/fd")),
        "environment": dict(os.environ),
        "modules": sorted(sys.modules),
        "specialised": specialised(),
    }

before = state()
child._rehearse(Config(["--uid", "1", "--gid", "1", "--judge-uid", "2", "--judge-gid", "2"]))
print(json.dumps({"before": before, "after": state()}))
"""


def test_the_rehearsal_specialises_the_spares_path_and_leaves_nothing_behind() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True
    )
    states = json.loads(probe.stdout)
    before, after = states["before"], states["after"]
    assert before.pop("specialised") == [0, 0, 0, 0]
    assert all(count > 0 for count in after.pop("specialised")), after
    assert after == before  # no descriptor, variable or module left behind
