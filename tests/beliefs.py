"""A user whose fact changed, as a worker would have projected it: for the tests of every
interface (HTTP, clients, MCP, CLI) that show stale hits and timelines.

The user said "I live in Berlin" (a fact with a claim, and the episode of that turn), then,
on :data:`MOVED_AT`, "I live in Munich now": the Berlin fact is superseded by the Munich one,
and the episode that said Berlin stays active but outdated (``memory_outdated``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from fakes import InMemoryPublisher, memory_added

from memstream.models.events.memory import (
    Claim,
    MemoryAdded,
    MemoryChange,
    MemoryOutdated,
    MemorySuperseded,
)
from memstream.projections.memories import MemoryIndex, SourcePosition

__all__ = ["BERLIN", "BERLIN_SAID", "MOVED_AT", "MUNICH", "SAID_AT", "moved_home", "project"]

#: When the user said Berlin, and when Munich.
SAID_AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MOVED_AT = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)
#: The memory ids: the two facts, and the episode of the Berlin turn.
BERLIN = "home-berlin"
MUNICH = "home-munich"
BERLIN_SAID = "said-berlin"


def _fact(memory_id: str, user_id: str, content: str, value: str, at: datetime) -> MemoryAdded:
    added = memory_added(memory_id, user_id, content, occurred_at=at)
    claim = Claim(subject="User", attribute="home", value=value, valid_from=at)
    return added.model_copy(update={"claim": claim})


def moved_home(user_id: str) -> list[MemoryAdded | MemoryChange]:
    """The memory events of ``user_id`` saying Berlin, then Munich, in log order."""
    episode = memory_added(
        BERLIN_SAID, user_id, "I live in Berlin and I ride to work", memory_type="episode",
        context="Sunday 1 March 2026. User: I live in Berlin and I ride to work",
        occurred_at=SAID_AT,
    )
    berlin = _fact(BERLIN, user_id, "User lives in Berlin", "Berlin", SAID_AT)
    munich = _fact(MUNICH, user_id, "User lives in Munich", "Munich", MOVED_AT)
    return [
        episode,
        berlin.model_copy(update={"stated_in": (BERLIN_SAID,)}),
        munich,
        MemorySuperseded(
            event_id=f"sup-{BERLIN}", user_id=user_id, session_id="s2", occurred_at=MOVED_AT,
            memory_id=BERLIN, superseded_by=MUNICH, reason="moved", similarity=0.8,
            change="updated", decided_by="rules", valid_until=MOVED_AT,
        ),
        MemoryOutdated(
            event_id=f"out-{BERLIN_SAID}", user_id=user_id, session_id="s2",
            occurred_at=MOVED_AT, memory_id=BERLIN_SAID, claim_memory_id=BERLIN,
            superseded_by=MUNICH, valid_until=MOVED_AT,
        ),
    ]


async def project(
    index: MemoryIndex,
    publisher: InMemoryPublisher,
    topic: str,
    events: Sequence[MemoryAdded | MemoryChange],
) -> None:
    """Apply ``events`` to the projection and append them to the memories topic, as a worker
    does, after what the topic holds."""
    for event in events:
        offset = sum(1 for t, _, _ in publisher.sent if t == topic)
        index.apply([(event, SourcePosition(topic, 0, offset))])
        await publisher.publish(topic, [event])
