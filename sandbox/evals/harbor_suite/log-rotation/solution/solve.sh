#!/bin/bash
# Reference fix: delete LOG.KEEP, shift the others from the oldest down (so no
# file is overwritten), move LOG to LOG.1, then SIGHUP the service so it opens
# a new LOG; every expansion quoted.
set -euo pipefail
cat > /workspace/logrot/rotate.sh <<'SH'
#!/bin/bash
# rotate.sh LOG KEEP PIDFILE: rotates LOG. LOG becomes LOG.1, LOG.1 becomes
# LOG.2, and so on, keeping at most KEEP rotated files (LOG.1 .. LOG.KEEP; the
# oldest beyond that is deleted); then it tells the service whose pid is in
# PIDFILE to reopen its log (SIGHUP), which starts a new LOG. No line the
# service writes may be lost or duplicated.
set -euo pipefail
log=$1
keep=$2
pidfile=$3
rm -f -- "$log.$keep"
for ((i = keep - 1; i >= 1; i--)); do
    if [ -e "$log.$i" ]; then
        mv -- "$log.$i" "$log.$((i + 1))"
    fi
done
if [ -e "$log" ]; then
    mv -- "$log" "$log.1"
fi
kill -HUP "$(cat -- "$pidfile")"
SH
chmod 0755 /workspace/logrot/rotate.sh
