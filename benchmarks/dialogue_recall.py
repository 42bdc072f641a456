"""Evidence recall on the dialogue data set, memstream beside a raw-turn LanceDB search.

A first step of issue 13's benchmark: the conversations of ``dialogues.py`` go through the
pipeline pieces without a broker, as ``quality.py`` does (each session closed, extracted by
the offline extractor, decided, projected), and in the same run every turn of both speakers
goes into a plain LanceDB table searched with its native full-text index and vectors, fused
by reciprocal rank: what a user could write in 30 lines with the same libraries and embedder.

Each question is scored by the turns its hits cite (``source_event_ids``; a baseline hit is
a turn): evidence recall@k is the share of the question's evidence turns among the first k
hits' citations, averaged per category. Three searches: the raw-turn baseline,
``MemoryProjection.search`` (memstream's hybrid search) and ``Retriever.retrieve`` (its
ranking). Through the client and the broker comes next.

Run from the repository root::

    python benchmarks/dialogue_recall.py
    python benchmarks/dialogue_recall.py --dialogues 10 --sessions 20 --seed 3
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import lancedb
import pyarrow as pa
from dialogues import CATEGORIES, Dialogue, generate
from lancedb.index import FTS
from lancedb.rerankers import RRFReranker
from quality import Conversation, build_extracted

from memstream.models.events import TranscriptMessage
from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MEMORY_TYPES, MemoryProjection
from memstream.projections.retrieval import Retriever

DEPTHS = (5, 10, 20)
#: Ranking figures give every type this many slots, so quotas do not cap recall@20.
RANK_SLOTS = 20

Search = Callable[[str, str], list[tuple[str, ...]]]


def conversations(dialogues: Sequence[Dialogue]) -> list[Conversation]:
    """The dialogues as the pipeline sees them: the user's turns are ``user`` messages, the
    other speaker's ``assistant`` messages with the speaker's name."""
    made = []
    for dialogue in dialogues:
        sessions = [
            [
                TranscriptMessage(
                    event_id=turn.turn_id,
                    role="user" if turn.speaker == dialogue.user else "assistant",
                    name=turn.speaker,
                    content=turn.text,
                    occurred_at=turn.at,
                )
                for turn in session
            ]
            for session in dialogue.sessions
        ]
        made.append(Conversation(user_id=dialogue.user_id, sessions=sessions))
    return made


def raw_turn_baseline(directory: Path, convs: Sequence[Conversation], embedder: MiniLMOnnxEmbedder) -> Search:
    """Every turn in one LanceDB table: FTS + vectors, RRF; a user filter."""
    rows = [
        {"user_id": conv.user_id, "turn_id": m.event_id, "text": m.content}
        for conv in convs for session in conv.sessions for m in session
    ]
    vectors = embedder.embed([row["text"] for row in rows])
    table = pa.Table.from_pylist(rows).append_column(
        "vector", pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1])
    )
    db = lancedb.connect(directory)
    turns = db.create_table("turns", table)
    turns.create_index("text", config=FTS(with_position=False))

    def search(user_id: str, question: str) -> list[tuple[str, ...]]:
        found = (
            turns.search(query_type="hybrid")
            .vector(embedder.embed([question])[0])
            .text(question)
            .where(f"user_id = '{user_id}'", prefilter=True)  # ids are the benchmark's own
            .rerank(RRFReranker())
            .limit(max(DEPTHS))
            .to_list()
        )
        return [(hit["turn_id"],) for hit in found]

    return search


def recall(cited: Sequence[tuple[str, ...]], evidence: Sequence[str], depth: int) -> float:
    seen = {turn for hit in cited[:depth] for turn in hit}
    return sum(turn in seen for turn in evidence) / len(evidence)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--turns", type=int, default=20, help="turns per session")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    dialogues = generate(args.dialogues, args.sessions, args.turns, args.seed)
    convs = conversations(dialogues)
    embedder = MiniLMOnnxEmbedder()
    workdir = Path(tempfile.mkdtemp(prefix="memstream-dialogues-"))
    try:
        projection = MemoryProjection(workdir / "memstream", embedder)
        build_extracted(convs, projection, embedder)
        retriever = Retriever(projection, Settings())
        slots = {t: RANK_SLOTS for t in MEMORY_TYPES}
        searches: dict[str, Search] = {
            "raw turns, LanceDB hybrid (baseline)": raw_turn_baseline(workdir / "raw", convs, embedder),
            "MemoryProjection.search": lambda u, q: [
                h.source_event_ids for h in projection.search(u, q, limit=max(DEPTHS))
            ],
            "Retriever.retrieve": lambda u, q: [
                item.memory.source_event_ids for item in retriever.retrieve(u, q, quotas=slots).items
            ],
        }
        scores: dict[str, dict[str, list[list[float]]]] = {name: defaultdict(list) for name in searches}
        for dialogue, conv in zip(dialogues, convs, strict=True):
            for question in dialogue.questions:
                for name, search in searches.items():
                    cited = search(conv.user_id, question.question)
                    scores[name][question.category].append(
                        [recall(cited, question.evidence, depth) for depth in DEPTHS]
                    )
        turns = sum(len(d.turns) for d in dialogues)
        asked = sum(len(d.questions) for d in dialogues)
        print(f"{args.dialogues} dialogues, {turns} turns, {asked} questions, seed {args.seed}")
        print(f"{'search':40} {'category':11} " + " ".join(f"{'@' + str(d):>6}" for d in DEPTHS))
        for name in searches:
            for category in (*CATEGORIES, "all"):
                rows = [r for c in CATEGORIES for r in scores[name][c]] if category == "all" else scores[name][category]
                means = [sum(r[i] for r in rows) / len(rows) if rows else 0.0 for i in range(len(DEPTHS))]
                print(f"{name:40} {category:11} " + " ".join(f"{m:6.3f}" for m in means))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
