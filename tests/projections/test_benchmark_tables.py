"""The retrieval benchmark writes its tables in bulk, outside the projection's write path:
its rows must stay in the projection's schema, or the benchmark breaks when the schema
grows (as it did at schema 5)."""

from __future__ import annotations

from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from fakes import FakeEmbedder
from memory_tables import Pool, bulk_rows, names_in

from memstream.projections.memories import MemoryProjection, memory_schema


def test_bulk_rows_are_in_the_projection_schema_and_searchable(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    texts = ["Alice lives in Porto", "Alice likes green tea", "Alice works at Acme"]
    pool = Pool(
        texts=pa.array(texts),
        types=pa.array(["fact", "preference", "fact"]),
        importance=np.array([0.9, 0.5, 0.7]),
        vectors=embedder.embed(texts),
        entities=pa.array([names_in(text) for text in texts], pa.list_(pa.string())),
    )
    rows = pa.concat_tables(bulk_rows(pool, embedder.model_id, 0, 10_000, np.random.default_rng(1)))
    assert rows.schema == memory_schema(embedder.dimensions, embedder.model_id)
    lancedb.connect(tmp_path).create_table("memories", rows)
    projection = MemoryProjection(tmp_path, embedder)
    hits = projection.search("user-0000", "Alice lives in Porto", limit=5)
    assert len(hits) == 5 and all(h.memory_id.startswith("user-0000-") for h in hits)
    # Each row names what its text names: what the recall's entity expansion follows.
    assert all(set(h.entities) == set(names_in(h.content)) for h in hits)
    assert [names_in(text) for text in texts] == [["Porto"], [], ["Acme"]]
