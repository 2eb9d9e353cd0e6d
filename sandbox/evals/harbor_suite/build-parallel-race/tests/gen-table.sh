#!/bin/sh
# The verifier's tools/gen-table.sh: the task's generator (/opt/calc), with
# when each run starts and ends logged to $GEN_LOG.
echo "start $1 $(date +%s.%N)" >> "${GEN_LOG:-/dev/null}"
sh /opt/calc/gen-table.sh "$@"
status=$?
echo "end $1 $(date +%s.%N)" >> "${GEN_LOG:-/dev/null}"
exit $status
