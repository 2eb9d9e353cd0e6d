#!/bin/bash
# rotate.sh LOG KEEP PIDFILE: rotates LOG. LOG becomes LOG.1, LOG.1 becomes
# LOG.2, and so on, keeping at most KEEP rotated files (LOG.1 .. LOG.KEEP; the
# oldest beyond that is deleted); then it tells the service whose pid is in
# PIDFILE to reopen its log (SIGHUP), which starts a new LOG. No line the
# service writes may be lost or duplicated.
log=$1
keep=$2
pidfile=$3
for i in $(seq 1 $keep); do
    if [ -f $log.$i ]; then
        mv $log.$i $log.$((i + 1))
    fi
done
mv $log $log.1
