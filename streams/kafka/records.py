"""Records a Kafka client cannot parse must not stop the partition they sit on.

A Kafka header key is a string on the wire, but nothing checks it is UTF-8: a producer
written with librdkafka can send any bytes. aiokafka 0.14 decodes header keys strictly, so
one such record made every ``getmany`` of its partition raise ``UnicodeDecodeError``, for
every consumer of it (Faust's agents, the projector, the archive sink, replays), on every
retry: the partition stopped for good before any memstream code saw the record.

:func:`install_lenient_headers` wraps the record sets aiokafka's fetcher reads: batches are
parsed by aiokafka's fast parser as before, and only a batch that fails this way is parsed
again by aiokafka's own pure-Python parser with header keys decoded leniently (undecodable
bytes become U+FFFD). The record then reaches the agents, which dead-letter or process it
as any other. It patches what the fetcher module names, so the pinned aiokafka version
(pyproject.toml) is checked; the patch is installed when :mod:`memstream.streams` is
imported, since every consumer memstream makes is created under it.
"""

from __future__ import annotations

import struct
from typing import Any

import aiokafka
from aiokafka.consumer import fetcher
from aiokafka.record import default_records

__all__ = ["install_lenient_headers", "lenient_headers_installed"]

#: The offset and length that start every record batch (all message formats).
_BATCH_HEAD = struct.Struct(">qi")
_MAGIC_AT = 16  # base offset (8), length (4), partition leader epoch (4), then magic
_STRICT_RECORDS = fetcher.MemoryRecords


class _LenientSlice(bytearray):
    """Bytes of a record whose ``decode`` never raises (UTF-8 with replacements)."""

    def decode(self, encoding: str = "utf-8", errors: str = "replace") -> str:
        return bytearray.decode(self, encoding, "replace")


class _LenientBuffer(bytearray):
    """A batch's bytes whose slices decode leniently (header keys are decoded from slices)."""

    def __getitem__(self, index: Any) -> Any:
        item = bytearray.__getitem__(self, index)
        return _LenientSlice(item) if isinstance(index, slice) else item


class _LenientBatch(default_records._DefaultRecordBatchPy):
    """aiokafka's pure-Python batch parser, on a buffer whose header keys decode leniently."""

    def __init__(self, buffer: bytes) -> None:
        super().__init__(buffer)
        self._buffer: bytearray = _LenientBuffer(self._buffer)

    def _maybe_uncompress(self) -> None:
        super()._maybe_uncompress()
        if not isinstance(self._buffer, _LenientBuffer):
            self._buffer = _LenientBuffer(self._buffer)


class _Batch:
    """One batch as the fetcher sees it: aiokafka's own, until a record fails to decode;
    then the rest comes from :class:`_LenientBatch` over the same bytes."""

    def __init__(self, batch: Any, raw: bytes) -> None:
        self._batch = batch
        self._raw = raw
        self._iterator: Any = None
        self._yielded = 0
        self._fallback: _LenientBatch | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batch, name)

    def __iter__(self) -> _Batch:
        return self

    def __next__(self) -> Any:
        if self._fallback is None:
            if self._iterator is None:
                self._iterator = iter(self._batch)
            try:
                record = next(self._iterator)
            except UnicodeDecodeError:
                if len(self._raw) <= _MAGIC_AT or self._raw[_MAGIC_AT] != 2:
                    raise  # older message formats carry no headers: not this failure
                self._fallback = _LenientBatch(self._raw)
                iterator = iter(self._fallback)
                for _ in range(self._yielded):
                    next(iterator)
            else:
                self._yielded += 1
                return record
        return next(self._fallback)


class _Records:
    """aiokafka's record set, handing out :class:`_Batch` es that know their own bytes."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self._records = _STRICT_RECORDS(data)
        self._position = 0

    def has_next(self) -> bool:
        return bool(self._records.has_next())

    def size_in_bytes(self) -> int:
        return int(self._records.size_in_bytes())

    def next_batch(self, *args: Any, **kwargs: Any) -> Any:
        batch = self._records.next_batch(*args, **kwargs)
        if batch is None:
            return None
        start = self._position
        _, length = _BATCH_HEAD.unpack_from(self._data, start)
        self._position = start + _BATCH_HEAD.size + length
        return _Batch(batch, self._data[start : self._position])


def install_lenient_headers() -> None:
    """Make aiokafka's fetcher survive header keys that are not UTF-8 (idempotent).

    Raises
    ------
    RuntimeError
        For an aiokafka other than the 0.14 line this was written against.
    """
    if not aiokafka.__version__.startswith("0.14."):
        raise RuntimeError(
            f"memstream.streams.kafka.records patches aiokafka 0.14, found {aiokafka.__version__}: "
            "check the fetcher's record parsing before changing the pin"
        )
    fetcher.MemoryRecords = _Records


def lenient_headers_installed() -> bool:
    """Whether the fetcher reads records through :func:`install_lenient_headers`."""
    return fetcher.MemoryRecords is _Records
