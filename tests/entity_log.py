"""The memories topic of the entity graph's tests: Lee's sister Ana across sessions and
Lee's move from Berlin to Porto, Kim in Oslo with Zed (see ``tests/streams/test_entities.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fakes import memory_added

from memstream.models.events.memory import Claim, MemoryAdded, MemoryChange, MemorySuperseded

SAID_AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
JOB_AT = datetime(2026, 3, 5, 18, 0, tzinfo=UTC)
LUNCH_AT = datetime(2026, 3, 9, 12, 0, tzinfo=UTC)
MOVED_AT = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)


def said(
    memory_id: str, user_id: str, session: str, content: str, at: datetime,
    entities: tuple[str, ...], memory_type: str = "episode",
) -> MemoryAdded:
    """A memory of ``session`` naming ``entities``, as the extraction agent publishes it."""
    added = memory_added(memory_id, user_id, content, memory_type=memory_type, occurred_at=at)
    return added.model_copy(update={"session_id": session, "entities": entities})


def claimed(
    memory_id: str, user_id: str, session: str, content: str, at: datetime,
    claim: tuple[str, str, str], entities: tuple[str, ...] = (),
    stated_in: tuple[str, ...] = (),
) -> MemoryAdded:
    """A fact with its claim (subject, attribute, value)."""
    subject, attribute, value = claim
    added = said(memory_id, user_id, session, content, at, entities, memory_type="fact")
    return added.model_copy(update={
        "claim": Claim(subject=subject, attribute=attribute, value=value, valid_from=at),
        "stated_in": stated_in,
    })


def the_log() -> list[MemoryAdded | MemoryChange]:
    """The memories topic of lee and kim, in log order."""
    return [
        said("lee-said-sister", "lee", "s1", "My sister Ana is visiting", SAID_AT, ("Ana",)),
        claimed("lee-sister", "lee", "s1", "User's sister is Ana", SAID_AT,
                ("User", "sister", "Ana"), ("Ana",), stated_in=("lee-said-sister",)),
        claimed("lee-berlin", "lee", "s1", "User lives in Berlin", SAID_AT,
                ("User", "home", "Berlin"), ("Berlin",)),
        # As the offline extractor takes it: not the name that opens the sentence.
        said("lee-said-job", "lee", "s2", "Ana got a new job at Acme", JOB_AT, ("Acme",)),
        claimed("lee-ana-acme", "lee", "s2", "Ana works at Acme", JOB_AT,
                ("Ana", "employer", "Acme"), ("Ana", "Acme"), stated_in=("lee-said-job",)),
        said("lee-lunch", "lee", "s3", "Lunch with ANA's team", LUNCH_AT, ("ANA's",)),
        claimed("kim-oslo", "kim", "k1", "User lives in Oslo", SAID_AT,
                ("User", "home", "Oslo"), ("Oslo",)),
        said("kim-zed", "kim", "k1", "Zed showed me Oslo", SAID_AT, ("Zed", "Oslo")),
        claimed("lee-porto", "lee", "s4", "User moved to Porto", MOVED_AT,
                ("User", "home", "Porto"), ("Porto",)),
        MemorySuperseded(
            event_id="sup-lee-berlin", user_id="lee", session_id="s4", occurred_at=MOVED_AT,
            memory_id="lee-berlin", superseded_by="lee-porto", reason="moved", similarity=0.8,
            change="updated", decided_by="rules", valid_until=MOVED_AT,
        ),
    ]
