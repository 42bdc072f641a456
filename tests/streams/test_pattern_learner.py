"""The pattern learner's books: folded from the log once per partition, the same events as a
learner that never stopped, whatever it forgot in between."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.envelope import Event
from memstream.models.events.memory import ExtractionRecorded, MemoryAdded, MemorySuperseded
from memstream.models.extraction import OfflineExtractor
from memstream.models.patterns import PatternBook, SpanObservation, observe_span, patterns, record
from memstream.streams.agents.patterns import PatternLearner, observe_request

MONDAY = datetime(2026, 3, 2, 8, 15, tzinfo=UTC)


def recorded(user: str, n: int) -> ExtractionRecorded:
    """Session ``n`` of ``user`` (a week apart), recorded with its observation."""
    at = MONDAY + timedelta(weeks=n)
    observed = observe_span(f"{user}-s{n}", at, [], [(f"{user}-t{n}", "calc")])
    return ExtractionRecorded(
        event_id=f"{user}-rec{n}", user_id=user, session_id=f"{user}-s{n}", occurred_at=at,
        consolidation_event_id=f"{user}-req{n}", extractor="offline", extractor_version="1",
        observed=observed,
    )


class Log:
    """The recorded extractions published so far, by user; counts the partition reads."""

    def __init__(self) -> None:
        self.published: list[ExtractionRecorded] = []
        self.reads = 0

    async def load(self, user_id: str) -> dict[str, list[SpanObservation]]:
        self.reads += 1
        found: dict[str, list[SpanObservation]] = {}
        for event in self.published:  # one partition: every user shares it
            assert event.observed is not None
            found.setdefault(event.user_id, []).append(event.observed)
        return found


def learn(learner: PatternLearner, log: Log, event: ExtractionRecorded) -> list[Event]:
    made = asyncio.run(learner.learn(event))
    log.published.append(event)
    return made


def test_a_learner_that_forgot_emits_what_one_that_never_stopped_did() -> None:
    spans = [recorded(user, n) for n in range(5) for user in ("ann", "bob")]
    steady_log, steady = Log(), None
    steady = PatternLearner(steady_log.load, lambda user: 0)
    expected = [learn(steady, steady_log, span) for span in spans]
    assert steady_log.reads == 1  # one partition read, for both users

    log = Log()
    learner = PatternLearner(log.load, lambda user: 0, max_users=1)
    found = []
    for i, span in enumerate(spans):
        if i == 4:
            learner.forget_all()  # a rebalance
        if i == 7:
            learner.forget([span.user_id])  # a failed publish
        found.append(learn(learner, log, span))
    assert found == expected
    # The third session makes each pattern; each later one supersedes it.
    ann = [e for events in expected for e in events if e.user_id == "ann"]
    added = [e for e in ann if isinstance(e, MemoryAdded)]
    assert [e.content for e in added if "calc" in e.content] == [
        f"uses the tool calc ({n} sessions)" for n in (3, 4, 5)]
    assert sum(isinstance(e, MemorySuperseded) for e in ann) == 2 * 3  # tool, hours, weekday


def test_a_span_delivered_again_emits_nothing_new() -> None:
    log = Log()
    learner = PatternLearner(log.load, lambda user: 0)
    spans = [recorded("ann", n) for n in range(3)]
    made = [learn(learner, log, span) for span in spans]
    assert made[2] and not made[0]
    assert asyncio.run(learner.learn(spans[2])) == []
    learner.forget_all()
    assert asyncio.run(learner.learn(spans[1])) == []


def test_a_correction_repeated_in_two_sessions_is_learned_by_what_it_corrects() -> None:
    book = PatternBook()
    for n, text in enumerate(["Actually, I live in Porto, not Lisbon.",
                              "No, sorry, I live in Faro now, not Porto."]):
        at = MONDAY + timedelta(days=n)
        said = TranscriptMessage(event_id=f"m{n}", role="user", occurred_at=at, content=text)
        request = ConsolidationRequested(
            event_id=f"c{n}", user_id="ann", session_id=f"s{n}", occurred_at=at,
            reason="session_closed", messages=(said,),
        )
        book = record(book, observe_request(request, OfflineExtractor().extract(request).candidates))
    found = patterns(book)["correction:home"]
    assert (found.content, found.event_ids) == ("corrects the home repeatedly (2 sessions)",
                                                ("m0", "m1"))
