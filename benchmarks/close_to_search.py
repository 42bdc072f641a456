"""Session close → memories searchable: how long until a closed session's memories answer a
search, with the offline extractor, on the embedded broker and one worker.

    python benchmarks/close_to_search.py [--sessions 40]

For each session it publishes the messages, then the close, and polls the LanceDB projection
(every 20 ms, as a reader in another process would) until a memory of that session is
found by search; it prints p50/p95/max of that delay. Goal: p95 <= 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memstream.models.codec import decode_event
from memstream.models.events.chat import MessageAdded, SessionClosed
from memstream.models.events.envelope import Event
from memstream.models.events.memory import MemoryAdded
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

FACTS = [
    "I live in {city} and I work at {company}.",
    "My favourite food is {food}, and I prefer {travel} over buses.",
]
CITIES = ["Lisbon", "Oslo", "Porto", "Berlin", "Munich", "Vienna", "Lyon", "Turin"]
COMPANIES = ["Siemens", "Acme", "Globex", "Initech", "Umbrella", "Hooli"]
FOODS = ["ramen", "paella", "falafel", "pierogi", "tacos"]
TRAVEL = ["trains", "bikes", "trams", "ferries"]


def session_events(index: int) -> tuple[list[Event], Event]:
    user, session = f"user{index % 7}", f"s{index}"
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC) + timedelta(hours=index)
    texts = [
        FACTS[0].format(city=CITIES[index % len(CITIES)], company=COMPANIES[index % len(COMPANIES)]),
        "Thanks, that helps.",
        FACTS[1].format(food=FOODS[index % len(FOODS)], travel=TRAVEL[index % len(TRAVEL)]),
    ]
    messages: list[Event] = [
        MessageAdded(
            event_id=f"{session}-m{i}", user_id=user, session_id=session,
            occurred_at=start + timedelta(minutes=i), role="user" if i % 2 == 0 else "assistant",
            content=text,
        )
        for i, text in enumerate(texts)
    ]
    close = SessionClosed(
        event_id=f"{session}-close", user_id=user, session_id=session,
        occurred_at=start + timedelta(minutes=5),
    )
    return messages, close


async def hop_delays(settings: Settings) -> dict[str, list[float]]:
    """Per session: close → consolidation request → first memory event, by broker timestamps."""
    topics = Topics.from_settings(settings)
    closes: dict[str, int] = {}
    for record in await read_topic(settings, topics.chat):
        event = decode_event(record.value)
        if isinstance(event, SessionClosed):
            closes[event.session_id] = record.timestamp
    requests: dict[str, int] = {}
    for record in await read_topic(settings, topics.consolidation):
        requests.setdefault(decode_event(record.value).session_id, record.timestamp)
    memories: dict[str, int] = {}
    for record in await read_topic(settings, topics.memories):
        event = decode_event(record.value)
        if isinstance(event, MemoryAdded):
            memories.setdefault(event.session_id, record.timestamp)
    hops: dict[str, list[float]] = {"close -> consolidation (session agent)": [],
                                    "consolidation -> memories (extraction)": []}
    for session, closed in closes.items():
        if session in requests:
            hops["close -> consolidation (session agent)"].append((requests[session] - closed) / 1000)
            if session in memories:
                hops["consolidation -> memories (extraction)"].append(
                    (memories[session] - requests[session]) / 1000
                )
    return hops


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=40)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="memstream-close-"))
    delays: list[float] = []
    with EmbeddedBroker(free_port(), log_dir=workdir) as broker:
        settings = Settings(broker=broker.address, data_dir=workdir / "data", web_port=free_port())
        with WorkerProcess(settings, log_path=workdir / "worker.log"):
            projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
            for index in range(args.sessions):
                messages, close = session_events(index)
                asyncio.run(publish_events(settings, messages))
                time.sleep(0.1)  # the messages are in; now the close
                sent = time.perf_counter()
                asyncio.run(publish_events(settings, [close]))
                city = CITIES[index % len(CITIES)]
                deadline = sent + 30
                while time.perf_counter() < deadline:
                    hits = projection.search(close.user_id, f"where do I live {city}", limit=10)
                    if any(hit.session_id == close.session_id for hit in hits):
                        delays.append(time.perf_counter() - sent)
                        break
                    time.sleep(0.02)
                else:
                    print(f"session {index}: not searchable within 30 s", file=sys.stderr)
            hops = asyncio.run(hop_delays(settings))
    delays.sort()
    p50 = statistics.median(delays)
    p95 = delays[max(0, round(0.95 * len(delays)) - 1)]
    print(f"{'sessions':>8}  {'p50 s':>6}  {'p95 s':>6}  {'max s':>6}")
    print(f"{len(delays):>8}  {p50:6.2f}  {p95:6.2f}  {delays[-1]:6.2f}")
    print("\nwhere the time goes (median, from broker timestamps):")
    for name, values in hops.items():
        print(f"  {name:<40} {statistics.median(values):6.2f} s")
    print("\ngoal: p95 <= 1 s (offline extractor); the delay includes the session agent's batch "
          "wait, extraction, decisions, the projector's batch wait and the LanceDB write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
