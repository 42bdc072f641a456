"""Kafka plumbing: the embedded broker and its Tansu workarounds, creating the topics, the
event publisher, dead letters, the log's identity mark, reading a topic whole, records a client
cannot parse, and how far the workers' group has read."""
