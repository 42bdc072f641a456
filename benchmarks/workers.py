"""Scale-out: N workers on one data directory, one of them killed with SIGKILL mid-ingest.

    python benchmarks/workers.py                   # 3 workers, 12 users, 4 sessions each
    python benchmarks/workers.py --users 30 --workers 4

The history is ``dialogues.py``'s (two named people per user, planted facts and corrections
among chit-chat), published as chat events with the dialogue's own ids (so two runs publish
the very same events). It starts the embedded broker, then:

1. **one worker** takes the whole history, and its memories are read when the group has
   committed every chat and consolidation record and the projection holds every memory event:
   the reference;
2. **N workers** on another topic prefix and one shared data directory (each writes the
   tables of the partitions Faust assigned it: ``memstream_projector_partitions`` on its
   /metrics says which). Half the sessions are published; once memories of every user are
   searchable, the rest is published and, as soon as the victim (the worker owning the most
   partitions) has projected some of it, it is killed with SIGKILL. A reader in this process
   searches each of the victim's users in turn all along, straight from the shared data
   directory, as ``memstream serve`` does.

It prints the longest gap between two answered searches of the victim's users, how long its
partitions were without a writer (SIGKILL to the survivors' gauges covering them), when its
users' memories grew again (the first growth after the survivors took over), and whether every memory exists exactly once and equals the
one-worker run. ``tests/integration/test_workers.py`` runs the same scenario and asserts the
outcome (not the times).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from dialogue_recall import memory_event_ends
from dialogues import Dialogue
from dialogues import generate as generate_dialogues
from prometheus_client.parser import text_string_to_metric_families
from runner import exit_on_sigterm, log

from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.models.topics import user_partition
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import VIEW_COLUMNS, PartitionedMemories
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.progress import group_caught_up
from memstream.streams.kafka.topics import Topics
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess, worker_url

#: The columns two runs of the same events must agree on: every column of the view except
#: ``learned_at``, the broker's time of the ``memory_added`` record (two runs append it at
#: two moments; a replay of one run keeps it), and the use counts, which retrievals change
#: (the reader searches the tables directly and records none, but a run could).
COMPARED = tuple(
    c for c in VIEW_COLUMNS if c not in ("learned_at", "access_count", "last_accessed_at")
)


def chat_events(dialogues: Sequence[Dialogue]) -> list[Event]:
    """Every session of ``dialogues`` as chat events: a start, the turns (with their ids and
    times, the speaker's name), an explicit close a minute after the last turn."""
    events: list[Event] = []
    for dialogue in dialogues:
        for session in dialogue.sessions:
            user, sid = dialogue.user_id, session[0].session_id
            events.append(SessionStarted(
                event_id=f"{user}/{sid}/start", user_id=user, session_id=sid,
                occurred_at=session[0].at - timedelta(minutes=1),
            ))
            events += [
                MessageAdded(
                    event_id=turn.turn_id, user_id=user, session_id=sid, occurred_at=turn.at,
                    role="user" if turn.speaker == dialogue.user else "assistant",
                    content=turn.text, name=turn.speaker,
                )
                for turn in session
            ]
            events.append(SessionClosed(
                event_id=f"{user}/{sid}/close", user_id=user, session_id=sid,
                occurred_at=session[-1].at + timedelta(minutes=1),
            ))
    return events


def halves(dialogues: Sequence[Dialogue]) -> tuple[list[Event], list[Event]]:
    """The chat events of each dialogue's first half of sessions, and of the rest."""
    first = [Dialogue(d.user, d.other, d.user_id, d.sessions[: len(d.sessions) // 2]) for d in dialogues]
    rest = [Dialogue(d.user, d.other, d.user_id, d.sessions[len(d.sessions) // 2 :]) for d in dialogues]
    return chat_events(first), chat_events(rest)


def projector_partitions(settings: Settings) -> frozenset[int] | None:
    """The partitions whose tables a worker's projector writes now (its /metrics); None if
    it does not answer."""
    try:
        with urllib.request.urlopen(worker_url(settings, "/metrics"), timeout=2) as reply:
            page = reply.read().decode()
    except OSError:
        return None
    return frozenset(
        int(sample.labels["partition"])
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == "memstream_projector_partitions" and sample.value == 1
    )


def spread(workers: Sequence[Settings], partitions: int) -> list[frozenset[int]] | None:
    """Each worker's partitions, when they split all partitions among the workers with
    some for each; None otherwise."""
    owned = [projector_partitions(s) for s in workers]
    if any(o is None or not o for o in owned):
        return None
    known = [o for o in owned if o is not None]
    every = [p for o in known for p in o]
    return known if sorted(every) == list(range(partitions)) else None


def settled(settings: Settings, projection: PartitionedMemories) -> bool:
    """Whether the workers' group committed every chat and consolidation record (so every
    memory event is in the log) and the projection holds every memory event."""
    topics = Topics.from_settings(settings)
    if not group_caught_up(settings, [topics.chat, topics.consolidation]):
        return False
    positions = projection.positions()
    return all(
        positions.get((topics.memories, p), 0) >= end for p, end in memory_event_ends(settings).items()
    )


def wait(check: Callable[[], Any], what: str, timeout_s: float, interval_s: float = 0.5) -> Any:
    """``check()`` once it is truthy; TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(interval_s)
    return found


def memories(projection: PartitionedMemories) -> list[dict[str, Any]]:
    """Every row of every partition's table (every status), the compared columns and the
    partition whose table holds it, sorted by memory id."""
    rows = []
    for partition in range(projection.partitions):
        table = projection.table(partition)
        if table.exists():
            rows += [{**row, "partition": partition} for row in table.view_rows(COMPARED)]
    return sorted(rows, key=lambda row: (row["memory_id"], row["partition"]))


@dataclass
class Reader:
    """Searches the victim's users in turn, straight from the shared tables, and notes when
    each search answered and how many memories its user had."""

    projection: PartitionedMemories
    users: Sequence[str]
    answers: list[tuple[float, str, int]] = field(default_factory=list)
    failures: list[tuple[float, str, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        for user in itertools.cycle(self.users):
            if self._stop.is_set():
                return
            try:
                self.projection.search(user, "what does she like", limit=5)
                found = self.projection.count(user)
            except Exception as exc:  # noqa: BLE001 - every failure is a gap, recorded
                self.failures.append((time.monotonic(), user, repr(exc)))
            else:
                self.answers.append((time.monotonic(), user, found))
            time.sleep(0.05)

    def longest_gap(self, since: float) -> float:
        """The longest time after ``since`` between two answered searches."""
        times = [since] + [t for t, _, _ in self.answers if t > since]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def resumed(self, killed: float, took_over: float) -> float:
        """How long after ``killed`` the victim's users' memories grew again once the
        survivors wrote its partitions (``took_over``): the first answer after it that
        counted more than its user's last answer before it. NaN if none grew."""
        counts: dict[str, int] = {}
        for t, user, found in self.answers:
            if t <= took_over:
                counts[user] = found
            elif found > counts.get(user, 0):
                return t - killed
        return float("nan")


@dataclass
class Outcome:
    """What a run of the scenario found."""

    rows: list[dict[str, Any]]
    workers: int
    victim_partitions: frozenset[int] = frozenset()
    victim_users: tuple[str, ...] = ()
    survivors_took_over: bool = False
    takeover_s: float = float("nan")
    longest_gap_s: float = float("nan")
    resumed_s: float = float("nan")
    searches: int = 0
    failed_searches: int = 0
    elapsed_s: float = 0.0


def one_worker(settings: Settings, events: Sequence[Event], logs: Path, timeout_s: float) -> Outcome:
    """The reference: one worker takes every event; its memories once all are projected."""
    started = time.monotonic()
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with WorkerProcess(settings, log_path=logs / "one-worker.log"):
        asyncio.run(publish_events(settings, list(events)))
        wait(lambda: settled(settings, projection), "the one worker to project everything", timeout_s)
        rows = memories(projection)
    return Outcome(rows, workers=1, elapsed_s=time.monotonic() - started)


@contextmanager
def started(workers: Sequence[Settings], logs: Path) -> Iterator[list[WorkerProcess]]:
    """``workers`` started at once (each waits for its web port), stopped at the end."""
    with ExitStack() as stack:
        processes = [WorkerProcess(s, log_path=logs / f"worker-{i}.log") for i, s in enumerate(workers)]
        threads = [threading.Thread(target=p.start) for p in processes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for process in processes:
            stack.callback(process.stop)
            if process.pid is None:
                raise RuntimeError("a worker did not start")
        yield processes


def kill_one_mid_ingest(
    workers: Sequence[Settings], dialogues: Sequence[Dialogue], logs: Path, timeout_s: float
) -> Outcome:
    """The scenario of the module's docstring, on ``workers`` (settings that differ only in
    their web ports)."""
    settings = workers[0]
    begun = time.monotonic()
    first, rest = halves(dialogues)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with started(workers, logs) as processes:
        # Partitions move while the workers join one by one: wait for a split that holds.
        polls: list[list[frozenset[int]] | None] = []

        def stable() -> list[frozenset[int]] | None:
            polls.append(spread(workers, settings.partitions))
            return polls[-1] if len(polls) > 2 and polls[-1] == polls[-2] == polls[-3] else None

        owned = wait(stable, "the workers to split the partitions", timeout_s, interval_s=1)
        victim = max(range(len(workers)), key=lambda i: len(owned[i]))
        users = tuple(
            d.user_id for d in dialogues if user_partition(d.user_id, settings.partitions) in owned[victim]
        )
        log(f"partitions: {[sorted(o) for o in owned]}; the victim is worker {victim}, users {users}")
        asyncio.run(publish_events(settings, first))
        wait(lambda: all(projection.count(d.user_id) for d in dialogues),
             "memories of every user after the first half", timeout_s)
        reader = Reader(projection, users)
        reader.start()
        try:
            before = {u: projection.count(u) for u in users}
            asyncio.run(publish_events(settings, rest))
            wait(lambda: any(projection.count(u) > before[u] for u in users),
                 "the victim to project some of the second half", timeout_s, interval_s=0.05)
            processes[victim].kill()
            killed = time.monotonic()
            log(f"killed worker {victim} (SIGKILL)")
            survivors = [s for i, s in enumerate(workers) if i != victim]

            def covered() -> bool:
                held = [projector_partitions(s) or frozenset() for s in survivors]
                return owned[victim] <= frozenset().union(*held)

            wait(covered, "the survivors to write the victim's partitions", timeout_s, interval_s=0.2)
            takeover = time.monotonic() - killed
            wait(lambda: settled(settings, projection), "the survivors to project everything", timeout_s)
        finally:
            reader.stop()
        taken = [projector_partitions(s) or frozenset() for s in survivors]
        rows = memories(projection)
    return Outcome(
        rows,
        workers=len(workers),
        victim_partitions=owned[victim],
        victim_users=users,
        survivors_took_over=frozenset().union(*taken) == frozenset(range(settings.partitions)),
        takeover_s=takeover,
        longest_gap_s=reader.longest_gap(killed),
        resumed_s=reader.resumed(killed, killed + takeover),
        searches=len(reader.answers),
        failed_searches=len(reader.failures),
        elapsed_s=time.monotonic() - begun,
    )


def duplicates(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Memory ids held by more than one row (in any partitions' tables)."""
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row["memory_id"]] += 1
    return {memory: n for memory, n in counts.items() if n > 1}


def misplaced(rows: Sequence[dict[str, Any]], partitions: int) -> list[str]:
    """Memory ids in a table other than their user's partition's."""
    return [r["memory_id"] for r in rows if r["partition"] != user_partition(r["user_id"], partitions)]


def differences(got: Sequence[dict[str, Any]], want: Sequence[dict[str, Any]]) -> list[str]:
    """What differs between two runs' rows, in words (empty when equal)."""
    mine, theirs = {r["memory_id"]: r for r in got}, {r["memory_id"]: r for r in want}
    found = [f"only in the N-worker run: {m}" for m in sorted(mine.keys() - theirs.keys())]
    found += [f"only in the one-worker run: {m}" for m in sorted(theirs.keys() - mine.keys())]
    for memory in sorted(mine.keys() & theirs.keys()):
        for column in (*COMPARED, "partition"):
            if mine[memory][column] != theirs[memory][column]:
                found.append(f"{memory} {column}: {mine[memory][column]!r} != {theirs[memory][column]!r}")
    return found


def print_report(many: Outcome, one: Outcome, partitions: int) -> None:
    """The table of the run."""
    diff = differences(many.rows, one.rows)
    rows = [
        ("memories (rows, every status)", f"{len(many.rows)}", f"{len(one.rows)}"),
        ("memory ids held twice", f"{len(duplicates(many.rows))}", f"{len(duplicates(one.rows))}"),
        ("rows in another partition's table", f"{len(misplaced(many.rows, partitions))}",
         f"{len(misplaced(one.rows, partitions))}"),
        ("rows that differ from the one-worker run", f"{len(diff)}", "-"),
        ("victim's partitions / users", f"{sorted(many.victim_partitions)} / {len(many.victim_users)}", "-"),
        ("SIGKILL -> survivors write its partitions", f"{many.takeover_s:.1f} s", "-"),
        ("SIGKILL -> its users' memories grow again", f"{many.resumed_s:.1f} s", "-"),
        ("longest gap between answered searches", f"{many.longest_gap_s * 1000:.0f} ms", "-"),
        ("searches answered / failed", f"{many.searches} / {many.failed_searches}", "-"),
        ("wall time of the run", f"{many.elapsed_s:.0f} s", f"{one.elapsed_s:.0f} s"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'':{width}} | {many.workers} workers, one killed | 1 worker |")
    print(f"|{'-' * (width + 2)}|---|---|")
    for name, a, b in rows:
        print(f"| {name:{width}} | {a} | {b} |")
    for line in diff[:20]:
        print("  differs:", line)


def main(argv: list[str] | None = None) -> int:
    """Run both, print the table; exit 1 if the N-worker run's memories are not the
    one-worker run's exactly once."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--users", type=int, default=12)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=12, help="turns per session (about)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    dialogues = generate_dialogues(args.users, args.sessions, args.turns, args.seed)
    with ExitStack() as cleanup:
        work = Path(tempfile.mkdtemp(prefix="memstream-workers-"))
        if not args.keep:
            cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        log(f"logs and data in {work}")
        with EmbeddedBroker(free_port(), log_dir=work) as broker:
            def settings(name: str) -> Settings:
                return Settings(
                    broker=broker.address, data_dir=work / name, topic_prefix=name,
                    partitions=args.partitions, web_port=free_port(),
                )

            log("one worker: the reference run")
            one = one_worker(settings("one"), chat_events(dialogues), work, args.timeout)
            base = settings("many")
            workers = [base.model_copy(update={"web_port": free_port()}) for _ in range(args.workers)]
            log(f"{args.workers} workers, one killed mid-ingest")
            many = kill_one_mid_ingest(workers, dialogues, work, args.timeout)
    print_report(many, one, args.partitions)
    same = not differences(many.rows, one.rows) and not duplicates(many.rows)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
