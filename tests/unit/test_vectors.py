"""A memory's vector in the log: float32 packed as base64 comes back bit for bit, and what is
not a vector is refused with a clear error, whatever the bytes."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.models.events.memory import MemoryAdded
from memstream.models.upcasting import UPCASTERS
from memstream.models.vectors import pack_vector, unpack_vector

float32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(st.lists(float32, min_size=1, max_size=512))
def test_a_packed_vector_comes_back_bit_for_bit(values: list[float]) -> None:
    assert list(unpack_vector(pack_vector(values))) == values


@given(st.binary(max_size=64))
def test_any_bytes_are_a_vector_or_a_clear_error(raw: bytes) -> None:
    packed = base64.b64encode(raw).decode()
    try:
        values = unpack_vector(packed)
    except ValueError as error:
        assert "vector" in str(error)
    else:
        assert len(values) * 4 == len(raw)


#: Empty; not base64; three bytes; a float32 NaN (0x7fc00000, little-endian).
NOT_VECTORS = ["", "not base64!", "AAAA", base64.b64encode(struct.pack("<f", float("nan"))).decode()]


@pytest.mark.parametrize("packed", NOT_VECTORS)
def test_what_is_not_a_vector_is_refused(packed: str) -> None:
    with pytest.raises(ValueError, match="vector"):
        unpack_vector(packed)


def test_a_v2_memory_added_is_read_as_the_current_version_without_a_vector_or_claim() -> None:
    payload = {
        "event_id": "e", "type": "memory_added", "schema_version": 2, "user_id": "ann",
        "session_id": "s", "occurred_at": "2026-11-02T09:00:00Z", "extractor": "offline/1",
        "memory_id": "m", "memory_type": "fact", "content": "User lives in Oslo",
        "importance": 0.5, "extraction_event_id": "x",
    }
    event = MemoryAdded.model_validate(UPCASTERS.upcast(payload))
    assert event.schema_version == 4 and event.vector is None and event.embedding_model is None
    assert event.claim is None and event.stated_in == ()
