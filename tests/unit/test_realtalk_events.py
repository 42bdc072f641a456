"""REALTALK's annotated events as an extraction check (``benchmarks/realtalk_events.py``): an
event is held only against its own speaker's texts as they stood at the end of its session,
whatever kind of text (memory, raw turn, turn window), and the extractor is the one asked for.
The data set is not in the repository: these tests are skipped where it is missing."""

from __future__ import annotations

import doctest
import json
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
import realtalk_events
from llm_server import Reply, ScriptedServer, completion
from realtalk import DEFAULT_DATA, LifeEvent, load
from realtalk_events import ANY_CITED, MEMORIES, TURNS, WINDOWS, Vectoriser, judge, kinds_of_text

from memstream.models.extraction import OfflineExtractor
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection

needs_data = pytest.mark.skipif(
    not any(DEFAULT_DATA.glob("Chat_*.json")), reason=f"REALTALK is not in {DEFAULT_DATA}"
)
CHAT = "Chat_1_Emi_Elise"


@needs_data
def test_every_event_is_judged_by_its_own_speakers_texts_of_its_session_and_before(
    tmp_path: Path,
) -> None:
    """Two sessions of one chat, built offline. Beside the annotated events, one of Elise's
    turns is planted word for word as an event of Elise's and as one of Emi's: Elise's turn
    and the episode made of it state the first; for the second, Emi's, neither counts
    (only when an episode is taken as its neighbours' too, as Emi's turn beside it)."""
    [chat] = load(chats=[CHAT])
    chat = realtalk_events.first_sessions(chat, 2)
    first = chat.sessions[0]
    said = next(
        turn for before, turn in pairwise(first)
        if turn.speaker == "elise" and before.speaker == "Emi" and len(turn.text.split()) >= 12
        and " ".join(turn.text.split()) == turn.text
    )
    planted = realtalk_events.turn_line(said)
    chat = replace(chat, life_events=[
        *chat.life_events,
        LifeEvent(said.session, "elise", planted),
        LifeEvent(said.session, "Emi", planted),
    ])
    embedder = MiniLMOnnxEmbedder()
    built, failed = realtalk_events.built_memories(
        MemoryProjection(tmp_path, embedder), embedder, [chat], ["named"], OfflineExtractor()
    )
    assert failed == 0
    judged = judge(chat, "named", kinds_of_text(chat, built[CHAT, "named"]), Vectoriser(embedder))

    assert len(judged) == len(chat.life_events) > 2
    speaker_of = {turn.dia_id: turn.speaker for turn in chat.turns}
    ends = realtalk_events.session_ends(chat)
    for j in judged:
        for name, best in j.best.items():
            if best.text is None:
                continue
            assert j.event.speaker in best.text.speakers, (name, j.event)
            assert best.text.made_at <= ends[j.event.session], (name, j.event)
        turn = j.best[TURNS].text
        assert turn is not None and speaker_of[turn.cited[0]] == j.event.speaker
        assert j.best[WINDOWS].text is not None
        assert -1.0 <= j.best[TURNS].cosine <= 1.0001
    by_elise, by_emi = judged[-2], judged[-1]
    assert by_elise.best[TURNS].cosine > 0.99 and by_elise.best[TURNS].text.cited == (said.dia_id,)
    assert by_elise.best[MEMORIES].cosine > 0.95
    assert by_elise.best[MEMORIES].text.kind == "episode"
    assert by_emi.best[TURNS].cosine < 0.95 and by_emi.best[MEMORIES].cosine < 0.95
    assert by_emi.best[ANY_CITED].cosine > 0.95


@needs_data
def test_the_llm_extractor_is_asked_once_per_session_and_its_memories_judged(
    tmp_path: Path,
) -> None:
    """``--extractor llm`` against a scripted OpenAI-compatible server, two sessions: the
    first goes to the model named, and the fact it returns (Emi's, citing her turn) states
    her event and is never held against Elise's; the second gets only server errors, and is
    counted as failed after its three attempts. A projection of another extractor is
    refused."""
    [chat] = load(chats=[CHAT])
    session = chat.sessions[0]
    emis = next(turn for turn in session if turn.speaker == "Emi")
    event = next(e for e in chat.life_events if e.session == emis.session and e.speaker == "Emi")
    reply = {
        "preferences": [],
        "facts": [{"content": event.text, "importance": 0.8, "source_event_ids": [emis.dia_id]}],
        "summary": "Two friends talked about their plans for the winter break.",
        "entities": [],
        "corrections": [],
    }
    server = ScriptedServer([Reply(completion(json.dumps(reply), model="scripted"))])
    server.start()
    figures = tmp_path / "figures.json"
    try:
        code = realtalk_events.main([
            "--chats", CHAT, "--sessions", "2", "--projection", str(tmp_path / "built"),
            "--extractor", "llm", "--llm-url", server.base_url, "--llm-model", "scripted",
            "--json", str(figures),
        ])
    finally:
        server.stop()
    assert code == 0
    assert len(server.received) == 1 + 3 and server.received[0].body["model"] == "scripted"
    assert emis.text.split()[0] in json.dumps(server.received[0].body["messages"])
    out = json.loads(figures.read_text(encoding="utf-8"))
    assert out["extractor"] == "llm" and out["failed_sessions"] == 1
    events = out["variants"]["named"]["events"]
    stated = next(e for e in events if e["event"] == event.text)
    assert stated["best"][MEMORIES]["cosine"] > 0.99
    assert stated["best"][MEMORIES]["kind"] == "fact"
    for other in (e for e in events if e["speaker"] == "elise"):
        assert other["best"][MEMORIES]["kind"] in ("summary", None)
    assert realtalk_events.main(
        ["--chats", CHAT, "--sessions", "1", "--projection", str(tmp_path / "built")]
    ) == 2


def test_the_judges_examples_run() -> None:
    result = doctest.testmod(realtalk_events)
    assert result.attempted > 0 and result.failed == 0
