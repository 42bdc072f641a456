"""Changed facts through the real pieces: the offline extractor reads claims from turns, the
decider (real LanceDB projection, real MiniLM) ends what a later claim replaces and marks
what stated it, and the retriever ranks what holds first and marks the rest.

Sessions are consolidated as the worker would, one ``ConsolidationRequested`` each, and the
events go to the projection in log order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    Claim,
    ExtractionRecorded,
    MemoryAdded,
    MemoryCandidate,
    MemoryChange,
    MemoryOutdated,
    MemorySuperseded,
)
from memstream.models.extraction import OfflineExtractor
from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection, SearchFilters, SourcePosition
from memstream.projections.retrieval import Retriever, render_context
from memstream.streams.agents.consolidation import record_extraction
from memstream.streams.agents.decisions import MemoryDecider

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


class Memory:
    """One user's memory as the worker builds it: extraction, decisions, projection."""

    def __init__(self, directory: Path, embedder: MiniLMOnnxEmbedder, user: str = "ann") -> None:
        self.user = user
        self.projection = MemoryProjection(directory, embedder)
        self.decider = MemoryDecider(self.projection, embedder)
        self.offset = 0
        self.events: list[Event] = []

    def session(
        self, day: float, *turns: str, name: str | None = None, closed: float | None = None
    ) -> list[Event]:
        """Consolidate a session of the user's ``turns`` on ``day`` (assistant replies
        between them), closed then or on day ``closed``; return the memory events it made."""
        at = T0 + timedelta(days=day)
        session = f"s{day}"
        messages = []
        for i, text in enumerate(turns):
            messages.append(TranscriptMessage(
                event_id=f"{session}-u{i}", role="user", content=text, name=name,
                occurred_at=at + timedelta(minutes=2 * i),
            ))
            messages.append(TranscriptMessage(
                event_id=f"{session}-a{i}", role="assistant", content="Got it.",
                occurred_at=at + timedelta(minutes=2 * i + 1),
            ))
        request = ConsolidationRequested(
            event_id=derived_id(self.user, session), user_id=self.user, session_id=session,
            occurred_at=(
                messages[-1].occurred_at if closed is None else T0 + timedelta(days=closed)
            ),
            reason="session_closed",
            messages=tuple(messages),
        )
        return self.decided(record_extraction(request, OfflineExtractor()))

    def decided(self, recorded: ExtractionRecorded) -> list[Event]:
        events = self.decider.decide(recorded)
        batch = []
        for event in events:
            assert isinstance(event, MemoryAdded | MemoryChange)
            batch.append((event, SourcePosition("t.memories", 0, self.offset)))
            self.offset += 1
        self.projection.apply(batch)
        self.projection.refresh_indexes()
        self.events += events
        return events

    def search(
        self, query: str, *, days: float = 400, limit: int = 8, settings: Settings | None = None
    ) -> list[tuple[str, bool]]:
        moment = T0 + timedelta(days=days)
        retriever = Retriever(self.projection, settings or Settings(), clock=lambda: moment)
        filters = SearchFilters(as_of=moment)
        found = retriever.search(self.user, query, limit=limit, filters=filters)
        return [(item.memory.content, item.stale) for item in found]


def first(found: Sequence[tuple[str, bool]], *words: str) -> int:
    """Rank of the first hit naming any of ``words``."""
    return next(i for i, (text, _) in enumerate(found) if any(w in text for w in words))


def test_a_move_ends_the_old_home_marks_its_turn_and_ranks_the_new_one_first(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "I live in Lisbon with my partner.", "Can you recommend a bakery?")
    made = memory.session(30, "Work is calmer since I moved to Porto.")
    [superseded] = [e for e in made if isinstance(e, MemorySuperseded)]
    assert superseded.change == "updated" and superseded.decided_by == "rules"
    assert superseded.valid_until == T0 + timedelta(days=30)  # the turn that said it
    outdated = [e for e in made if isinstance(e, MemoryOutdated)]
    assert outdated and all(e.superseded_by == superseded.superseded_by for e in outdated)

    found = memory.search("where do I live?")
    assert first(found, "Porto") < first(found, "Lisbon")
    assert all(stale for text, stale in found if "Lisbon" in text)
    # Before the move, Lisbon was what held, and nothing was stale.
    past = memory.search("where do I live?", days=10)
    assert first(past, "Lisbon") == 0 and not any(stale for _, stale in past)
    # With the stale move switched off, the old home ranks as found and is not marked.
    as_found = memory.search("where do I live?", settings=Settings(recall_stale_below_current=False))
    assert not any(stale for _, stale in as_found)
    assert {text for text, _ in as_found} >= {text for text, _ in found if "Lisbon" in text}


