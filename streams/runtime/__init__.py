"""What every part runs on: the embedded broker and its workarounds, topics, the worker process,
its health and web pages, the log's identity, the key store, dead letters and raw records."""
