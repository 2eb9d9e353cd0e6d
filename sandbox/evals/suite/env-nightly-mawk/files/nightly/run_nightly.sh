#!/bin/bash
# Nightly aggregation of the sensor readings in $INPUT_DIR into $OUTPUT_DIR/nightly.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source nightly/env.conf

work=$(mktemp -d -p "$SCRATCH_DIR")
trap 'rm -rf "$work"' EXIT

for file in "$INPUT_DIR"/readings-*.csv; do
    tail -n +2 "$file" >> "$work/all.csv"
    echo "$(basename "$file") $(tail -n +2 "$file" | wc -l)" >> "$work/files.txt"
done

{
    echo "# nightly report"
    echo "## files"
    cat "$work/files.txt"
    echo "## sensors"
    awk -F, -f nightly/aggregate.awk "$work/all.csv"
} > "$work/report.txt"
mv "$work/report.txt" "$OUTPUT_DIR/nightly.txt"
