"""Extraction check on REALTALK's annotated events: the share of what happened in each
speaker's life that some memory of theirs states, beside the share the raw turns state, in
the same run and by the same judge.

Issue 40, item 6. REALTALK (Lee et al., 2025, arXiv 2502.13270; ``realtalk.py``) lists per
session the events of each speaker's life as its authors read them from the chat
(``events_session_N``: "Kate takes an Italian cooking class and makes pasta."), 593 of them
in 219 sessions: a reference list of what an extractor should have found. ``agent_a`` is
the file's ``speaker_1`` and ``agent_b`` its ``speaker_2`` (the files do not say; the events'
own words do: 591 of the 593 name their side's speaker, none only the other one; see
``realtalk.py``).

Each chat is built as ``realtalk_recall.py --offline`` builds it (one memstream user per chat
and variant, ``speaker_1`` as role user, each turn's ``dia_id`` its event id, one request
per session through :func:`quality.build_extracted`, the extractor of ``--extractor``), or
taken from ``--projection`` when that folder already holds the chat's users. Then every
event of session N is held against three kinds of text, each only of the event's own speaker
and only as it stood at the end of session N (that session and the earlier ones):

* **memories**: every memory of the chat's user made by then (``list_memories`` with
  ``include_inactive``: superseded and expired memories count, for the extractor did state
  them), read by its ``content``. A memory is the speaker's when the turns it was made from
  include one of theirs: a fact's or preference's cited turns, a summary's (every turn of
  its session); an episode's own turn only (its first source), not the neighbouring turns
  its context shows, which a raw turn has no equivalent of. Also reported: the memories
  still current at the session's end, the memories with every cited turn counted (an
  episode is then its neighbours' too), and each memory type alone;
* **raw turns**: each turn of the speaker alone, as ``"Speaker: text"`` (the plain search's
  rows in ``realtalk_recall.py``; an episode's content is written the same way);
* **turn windows**: each turn of the speaker with the turn before and after it in its
  session, the three as lines of one text (what an episode's context shows).

The judge is one general mechanism, no phrase list: the cosine of the event's sentence and
the text under memstream's own embedder (``MiniLMOnnxEmbedder``, all-MiniLM-L6-v2); an
event is *stated* by a kind of text when the best cosine over its texts reaches a threshold.
Both speakers' names are left out of every text compared (:func:`without_names`; the
event's, a turn's ``"Speaker: "``, a memory's "Tom works at ..."): which speaker a text is
of is settled by its turns, and a name alone is most of a cosine ("Nicolas is studying"
scores 0.63 against "Nicolas: lol", 0.01 against "lol"), so with names kept (``--keep-names``)
nearly every event of a chat of a thousand turns is "stated" by some turn. A name the
events use and the chat's ``name`` field does not ("Kate", as Emi introduces herself) stays.
The figures are the share of events stated at 0.5, 0.6 and 0.7, and the mean best cosine
(0 for an event with no text of its kind), overall and per chat; ``--json`` adds every
session and every event with its best text of each kind.

Run from the repository root. The offline build takes about as long as
``realtalk_recall.py --offline``'s (15 minutes for both variants on a quiet machine); judging
about 5-6 CPU-minutes per variant, most of it embedding some 27,000 texts::

    python benchmarks/realtalk_events.py --projection /tmp/realtalk-built
    python benchmarks/realtalk_events.py --projection /tmp/realtalk-built --variants unnamed
    python benchmarks/realtalk_events.py --chats Chat_1_Emi_Elise --sessions 3 \\
        --extractor llm --llm-url http://localhost:8000/v1 --llm-model qwen2.5-7b-instruct
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import numpy as np
from quality import build_extracted
from realtalk import Chat, LifeEvent, Turn, add_data_arguments, load
from realtalk_recall import VARIANTS, transcripts, user_id
from runner import exit_on_sigterm, log, release

from memstream.models.extraction import Extractor
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, MiniLMOnnxEmbedder, Vectors
from memstream.projections.memories import MemoryProjection, MemoryRecord
from memstream.streams.agents.app import extractor_from_settings

THRESHOLDS = (0.5, 0.6, 0.7)
#: The threshold the per-chat table and the overlaps are given at.
HEADLINE = 0.6
MEMORIES = "memories"
CURRENT = "memories current at the session's end"
ANY_CITED = "memories, every cited turn"
TURNS = "raw turns (each alone)"
WINDOWS = "turn windows (with the turns around)"
#: The kinds of text of the headline comparison, in the tables' order, and their columns.
MAIN = (MEMORIES, TURNS, WINDOWS)
LABELS = ("memories", "raw turns", "turn windows")
#: Memory types, in the order they are listed (a type no memory has is left out).
TYPES = ("fact", "preference", "correction", "episode", "summary", "entity", "task")
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Text:
    """One text that may state an event: a memory, a turn or a turn window."""

    text: str
    #: The memory's type; "turn" or "window" for the raw references.
    kind: str
    #: The speakers whose events it may state.
    speakers: frozenset[str]
    #: The turns it cites (``dia_id``).
    cited: tuple[str, ...]
    #: Event time it existed from: a memory's ``created_at``, a turn's moment.
    made_at: datetime
    #: Event time it stopped being current (a memory superseded or expired); None: current.
    ended_at: datetime | None = None


@dataclass(frozen=True)
class Best:
    """The best text of one kind for one event, by cosine; ``text`` None when none was
    eligible (the cosine is then 0)."""

    cosine: float
    text: Text | None


@dataclass(frozen=True)
class Judged:
    """One event, and the best text of each kind (by the names of :func:`kinds_of_text`)."""

    chat: str
    variant: str
    event: LifeEvent
    best: Mapping[str, Best]


# --- the texts --------------------------------------------------------------------------


def turn_line(turn: Turn) -> str:
    """A turn as the plain search stores it, and an episode writes it."""
    return f"{turn.speaker}: {turn.text}"


def turn_texts(chat: Chat) -> tuple[list[Text], list[Text]]:
    """Each turn alone, and each turn with the turns before and after it in its session;
    both the turn's speaker's only."""
    alone, windows = [], []
    for session in chat.sessions:
        for index, turn in enumerate(session):
            around = session[max(0, index - 1) : index + 2]
            speakers = frozenset({turn.speaker})
            alone.append(Text(turn_line(turn), "turn", speakers, (turn.dia_id,), turn.at))
            windows.append(Text(
                "\n".join(turn_line(t) for t in around), "window", speakers,
                tuple(t.dia_id for t in around), turn.at,
            ))
    return alone, windows


def memory_texts(
    chat: Chat, records: Iterable[MemoryRecord], *, every_cited_turn: bool = False
) -> list[Text]:
    """The memories as texts, each the speakers' of the turns it was made from: an episode's
    own turn (its first source) unless ``every_cited_turn``; every cited turn of the chat
    otherwise. A memory citing no turn of the chat is left out."""
    speaker_of = {turn.dia_id: turn.speaker for turn in chat.turns}
    texts = []
    for record in records:
        cited = tuple(t for t in record.source_event_ids if t in speaker_of)
        own = cited[:1] if record.memory_type == "episode" and not every_cited_turn else cited
        if not own:
            continue
        ended = record.ended_at
        if ended is None and record.status != "active":
            # Left the view without a recorded time (a row from before ended_at existed):
            # treat it as ended when made, so "current" never counts it.
            ended = record.created_at
        texts.append(Text(
            record.content, record.memory_type, frozenset(speaker_of[t] for t in own), cited,
            record.created_at, ended,
        ))
    return texts


def kinds_of_text(chat: Chat, records: Sequence[MemoryRecord]) -> dict[str, list[Text]]:
    """Every kind of text one chat's events are held against, by name."""
    memories = memory_texts(chat, records)
    alone, windows = turn_texts(chat)
    kinds = {
        MEMORIES: memories,
        CURRENT: memories,  # the same texts; :func:`judge` keeps the current ones
        ANY_CITED: memory_texts(chat, records, every_cited_turn=True),
    }
    for memory_type in TYPES:
        of_type = [text for text in memories if text.kind == memory_type]
        if of_type:
            kinds[f"  {memory_type}"] = of_type
    kinds[TURNS] = alone
    kinds[WINDOWS] = windows
    return kinds


