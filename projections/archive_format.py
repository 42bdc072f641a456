"""The Parquet archive's format: its columns and where the live archive is.

Both the archive sink (:mod:`memstream.streams.archive`, which writes it from the topics) and
the DuckDB reports (:mod:`memstream.projections.analytics`, which read it) import this
module, so reading the archive needs no Kafka client.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from memstream.models.settings import Settings
from memstream.projections.shadow import live_name

#: The archive's pointer name under ``settings.archive_dir``, and its first directory's name.
ARCHIVE = "archive"

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

#: Columns of every archive file. The first six and ``headers`` are the record itself;
#: the rest are parsed from the value for queries, null when it is not an event.
SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("event_id", pa.string()),
        pa.field("type", pa.string()),
        pa.field("user_id", pa.string()),
        pa.field("session_id", pa.string()),
        pa.field("agent_id", pa.string()),
        pa.field("occurred_at", pa.timestamp("us", tz="UTC")),
        pa.field("schema_version", pa.int32()),
        pa.field("headers", _HEADERS),
    ]
)


def live_archive_dir(settings: Settings) -> Path:
    """The live archive directory: what the sink writes and queries read.

    A replay may build another one and swap it in (:mod:`memstream.projections.shadow`).
    """
    return settings.archive_dir / live_name(settings.archive_dir, ARCHIVE, ARCHIVE)
