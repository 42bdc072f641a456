"""Forgetting: ``memstream forget --policy decay`` lets memories go that no longer earn a place.

The decay policy scores every active memory with
:func:`~memstream.models.ranking.decay_score` (importance, recency of its event time,
use) and forgets those scoring below ``forget_threshold``, except memories younger than
``forget_min_age_days`` (event time) and memories of the ``forget_keep_types`` (corrections, by
default: they guard against a fact coming back).

**Forgetting is an event.** Nothing is deleted: one :class:`MemoryForgotten` per memory goes
to the memories topic, keyed by its user, recording the policy, score and threshold, with the
decision time as ``occurred_at``. The projector applies it like an expiry: the memory leaves
search and the current view, stays in history, and point-in-time reads before the decision
still see it. A replay applies the recorded decision; it never scores again (with another
clock, or other access counts).

**Idempotent.** The event id derives from the memory and the policy, and a memory is forgotten
only while it is active: a second run finds nothing new once the first is projected, and a run
that repeats events still in flight publishes the same ids, which the projection skips.

**Sealed.** The reason is free text, so each event is sealed with its user's current key
before it is published (never a new key); a user without one is erased or being erased, and
the event is dropped and logged, never published unsealed.

Examples
--------
>>> report = await forget(settings, dry_run=True)  # doctest: +SKIP
>>> [(c.user_id, c.memory_id, round(c.score, 3)) for c in report.candidates]  # doctest: +SKIP
[('ann', 'm-old-trivia', 0.054)]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memstream.models.events.memory import MemoryForgotten
from memstream.models.forgetting import (
    ForgetCandidate,
    Policy,
    decay_candidates,
    forgotten_event,
    keep_types,
)
from memstream.models.settings import Settings
from memstream.streams.kafka.publisher import EventPublisher, KafkaPublisher
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import KeyStore, keystore_from_settings

# The command module builds its parser (add_forget_command) on every `memstream` call: LanceDB
# and aiokafka (1.3 s to import) are imported where they are used, as streams/cli.py does.
if TYPE_CHECKING:
    from memstream.projections.memories import MemoryStore, PartitionedMemories
    from memstream.streams.service.container import Container

log = logging.getLogger(__name__)

#: Characters of a memory's content the command prints.
SNIPPET_CHARS = 60


@dataclass(frozen=True)
class ForgetReport:
    """What one run of a forgetting policy decided and published."""

    policy: Policy
    threshold: float
    #: The decision time: ``occurred_at`` of every event published.
    decided_at: datetime
    dry_run: bool
    #: The memories forgotten (or, in a dry run, that would be), lowest score first.
    candidates: tuple[ForgetCandidate, ...]
    #: The events published, sealed as they went out: none in a dry run, and none for a
    #: user without a key (erased meanwhile).
    events: tuple[MemoryForgotten, ...]
    topic: str


def plan_forgetting(
    settings: Settings,
    projection: MemoryStore,
    now: datetime,
    *,
    user_id: str | None = None,
) -> list[ForgetCandidate]:
    """The memories the decay policy forgets at ``now``: every user's, or ``user_id``'s.

    Reads the active memories old enough and of types not kept from ``projection`` (the
    user named only by the digest filter of the projection), then scores them with
    :func:`decay_candidates`.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    memories = projection.active_memories_created_before(
        now - timedelta(days=settings.forget_min_age_days),
        exclude_types=keep_types(settings),
        user_id=user_id,
    )
    return decay_candidates(memories, settings, now)