# --- the judge --------------------------------------------------------------------------


class Vectoriser:
    """Texts to unit vectors, each distinct text embedded once per run."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._known: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> Vectors:
        new = list(dict.fromkeys(t for t in texts if t not in self._known))
        if new:
            for text, vector in zip(new, self.embedder.embed(new), strict=True):
                self._known[text] = vector
        if not texts:
            return np.empty((0, self.embedder.dimensions), dtype=np.float32)
        return np.stack([self._known[text] for text in texts])


def session_ends(chat: Chat) -> dict[int, datetime]:
    """Each session's number -> the moment of its last turn."""
    return {session[0].session: session[-1].at for session in chat.sessions}


def is_name(word: str, names: Iterable[str]) -> bool:
    """Whether ``word`` is one of ``names`` (lower-case words): the same word in any case, or,
    capitalised, one spelt a little differently (the same first letter, at most two letters
    more or fewer, difflib's ratio at least 0.75: "Poala", "Muhammad" for "muhhamed"; a
    capitalised "Else" too, rare enough).

    Examples
    --------
    >>> [is_name(w, ["elise", "akib"]) for w in ("elise", "Akim", "Eliza", "else", "Else")]
    [True, True, False, False, True]
    """
    lower = word.lower()
    for name in names:
        if lower == name:
            return True
        if (
            word[:1].isupper() and lower[:1] == name[:1] and abs(len(lower) - len(name)) <= 2
            and len(lower) >= 3 and SequenceMatcher(None, lower, name).ratio() >= 0.75
        ):
            return True
    return False