def test_the_context_says_until_when_and_since_when(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "My budget for the trip is 1,500 euros.")
    memory.session(9, "Good news, the budget went up to 2,000 euros.")
    now = T0 + timedelta(days=20)
    retriever = Retriever(memory.projection, Settings(), clock=lambda: now)
    found = retriever.retrieve("ann", "What is my budget?", filters=SearchFilters(as_of=now))
    assert "until 2026-03-11: " in found.context and "since 2026-03-11: " in found.context
    assert found.context.index("2,000") < found.context.index("1,500")
    assert render_context(found.in_context) == found.context


def test_values_that_coexist_are_never_superseded(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "We have a cat called Miso.", "I live in Lisbon.")
    made = memory.session(20, "We also adopted a dog called Rex.", "I work in Madrid three days a week.")
    assert not [e for e in made if isinstance(e, MemorySuperseded | MemoryOutdated)]
    assert not any(stale for _, stale in memory.search("what pets do I have?"))


def test_a_revert_leaves_the_first_value_current_and_a_chain_the_last(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "I prefer the window seat on flights.")
    memory.session(10, "These days I prefer the aisle.")
    memory.session(20, "Actually I'm back to preferring the window seat.")
    memory.session(0.5, "My rent is 900 a month.")
    memory.session(5, "My rent went up to 950.")
    memory.session(15, "The rent is now 1,000.")
    current = {
        record.claim.attribute: record.claim.value
        for record in memory.projection.claims_of("ann")
        if record.claim is not None
    }
    assert current == {"preferred seat": "window seat", "rent": "1,000"}


def test_a_retraction_ends_a_claim_with_nothing_in_its_place(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "I'm vegetarian, so no meat please.")
    made = memory.session(40, "I'm not vegetarian any more, I eat fish and chicken now.")
    [ended] = [e for e in made if isinstance(e, MemorySuperseded)]
    assert ended.change == "retracted"
    found = memory.search("am I vegetarian?")
    # First what holds now (the retraction, as a fact or as the turn that said it).
    assert "no longer" in found[0][0] or "not vegetarian any more" in found[0][0]


def test_a_state_with_an_end_expires_on_its_own(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "I live in Lisbon.")
    made = memory.session(10, "I'm in Berlin this week for a conference.")
    assert not [e for e in made if isinstance(e, MemorySuperseded)]
    during = memory.search("where am I right now?", days=11)
    assert not any(stale for text, stale in during if "Berlin" in text)
    after = memory.search("where am I right now?", days=30)
    assert all(stale for text, stale in after if "Berlin" in text)
    assert first(after, "Lisbon") < first(after, "Berlin")


