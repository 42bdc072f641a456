"""Commands that work on the log from outside the worker: publish, replay and verify, rebuild
the sessions, re-extract, dead letters, erasure, forgetting, and the demo."""
