"""Which partition a user's events land on, worked out without a Kafka client: the same as
the producers' default partitioner for any key."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner, murmur2
from hypothesis import given
from hypothesis import strategies as st

from memstream.models.topics import murmur2 as our_murmur2
from memstream.models.topics import user_partition


@given(st.binary(max_size=300))
def test_murmur2_is_kafkas(data: bytes) -> None:
    assert our_murmur2(data) == murmur2(data) & 0xFFFFFFFF


@given(st.text(max_size=200), st.integers(min_value=1, max_value=256))
def test_a_users_partition_is_the_one_the_producer_picks(user_id: str, partitions: int) -> None:
    key = user_id.encode("utf-8", "surrogatepass")
    every = list(range(partitions))
    assert user_partition(user_id, partitions) == DefaultPartitioner()(key, every, every)