async def forget(
    settings: Settings,
    *,
    dry_run: bool,
    user_id: str | None = None,
    now: datetime | None = None,
    projection: MemoryStore | None = None,
    keys: KeyStore | None = None,
    publisher: EventPublisher | None = None,
) -> ForgetReport:
    """Run the decay policy: publish a ``MemoryForgotten`` per memory it forgets.

    Parameters
    ----------
    settings
        ``forget_*``, the rank weights and half-life, ``decay_use_saturation``; the broker,
        topics and data directory.
    dry_run
        Decide, publish nothing.
    user_id
        Only this user's memories; every user's when None.
    now
        The decision time (default: the wall clock), recorded as the events' ``occurred_at``.
    projection
        The memory projection to judge from; the live one in the store of ``settings`` by
        default.
    keys
        The users' keys, which seal the events; the key store of ``settings`` by default.
    publisher
        Seals the events with their users' current keys (never new ones: the events of a
        user without a key, erased or being erased, are dropped) and sends them; one on
        ``settings.broker`` by default.

    Raises
    ------
    ValueError
        An unknown type in ``forget_keep_types``, or a naive ``now``.
    """
    now = datetime.now(UTC) if now is None else now
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if projection is None:
        projection = await asyncio.to_thread(_live_projection, settings)
    candidates = await asyncio.to_thread(
        plan_forgetting, settings, projection, now, user_id=user_id
    )
    topic = Topics.from_settings(settings).memories
    events: tuple[MemoryForgotten, ...] = ()
    if not dry_run and candidates:
        decided = [forgotten_event(candidate, settings, now) for candidate in candidates]
        own = publisher is None
        if publisher is None:
            keys = keys if keys is not None else keystore_from_settings(settings)
            # Never decide on a log that is not the projection's: the publisher claims it.
            publisher = KafkaPublisher(settings, keys, check=False)
        try:
            sent = await publisher.publish(topic, decided, create_keys=False)
        finally:
            if own:
                await publisher.close()
        events = tuple(s.event for s in sent if isinstance(s.event, MemoryForgotten))
    if events:
        log.info("forget: published %d memory_forgotten event(s)", len(events))
    return ForgetReport(
        policy="decay",
        threshold=settings.forget_threshold,
        decided_at=now,
        dry_run=dry_run,
        candidates=tuple(candidates),
        events=events,
        topic=topic,
    )


def _live_projection(settings: Settings) -> PartitionedMemories:
    from memstream.projections.embedder import embedder_from_settings
    from memstream.projections.memories import PartitionedMemories

    return PartitionedMemories.from_settings(settings, embedder_from_settings(settings))


def cmd_forget(args: argparse.Namespace, container: Container) -> int:
    """Forget memories that no longer earn their place (publishes memory_forgotten events)."""
    try:
        report = asyncio.run(
            forget(container.settings, dry_run=args.dry_run, user_id=args.user,
                   keys=container.key_store)
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render_report(report))
    return 0


def render_report(report: ForgetReport) -> str:
    """The command's output: one block per memory, lowest score first, then a summary."""
    lines = []
    for candidate in report.candidates:
        memory = candidate.memory
        lines.append(
            f"{candidate.score:.4f}  {candidate.age_days:5.0f} d  [{memory.memory_type}] "
            f"{_snippet(memory.content)}"
        )
        lines.append(
            f"         memory {memory.memory_id} · user {candidate.user_id} · importance "
            f"{memory.importance:.2f} · retrieved {memory.access_count}×"
        )
    count = len(report.candidates)
    lines.append(
        f"{count} memor{'y' if count == 1 else 'ies'} below the {report.policy} threshold "
        f"{report.threshold:g} at {report.decided_at.isoformat(timespec='seconds')}"
    )
    if report.dry_run:
        lines.append("dry run: nothing was published")
    else:
        lines.append(
            f"published {len(report.events)} memory_forgotten event(s) to {report.topic}; "
            "the memories leave search once projected"
        )
    return "\n".join(lines)


def _snippet(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1] + "…"


def add_forget_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``memstream forget --policy decay [--dry-run] [--user U]`` on ``commands``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="memstream")
    >>> add_forget_command(parser.add_subparsers(dest="command", required=True))
    >>> parser.parse_args(["forget", "--policy", "decay", "--dry-run"]).dry_run
    True
    """
    forget_parser = commands.add_parser(
        "forget",
        help=cmd_forget.__doc__,
        description="Score every active memory with the decay score (importance, recency, "
        "use) and publish a memory_forgotten event for each one below MEMSTREAM_FORGET_THRESHOLD, "
        "except memories younger than MEMSTREAM_FORGET_MIN_AGE_DAYS (event time) and those of "
        "MEMSTREAM_FORGET_KEEP_TYPES.",
    )
    forget_parser.add_argument(
        "--policy", required=True, choices=["decay"], help="how memories are judged"
    )
    forget_parser.add_argument(
        "--dry-run", action="store_true", help="list what would be forgotten, publish nothing"
    )
    forget_parser.add_argument("--user", help="only this user's memories (default: every user)")
    forget_parser.set_defaults(run=cmd_forget)
