"""The replay stand-in of benchmarks/local_llm.py: the replies a run recorded, served back to
the real LLM extractor, each transcript's in order, then HTTP 500."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from local_llm import replayed_llm

from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.streams.llm.extractor import ExtractionFailed, LLMExtractor

AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def request(first_id: str) -> ConsolidationRequested:
    messages = (
        TranscriptMessage(event_id=first_id, role="user", content="I moved to Busan.",
                          occurred_at=AT),
        TranscriptMessage(event_id=f"{first_id}-a", role="assistant", content="Noted.",
                          occurred_at=AT + timedelta(minutes=1)),
    )
    return ConsolidationRequested(event_id=f"c-{first_id}", user_id="u", session_id="s",
                                  occurred_at=AT + timedelta(minutes=2),
                                  reason="session_closed", messages=messages)


def test_each_transcript_gets_its_recorded_replies_in_order(tmp_path: Path) -> None:
    cut = '{"facts": [{"content": "User lives in Busan", "importance": 0.8}, {"cont'
    lines = [
        {"first_event_id": "t0", "attempt": 2, "finish_reason": "stop", "text": "{}"},
        {"first_event_id": "t0", "attempt": 1, "finish_reason": "length", "text": cut},
    ]
    recorded = tmp_path / "replies.jsonl"
    recorded.write_text("".join(json.dumps(line) + "\n" for line in lines))

    with replayed_llm(recorded) as served:
        assert served.cpu_seconds() is None
        extractor = LLMExtractor(base_url=served.base_url, api_key="", model=served.model,
                                 timeout_s=5, max_retries=0, retry_backoff_s=0)
        try:
            extraction = extractor.extract(request("t0"))
            with pytest.raises(ExtractionFailed, match="no more recorded replies"):
                extractor.extract(request("unknown"))
        finally:
            extractor.close()

    assert [c.content for c in extraction.candidates] == ["User lives in Busan"]
