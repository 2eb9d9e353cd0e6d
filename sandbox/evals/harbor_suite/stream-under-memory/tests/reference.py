"""reference.py EVENTS.csv: the summary summarize.py must write, computed streaming."""

import csv
import json
import sys

acc: dict[str, dict] = {}
with open(sys.argv[1], encoding="utf-8", newline="") as f:
    for row in csv.DictReader(f):
        a = acc.setdefault(row["region"], {"events": 0, "bytes": 0, "per_user": {}})
        n = int(row["bytes"])
        a["events"] += 1
        a["bytes"] += n
        a["per_user"][row["user"]] = a["per_user"].get(row["user"], 0) + n
summary = {
    region: {
        "events": a["events"],
        "bytes": a["bytes"],
        "users": len(a["per_user"]),
        "top_user": min(a["per_user"].items(), key=lambda kv: (-kv[1], kv[0]))[0],
    }
    for region, a in sorted(acc.items())
}
json.dump(summary, sys.stdout, sort_keys=True)
