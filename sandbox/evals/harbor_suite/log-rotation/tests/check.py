"""check.py ROTATE: rotates a live service.py log with ROTATE (both as uid 10001).

Checks the lines the rotated files hold.
"""

import itertools
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

rotate = sys.argv[1]
ROOT = os.geteuid() == 0  # Harbor's verifier; else sandbox-platform's judge uid, with agent-run
AGENT = (
    ["setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", "--reset-env"]
    if ROOT
    else ["agent-run"]
)
KEEP = {} if ROOT else {"pass_fds": (3,)}  # agent-run talks to its server on fd 3


def give(path: Path) -> None:
    """Hand the verifier's scratch tree to the agent's uid."""
    if ROOT:
        subprocess.run(["chown", "-R", "10001:10001", str(path)], check=True)
    else:  # the verifier's own files: what the agent's uid made is its own already
        mine = ["-user", str(os.geteuid()), "-exec", "chmod", "a+rwX", "{}", "+"]
        subprocess.run(["find", str(path), *mine], check=True)


def fail(msg: str) -> None:
    print(f"FAIL: {msg}")
    sys.exit(1)


def trial(keep: int, rotations: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="rot."))
    logs = base / "var log" / "my service"
    logs.mkdir(parents=True)
    log, pidfile = logs / "service.log", logs / "service.pid"
    give(base)
    service = subprocess.Popen(
        [*AGENT, "python3", "/opt/logrot/service.py", str(log), str(pidfile)], **KEEP
    )
    try:
        deadline = time.monotonic() + 10
        while not (log.exists() and pidfile.exists() and log.stat().st_size):
            if time.monotonic() > deadline:
                fail("service.py did not start")
            time.sleep(0.02)
        for n in range(rotations):
            time.sleep(0.15)
            done = subprocess.run(
                [*AGENT, rotate, str(log), str(keep), str(pidfile)],
                capture_output=True,
                timeout=30,
                **KEEP,
            )
            if done.returncode != 0:
                fail(
                    f"rotation {n + 1} (KEEP={keep}) exited {done.returncode}: "
                    f"{done.stderr[-300:]!r}"
                )
        time.sleep(0.3)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=10)
    names = sorted(p.name for p in logs.iterdir() if p.name != "service.pid")
    want = ["service.log"] + [f"service.log.{i}" for i in range(1, min(keep, rotations) + 1)]
    if names != sorted(want):
        fail(
            f"KEEP={keep}, {rotations} rotations: the log directory holds {names}, "
            f"expected {sorted(want)}"
        )
    order = [f"service.log.{i}" for i in range(min(keep, rotations), 0, -1)] + ["service.log"]
    numbers = []
    for name in order:
        text = (logs / name).read_text()
        if not text:
            fail(f"KEEP={keep}: {name} is empty")
        for line in text.splitlines():
            m = re.fullmatch(r"line (\d+)", line)
            if not m:
                fail(f"{name} holds {line!r}")
            numbers.append(int(m.group(1)))
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        gaps = [(a, b) for a, b in itertools.pairwise(numbers) if b != a + 1][:3]
        fail(f"KEEP={keep}, {rotations} rotations: lines are not consecutive, e.g. {gaps}")
    if rotations <= keep and numbers[0] != 1:
        fail(f"KEEP={keep}, {rotations} rotations: the first lines were lost")


trial(3, 2)
trial(3, 6)
trial(1, 3)
