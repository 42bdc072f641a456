"""The Extractor port's contract, run against every implementation.

One test class states what any extractor must do (as eventsourcing's recorder test cases
do); a subclass per implementation supplies it: the offline extractor, and the LLM
extractor driving the real ``openai`` client against a scripted local server. A new
extractor gets its subclass and must pass the same tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from llm_server import Reply, ScriptedServer, completion

from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.extraction import MIN_IMPORTANCE, Extraction, Extractor, OfflineExtractor
from memstream.streams.llm.extractor import LLMExtractor

AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def request_of(*turns: tuple[str, str]) -> ConsolidationRequested:
    messages = tuple(
        TranscriptMessage(
            event_id=f"m{i}", role=role, content=text, occurred_at=AT + timedelta(minutes=i)  # type: ignore[arg-type]
        )
        for i, (role, text) in enumerate(turns)
    )
    return ConsolidationRequested(
        event_id="c-1", user_id="maria", session_id="s-1", occurred_at=AT + timedelta(hours=1),
        reason="session_closed", messages=messages,
    )


TRIP = request_of(
    ("user", "Hi, I'm Maria. I'm vegetarian and I prefer window seats."),
    ("assistant", "Nice to meet you! I recommend the Lisbon food tour. I love jazz."),
    ("user", "Actually I live in Lisbon, not Porto. Book me a trip to Kyoto in May."),
    ("tool", '{"profile": "I live in Paris and I prefer cats."}'),
)

#: What a model might answer for TRIP, including a statement that cites only the assistant.
LLM_REPLY = {
    "preferences": [
        {"content": "User prefers window seats", "importance": 0.75, "source_event_ids": ["m0"]},
        {"content": "User loves jazz", "importance": 0.7, "source_event_ids": ["m1"]},
    ],
    "facts": [
        {"content": "User is vegetarian", "importance": 0.85, "source_event_ids": ["m0"]},
        {"content": "User lives in Lisbon", "importance": 0.85, "source_event_ids": ["m2"]},
    ],
    "summary": "Maria, vegetarian, lives in Lisbon and asked for a trip to Kyoto in May.",
    "entities": ["Maria", "Lisbon", "Kyoto"],
    "corrections": [
        {"content": "User lives in Lisbon, not Porto", "importance": 0.9,
         "source_event_ids": ["m2"]},
    ],
}


class ExtractorContract:
    """What every :class:`~memstream.models.extraction.Extractor` must do."""

    #: Substrings that must appear among the candidates' contents for TRIP.
    expected_in_trip: ClassVar[tuple[str, ...]] = ("window seats", "vegetarian", "Lisbon")

    @pytest.fixture
    def extractor(self) -> Iterator[Extractor]:
        raise NotImplementedError

    def test_it_satisfies_the_protocol_and_names_itself(self, extractor: Extractor) -> None:
        assert isinstance(extractor, Extractor)
        assert extractor.name and extractor.version

    def test_it_returns_an_extraction_with_its_raw_response(self, extractor: Extractor) -> None:
        found = extractor.extract(TRIP)
        assert isinstance(found, Extraction)
        assert found.raw_response
        text = " ".join(candidate.content for candidate in found.candidates)
        for expected in self.expected_in_trip:
            assert expected in text

    def test_candidates_cite_only_the_requests_messages(self, extractor: Extractor) -> None:
        ids = {message.event_id for message in TRIP.messages}
        for candidate in extractor.extract(TRIP).candidates:
            assert set(candidate.source_event_ids) <= ids

    def test_no_statement_rests_on_the_assistant_or_a_tool_alone(
        self, extractor: Extractor
    ) -> None:
        roles = {message.event_id: message.role for message in TRIP.messages}
        for candidate in extractor.extract(TRIP).candidates:
            if candidate.memory_type in ("preference", "fact", "correction"):
                assert any(roles[e] == "user" for e in candidate.source_event_ids), candidate
                assert "jazz" not in candidate.content and "Paris" not in candidate.content

    def test_candidates_are_within_bounds(self, extractor: Extractor) -> None:
        for candidate in extractor.extract(TRIP).candidates:
            assert MIN_IMPORTANCE <= candidate.importance <= 1.0
            assert candidate.content.strip() == candidate.content and candidate.content


class TestOfflineExtractor(ExtractorContract):
    @pytest.fixture
    def extractor(self) -> Iterator[Extractor]:
        yield OfflineExtractor()

    def test_the_same_request_gives_the_same_extraction(self, extractor: Extractor) -> None:
        assert extractor.extract(TRIP) == extractor.extract(TRIP)


class TestLLMExtractor(ExtractorContract):
    @pytest.fixture
    def extractor(self) -> Iterator[Extractor]:
        # Enough scripted replies for every extract() of one test.
        server = ScriptedServer([Reply(completion(json.dumps(LLM_REPLY))) for _ in range(4)])
        server.start()
        options: dict[str, Any] = {"api_key": "sk-test-123", "model": "test-model",
                                   "timeout_s": 2.0, "max_retries": 0, "retry_backoff_s": 0.0}
        made = LLMExtractor(base_url=server.base_url, **options)
        try:
            yield made
        finally:
            made.close()
            server.stop()
