"""service.py LOG PIDFILE: a stand-in for the real service's logging.

Appends numbered lines ("line 1", "line 2", ...) to LOG, writes its pid to
PIDFILE, and on SIGHUP closes LOG and opens it again (creating it). Stops on
SIGTERM.
"""

import os
import signal
import sys
import time

log_path, pid_path = sys.argv[1], sys.argv[2]
reopen = False
running = True


def on_hup(signum, frame):
    global reopen
    reopen = True


def on_term(signum, frame):
    global running
    running = False


signal.signal(signal.SIGHUP, on_hup)
signal.signal(signal.SIGTERM, on_term)
with open(pid_path, "w") as f:
    f.write(f"{os.getpid()}\n")
log = open(log_path, "a", buffering=1)  # noqa: SIM115 (reopened on SIGHUP)
n = 0
while running:
    if reopen:
        reopen = False
        log.close()
        log = open(log_path, "a", buffering=1)  # noqa: SIM115
    n += 1
    log.write(f"line {n}\n")
    time.sleep(0.01)
log.close()
