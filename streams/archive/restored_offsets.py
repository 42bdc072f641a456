"""Where offsets stand after a restore: the archive's gaps (:class:`Gap`), the group's
archived offsets moved past them and capped at the restored log, and committing those for
the group."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aiokafka.errors as kafka_errors
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from memstream.models.settings import Settings
from memstream.streams.archive.broker_log import _ADMIN_TIMEOUT_MS
from memstream.streams.archive.errors import ArchiveError
from memstream.streams.archive.layout import GroupOffsets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gap:
    """Offsets ``start`` to ``end - 1`` of a partition that the archive does not hold.

    Restore republishes the records around it contiguously, so every record after it gets an
    offset ``shift`` lower than it had in the original log (``shift`` counts this gap and the
    earlier ones of the partition).
    """

    topic: str
    partition: int
    start: int
    end: int
    shift: int

    def explain(self) -> str:
        """The plain-words report of it."""
        return (
            f"{self.topic}[{self.partition}]: offsets {self.start}..{self.end - 1} are missing "
            f"from the archive; restored records from offset {self.end} on are {self.shift} "
            "lower than in the original log"
        )


def _restored_offset(offset: int, gaps: Sequence[Gap]) -> int:
    """Where original ``offset`` of a partition is after a restore with these ``gaps``.

    An offset inside a gap goes to the first record after it.

    Examples
    --------
    >>> gaps = [Gap("t", 0, 3, 5, 2), Gap("t", 0, 8, 9, 3)]
    >>> [_restored_offset(offset, gaps) for offset in (2, 3, 4, 5, 8, 9, 12)]
    [2, 3, 3, 3, 6, 6, 9]
    """
    restored = offset
    for gap in gaps:
        if offset >= gap.end:
            restored = offset - gap.shift
        elif offset > gap.start:
            return gap.start - (gap.shift - (gap.end - gap.start))
        else:
            break
    return restored


def _restored_group_offsets(
    snapshot: GroupOffsets, ends: Mapping[TopicPartition, int], gaps: Sequence[Gap]
) -> tuple[dict[TopicPartition, int], dict[tuple[str, int], int]]:
    """The snapshot's offsets moved past the ``gaps`` and capped at the restored ``ends``;
    and the snapshot's offsets that the cap lowered, by (topic, partition)."""
    targets: dict[TopicPartition, int] = {}
    lowered: dict[tuple[str, int], int] = {}
    for (topic, partition), offset in sorted(snapshot.offsets.items()):
        tp = TopicPartition(topic, partition)
        if tp not in ends:
            log.warning("restore: ignored the offset of %s[%d], not archived", topic, partition)
            continue
        moved = _restored_offset(offset, [g for g in gaps if (g.topic, g.partition) == tp])
        targets[tp] = min(moved, ends[tp])
        if moved > ends[tp]:
            lowered[(topic, partition)] = offset
            log.warning(
                "restore: %s[%d]: the group had committed %d, past the restored log; "
                "committing its end, %d",
                topic, partition, offset, ends[tp],
            )
    return targets, lowered


async def _commit_group_offsets(
    settings: Settings, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[tuple[str, int], int]:
    """Commit ``offsets`` for ``group_id`` as a client outside the group, then read them
    back; return what the broker holds."""
    if not offsets:
        return {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker, group_id=group_id, enable_auto_commit=False
    )
    try:
        await consumer.start()  # stopped below even when it fails: no leak
        # Assigned, never subscribed: the client commits without joining the group.
        consumer.assign(list(offsets))
        try:
            await consumer.commit(
                {tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()}
            )
        except kafka_errors.CommitFailedError as exc:
            raise ArchiveError(
                f"the records are restored, but the offsets of consumer group {group_id!r} "
                f"were refused ({exc.args[-1]}): a worker joined the group meanwhile. Stop "
                "the workers and restore again into an empty broker."
            ) from exc
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group_id, partitions=list(offsets))
    finally:
        await admin.close()
    held = {tp: meta.offset for tp, meta in found.items()}
    wrong = [f"{tp.topic}[{tp.partition}]" for tp, o in offsets.items() if held.get(tp) != o]
    if wrong:
        raise ArchiveError(
            f"the broker does not hold the committed offsets of group {group_id!r} for "
            f"{', '.join(wrong)}"
        )
    return {(tp.topic, tp.partition): offset for tp, offset in sorted(offsets.items())}
