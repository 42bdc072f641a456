"""A user's profile (``service.memories.profile``), on a real LanceDB table: what holds now
and at a past moment, by subject and kind, scoped to one user, the same after a replay, and
at the head of ``context()`` at a session's start.

Lee said "I live in Berlin" on 1 March, and "I moved to Porto" on 2 April (the Berlin fact is
superseded, as the decider does); Lee also prefers window seats, Lee's sister lives in Lisbon
and Maya, who speaks in Lee's sessions, works at Acme (and, spelt "maya", has a dog). Kim
lives in Oslo.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes import memory_added
from projected import projected, service_over

from memstream.models.events.memory import (
    Claim,
    MemoryAdded,
    MemoryChange,
    MemoryOutdated,
    MemorySuperseded,
)
from memstream.models.session import estimate_tokens
from memstream.projections.memories import SearchFilters
from memstream.streams.service.app import Service
from memstream.streams.service.profiles import profile
from memstream.streams.service.results import ProfileDict

SAID_AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MOVED_AT = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)


def claim_added(
    memory_id: str,
    user_id: str,
    content: str,
    subject: str,
    attribute: str,
    value: str,
    at: datetime,
    memory_type: str = "fact",
    stated_in: tuple[str, ...] = (),
) -> MemoryAdded:
    """A fact or preference with its claim, as the extraction agent publishes it."""
    added = memory_added(memory_id, user_id, content, memory_type=memory_type, occurred_at=at)
    claim = Claim(subject=subject, attribute=attribute, value=value, valid_from=at)
    return added.model_copy(update={"claim": claim, "stated_in": stated_in})


def the_log() -> list[MemoryAdded | MemoryChange]:
    """The memories topic of lee and kim, in log order."""
    episode = memory_added(
        "lee-said-berlin", "lee", "I live in Berlin", memory_type="episode",
        context="Sunday 1 March 2026. User: I live in Berlin", occurred_at=SAID_AT,
    )
    return [
        episode,
        claim_added("lee-berlin", "lee", "User lives in Berlin", "User", "home", "Berlin",
                    SAID_AT, stated_in=("lee-said-berlin",)),
        claim_added("lee-seat", "lee", "User prefers window seats", "User", "preferred seat",
                    "window", SAID_AT, memory_type="preference"),
        claim_added("lee-sister", "lee", "User's sister lives in Lisbon", "User's sister",
                    "home", "Lisbon", SAID_AT),
        claim_added("lee-maya", "lee", "Maya works at Acme", "Maya", "employer", "Acme",
                    SAID_AT),
        # The same speaker, spelt another way in another session.
        claim_added("lee-maya-dog", "lee", "maya has a dog", "maya", "pet", "a dog",
                    SAID_AT + timedelta(days=1)),
        claim_added("kim-oslo", "kim", "User lives in Oslo", "User", "home", "Oslo", SAID_AT),
        claim_added("lee-porto", "lee", "User moved to Porto", "User", "home", "Porto",
                    MOVED_AT),
        MemorySuperseded(
            event_id="sup-lee-berlin", user_id="lee", session_id="s2", occurred_at=MOVED_AT,
            memory_id="lee-berlin", superseded_by="lee-porto", reason="moved", similarity=0.8,
            change="updated", decided_by="rules", valid_until=MOVED_AT,
        ),
        MemoryOutdated(
            event_id="out-lee-said-berlin", user_id="lee", session_id="s2",
            occurred_at=MOVED_AT, memory_id="lee-said-berlin", claim_memory_id="lee-berlin",
            superseded_by="lee-porto", valid_until=MOVED_AT,
        ),
    ]


@pytest.fixture
def service(tmp_path: Path) -> Service:
    """The service over a real LanceDB projection of :func:`the_log`, applied as a live
    projector does (one event at a time)."""
    return service_over(tmp_path, the_log())


def values(found: ProfileDict) -> list[tuple[str, str, str, str]]:
    """(subject, kind, attribute, value) of every entry, in the profile's order."""
    return [
        (who["subject"], kind["kind"], entry["attribute"], entry["value"])
        for who in found["subjects"] for kind in who["kinds"] for entry in kind["entries"]
    ]


