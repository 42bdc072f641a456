"""REALTALK: real 21-day chats between pairs of people, with questions and evidence turns.

Lee, Maharana, Pujara, Ren, Barbieri, "REALTALK: A 21-Day Real-World Dataset for Long-Term
Conversation", arXiv 2502.13270, 2025 (public repository danny911kr/REALTALK, ``data/*.json``).
Nobody on this team wrote these conversations: recall measured on them says how memstream
does on chats it was not written for. The data set is not part of the repository; it is read
from ``../shared/datasets/realtalk`` beside the checkout (``--data`` elsewhere), and the
benchmark says so and stops when it is missing.

This module only reads the files. Each chat becomes a :class:`Chat`: its sessions (the turns
oldest first, each with its ``dia_id``, speaker, text and the moment it was sent), its
questions with their evidence turns, and the events the authors annotated per session.
An event's speaker is read from its side, which the files do not name: ``agent_a`` is
``name.speaker_1``, ``agent_b`` is ``name.speaker_2``. So the events read, in every file: of
the 593 non-empty ones, 591 name their side's speaker (by name, a misspelling such as
"Muhammad", or "Kate", as Emi introduces herself in Chat 1), 587 as their first word; two
name nobody ("Looking for additional manga recommendations to read"); none names only the
other speaker.

Evidence ids are written by hand and some are malformed (``"D1:11; D3:18"``, ``"D5:3."``,
``"D12:3-D12:5"``): :func:`evidence_ids` splits lists, strips punctuation and expands a
range within one session; an id that still names no turn of its file is dropped, and a
question left with none is left out (the data set's README). A ``dia_id``'s number does not
always match its session, so a turn's session is read from where the turn is, never from
its id.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from dialogues import Question

#: Where the data set sits beside a checkout of the repository.
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "realtalk"
#: The data set's question categories, by number.
CATEGORIES = {1: "multi-hop", 2: "time", 3: "inference"}
_SESSION_KEY = re.compile(r"session_(\d+)")
_ID = re.compile(r"D\s*(\d+)\s*:\s*(\d+)")
_RANGE = re.compile(r"D(\d+):(\d+)\s*-\s*D(\d+):(\d+)")
#: Between the ids of one evidence string: ';', ',', a full stop and a space, or a space
#: before the next id.
_SEPARATOR = re.compile(r"[;,]|\.\s|\s(?=D)")


@dataclass(frozen=True)
class Turn:
    """One message of a chat."""

    dia_id: str
    #: The session's number in the file (``session_N``), 1 first.
    session: int
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True)
class LifeEvent:
    """One event of a speaker's life the authors noted for a session (a ``sub-event``)."""

    #: The session's number in the file (``session_N``), as :attr:`Turn.session`.
    session: int
    #: The speaker it happened to, as the turns spell the name.
    speaker: str
    text: str


@dataclass
class Chat:
    """One REALTALK file: two people's chat over about 21 days."""

    #: The file's stem, e.g. ``Chat_1_Emi_Elise``.
    name: str
    #: ``speaker_1``, then ``speaker_2`` (as the turns spell them).
    speakers: tuple[str, str]
    sessions: list[list[Turn]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    #: Per session, what the authors noted happened in each speaker's life (``sub-event``).
    events: list[list[str]] = field(default_factory=list)
    #: The same events with their session and speaker; empty ``sub-event``\ s left out.
    life_events: list[LifeEvent] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session]

    def session_of(self) -> dict[str, int]:
        """``dia_id`` -> the number of the session that holds the turn."""
        return {turn.dia_id: turn.session for turn in self.turns}


