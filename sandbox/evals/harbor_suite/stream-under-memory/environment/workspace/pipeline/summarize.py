"""summarize.py EVENTS.csv OUT.json: per-region traffic summary of an event log.

EVENTS.csv has a header line and columns ts,user,region,bytes. OUT.json maps
each region to {"events": n, "bytes": total, "users": distinct users,
"top_user": the user with the most bytes in the region (ties: the smallest
name)}, regions sorted by name.
"""

import json
import sys


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header, rows = lines[0].split(","), [line.split(",") for line in lines[1:]]
    records = [dict(zip(header, row, strict=False)) for row in rows]

    summary = {}
    for region in sorted({r["region"] for r in records}):
        mine = [r for r in records if r["region"] == region]
        per_user = {}
        for r in mine:
            per_user[r["user"]] = per_user.get(r["user"], 0) + int(r["bytes"])
        top = sorted(per_user.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        summary[region] = {
            "events": len(mine),
            "bytes": sum(int(r["bytes"]) for r in mine),
            "users": len(per_user),
            "top_user": top,
        }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
