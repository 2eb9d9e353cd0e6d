"""The assembled platform of one host (:mod:`.platform`) and its tenants (:mod:`.tenants`).

What ``sandbox serve`` runs and the API calls: backend, pools, executions, judge,
batches, sessions, the reaper and the audit log, configured by one settings object.
"""