def evidence_ids(raw: str, known: Iterable[str]) -> list[str]:
    """The turn ids one hand-written evidence string names, of those in ``known``.

    Examples
    --------
    >>> known = {"D1:11", "D3:18", "D5:3", "D12:3", "D12:4", "D12:5"}
    >>> evidence_ids("D1:11; D3:18", known), evidence_ids("D5:3.", known)
    (['D1:11', 'D3:18'], ['D5:3'])
    >>> evidence_ids("D12:3-D12:5", known), evidence_ids("D9:9", known)
    (['D12:3', 'D12:4', 'D12:5'], [])
    """
    wanted = set(known)
    found: list[str] = []
    for part in _SEPARATOR.split(raw):
        part = part.strip().rstrip(".")
        span = _RANGE.fullmatch(part)
        if span is not None and span.group(1) == span.group(3):
            first, last = int(span.group(2)), int(span.group(4))
            found += [f"D{span.group(1)}:{n}" for n in range(first, last + 1)]
            continue
        single = _ID.fullmatch(part)
        if single is not None:
            found.append(f"D{single.group(1)}:{single.group(2)}")
    return [turn for turn in dict.fromkeys(found) if turn in wanted]


def _moment(text: str) -> datetime:
    """``"29.12.2023, 22:42:04"`` (day first) as an aware time; the files give no zone."""
    return datetime.strptime(text.strip(), "%d.%m.%Y, %H:%M:%S").replace(tzinfo=UTC)


def load_chat(path: Path) -> Chat:
    """One REALTALK file as a :class:`Chat` (see the module docstring for what is cleaned)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    names = raw["name"]
    numbers = sorted(
        int(match.group(1))
        for key in raw
        if (match := _SESSION_KEY.fullmatch(key)) is not None
    )
    chat = Chat(path.stem, (names["speaker_1"], names["speaker_2"]))
    for number in numbers:
        turns = [
            Turn(t["dia_id"], number, t["speaker"], t["clean_text"].strip(), _moment(t["date_time"]))
            for t in raw[f"session_{number}"]
            if t["clean_text"].strip()
        ]
        if turns:
            chat.sessions.append(turns)
        events = raw.get(f"events_session_{number}", {})
        chat.events.append(
            [e["sub-event"] for side in ("agent_a", "agent_b") for e in events.get(side, [])]
        )
        chat.life_events += [
            LifeEvent(number, speaker, e["sub-event"].strip())
            for side, speaker in zip(("agent_a", "agent_b"), chat.speakers, strict=True)
            for e in events.get(side, [])
            if e["sub-event"].strip()
        ]
    known = {turn.dia_id for turn in chat.turns}
    for entry in raw["qa"]:
        evidence = tuple(
            dict.fromkeys(turn for text in entry["evidence"] for turn in evidence_ids(text, known))
        )
        if evidence:
            chat.questions.append(
                Question(entry["question"], str(entry["answer"]), CATEGORIES[entry["category"]],
                         evidence)
            )
    return chat


def load(folder: Path = DEFAULT_DATA, *, chats: Sequence[str] = ()) -> list[Chat]:
    """Every chat of the data set in ``folder`` (or only those whose file stem is in
    ``chats``), in file-name order.

    Raises
    ------
    FileNotFoundError
        ``folder`` holds no ``Chat_*.json`` (the data set is not there).
    """
    paths = sorted(folder.glob("Chat_*.json"), key=lambda p: _chat_number(p.stem))
    if not paths:
        raise FileNotFoundError(
            f"no REALTALK chats (Chat_*.json) in {folder}: pass --data with the data set's folder"
        )
    if chats:
        paths = [p for p in paths if p.stem in set(chats)]
    return [load_chat(path) for path in paths]


def _chat_number(stem: str) -> int:
    match = re.match(r"Chat_(\d+)", stem)
    return int(match.group(1)) if match else 0


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every REALTALK script takes: where the data is, and which chats."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="the REALTALK folder (Chat_*.json); default: "
                             "../shared/datasets/realtalk beside the checkout")
    parser.add_argument("--chats", nargs="*", default=(),
                        help="only these chats (file stems, e.g. Chat_1_Emi_Elise)")
