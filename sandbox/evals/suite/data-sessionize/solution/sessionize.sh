#!/bin/bash
# Group click-stream events (TSV on stdin) into per-user sessions (CSV on stdout).
set -euo pipefail

exec python3 -c '
import datetime
import re
import sys
from collections import defaultdict

GAP = 1800
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(Z|[+-]\d{2}:\d{2})")

def utc(text):
    if not STAMP.fullmatch(text):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(datetime.timezone.utc)

events = defaultdict(list)
lines = sys.stdin.read().split("\n")
for line in lines[1:]:
    fields = line.split("\t")
    if len(fields) != 3:
        continue
    moment = utc(fields[0])
    if moment is not None:
        events[fields[1]].append(moment)

def show(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

print("user,start,end,events,duration_s")
for user in sorted(events):
    times = sorted(events[user])
    sessions = [[times[0]]]
    for moment in times[1:]:
        if (moment - sessions[-1][-1]).total_seconds() > GAP:
            sessions.append([moment])
        else:
            sessions[-1].append(moment)
    for session in sessions:
        seconds = int((session[-1] - session[0]).total_seconds())
        print(f"{user},{show(session[0])},{show(session[-1])},{len(session)},{seconds}")
'