def without_names(text: str, names: Sequence[str]) -> str:
    """``text`` with every word that is one of ``names`` left out (:func:`is_name`).

    Examples
    --------
    >>> without_names("Nicolas: I'm studying for my exam, Nebraas", ["nicolas", "nebraas"])
    ": I'm studying for my exam,"
    """
    kept = _WORD.sub(lambda m: "" if is_name(m.group(), names) else m.group(), text)
    return " ".join(kept.split())


def judge(
    chat: Chat, variant: str, kinds: Mapping[str, Sequence[Text]], vectorise: Vectoriser, *,
    keep_names: bool = False,
) -> list[Judged]:
    """Every annotated event of ``chat`` with the best text of each kind: the highest cosine
    over the texts of the event's speaker that existed at the end of the event's session
    (for :data:`CURRENT`, and still were current then).

    The two speakers' names are left out of every text compared, the event's included,
    unless ``keep_names``: which speaker a text is of is settled by its turns, and the name
    alone is most of a cosine ("Nicolas is studying" and "Nicolas: lol" score 0.63)."""
    ends = session_ends(chat)
    events = [event for event in chat.life_events if event.session in ends]
    if not events:
        return []
    names = [] if keep_names else [word.lower() for name in chat.speakers for word in name.split()]

    def compared(texts: Iterable[str]) -> Vectors:
        return vectorise([without_names(text, names) if names else text for text in texts])

    event_vectors = compared(event.text for event in events)
    best: list[dict[str, Best]] = [{} for _ in events]
    for name, texts in kinds.items():
        cosines = event_vectors @ compared(text.text for text in texts).T
        made = np.array([text.made_at.timestamp() for text in texts])
        ended = np.array([
            np.inf if text.ended_at is None or name != CURRENT else text.ended_at.timestamp()
            for text in texts
        ])
        of_speaker = {
            speaker: np.array([speaker in text.speakers for text in texts], dtype=bool)
            for speaker in chat.speakers
        }
        for row, event in enumerate(events):
            end = ends[event.session].timestamp()
            eligible = of_speaker[event.speaker] & (made <= end) & (ended > end)
            if not eligible.any():
                best[row][name] = Best(0.0, None)
                continue
            scores = np.where(eligible, cosines[row], -np.inf)
            top = int(np.argmax(scores))
            best[row][name] = Best(float(scores[top]), texts[top])
    return [Judged(chat.name, variant, event, found) for event, found in zip(events, best, strict=True)]


