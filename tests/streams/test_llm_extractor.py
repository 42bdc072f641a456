"""The LLM extractor, driving the real ``openai`` client against a scripted local server.

The server is stdlib ``http.server`` on 127.0.0.1: it answers each call with the next
scripted reply and records every request, so the tests see what went over the wire.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from llm_server import Reply, ScriptedServer, completion
from prometheus_client import REGISTRY

from memstream.models.beliefs import KnownClaim
from memstream.models.events.consolidation import (
    ConsolidationRequested,
    TaskChange,
    TranscriptMessage,
)
from memstream.models.events.memory import Claim, TokenUsage
from memstream.models.extraction import Extractor
from memstream.models.llm_reply import (
    PROMPT_VERSION,
    ReplyInvalid,
    parse_json_reply,
    reply_json_schema,
)
from memstream.models.settings import Settings
from memstream.streams.llm.extractor import ExtractionFailed, LLMExtractor

AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
API_KEY = "sk-test-123"


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    """Start a scripted server; every server started is stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(*replies: Reply) -> ScriptedServer:
        server = ScriptedServer(list(replies))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def make_extractor() -> Iterator[Callable[..., LLMExtractor]]:
    """Extractors with test-sized timeouts and no backoff; closed after the test."""
    made: list[LLMExtractor] = []

    def make(base_url: str, **overrides: Any) -> LLMExtractor:
        options: dict[str, Any] = {
            "api_key": API_KEY,
            "model": "test-model",
            "timeout_s": 1.0,
            "max_retries": 2,
            "retry_backoff_s": 0.0,
        }
        options.update(overrides)
        extractor = LLMExtractor(base_url=base_url, **options)
        made.append(extractor)
        return extractor

    yield make
    for extractor in made:
        extractor.close()


# --- builders ----------------------------------------------------------------------------


def request_of(*turns: tuple[str, str]) -> ConsolidationRequested:
    """A consolidation request whose messages are ``m0``, ``m1``, ... in order."""
    messages = tuple(
        TranscriptMessage(
            event_id=f"m{i}", role=role, content=text, occurred_at=AT + timedelta(minutes=i)
        )
        for i, (role, text) in enumerate(turns)
    )
    return ConsolidationRequested(
        event_id="c-1",
        user_id="maria",
        session_id="s-1",
        occurred_at=AT + timedelta(hours=1),
        reason="session_closed",
        messages=messages,
    )


TRIP = request_of(
    ("user", "Hi, I'm Maria. I'm vegetarian and I prefer window seats."),
    ("assistant", "Nice to meet you, Maria! I recommend the Lisbon food tour."),
    ("user", "Actually I live in Lisbon, not Porto. Book me a trip to Kyoto in May."),
    ("system", "Recalled memory: User likes jazz"),
)

GOOD = {
    "preferences": [
        {"content": "User prefers window seats", "importance": 0.75, "source_event_ids": ["m0"]},
        {
            "content": "User likes the colour of the sky",
            "importance": 0.1,
            "source_event_ids": ["m0"],
        },
    ],
    "facts": [
        {"content": "User's name is Maria", "importance": 0.9, "source_event_ids": ["m0"]},
        {"content": "User is vegetarian", "importance": 0.85, "source_event_ids": ["m0"]},
        {
            "content": "User plans a trip to Kyoto in May",
            "importance": 0.29,
            "source_event_ids": ["m2"],
        },
    ],
    "summary": "Maria introduced herself. She asked for a trip to Kyoto in May.",
    "entities": ["Maria", "Lisbon", "Kyoto", "Porto"],
    "corrections": [
        {
            "content": "User lives in Lisbon, not Porto",
            "importance": 0.6,
            "source_event_ids": ["m2"],
        }
    ],
}


# --- the happy path ----------------------------------------------------------------------


