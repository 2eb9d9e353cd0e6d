"""The core of one host: the pool of warm containers, executions, and agent sessions.

:mod:`.pool` leases containers per (image, policy, tenant); :mod:`.execution` runs one
program in a leased container; :mod:`.sessions` holds long-lived agent sessions (files,
commands, snapshots, hidden tests at the end); :mod:`.snapshots` keeps snapshots on disk;
:mod:`.quotas` is what one tenant may hold. Below: ``backends``; above: ``judge``.
"""
