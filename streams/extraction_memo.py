"""The extraction memo: every finished extraction, in the broker before its memories go out.

A consolidation request is committed only after its memory events are published, so a
worker killed in between gets the request again. Running the extractor a second time is
harmless for the offline extractor, but an LLM's second reply can differ from the first:
the same ``extraction_recorded`` id with other candidates, and other decisions. So the
extraction agent keeps each finished extraction in the ``extractions`` table, keyed by the
request's event id, and waits until the broker has acknowledged the changelog record
before it publishes anything (:meth:`ExtractionMemo.record`). A request delivered again
finds its extraction there (:meth:`ExtractionMemo.lookup`) and is decided and published
from it; the extractor is not called. Failed extractions are not kept: they are tried again.
The key is the request alone, not the extractor: a request delivered again after the
extractor setting changed reuses what was published for it, rather than adding a second
extraction of the same span.

The changelog record goes to the partition of the request, so the worker that is given
the request's partition after a crash or a rebalance holds the entry (Faust assigns a
changelog partition with the same partition of every topic of the same size).

**Sealed.** A value holds the extraction (the user's words) sealed with the key of the span
it comes from, bound to its table key (:func:`~memstream.models.crypto.seal_bytes`). Once an
erasure destroys that key the value cannot be read: it counts as absent, and the next sweep
writes its tombstone.

**Bounded.** :meth:`ExtractionMemo.sweep` drops (tombstones) the entries that are
``retention_s`` old and that this worker has held for ``retention_s``: a worker that was
down longer than the retention still finds the entries of the requests it must finish.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from memstream.models.codec import InvalidEvent, decode_event, encode_event
from memstream.models.crypto import SealError, open_bytes, seal_bytes, sealed_key_id
from memstream.models.events import ConsolidationRequested, ExtractionRecorded
from memstream.models.settings import Settings
from memstream.streams.keys import BatchKeys, KeyStore

log = logging.getLogger(__name__)

#: The table's name; Faust names its changelog ``{app id}-extractions-changelog``.
TABLE = "extractions"
#: Starts every memo value: neither JSON nor a sealed value starts so.
MEMO_MAGIC = b"\x00ms-memo-v1\x00"
#: After the magic: when the entry was written (seconds since the epoch) and its partition.
_HEADER = struct.Struct(">dH")


def extractions_changelog_topic(settings: Settings) -> str:
    """The changelog topic of the workers' extraction memo.

    Examples
    --------
    >>> extractions_changelog_topic(Settings(topic_prefix="memstream", app_id="worker"))
    'memstream.worker-extractions-changelog'
    """
    return f"{settings.topic_prefix}.{settings.app_id}-{TABLE}-changelog"


@dataclass(frozen=True)
class MemoHeader:
    """The clear part of a memo value: when it was written, and its changelog partition."""

    written_at: float
    partition: int


def dump_memo(
    table_key: str,
    recorded: ExtractionRecorded,
    *,
    partition: int,
    written_at: float,
    keys: KeyStore | None,
    key_id: str | None,
) -> bytes | None:
    """The stored bytes of a memo entry: the header, then ``recorded`` sealed with
    ``key_id``'s key (or the user's current key), bound to ``table_key``.

    Without ``keys`` the extraction is stored as it is. None when ``key_id``'s key is
    destroyed: the user was erased while the span was extracted, nothing may be kept.

    Examples
    --------
    >>> raw = dump_memo("req-1", recorded, partition=2, written_at=0.0, keys=keys, key_id=None)
    ... # doctest: +SKIP
    >>> memo_header(raw), load_memo("req-1", raw, keys) == recorded  # doctest: +SKIP
    (MemoHeader(written_at=0.0, partition=2), True)
    """
    body = encode_event(recorded)
    if keys is not None:
        if key_id is not None:
            secret = keys.key_by_id(key_id)
            if secret is None:
                return None
        else:
            found = keys.key_for(recorded.user_id, create=True)
            assert found is not None
            key_id, secret = found
        body = seal_bytes(body, secret, key_id, table_key.encode("utf-8", "surrogatepass"))
    return MEMO_MAGIC + _HEADER.pack(written_at, partition) + body


def memo_header(raw: bytes) -> MemoHeader:
    """The header of a memo value.

    Raises
    ------
    ValueError
        ``raw`` is not a memo value.
    """
    if not raw.startswith(MEMO_MAGIC) or len(raw) < len(MEMO_MAGIC) + _HEADER.size:
        raise ValueError("not an extraction memo value")
    written_at, partition = _HEADER.unpack_from(raw, len(MEMO_MAGIC))
    return MemoHeader(written_at, partition)


def _body(raw: bytes) -> bytes:
    return raw[len(MEMO_MAGIC) + _HEADER.size :]


def memo_key_id(raw: bytes) -> str | None:
    """The id of the key a memo value is sealed with (None: not sealed).

    Raises
    ------
    ValueError
        ``raw`` is not a memo value.
    """
    memo_header(raw)
    return sealed_key_id(_body(raw))


def load_memo(table_key: str, raw: bytes, keys: KeyStore | None) -> ExtractionRecorded | None:
    """The extraction of a memo value; None when its key is destroyed (an erased user).

    Raises
    ------
    SealError
        A sealed value with no key store, one altered since it was written, or one that is
        not an extraction.
    """
    try:
        memo_header(raw)
    except ValueError as exc:
        raise SealError(str(exc)) from None
    body = _body(raw)
    key_id = sealed_key_id(body)
    if key_id is not None:
        if keys is None:
            raise SealError(f"memo entry {table_key!r} is sealed and no key store was given")
        secret = keys.key_by_id(key_id)
        if secret is None:
            return None
        body = open_bytes(body, secret, table_key.encode("utf-8", "surrogatepass"))
    try:
        event = decode_event(body)
    except InvalidEvent as exc:
        raise SealError(f"memo entry {table_key!r} does not hold an extraction: {exc}") from None
    if not isinstance(event, ExtractionRecorded):
        raise SealError(f"memo entry {table_key!r} holds a {event.type}, not an extraction")
    return event


class ExtractionMemo:
    """The ``extractions`` table: request event id → the extraction recorded for it.

    Like :class:`~memstream.streams.sessions.SessionStore`, it writes the table's local
    data and sends the changelog record itself, to the partition it is given; unlike it, a
    record is awaited until the broker acknowledges it (see :meth:`record`).

    Examples
    --------
    >>> memo = ExtractionMemo(app.Table("extractions", ...), keys, retention_s=3600)
    ... # doctest: +SKIP
    >>> await memo.record(request, recorded, partition=1, key_id=key_id)  # doctest: +SKIP
    True
    >>> memo.lookup(request) == recorded  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        table: Any,
        keys: KeyStore | None,
        retention_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.keys = keys
        self.retention_s = retention_s
        self.clock = clock
        #: When this worker last started or was given partitions: entries count their age
        #: from here at the earliest.
        self.held_since = clock()

    @property
    def sweep_interval_s(self) -> float:
        """How often :meth:`sweep` should run: a tenth of the retention, 0.5 s to 60 s."""
        return min(60.0, max(0.5, self.retention_s / 10))

    def lookup(self, request: ConsolidationRequested) -> ExtractionRecorded | None:
        """The extraction recorded for ``request``, or None (never recorded, dropped after
        the retention, its key destroyed, or a value that does not open)."""
        raw = self.table.data.get(request.event_id)
        if raw is None:
            return None
        try:
            recorded = load_memo(request.event_id, raw, self.keys)
        except SealError:
            log.exception("extraction memo: the entry of %s does not open", request.event_id)
            return None
        if recorded is None:
            return None
        if (
            recorded.consolidation_event_id != request.event_id
            or recorded.user_id != request.user_id
        ):
            log.warning("extraction memo: the entry of %s is another request's", request.event_id)
            return None
        return recorded

    async def record(
        self,
        request: ConsolidationRequested,
        recorded: ExtractionRecorded,
        partition: int,
        key_id: str | None,
    ) -> bool:
        """Keep ``recorded`` as the extraction of ``request``; return once the broker has
        acknowledged the changelog record. False (nothing kept) when ``key_id``'s key is
        destroyed: the user was erased meanwhile, and nothing of the span may go out.

        ``partition`` is the request's partition: the worker given it next recovers the
        entry. The record is awaited, not queued as session values are: the memory events
        published next must never be in the log while their extraction is not.
        """
        raw = dump_memo(
            request.event_id,
            recorded,
            partition=partition,
            written_at=self.clock(),
            keys=self.keys,
            key_id=key_id,
        )
        if raw is None:
            return False
        self.table.data[request.event_id] = raw
        acknowledged = await self._send(request.event_id, raw, partition)
        await acknowledged
        return True

    def note_assignment(self) -> None:
        """Partitions were assigned: what this worker holds now is held from now."""
        self.held_since = self.clock()

    async def sweep(self, held: Collection[int]) -> int:
        """Drop the entries due: those ``retention_s`` old and held that long, and those
        whose key is destroyed (an erased user). Entries of ``held`` partitions get a
        tombstone in the changelog; those of other partitions (moved to another worker,
        which sweeps its own) are only dropped here. Returns the tombstones sent.
        """
        now = self.clock()
        looked_up = BatchKeys(self.keys) if self.keys is not None else None
        tombstones = 0
        for key, raw in list(self.table.data.items()):
            try:
                header = memo_header(raw)
                key_id = memo_key_id(raw)
            except (ValueError, SealError):
                log.warning("extraction memo: dropping the unreadable entry of %s", key)
                self.table.data.pop(key, None)
                continue
            expired = now - max(header.written_at, self.held_since) >= self.retention_s
            erased = (
                key_id is not None
                and looked_up is not None
                and looked_up.key_by_id(key_id) is None
            )
            if not (expired or erased):
                continue
            self.table.data.pop(key, None)
            if header.partition not in held:
                continue  # its partition moved: the worker holding it now writes the tombstone
            # Queued, not awaited: a lost tombstone only means the entry is swept again.
            await self._send(key, None, header.partition)
            tombstones += 1
        return tombstones

    def __len__(self) -> int:
        return len(self.table.data)

    async def _send(self, key: str, raw: bytes | None, partition: int) -> Any:
        changelog = self.table.changelog_topic
        key_bytes = changelog.prepare_key(key, None)[0]
        return await self.table.app.producer.send(
            changelog.get_topic_name(), key_bytes, raw, partition, None, None
        )
