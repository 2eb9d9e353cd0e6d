"""What the platform records: the append-only audit log (:mod:`.audit`) and Prometheus
metrics (:mod:`.metrics`). Imports nothing of the platform, so every layer may use it.
"""
