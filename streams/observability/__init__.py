"""Observability of the worker and of ``memstream serve``: Prometheus metrics (``metrics``)
and JSON log lines (``logs``)."""