def test_a_session_consolidated_late_records_its_old_value_as_ended(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(30, "I work at Spotify now.")
    # Said first, consolidated after (a backfill of an old session).
    made = memory.session(1, "I work at Acme.", closed=31)
    [late] = [e for e in made if isinstance(e, MemorySuperseded)]
    acme = next(e for e in made if isinstance(e, MemoryAdded) and e.claim is not None)
    assert late.memory_id == acme.memory_id and late.valid_until == T0 + timedelta(days=30)
    found = memory.search("where do I work?")
    assert first(found, "Spotify") < first(found, "Acme")


def test_the_same_decisions_when_a_request_is_decided_again(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    sessions = [
        (0, "I live in Lisbon and my budget is 1,500 euros."),
        (30, "I moved to Porto, and the budget went up to 2,000."),
        (60, "We moved back to Lisbon."),
    ]
    first = [memory.session(day, text) for day, text in sessions]
    # A restarted worker (nothing in memory) gets every request again, in another order,
    # after the projection applied all of them: the same events each time.
    for day, text in reversed(sessions):
        memory.decider = MemoryDecider(memory.projection, minilm)
        again = memory.session(day, text)
        assert again == first[sessions.index((day, text))]


def llm_extraction(
    name: str, day: float, claim: Claim, content: str
) -> ExtractionRecorded:
    return ExtractionRecorded(
        event_id=f"ext-{name}", user_id="ann", session_id=name,
        occurred_at=T0 + timedelta(days=day, minutes=5), consolidation_event_id=f"c-{name}",
        extractor="llm", extractor_version="2",
        candidates=(MemoryCandidate(memory_type="fact", content=content, importance=0.8,
                                    source_event_ids=(f"{name}-u0",), claim=claim),),
    )


def test_an_llm_operation_is_recorded_as_its_decision_and_a_made_up_one_as_the_rules(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    home = Claim(subject="User", attribute="home", value="Lisbon", valid_from=T0)
    [added] = [e for e in memory.decided(llm_extraction("a", 0, home, "User lives in Lisbon"))
               if isinstance(e, MemoryAdded)]
    moved = Claim(subject="User", attribute="home", value="Porto",
                  valid_from=T0 + timedelta(days=5), operation="update", target=added.memory_id)
    [by_llm] = [e for e in memory.decided(llm_extraction("b", 5, moved, "User lives in Porto"))
                if isinstance(e, MemorySuperseded)]
    assert (by_llm.memory_id, by_llm.decided_by) == (added.memory_id, "llm")
    # A target that is not a current claim (it was just superseded): the rules decide.
    back = Claim(subject="User", attribute="home", value="Lisbon",
                 valid_from=T0 + timedelta(days=9), operation="update", target=added.memory_id)
    [by_rules] = [e for e in memory.decided(llm_extraction("c", 9, back, "User lives in Lisbon"))
                  if isinstance(e, MemorySuperseded)]
    assert (by_rules.memory_id, by_rules.decided_by) == (by_llm.superseded_by, "rules")



def test_a_restatement_consolidated_after_the_end_is_marked_alike_on_a_redelivery(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    sessions = [
        (0, "My budget is 1,500 euros."),
        (30, "The budget went up to 2,000 euros."),
        # Said before the change, consolidated after it (log order is not event-time order).
        (20, "Remember, my budget is 1,500 euros."),
    ]
    for day, text in sessions:
        memory.session(day, text)

    def view() -> dict[str, tuple[object, ...]]:
        return {
            r.memory_id: (r.status, r.superseded_by, r.valid_until, r.ended_claims, r.stated_in)
            for r in memory.projection.list_memories(memory.user, include_inactive=True)
        }

    before = view()
    # The late restatement's episode states a claim that had ended: it is marked so.
    restated = [r for r in memory.projection.list_memories(memory.user)
                if r.memory_type == "episode" and "Remember" in r.content]
    assert restated and all(r.ended_claims and r.superseded_by for r in restated)
    # A restarted worker gets the last two requests again, after the projection applied
    # them (it now holds the restatement when it decides the change): the same memories.
    memory.decider = MemoryDecider(memory.projection, minilm)
    for day, text in sessions[1:]:
        memory.session(day, text)
    assert view() == before


def test_a_restatement_the_projector_has_not_applied_is_ended_by_a_restarted_decider_too(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    def ended_statements(restart: bool, directory: Path) -> set[str]:
        memory = Memory(directory, minilm)
        memory.session(0, "My budget is 1,500 euros.")
        if restart:  # a new worker: the claim was made by the one before it
            memory.decider = MemoryDecider(memory.projection, minilm)
        # The restatement is decided, but the projector has not applied it yet.
        apply, memory.projection.apply = memory.projection.apply, lambda batch: None
        restated = memory.session(10, "Remember, my budget is 1,500 euros.")
        memory.projection.apply = apply
        made = memory.session(30, "The budget went up to 2,000 euros.")
        episodes = {e.memory_id for e in restated
                    if isinstance(e, MemoryAdded) and e.memory_type == "episode"}
        assert episodes
        return {e.memory_id for e in made if isinstance(e, MemoryOutdated)} & episodes

    uncrashed = ended_statements(False, tmp_path / "uncrashed")
    assert uncrashed
    assert ended_statements(True, tmp_path / "restarted") == uncrashed


def test_a_claim_said_twice_in_a_span_names_its_statements_in_the_log_for_a_restarted_decider(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    def ended_statements(restart: bool, directory: Path) -> set[str]:
        memory = Memory(directory, minilm)
        said = memory.session(0, "My budget is about 1500 euros.", "My budget is about 1500 euros.")
        [claim] = [e for e in said if isinstance(e, MemoryAdded) and e.claim is not None]
        # The log itself says what states the claim, not only the decider's memory of it.
        assert claim.stated_in
        if restart:
            memory.decider = MemoryDecider(memory.projection, minilm)
        made = memory.session(3, "My budget is about 2000 euros.")
        return {e.memory_id for e in made if isinstance(e, MemoryOutdated)}

    uncrashed = ended_statements(False, tmp_path / "uncrashed")
    assert uncrashed
    assert ended_statements(True, tmp_path / "restarted") == uncrashed


def test_a_compound_sentence_states_each_claim_and_a_later_value_replaces_its_own(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    """README's first sentence and a budget said in passing, as a new user says them."""
    memory = Memory(tmp_path, minilm)
    memory.session(0, "I prefer window seats and I live in Lisbon.",
                   "I live in Berlin and my budget for the trip is 1,500 euros.")
    made = memory.session(9, "I prefer aisle seats now.", "My budget is now 2,000 euros.")
    ended = {e.memory_id for e in made if isinstance(e, MemorySuperseded)}
    contents = {e.memory_id: e.content for e in memory.events if isinstance(e, MemoryAdded)}
    assert {contents[m] for m in ended} >= {
        "User prefers window seats", "User's budget for the trip is 1,500 euros"
    }
    seats = memory.search("which seats do I prefer?", days=20)
    assert first(seats, "aisle") < first(seats, "window")
    budget = memory.search("what is my budget?", days=20)
    assert first(budget, "2,000") < first(budget, "1,500")
    # The old budget's statement is history now (a search shows what holds); the turn that
    # said it is marked, though the home it also said still holds (a fact of its own).
    assert "User's budget for the trip is 1,500 euros" not in {text for text, _ in budget}
    assert all(stale for text, stale in budget if "1,500" in text)


def test_what_happened_today_is_no_state_that_ends_tonight(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "I went to the beach today.", "I'm in Berlin this week for a conference.")
    later = memory.search("the beach", days=30)
    assert not any(stale for text, stale in later if "beach" in text)
    assert all(stale for text, stale in memory.search("Berlin", days=30) if "Berlin" in text)


def test_what_no_claim_reads_still_ages_the_newer_first_and_the_older_possibly_outdated(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(0, "Our band rehearses in the old garage on Fridays.")
    memory.session(12, "Our band rehearses in the church hall on Tuesdays now.")
    memory.session(13, "We have a cat called Miso.")
    moment = T0 + timedelta(days=30)
    retriever = Retriever(memory.projection, Settings(), clock=lambda: moment)
    found = retriever.search("ann", "where does the band rehearse?", limit=5,
                             filters=SearchFilters(as_of=moment))
    texts = [item.memory.content for item in found]
    newer = next(i for i, text in enumerate(texts) if "church hall" in text)
    older = next(i for i, text in enumerate(texts) if "garage" in text)
    assert newer < older
    assert found[older].possibly_outdated_by == found[newer].memory.memory_id
    assert not found[older].stale  # nothing superseded it
    assert all(item.possibly_outdated_by is None for item in found if "garage" not in
               item.memory.content)
    context = retriever.retrieve("ann", "where does the band rehearse?",
                                 filters=SearchFilters(as_of=moment)).context
    assert "possibly outdated (said differently later): " in context
    # Switched off with the near-tie step, nothing is marked.
    plain = Retriever(memory.projection, Settings(recall_newer_on_near_ties=False),
                      clock=lambda: moment).search("ann", "where does the band rehearse?",
                                                   limit=5, filters=SearchFilters(as_of=moment))
    assert all(item.possibly_outdated_by is None for item in plain)


def test_a_value_let_go_of_ends_the_claim_that_held_it_and_a_replacement_takes_its_attribute(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    memory = Memory(tmp_path, minilm)
    memory.session(
        0, "I drive a Subaru to work every day.", "My sister works at Zalando.", "We have a dog."
    )
    memory.session(10, "I sold the Subaru and bought a Skoda.")
    memory.session(20, "My sister left Zalando and joined Novartis.")
    memory.session(30, "We gave away the dog.")
    current = {
        (record.claim.subject, record.claim.attribute, record.claim.value)
        for record in memory.projection.claims_of("ann")
        if record.claim is not None and record.claim.polarity
    }
    assert ("User", "car", "Skoda") in current
    assert ("User's sister", "employer", "Novartis") in current
    assert not {value for _, _, value in current} & {"Subaru", "Zalando", "dog"}
    found = memory.search("what car do I drive?")
    old = [stale for text, stale in found if "Subaru" in text and "Skoda" not in text]
    assert old and all(old)  # "I drive a Subaru." is found, and marked as what held before