# --- the figures ------------------------------------------------------------------------


def figures(judged: Sequence[Judged], kind: str) -> dict[str, float]:
    """The share of ``judged`` stated at each threshold, and the mean best cosine."""
    cosines = [j.best[kind].cosine for j in judged if kind in j.best]
    out = {
        f"stated@{t}": round(sum(c >= t for c in cosines) / len(cosines), 4) if cosines else 0.0
        for t in THRESHOLDS
    }
    out["mean_best_cosine"] = round(statistics.fmean(cosines), 4) if cosines else 0.0
    out["events"] = len(cosines)
    return out


def kind_names(judged: Sequence[Judged]) -> list[str]:
    """The kinds of text of ``judged``, in the order they were judged."""
    return list(dict.fromkeys(name for j in judged for name in j.best))


def as_json(judged: Sequence[Judged], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The figures as plain data: per variant, overall, per chat, per session, per event."""
    out: dict[str, Any] = {**meta, "thresholds": list(THRESHOLDS), "variants": {}}
    for variant in dict.fromkeys(j.variant for j in judged):
        of_variant = [j for j in judged if j.variant == variant]
        names = kind_names(of_variant)
        chats: dict[str, Any] = {}
        for chat in dict.fromkeys(j.chat for j in of_variant):
            of_chat = [j for j in of_variant if j.chat == chat]
            sessions = {
                str(n): {name.strip(): figures([j for j in of_chat if j.event.session == n], name)
                         for name in MAIN}
                for n in sorted({j.event.session for j in of_chat})
            }
            chats[chat] = {
                "overall": {name.strip(): figures(of_chat, name) for name in names},
                "sessions": sessions,
            }
        out["variants"][variant] = {
            "overall": {name.strip(): figures(of_variant, name) for name in names},
            "chats": chats,
            "events": [
                {
                    "chat": j.chat, "session": j.event.session, "speaker": j.event.speaker,
                    "event": j.event.text,
                    "best": {
                        name.strip(): {
                            "cosine": round(found.cosine, 4),
                            "kind": found.text.kind if found.text else None,
                            "text": found.text.text if found.text else None,
                            "cites": list(found.text.cited) if found.text else [],
                        }
                        for name, found in j.best.items() if name in (*MAIN, CURRENT, ANY_CITED)
                    },
                }
                for j in of_variant
            ],
        }
    return out


def print_tables(judged: Sequence[Judged], misses: int) -> None:
    """Per variant: every kind of text overall, the headline kinds per chat, the overlap of
    memories and raw turns at :data:`HEADLINE`, and ``misses`` events a turn states and no
    memory does."""
    for variant in dict.fromkeys(j.variant for j in judged):
        of_variant = [j for j in judged if j.variant == variant]
        names = kind_names(of_variant)
        width = max(len(name) for name in names)
        print(f"\n## variant {variant}: {len(of_variant)} events; share stated at cosine >= "
              "threshold, and mean best cosine")
        print(f"{'':{width}}  " + "  ".join(f"{'>= ' + str(t):>7}" for t in THRESHOLDS)
              + "  mean best")
        for name in names:
            row = figures(of_variant, name)
            print(f"{name:{width}}  " + "  ".join(f"{row[f'stated@{t}']:7.3f}" for t in THRESHOLDS)
                  + f"  {row['mean_best_cosine']:9.3f}")
        print(f"\nper chat, stated at >= {HEADLINE} (mean best cosine)")
        print(f"{'chat':24} {'events':>6}  " + "  ".join(f"{label:>16}" for label in LABELS))
        for chat in dict.fromkeys(j.chat for j in of_variant):
            of_chat = [j for j in of_variant if j.chat == chat]
            cells = []
            for name in MAIN:
                row = figures(of_chat, name)
                cells.append(f"{row[f'stated@{HEADLINE}']:7.3f} ({row['mean_best_cosine']:.3f})")
            print(f"{chat:24} {len(of_chat):6}  " + "  ".join(f"{c:>16}" for c in cells))
        overlap = Counter(
            (j.best[MEMORIES].cosine >= HEADLINE, j.best[TURNS].cosine >= HEADLINE)
            for j in of_variant
        )
        print(f"\nat >= {HEADLINE}: both {overlap[True, True]}, memories only "
              f"{overlap[True, False]}, raw turns only {overlap[False, True]}, neither "
              f"{overlap[False, False]}")
        winners = Counter(
            found.text.kind for found in (j.best[MEMORIES] for j in of_variant)
            if found.text is not None and found.cosine >= HEADLINE
        )
        print("best memory of the events memories state, by type: "
              + ", ".join(f"{kind} {n}" for kind, n in winners.most_common()))
        missed = sorted(
            (j for j in of_variant
             if j.best[TURNS].cosine >= HEADLINE > j.best[MEMORIES].cosine),
            key=lambda j: j.best[MEMORIES].cosine - j.best[TURNS].cosine,
        )
        for j in missed[:misses]:
            turn, memory = j.best[TURNS], j.best[MEMORIES]
            print(f"\n- {j.chat} s{j.event.session} {j.event.speaker}: {j.event.text}\n"
                  f"  turn   {turn.cosine:.3f}  {turn.text.text if turn.text else ''}\n"
                  f"  memory {memory.cosine:.3f}  "
                  f"{memory.text.kind + ': ' + memory.text.text if memory.text else '(none)'}")


# --- building -----------------------------------------------------------------------------


def first_sessions(chat: Chat, sessions: int | None) -> Chat:
    """``chat`` cut to its first ``sessions`` sessions (their events and questions too)."""
    if sessions is None:
        return chat
    kept = chat.sessions[:sessions]
    numbers = {session[0].session for session in kept}
    turns = {turn.dia_id for session in kept for turn in session}
    return replace(
        chat, sessions=kept, events=chat.events[:sessions],
        life_events=[e for e in chat.life_events if e.session in numbers],
        questions=[q for q in chat.questions if set(q.evidence) <= turns],
    )


def extractor_of(args: argparse.Namespace) -> Extractor:
    """The extractor ``--extractor`` names, as the worker builds it from its settings."""
    updates: dict[str, Any] = {"extractor": args.extractor}
    if args.extractor == "llm":
        updates.update(llm_base_url=args.llm_url, llm_model=args.llm_model,
                       llm_timeout_s=args.llm_timeout)
    return extractor_from_settings(Settings().model_copy(update=updates))


def built_memories(
    projection: MemoryProjection, embedder: MiniLMOnnxEmbedder, chats: Sequence[Chat],
    variants: Sequence[str], extractor: Extractor,
) -> tuple[dict[tuple[str, str], list[MemoryRecord]], int]:
    """(chat, variant) -> every memory of its user, any status; and the sessions whose
    extraction failed. The users ``projection`` does not hold yet are built first with
    ``extractor``.

    Raises
    ------
    ValueError
        A user the projection holds has memories of another extractor.
    """
    failed = 0
    missing = [
        (chat, variant) for chat in chats for variant in variants
        if projection.count(user_id(chat, variant)) == 0
    ]
    if missing:
        turns = sum(len(chat.turns) for chat, _ in missing)
        log(f"building {len(missing)} users ({turns} turns) with the {extractor.name} extractor")
        conversations = [
            conversation
            for chat, variant in missing
            for conversation in transcripts([chat], [variant])
        ]
        failed = len(build_extracted(conversations, projection, embedder,
                                     extractor=extractor).failed)
        if failed:
            log(f"{failed} sessions' extraction failed: their turns have no memories")
    records = {}
    for chat in chats:
        for variant in variants:
            held = projection.list_memories(user_id(chat, variant), include_inactive=True)
            others = {
                r.extractor for r in held
                if r.extractor and r.memory_type != "task"
                and r.extractor.split("/")[0] != extractor.name
            }
            if others:
                raise ValueError(
                    f"the projection holds {user_id(chat, variant)} built by {sorted(others)}, "
                    f"not the {extractor.name} extractor: pass another --projection"
                )
            records[chat.name, variant] = held
    return records, failed


def main(argv: list[str] | None = None) -> int:
    """Load REALTALK, build (or reuse) the chats' memories, judge every event, print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_data_arguments(parser)
    parser.add_argument("--sessions", type=int, help="only each chat's first N sessions")
    parser.add_argument("--variants", nargs="*", choices=VARIANTS, default=["named"])
    parser.add_argument("--projection", type=Path,
                        help="build the memories in this folder, or read the users it "
                             "already holds (built with the same extractor)")
    parser.add_argument("--extractor", choices=("offline", "llm"), default="offline")
    parser.add_argument("--llm-url", help="with --extractor llm: the OpenAI-compatible API "
                                          "root, e.g. http://localhost:8000/v1")
    parser.add_argument("--llm-model", default=Settings.model_fields["llm_model"].default,
                        help="with --extractor llm: the model name the server knows")
    parser.add_argument("--llm-timeout", type=float, default=1800.0,
                        help="with --extractor llm: seconds per request (one whole session)")
    parser.add_argument("--keep-names", action="store_true",
                        help="compare the texts with the speakers' names in them (a name "
                             "alone then scores as much as a sentence that states the event)")
    parser.add_argument("--misses", type=int, default=0,
                        help="also print this many events a raw turn states and no memory does")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.sessions is not None and args.sessions < 1:
        parser.error("--sessions takes a positive number")
    try:
        chats = [first_sessions(chat, args.sessions) for chat in load(args.data, chats=args.chats)]
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    exit_on_sigterm()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="memstream-realtalk-events-"))
    extractor = extractor_of(args)
    try:
        embedder = MiniLMOnnxEmbedder()
        projection = MemoryProjection(args.projection or workdir / "memstream", embedder)
        try:
            records, failed = built_memories(
                projection, embedder, chats, args.variants, extractor
            )
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        built = time.perf_counter() - started
        log("judging every event")
        vectorise = Vectoriser(embedder)
        judged = [
            j
            for chat in chats
            for variant in args.variants
            for j in judge(chat, variant, kinds_of_text(chat, records[chat.name, variant]),
                           vectorise, keep_names=args.keep_names)
        ]
    finally:
        close = getattr(extractor, "close", None)
        if close is not None:
            close()
        release(None, workdir, keep=False)
    sessions = sum(len(chat.sessions) for chat in chats)
    print(f"REALTALK events (Lee et al., 2025, arXiv 2502.13270): {len(chats)} chats, "
          f"{sessions} sessions, {sum(j.variant == args.variants[0] for j in judged)} annotated "
          f"events\n"
          f"extractor {extractor.name}; an event of session N against its own speaker's "
          f"texts as they stood at the end of session N; judge: MiniLM cosine, the speakers' "
          f"names {'kept' if args.keep_names else 'left out'}"
          + (f"; {failed} sessions' extraction failed (no memories)" if failed else ""))
    print_tables(judged, args.misses)
    if args.json is not None:
        meta = {"extractor": extractor.name, "chats": [chat.name for chat in chats],
                "sessions": args.sessions, "names_kept": args.keep_names,
                "failed_sessions": failed}
        args.json.write_text(json.dumps(as_json(judged, meta), indent=2) + "\n",
                             encoding="utf-8")
    wall = time.perf_counter() - started
    print(f"\nwall {wall:.0f} s (build or read {built:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
