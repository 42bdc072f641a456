"""Kafka side of memstream: topics, the embedded broker, the Faust app and its agents."""
