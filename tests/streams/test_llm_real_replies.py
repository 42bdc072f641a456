"""Replies a real small model gave, read by the LLM extractor through the real ``openai``
client against the scripted local server.

The replies in ``tests/fixtures/llm_replies.json`` are verbatim: Qwen2.5 1.5B Instruct
(GGUF, llama.cpp's server through xllamacpp on CPU, ``benchmarks/local_llm.py``) on sessions
of the beliefs benchmark's held-out split (``benchmarks/beliefs.py --extractor both
--local-llm``), each with the transcript it was shown. ``seen`` says which response format
the extractor had asked for: with ``json_schema`` llama.cpp constrains the reply to the
schema, so what breaks is what the model puts in it; with ``text`` (a server that supports
no response format) the shape itself breaks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from llm_server import Reply, ScriptedServer, completion

from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.memory import MemoryCandidate
from memstream.models.extraction.parsed_memories import WithParsedMemories
from memstream.models.llm_reply import PROMPT_EXAMPLE_TERMS, SYSTEM_PROMPT
from memstream.streams.llm.extractor import LLMExtractor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm_replies.json"
AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RECORDED: dict[str, dict[str, Any]] = {
    case["name"]: case for case in json.loads(FIXTURES.read_text())
}


@pytest.fixture
def extract() -> Iterator[Callable[..., tuple[list[MemoryCandidate], ScriptedServer]]]:
    """Extract one recorded session: its reply first, then ``more`` replies if asked again."""
    servers: list[ScriptedServer] = []
    extractors: list[LLMExtractor] = []

    def run(
        name: str, *more: Reply, parsed: bool = False
    ) -> tuple[list[MemoryCandidate], ScriptedServer]:
        case = RECORDED[name]
        server = ScriptedServer([
            Reply(completion(case["reply"], finish_reason=case["finish_reason"])), *more
        ])
        server.start()
        servers.append(server)
        extractor = LLMExtractor(
            base_url=server.base_url, api_key="", model="qwen2.5-1.5b-instruct",
            timeout_s=5.0, max_retries=1, retry_backoff_s=0.0,
            response_format=case["seen"],
        )
        extractors.append(extractor)
        messages = tuple(
            TranscriptMessage(event_id=event_id, role=role, content=text,
                              occurred_at=AT + timedelta(minutes=i))
            for i, (event_id, role, text) in enumerate(case["transcript"])
        )
        request = ConsolidationRequested(
            event_id=f"c-{name}", user_id="u", session_id=case["session"],
            occurred_at=messages[-1].occurred_at, reason="session_closed", messages=messages,
        )
        worker = WithParsedMemories(extractor) if parsed else extractor
        return list(worker.extract(request).candidates), server

    yield run
    for extractor in extractors:
        extractor.close()
    for server in servers:
        server.stop()


def contents(candidates: list[MemoryCandidate]) -> list[tuple[str, str]]:
    return [(c.memory_type, c.content) for c in candidates]


def test_the_recorded_replies_are_verbatim_and_short() -> None:
    assert RECORDED, "no fixtures"
    for case in RECORDED.values():
        assert case["seen"] in ("json_schema", "json_object", "text")
        assert len(case["reply"]) < 5000 and len(case["transcript"]) <= 20


# --- json_schema: the shape holds, the content breaks -------------------------------------


def test_the_prompts_own_examples_are_not_the_users(extract: Callable[..., Any]) -> None:
    # The transcript names neither Lisbon nor window seats: the prompt's examples do.
    candidates, _ = extract("prompt_examples_copied")

    found = contents(candidates)
    assert ("preference", "User plans to visit Croatia next spring") in found
    assert not any("Lisbon" in text or "window seat" in text for _, text in found)
    assert all("Lisbon" not in c.entities and "window seats" not in c.entities
               for c in candidates)


def test_an_item_listed_as_preference_and_fact_is_one_memory(
    extract: Callable[..., Any],
) -> None:
    candidates, _ = extract("listed_as_preference_and_fact")

    found = contents(candidates)
    assert found.count(("preference", "I can't stop procrastinating today")) == 1
    assert ("fact", "I can't stop procrastinating today") not in found


def test_an_item_citing_the_answer_to_the_users_turn_cites_that_turn(
    extract: Callable[..., Any],
) -> None:
    # "I have a job with Shopify." is t2; the model cited t3, the assistant's "Thanks, I've
    # made a note of that."
    candidates, _ = extract("listed_as_preference_and_fact")

    sources = {c.content: c.source_event_ids for c in candidates}
    assert sources["I have a job with Shopify"] == ("belief-heldout-003-s0-t2",)


def test_an_item_repeated_in_a_loop_is_one_memory(extract: Callable[..., Any]) -> None:
    # Six items, two statements, each under both lists.
    candidates, server = extract("items_repeated")

    assert contents(candidates) == [
        ("preference", "User likes to stretch before lifting"),
        ("preference", "User likes to stretch after lifting"),
        ("summary", "User likes to stretch before and after lifting."),
    ]
    assert len(server.received) == 1


def test_a_reply_cut_off_in_a_loop_keeps_what_it_wrote_before(
    extract: Callable[..., Any],
) -> None:
    # 1,536 tokens, "User has a pet" / "User has a bike" over and over, cut mid-item; asked
    # again with the error, the model answered with nothing at all.
    candidates, server = extract(
        "cut_off_in_a_loop", Reply(completion('{"preferences": [], "facts": [], "summary": ""}'))
    )

    assert len(server.received) == 1
    found = contents(candidates)
    assert len(found) == len(set(found))  # the loop's repeats merged
    assert ("preference", "User likes standing desks") in found
    assert ("fact", "User has a bike") in found
    assert not any("Lisbon" in text for _, text in found)
    assert not any(kind == "summary" for kind, _ in found)  # it never got that far


# --- text: no response format --------------------------------------------------------------


def test_unconstrained_json_without_claims_reads_and_a_wrong_turn_is_corrected(
    extract: Callable[..., Any],
) -> None:
    # Plain JSON, no claim fields; "I can't stop procrastinating today" cites t9, the
    # assistant's "Let's take it step by step."; the user said it at t6.
    candidates, server = extract("text_mode_wrong_turn_cited")

    assert "response_format" not in server.received[0].body
    sources = {c.content: c.source_event_ids for c in candidates}
    assert sources["I can't stop procrastinating today."] == ("belief-heldout-000-s0-t6",)
    assert sources["I settled in Adelaide a while ago."] == ("belief-heldout-000-s0-t10",)
    assert all(c.claim is None for c in candidates)


def test_the_example_terms_are_the_prompts_own() -> None:
    # They must stay in step with the prompt: a term it no longer uses guards nothing.
    for term in PROMPT_EXAMPLE_TERMS:
        assert term.casefold() in SYSTEM_PROMPT.casefold(), term


def test_as_the_worker_runs_it_the_turns_are_kept_and_the_parse_gives_the_claims_left_null(
    extract: Callable[..., Any],
) -> None:
    # The model gave no item of these sessions a claim.
    alone = [c for name in RECORDED for c in extract(name)[0]]
    assert not any(c.claim is not None for c in alone)
    claims = {
        (c.claim.subject, c.claim.attribute, c.claim.value)
        for name in RECORDED for c in extract(name, parsed=True)[0] if c.claim is not None
    }
    # "I settled in Adelaide a while ago.", which the model gave as a preference: the one
    # claim the parse reads in these sessions ("Deloitte is where my uncle works" and
    # "Next spring I'm heading to Namibia" it does not read).
    assert claims == {("User", "home", "Adelaide")}
    # The model writes no turn down; the worker keeps each as the offline reader does.
    episodes = {c.content for c in extract("text_mode_wrong_turn_cited", parsed=True)[0]
                if c.memory_type == "episode"}
    assert "I settled in Adelaide a while ago." in episodes
    assert not any(c.memory_type == "episode" for c in alone)
