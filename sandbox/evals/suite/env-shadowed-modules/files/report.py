"""Summarize sensor measurements: python3 report.py CONFIG CSV."""

import csv
import json
import os
import statistics
import sys
import tempfile
from random import sample_rows

import yaml


def main(config_path: str, csv_path: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    with open(csv_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))

    summary = {"source": os.path.basename(csv_path), "sensors": {}}
    for sensor in config["sensors"]:
        values = [float(r["value"]) for r in rows if r["sensor"] == sensor["id"]]
        if not values:
            continue
        summary["sensors"][sensor["id"]] = {
            "label": sensor["label"],
            "count": len(values),
            "mean": round(statistics.fmean(values), 3),
            "median": statistics.median(values),
            "alert": max(values) > sensor["max"],
        }
    summary["spot_checks"] = [
        r["id"]
        for r in sample_rows(rows, config["spot_checks"]["count"], config["spot_checks"]["seed"])
    ]

    out_dir = config["output_dir"]
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out_dir, delete=False, suffix=".tmp") as handle:
        json.dump(summary, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(handle.name, os.path.join(out_dir, "summary.json"))

    for sensor_id, info in summary["sensors"].items():
        flag = "  ALERT" if info["alert"] else ""
        print(f"{sensor_id:<6} {info['label']:<18} n={info['count']:<4} mean={info['mean']}{flag}")
    print(f"spot checks: {' '.join(summary['spot_checks'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
