#!/bin/bash
# Reference fix: an unprivileged port (8080), log and pid files inside the
# service's directory, and the log format's % signs escaped for ConfigParser
# (whose interpolation otherwise reads %(asctime)s as a reference to an option).
set -euo pipefail
cd /workspace/notes-svc
mkdir -p logs run
cat > service.ini <<'INI'
# notes-svc configuration (relative paths are relative to this file).
[server]
host = 127.0.0.1
port = 8080
pidfile = run/notes-svc.pid

[storage]
notes = data/notes.json

[log]
file = logs/notes-svc.log
format = %%(asctime)s %%(levelname)s %%(message)s
INI
