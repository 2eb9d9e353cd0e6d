#!/bin/bash
# Verifier for service-startup. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; the service runs as the
# agent's uid (10001), never as root. Reward 1 only if every check passes.
set -u
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
if [ "$(id -u)" = 0 ]; then  # Harbor: root, in a fresh container holding the agent's /workspace
    chown -R 10001:10001 /workspace
    chmod -R go-rwx /tests  # the agent's programs (uid 10001) cannot read the tests
    as_agent() { setpriv --reuid=10001 --regid=10001 --clear-groups --reset-env -- "$@"; }
    give() { chown -R 10001:10001 "$@"; }  # the verifier's files, to the agent's uid
else  # sandbox-platform: the judge uid, /tests unreadable to others; agent-run is the uid drop
    export TMPDIR=/tmp  # scratch the agent's uid can enter (the judge's own is /judge)
    as_agent() { agent-run "$@"; }
    give() { find "$@" -user "$(id -u)" -exec chmod a+rwX {} +; }  # the agent's are its own
fi
# put MODE SRC DEST: a file of the task's into the agent's tree, written as the agent.
put() { as_agent sh -c 'cat > "$2" && chmod "$1" "$2"' sh "$1" "$3" < "$2"; }
fail() { echo "FAIL: $*"; [ -f "$svc/server.err" ] && tail -5 "$svc/server.err"; exit 0; }

svc=/workspace/notes-svc
[ -f "$svc/service.ini" ] || fail "$svc/service.ini is missing"
# server.py, start.sh and the notes are the task's, not the agent's.
put 0644 /opt/notes-svc/server.py "$svc/server.py"
put 0755 /opt/notes-svc/start.sh "$svc/start.sh"
as_agent mkdir -p "$svc/data"
put 0644 /opt/notes-svc/notes.json "$svc/data/notes.json"

cd /tmp
out=$(as_agent timeout 30 "$svc/start.sh" 2>&1) || fail "start.sh failed: $out"

python3 - "$svc" <<'PY' || exit 0
import configparser, json, os, re, sys, time, urllib.request
from pathlib import Path

svc = Path(sys.argv[1])

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:8080{path}", timeout=5) as r:
        return r.status, json.load(r)

if get("/health") != (200, {"status": "ok", "notes": 3}):
    fail(f"/health answered {get('/health')}")
notes = json.loads((svc / "data/notes.json").read_text())
for key, note in notes.items():
    if get(f"/notes/{key}") != (200, note):
        fail(f"/notes/{key} answered {get(f'/notes/{key}')}")

config = configparser.RawConfigParser()
config.read(svc / "service.ini")
host, port = config.get("server", "host"), config.getint("server", "port")
if (host, port) != ("127.0.0.1", 8080):
    fail(f"service.ini says {host}:{port}")
log_file = (svc / config.get("log", "file")).resolve()
pid_file = (svc / config.get("server", "pidfile")).resolve()
for f in (log_file, pid_file):
    if not f.is_relative_to(svc) or not f.is_file():
        fail(f"{f} is not a file inside {svc}")
pid = pid_file.read_text().strip()
cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if pid.isdigit() else []
if b"server.py" not in b" ".join(cmdline):
    fail(f"pid file holds {pid!r}, not the service's process id")
if os.stat(f"/proc/{pid}").st_uid != 10001:
    fail("the service does not run as uid 10001")
time.sleep(0.5)
lines = log_file.read_text().splitlines()
request = [l for l in lines if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO GET /notes/2 200", l)]
if not request:
    fail(f"no '<timestamp> INFO GET /notes/2 200' line in {log_file}: {lines[-3:]}")
PY
echo PASS
echo 1 > /logs/verifier/reward.txt
