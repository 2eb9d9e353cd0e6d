# env.conf has CRLF line endings: every path it sets ends in a carriage return.
sed -i 's/\r$//' nightly/env.conf
# The scratch directory does not exist on this machine: create it.
sed -i 's|^work=$(mktemp -d -p "$SCRATCH_DIR")$|mkdir -p "$SCRATCH_DIR" "$OUTPUT_DIR"\nwork=$(mktemp -d -p "$SCRATCH_DIR")|' nightly/run_nightly.sh
bash nightly/run_nightly.sh
cat data/reports/nightly.txt