def test_a_structured_reply_becomes_typed_candidates(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(Reply(completion(json.dumps(GOOD), prompt_tokens=321, completion_tokens=54)))
    extractor = make_extractor(server.base_url)

    extraction = extractor.extract(TRIP)

    found = [
        (c.memory_type, c.content, c.importance, c.source_event_ids, c.entities)
        for c in extraction.candidates
    ]
    assert found == [
        ("preference", "User prefers window seats", 0.75, ("m0",), ()),
        ("fact", "User's name is Maria", 0.9, ("m0",), ("Maria",)),
        ("fact", "User is vegetarian", 0.85, ("m0",), ()),
        ("correction", "User lives in Lisbon, not Porto", 0.8, ("m2",), ("Lisbon", "Porto")),
        (
            "summary",
            "Maria introduced herself. She asked for a trip to Kyoto in May.",
            0.55,
            ("m0", "m1", "m2"),  # the system message is not part of the transcript
            ("Maria", "Kyoto"),
        ),
    ]
    assert extraction.raw_response == json.dumps(GOOD)
    assert extraction.model == "test-model-2026-01-01"
    assert extraction.prompt_version == PROMPT_VERSION
    assert extraction.usage == TokenUsage(prompt_tokens=321, completion_tokens=54)


def test_the_request_carries_schema_transcript_and_bearer_key(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(Reply(completion(json.dumps(GOOD))))
    make_extractor(server.base_url).extract(TRIP)

    [sent] = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.body["model"] == "test-model"
    assert sent.body["temperature"] == 0.0
    response_format = sent.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["schema"] == reply_json_schema()
    system, user = sent.body["messages"]
    assert system["role"] == "system" and "Never translate" in system["content"]
    claims, shown = user["content"].split("\n\n", 1)
    assert claims == "CURRENT CLAIMS:\n[]"  # none known: the model is told so
    transcript = json.loads(shown.removeprefix("Transcript:\n"))
    assert [(t["id"], t["role"]) for t in transcript] == [
        ("m0", "user"),
        ("m1", "assistant"),
        ("m2", "user"),
    ]  # the recalled memory in the system message is never shown again


def test_openai_environment_variables_do_not_override_the_settings(
    serve: Callable[..., ScriptedServer],
    make_extractor: Callable[..., LLMExtractor],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "Authorization: Bearer from-env")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-env")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = serve(Reply(completion(json.dumps(GOOD))))

    make_extractor(server.base_url).extract(TRIP)

    headers = server.received[0].headers
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert "openai-organization" not in headers and "openai-project" not in headers


def test_an_empty_key_sends_a_placeholder(
    serve: Callable[..., ScriptedServer],
    make_extractor: Callable[..., LLMExtractor],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = serve(Reply(completion(json.dumps(GOOD))))

    make_extractor(server.base_url, api_key="").extract(TRIP)

    assert server.received[0].headers["authorization"] == "Bearer EMPTY"


def test_the_schema_is_strict_everywhere() -> None:
    schema = reply_json_schema()
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    objects = [schema, schema["properties"]["facts"]["items"]]
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


def test_text_in_other_languages_is_sent_unescaped(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    reply = {"preferences": [], "facts": [], "summary": "", "entities": []}
    server = serve(Reply(completion(json.dumps(reply))))
    make_extractor(server.base_url).extract(request_of(("user", "Ich wohne in Zürich, 东京も好き")))

    assert "Ich wohne in Zürich, 东京も好き" in server.received[0].body["messages"][1]["content"]


def test_a_transcript_without_user_turns_costs_no_call(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve()
    extraction = make_extractor(server.base_url).extract(
        request_of(("assistant", "How can I help?"), ("tool", "{}"))
    )

    assert extraction.candidates == ()
    assert server.received == []


def test_the_spans_task_changes_become_task_memories_after_the_models_candidates(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(Reply(completion(json.dumps(GOOD))))
    extractor = make_extractor(server.base_url)
    change = TaskChange(
        event_id="t1", task="Book Kyoto", project="kyoto trip", progress="flights booked",
        occurred_at=AT,
    )
    extraction = extractor.extract(TRIP.model_copy(update={"task_changes": (change,)}))
    assert [c.memory_type for c in extraction.candidates][-2:] == ["summary", "task"]
    assert extraction.candidates[-1].content == "Project kyoto trip: Book Kyoto (open): flights booked"
    # A span with task changes and nothing the user said still costs no call.
    quiet = request_of(("assistant", "How can I help?"))
    extraction = extractor.extract(quiet.model_copy(update={"task_changes": (change,)}))
    assert [c.memory_type for c in extraction.candidates] == ["task"]
    assert len(server.received) == 1


# --- response formats --------------------------------------------------------------------


def rejection(kind: str) -> Reply:
    """A 400 as vLLM and LM Studio send it for a response format they do not support."""
    message = f"'response_format.type' {kind} is not supported by this model"
    return Reply({"error": {"message": message, "type": "invalid_request_error"}}, status=400)


def test_a_rejected_json_schema_falls_back_to_json_object(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(rejection("json_schema"), Reply(completion(json.dumps(GOOD))))
    extractor = make_extractor(server.base_url, max_retries=0)

    extraction = extractor.extract(TRIP)

    assert len(extraction.candidates) == 5
    assert [r.body["response_format"]["type"] for r in server.received] == [
        "json_schema",
        "json_object",
    ]
    assert extractor.response_format_mode == "json_object"


def test_a_server_without_any_response_format_gets_plain_text_and_it_sticks(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(
        rejection("json_schema"),
        rejection("json_object"),
        Reply(completion(json.dumps(GOOD))),
        Reply(completion(json.dumps(GOOD))),
    )
    extractor = make_extractor(server.base_url, max_retries=0)

    extractor.extract(TRIP)
    extractor.extract(TRIP)

    formats = [r.body.get("response_format", {}).get("type") for r in server.received]
    assert formats == ["json_schema", "json_object", None, None]


def test_the_first_response_format_can_be_chosen_and_still_only_downgrades(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(rejection("json_object"), Reply(completion(json.dumps(GOOD))))
    extractor = make_extractor(server.base_url, max_retries=0, response_format="json_object")

    extractor.extract(TRIP)

    formats = [r.body.get("response_format", {}).get("type") for r in server.received]
    assert formats == ["json_object", None]


def test_on_reply_sees_every_reply_the_rejected_ones_too(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(
        Reply(completion('{"facts": [{"content": "cut', finish_reason="length")),
        Reply(completion(json.dumps(GOOD))),
    )
    seen: list[tuple[str, str | None]] = []
    extractor = make_extractor(server.base_url, on_reply=lambda *reply: seen.append(reply))

    extractor.extract(TRIP)

    assert seen == [('{"facts": [{"content": "cut', "length"), (json.dumps(GOOD), "stop")]


def test_a_400_about_something_else_fails_at_once(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    too_long = {"error": {"message": "This model's maximum context length is 8192 tokens"}}
    server = serve(Reply(too_long, status=400))
    extractor = make_extractor(server.base_url)

    with pytest.raises(ExtractionFailed) as failed:
        extractor.extract(TRIP)

    assert len(server.received) == 1
    assert failed.value.attempts == 1
    assert "HTTP 400" in failed.value.reason
    assert "maximum context length" in failed.value.raw_response
    assert extractor.response_format_mode == "json_schema"


# --- tolerant parsing --------------------------------------------------------------------


def test_a_fenced_reply_with_prose_around_it_is_parsed(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    body = json.dumps(GOOD, indent=2).replace("]\n}", "],\n}")  # a trailing comma, too
    text = f"Here are the memories I found:\n```json\n{body}\n```\nLet me know if you need more."
    server = serve(Reply(completion(text)))

    extraction = make_extractor(server.base_url).extract(TRIP)

    assert [c.memory_type for c in extraction.candidates] == [
        "preference",
        "fact",
        "fact",
        "correction",
        "summary",
    ]
    assert extraction.raw_response == text


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '```\n{"a": 1}\n```',
        'Sure: {"a": 1} - done.',
        '<think>maybe {"a": 0}?</think>\n{"a": 1}',
        '{"a": 1,}',
        'The set {1, 2} aside, here it is: {"a": 1}',
    ],
)
def test_parse_json_reply_tolerates_wrapping(text: str) -> None:
    assert parse_json_reply(text) == {"a": 1}


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2]", '{"a": '])
def test_parse_json_reply_rejects_what_holds_no_object(text: str) -> None:
    with pytest.raises(ReplyInvalid):
        parse_json_reply(text)


# --- retries -----------------------------------------------------------------------------


def test_malformed_json_is_retried_with_the_error_and_usage_sums(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    broken = '{"preferences": [{"content": "User prefers window seats", "importance": '
    server = serve(
        Reply(completion(broken, prompt_tokens=300, completion_tokens=30, finish_reason="length")),
        Reply(completion(json.dumps(GOOD), prompt_tokens=360, completion_tokens=50)),
    )

    extraction = make_extractor(server.base_url).extract(TRIP)

    assert len(extraction.candidates) == 5
    assert extraction.usage == TokenUsage(prompt_tokens=660, completion_tokens=80)
    assert extraction.raw_response == json.dumps(GOOD)
    retry = server.received[1].body["messages"]
    assert len(retry) == 4
    assert retry[2] == {"role": "assistant", "content": broken}
    assert retry[3]["role"] == "user"
    assert "not valid JSON" in retry[3]["content"] and "cut off" in retry[3]["content"]


def test_every_call_counts_its_tokens_and_a_failed_attempt_logs_no_reply(
    serve: Callable[..., ScriptedServer],
    make_extractor: Callable[..., LLMExtractor],
    caplog: pytest.LogCaptureFixture,
) -> None:
    def tokens(kind: str) -> float:
        labels = {"model": "metered-model", "kind": kind}
        return REGISTRY.get_sample_value("memstream_llm_tokens_total", labels) or 0.0

    before = tokens("prompt"), tokens("completion")
    broken = '{"facts": [{"content": "User keeps the spare key under the flowerpot", "importance": '
    # A proxy's error page quoting the prompt, a cut-off reply quoting the user, a good one.
    echoed = {"error": {"message": "upstream rejected: My spare key is under the flowerpot"}}
    server = serve(
        Reply(echoed, status=500),
        Reply(completion(broken, prompt_tokens=300, completion_tokens=30, finish_reason="length")),
        Reply(completion(json.dumps(GOOD), prompt_tokens=360, completion_tokens=50)),
    )
    with caplog.at_level(logging.DEBUG, logger="memstream"):
        make_extractor(server.base_url, model="metered-model").extract(TRIP)

    # The failed attempt's tokens too: they were spent.
    assert (tokens("prompt") - before[0], tokens("completion") - before[1]) == (660, 80)
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "HTTP 500" in logged and "did not validate" in logged and "flowerpot" not in logged


def test_a_reply_whose_every_item_breaks_the_schema_is_retried_with_the_field_named(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    out_of_range = {"preferences": [], "summary": "",
                    "facts": [{"content": "User is 30", "importance": 7}]}
    server = serve(Reply(completion(json.dumps(out_of_range))), Reply(completion(json.dumps(GOOD))))

    make_extractor(server.base_url).extract(TRIP)

    feedback = server.received[1].body["messages"][3]["content"]
    assert "facts.0.importance" in feedback


def test_an_item_that_breaks_the_schema_costs_that_item_not_the_reply(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    broken = {"content": "User is 30", "importance": 7}
    reply = {**GOOD, "facts": [broken, *GOOD["facts"]]}
    server = serve(Reply(completion(json.dumps(reply))))

    extraction = make_extractor(server.base_url).extract(TRIP)

    assert len(server.received) == 1  # no retry: the other items were fine
    contents = [c.content for c in extraction.candidates]
    assert "User is 30" not in contents and "User's name is Maria" in contents


def test_always_malformed_raises_with_raw_text_and_attempts(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(*(Reply(completion(f"I cannot do JSON, try {i}")) for i in range(3)))
    extractor = make_extractor(server.base_url, max_retries=2)

    with pytest.raises(ExtractionFailed) as failed:
        extractor.extract(TRIP)

    assert issubclass(ExtractionFailed, RuntimeError)
    assert failed.value.attempts == 3
    assert len(server.received) == 3
    assert failed.value.raw_response == "I cannot do JSON, try 2"
    assert "did not validate" in failed.value.reason
    assert failed.value.usage == TokenUsage(prompt_tokens=300, completion_tokens=60)
    assert "after 3 attempt(s)" in str(failed.value)


def test_a_slow_reply_counts_as_a_failed_attempt(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(
        Reply(completion(json.dumps(GOOD), prompt_tokens=999), delay_s=2.0),
        Reply(completion(json.dumps(GOOD), prompt_tokens=100, completion_tokens=20)),
    )
    extractor = make_extractor(server.base_url, timeout_s=0.3, max_retries=1)

    started = time.monotonic()
    extraction = extractor.extract(TRIP)

    assert time.monotonic() - started < 1.5  # one timeout, no client-side retry of it
    assert len(server.received) == 2
    assert extraction.usage == TokenUsage(prompt_tokens=100, completion_tokens=20)


def test_timeouts_on_every_attempt_raise(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(*(Reply(completion("{}"), delay_s=2.0) for _ in range(2)))
    extractor = make_extractor(server.base_url, timeout_s=0.2, max_retries=1)

    with pytest.raises(ExtractionFailed) as failed:
        extractor.extract(TRIP)

    assert failed.value.attempts == 2
    assert "no reply within 0.2 s" in failed.value.reason
    assert failed.value.raw_response == ""
    assert failed.value.usage == TokenUsage()


def test_server_errors_are_retried_but_not_by_the_client(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(
        Reply({"error": {"message": "overloaded"}}, status=503),
        Reply({"error": {"message": "slow down"}}, status=429),
        Reply(completion(json.dumps(GOOD))),
    )

    extraction = make_extractor(server.base_url, max_retries=2).extract(TRIP)

    assert len(server.received) == 3
    assert len(extraction.candidates) == 5


def test_a_200_that_is_not_a_completion_is_a_failed_attempt(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(
        Reply("<html>502 Bad Gateway</html>"),
        Reply({"error": {"message": "upstream timed out"}}),
        Reply(completion(json.dumps(GOOD))),
    )

    extraction = make_extractor(server.base_url, max_retries=2).extract(TRIP)

    assert len(server.received) == 3
    assert len(extraction.candidates) == 5


def test_a_failure_keeps_the_body_the_server_sent(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(Reply("<html>502 Bad Gateway</html>"))

    with pytest.raises(ExtractionFailed) as failed:
        make_extractor(server.base_url, max_retries=0).extract(TRIP)

    assert failed.value.raw_response == "<html>502 Bad Gateway</html>"
    assert "unusable response" in failed.value.reason


def test_a_bad_key_is_not_retried(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    server = serve(Reply({"error": {"message": "Incorrect API key provided"}}, status=401))

    with pytest.raises(ExtractionFailed) as failed:
        make_extractor(server.base_url).extract(TRIP)

    assert len(server.received) == 1
    assert "HTTP 401" in failed.value.reason


def test_nothing_listening_is_a_connection_failure(
    make_extractor: Callable[..., LLMExtractor],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port was free a moment ago and nothing listens on it now.
    extractor = make_extractor(f"http://127.0.0.1:{port}/v1", max_retries=1)

    with pytest.raises(ExtractionFailed) as failed:
        extractor.extract(TRIP)

    assert failed.value.attempts == 2
    assert "connection failed" in failed.value.reason


# --- sources -----------------------------------------------------------------------------


def test_unknown_source_ids_are_dropped(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    reply = {
        "preferences": [
            {
                "content": "User prefers window seats",
                "importance": 0.7,
                "source_event_ids": ["m0", "m99"],
            },
        ],
        "facts": [
            {"content": "User is vegetarian", "importance": 0.8, "source_event_ids": ["msg-1"]},
            {"content": "User's name is Maria", "importance": 0.9, "source_event_ids": "m0"},
            {"content": "User likes jazz", "importance": 0.7, "source_event_ids": ["m3"]},
        ],
        "summary": "Maria talked about travel.",
    }
    server = serve(Reply(completion(json.dumps(reply))))

    extraction = make_extractor(server.base_url).extract(TRIP)

    sources = {c.content: c.source_event_ids for c in extraction.candidates}
    assert sources["User prefers window seats"] == ("m0",)
    # No known id left: credited to every user message rather than lost.
    assert sources["User is vegetarian"] == ("m0", "m2")
    assert sources["User's name is Maria"] == ("m0",)
    # m3 is the system message, never shown to the model: an unknown id, like any other.
    assert sources["User likes jazz"] == ("m0", "m2")


def test_an_assistant_statement_does_not_become_a_user_fact(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    reply = {
        "preferences": [
            {
                "content": "User wants the Lisbon food tour",
                "importance": 0.7,
                "source_event_ids": ["m1"],
            },
            {
                "content": "User prefers window seats",
                "importance": 0.7,
                "source_event_ids": ["m1", "m0"],
            },
        ],
        "facts": [],
        "summary": "",
        "corrections": [
            {"content": "User is not in Porto", "importance": 0.9, "source_event_ids": ["m1"]},
        ],
    }
    server = serve(Reply(completion(json.dumps(reply))))

    extraction = make_extractor(server.base_url).extract(TRIP)

    assert [(c.content, c.source_event_ids) for c in extraction.candidates] == [
        ("User prefers window seats", ("m1", "m0")),
        # Cited to the assistant, but worded like the user's m2 ("not Porto"): a wrong id.
        ("User is not in Porto", ("m2",)),
    ]


def test_duplicates_within_a_type_are_merged(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    reply = {
        "preferences": [],
        "facts": [
            {"content": "User is vegetarian", "importance": 0.7, "source_event_ids": ["m0"]},
            {"content": "user is  vegetarian.", "importance": 0.85, "source_event_ids": ["m2"]},
        ],
        "summary": "",
    }
    server = serve(Reply(completion(json.dumps(reply))))

    [fact] = make_extractor(server.base_url).extract(TRIP).candidates

    assert (fact.content, fact.importance, fact.source_event_ids) == (
        "User is vegetarian",
        0.85,
        ("m0", "m2"),
    )


# --- wiring ------------------------------------------------------------------------------


def test_from_settings_and_the_protocol() -> None:
    settings = Settings(
        extractor="llm",
        llm_base_url="http://127.0.0.1:9/v1",
        llm_api_key="sk-x",
        llm_model="qwen2.5",
        llm_timeout_s=5,
        llm_max_retries=4,
    )
    extractor = LLMExtractor.from_settings(settings)
    try:
        assert isinstance(extractor, Extractor)
        assert (extractor.name, extractor.version) == ("llm", "2")
        assert (extractor.base_url, extractor.model) == ("http://127.0.0.1:9/v1", "qwen2.5")
        assert (extractor.timeout_s, extractor.max_retries) == (5, 4)
    finally:
        extractor.close()


# --- claims against the user's current claims ---------------------------------------------

HOME = KnownClaim("mem-home", Claim(subject="User", attribute="home", value="Porto",
                                    valid_from=AT - timedelta(days=30)))
DIET = KnownClaim("mem-diet", Claim(subject="User", attribute="diet", value="vegetarian",
                                    valid_from=AT - timedelta(days=60)))


def claim_item(attribute: str, value: str, operation: str = "add", target: Any = None,
               **more: Any) -> dict[str, Any]:
    return {"reasoning": "because", "subject": "User", "attribute": attribute, "value": value,
            "polarity": True, "cardinality": "one", "operation": operation, "target": target,
            "valid_until": None, **more}


def fact(content: str, claim: Any, source: str = "m2") -> dict[str, Any]:
    return {"content": content, "importance": 0.8, "source_event_ids": [source], "claim": claim}


def extract_claims(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor],
    facts: list[dict[str, Any]], known: tuple[KnownClaim, ...] = (HOME, DIET),
) -> tuple[dict[str, Claim | None], ScriptedServer]:
    reply = {"preferences": [], "facts": facts, "summary": ""}
    server = serve(Reply(completion(json.dumps(reply))))
    extraction = make_extractor(server.base_url).extract(TRIP, known)
    return {c.content: c.claim for c in extraction.candidates}, server


def test_the_model_sees_the_current_claims_numbered_and_its_operations_name_memories(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    claims, server = extract_claims(serve, make_extractor, [
        fact("User lives in Lisbon", claim_item("home", "Lisbon", "update", 2)),
        fact("User is no longer vegetarian",
             claim_item("diet", "vegetarian", "retract", 1, polarity=False), source="m0"),
    ])
    shown = json.loads(
        server.received[0].body["messages"][1]["content"].split("\n\n")[0].split("\n", 1)[1]
    )
    # The newest first, by number; memory ids never reach the model.
    assert [(c["n"], c["attribute"], c["value"]) for c in shown] == [
        (1, "home", "Porto"), (2, "diet", "vegetarian"),
    ]
    assert "mem-home" not in server.received[0].body["messages"][1]["content"]
    # Number 2 is the diet, not the home: the model's numbers are taken as it gave them...
    lisbon = claims["User lives in Lisbon"]
    assert lisbon is not None and (lisbon.operation, lisbon.target) == ("update", "mem-diet")
    assert lisbon.valid_from == AT + timedelta(minutes=2)  # the turn it cites
    # ... and a retraction takes the value back, from the turn that said so.
    gone = claims["User is no longer vegetarian"]
    assert gone is not None and (gone.operation, gone.target, gone.polarity) == (
        "retract", "mem-home", False
    )


@pytest.mark.parametrize("target", [0, 3, 99, -1, None])
def test_an_operation_on_a_claim_the_model_was_not_shown_is_left_to_the_rules(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor],
    target: Any,
) -> None:
    claims, _ = extract_claims(serve, make_extractor, [
        fact("User lives in Lisbon", claim_item("home", "Lisbon", "update", target)),
    ])
    claim = claims["User lives in Lisbon"]
    assert claim is not None and (claim.operation, claim.target) == (None, None)
    assert (claim.attribute, claim.value) == ("home", "Lisbon")


def test_contradictory_operations_keep_the_first_and_leave_the_rest_to_the_rules(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor]
) -> None:
    claims, _ = extract_claims(serve, make_extractor, [
        fact("User lives in Lisbon", claim_item("home", "Lisbon", "update", 1)),
        fact("User lives in Madrid", claim_item("home", "Madrid", "update", 1)),
        fact("User lives in Porto", claim_item("home", "Porto", "update", 1)),
        fact("User is vegetarian", claim_item("diet", "vegetarian", "update", 2)),
    ])
    assert claims["User lives in Lisbon"].operation == "update"  # type: ignore[union-attr]
    assert claims["User lives in Madrid"].operation is None  # type: ignore[union-attr]
    assert claims["User lives in Porto"].operation is None  # type: ignore[union-attr]
    # "Update" to the value it already holds: a repeat.
    assert claims["User is vegetarian"].operation == "none"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "broken",
    [
        "not an object",
        {"attribute": "home"},  # no value
        {"attribute": "home", "value": "Lisbon", "operation": "obliterate"},
        {"attribute": "home", "value": "Lisbon", "target": "two"},
        {"attribute": "home", "value": "Lisbon", "cardinality": 7},
        ["home", "Lisbon"],
    ],
    ids=repr,
)
def test_a_malformed_claim_costs_its_fact_the_claim_not_the_reply(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor],
    broken: Any,
) -> None:
    claims, server = extract_claims(serve, make_extractor, [
        fact("User lives in Lisbon", broken),
        fact("User is vegan", claim_item("diet", "vegan", "update", 2)),
    ])
    assert len(server.received) == 1  # no retry: the reply itself was fine
    assert claims["User lives in Lisbon"] is None
    assert claims["User is vegan"] is not None


@pytest.mark.parametrize(
    ("stated", "kept"),
    [
        ("2026-11-08", True),
        ("2026-11-08T18:00:00+00:00", True),
        ("2020-01-01", False),  # before it was said
        ("2031-01-01", False),  # years ahead: not a stated end
        ("next friday", False),
        ("9999-12-31T23:59:59-14:00", False),
    ],
)
def test_a_stated_end_is_kept_only_when_it_is_a_time_after_the_turn(
    serve: Callable[..., ScriptedServer], make_extractor: Callable[..., LLMExtractor],
    stated: str, kept: bool,
) -> None:
    claims, _ = extract_claims(serve, make_extractor, [
        fact("User is in Hamburg this week",
             claim_item("whereabouts", "Hamburg", valid_until=stated)),
    ])
    claim = claims["User is in Hamburg this week"]
    assert claim is not None and (claim.valid_until is not None) == kept
