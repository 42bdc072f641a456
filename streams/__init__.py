"""Kafka side of memstream: topics, the embedded broker, the Faust app and its agents.

Importing it makes aiokafka's fetcher survive records whose header keys are not UTF-8
(:mod:`memstream.streams.kafka.records`): every consumer memstream creates lives in this package,
and one such record stopped every consumer of its partition.
"""

from memstream.streams.kafka.records import install_lenient_headers

install_lenient_headers()
