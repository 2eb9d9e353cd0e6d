#!/bin/bash
# Sales report: a title, per-region totals and the number of rows.
set -eu

file="$1"
echo "Sales report for $(basename "$file")"
echo "=============================="
python tools/summarize.py "$file"
echo "=============================="
echo "rows: $(tail -n +2 "$file" | grep -c .)"
