#!/bin/sh
# start.sh: starts notes-svc in the background and waits until it answers on
# the port the load balancer sends traffic to (8080).
cd "$(dirname "$0")" || exit 1
nohup python3 server.py --config service.ini > /dev/null 2> server.err &
for _ in $(seq 50); do
    if python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8080/health", timeout=1)' 2>/dev/null; then
        echo "notes-svc started"
        exit 0
    fi
    sleep 0.2
done
echo "notes-svc did not start on 127.0.0.1:8080; see server.err" >&2
exit 1