async def test_a_changed_home_shows_the_new_value_and_as_of_the_old(service: Service) -> None:
    now = await service.memories.profile(user_id="lee")
    assert values(now) == [
        ("User", "fact", "home", "Porto"),
        ("User", "preference", "preferred seat", "window"),
        ("Maya", "fact", "employer", "Acme"),
        ("Maya", "fact", "pet", "a dog"),
        ("User's sister", "fact", "home", "Lisbon"),
    ]
    porto = now["subjects"][0]["kinds"][0]["entries"][0]
    assert porto == {
        "attribute": "home", "value": "Porto", "polarity": True,
        "statement": "User moved to Porto", "valid_from": MOVED_AT.isoformat(),
        "memory_id": "lee-porto", "turns": ["m-lee-porto"],
    }
    assert (now["subject"], now["as_of"]) == (None, None)

    before = await service.memories.profile(user_id="lee", as_of=MOVED_AT - timedelta(days=1))
    homes = [v for v in values(before) if v[0] == "User" and v[2] == "home"]
    assert homes == [("User", "fact", "home", "Berlin")]
    berlin = before["subjects"][0]["kinds"][0]["entries"][0]
    assert berlin["turns"] == ["m-lee-berlin", "m-lee-said-berlin"]  # its turn, and the episode's
    assert before["as_of"] == (MOVED_AT - timedelta(days=1)).isoformat()
    # Before Lee said anything, nothing held.
    empty = await service.memories.profile(user_id="lee", as_of=SAID_AT - timedelta(seconds=1))
    assert empty["subjects"] == []


async def test_a_profile_is_one_users_and_one_subjects_when_asked(service: Service) -> None:
    kim = await service.memories.profile(user_id="kim")
    assert values(kim) == [("User", "fact", "home", "Oslo")]
    assert (await service.memories.profile(user_id="nobody"))["subjects"] == []
    sister = await service.memories.profile(user_id="lee", subject="user's  SISTER")
    assert values(sister) == [("User's sister", "fact", "home", "Lisbon")]
    assert sister["subject"] == "user's  SISTER"
    # A subject that is text, not a filter: nothing matches it, nothing breaks.
    hostile = await service.memories.profile(user_id="lee", subject="x' OR '1'='1")
    assert hostile["subjects"] == []
    for subject in ("", "   ", "x" * 201):
        with pytest.raises(ValueError, match="subject"):
            await service.memories.profile(user_id="lee", subject=subject)
    with pytest.raises(ValueError, match="as_of"):
        await service.memories.profile(user_id="lee", as_of=datetime(2026, 3, 1))


def test_a_replayed_projection_has_the_same_profile(tmp_path: Path) -> None:
    # Live: one event at a time, as the projector applies them; replayed: the whole log in
    # one batch into a fresh table, as a replay does.
    live = projected(tmp_path / "live", the_log(), batch=1)
    replayed = projected(tmp_path / "replayed", the_log(), batch=len(the_log()))
    moments = [None, SAID_AT, MOVED_AT - timedelta(hours=1), MOVED_AT]
    for user in ("lee", "kim"):
        for moment in moments:
            assert profile(replayed, user, as_of=moment) == profile(live, user, as_of=moment)
    assert values(profile(replayed, "lee"))[0] == ("User", "fact", "home", "Porto")


async def test_context_at_a_sessions_start_opens_with_the_profile(service: Service) -> None:
    first = await service.memories.context("Can you book me a flight home?", user_id="lee")
    text = first["context"]
    assert text.startswith("## Profile\n- User's home: Porto (since 2026-04-02)\n")
    profile_part = text.split("\n\n")[0]
    assert "Berlin" not in profile_part and "User's sister's home: Lisbon" in profile_part
    assert "Oslo" not in text  # kim's
    # A memory a profile line already says is not said again, and counts as in the context.
    placed = {m["memory_id"]: m["in_context"] for m in first["memories"]}
    assert placed["lee-porto"] is True and text.count("Porto") == 1
    # The turn that said Berlin may follow, marked as what held until the move.
    assert "- until 2026-04-02: Sunday 1 March 2026. User: I live in Berlin" in text

    # Later in the session (recent turns), the context is the turn's memories only.
    later = await service.memories.context(
        "Can you book me a flight home?", user_id="lee", recent_turns=["hello"]
    )
    assert "## Profile" not in later["context"]

    # Before the move, the profile said Berlin.
    then = await service.memories.context(
        "Can you book me a flight home?", user_id="lee",
        filters=SearchFilters(as_of=MOVED_AT - timedelta(days=1)),
    )
    assert then["context"].startswith("## Profile\n- User's home: Berlin (since 2026-03-01)\n")


async def test_the_profile_stays_within_half_the_token_budget(service: Service) -> None:
    for budget in (0, 12, 30, 40, 60, 100):
        found = await service.memories.context("flight", user_id="lee", token_budget=budget)
        assert found["tokens"] <= budget
        head = found["context"].split("\n\n")[0] if found["context"].startswith("## Profile") else ""
        assert estimate_tokens(head) <= budget // 2
    # A budget of 40 leaves the profile 20 tokens: its first line (18), the user's home.
    small = await service.memories.context("flight", user_id="lee", token_budget=40)
    assert small["context"].startswith("## Profile\n- User's home: Porto (since 2026-04-02)\n\n")
