#!/bin/bash
# Reference fix: one streaming pass with per-region accumulators, so memory
# grows with the number of distinct (region, user) pairs, not with the input.
set -euo pipefail
cat > /workspace/pipeline/summarize.py <<'PY'
"""summarize.py EVENTS.csv OUT.json: per-region traffic summary of an event log.

EVENTS.csv has a header line and columns ts,user,region,bytes. OUT.json maps
each region to {"events": n, "bytes": total, "users": distinct users,
"top_user": the user with the most bytes in the region (ties: the smallest
name)}, regions sorted by name. The input is read in one streaming pass.
"""

import json
import sys


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    events: dict[str, int] = {}
    per_user: dict[str, dict[str, int]] = {}
    with open(src, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split(",")
        i_user, i_region, i_bytes = (header.index(k) for k in ("user", "region", "bytes"))
        for line in f:
            row = line.rstrip("\n").split(",")
            region, user = row[i_region], row[i_user]
            events[region] = events.get(region, 0) + 1
            users = per_user.setdefault(region, {})
            users[user] = users.get(user, 0) + int(row[i_bytes])

    summary = {}
    for region in sorted(events):
        users = per_user[region]
        summary[region] = {
            "events": events[region],
            "bytes": sum(users.values()),
            "users": len(users),
            "top_user": min(users.items(), key=lambda kv: (-kv[1], kv[0]))[0],
        }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
PY
cd /workspace/pipeline
python3 summarize.py sample.csv /tmp/sample.json
