"""A record whose header key is not UTF-8 (librdkafka lets a producer send one) reaches the
agents instead of stopping every consumer of its partition."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy
from aiokafka.record.memory_records import MemoryRecords
from fuzz import RawHeaderKey

from memstream.streams.kafka.records import _Records, lenient_headers_installed


def batch_with(header_key: str, codec: int = 0) -> bytes:
    builder = _DefaultRecordBatchBuilderPy(2, codec, 0, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=None, key=b"ann", value=b"first", headers=[])
    builder.append(1, timestamp=None, key=b"ann", value=b"poison", headers=[(header_key, b"v")])
    builder.append(2, timestamp=None, key=b"ann", value=b"third", headers=[("ok", b"w")])
    return bytes(builder.build())


def records_of(data: bytes, parse: type) -> list[tuple[bytes, list]]:
    records = parse(data)
    out = []
    while records.has_next():
        out += [(r.value, list(r.headers)) for r in records.next_batch()]
    return out


def test_importing_memstream_streams_installs_the_lenient_parser() -> None:
    assert lenient_headers_installed()


@pytest.mark.parametrize("codec", [0, 1])  # none, gzip (the codec the others need is not installed)
def test_a_header_key_that_is_not_utf8_is_read_with_replacements_and_the_records_around_it_too(codec: int) -> None:
    data = batch_with(RawHeaderKey(b"\xff\xfekey"), codec)
    with pytest.raises(UnicodeDecodeError):
        records_of(data, MemoryRecords)  # aiokafka's own: the partition would stop here
    found = records_of(data, _Records)
    assert [value for value, _ in found] == [b"first", b"poison", b"third"]
    assert found[1][1] == [("\ufffd\ufffdkey", b"v")] and found[2][1] == [("ok", b"w")]


def test_batches_that_parse_are_read_as_before() -> None:
    data = batch_with("plain") + batch_with("also plain")
    assert records_of(data, _Records) == records_of(data, MemoryRecords)
