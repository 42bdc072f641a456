"""Operations on the log from outside the worker: replay and verify, rebuild the sessions,
re-extract, dead letters, erasure and forgetting."""
