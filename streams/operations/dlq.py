"""``memstream dlq``: list, show and retry dead letters.

Every agent routes what it cannot process to the dead-letters topic with the original bytes,
the source position and the reason, and moves on (:mod:`memstream.streams.kafka.deadletters`).
These commands read that topic. A dead letter is named by its place in it,
``<partition>:<offset>``. ``retry`` republishes the original bytes, with the original key,
to the source topic, with a header naming the dead letter it retries; consumers are
idempotent by event id, so a retry of an event that did get through changes nothing, and an
event that still fails is dead-lettered again with its new reason.

A dead letter of a user with a key holds its bytes sealed with that key: ``show`` and
``retry`` open them with the key store (``MEMSTREAM_DATA_DIR/keys``); once the user is
erased they say so, and ``retry`` leaves those letters out.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from memstream.models.crypto import SealError
from memstream.models.settings import Settings
from memstream.streams.kafka.deadletters import DeadLetter, SealedDeadLetter
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.publisher import KafkaPublisher, RawRecord
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import KeyStore, keystore_from_settings

if TYPE_CHECKING:
    from memstream.streams.service.container import Container

#: Header on a retried record: the dead letter it came from.
RETRY_HEADER = "memstream-retry-of"


@dataclass(frozen=True)
class StoredLetter:
    """A dead letter and where it sits in the dead-letters topic."""

    partition: int
    offset: int
    letter: DeadLetter

    @property
    def letter_id(self) -> str:
        """``<partition>:<offset>`` in the dead-letters topic."""
        return f"{self.partition}:{self.offset}"


async def dead_letters(settings: Settings) -> tuple[list[StoredLetter], int]:
    """Every dead letter now in the topic, and how many records there were not readable."""
    records = await read_topic(settings, Topics.from_settings(settings).deadletters)
    found, unreadable = [], 0
    for record in records:
        try:
            letter = DeadLetter.model_validate_json(record.value or b"")
        except ValidationError:
            unreadable += 1
            continue
        found.append(StoredLetter(record.partition, record.offset, letter))
    return found, unreadable


async def retry(
    settings: Settings, letters: Sequence[StoredLetter], keys: KeyStore | None = None
) -> int:
    """Republish the original records of ``letters`` to their source topics; return how many.

    Sealed letters are opened with ``keys`` (default: the key store of ``settings``); those
    whose key is destroyed (an erased user) are left out.
    """
    keys = keys if keys is not None else keystore_from_settings(settings)
    by_topic: dict[str, list[RawRecord]] = {}
    for stored in letters:
        letter = stored.letter
        value = _original(letter, keys)
        if value is None:
            continue
        key = None if letter.key_b64 is None else _b64(letter.key_b64)
        headers = ((RETRY_HEADER, stored.letter_id.encode()),)
        by_topic.setdefault(letter.source_topic, []).append(RawRecord(key, value, headers))
    # The original bytes as they were: already sealed and checked when first published.
    publisher = KafkaPublisher(settings, keys, check=False, claim=False)
    try:
        sent = [await publisher.send_raw(topic, records) for topic, records in by_topic.items()]
    finally:
        await publisher.close()
    return sum(map(len, sent))


def _original(letter: DeadLetter, keys: KeyStore) -> bytes | None:
    """The letter's original bytes, opened if sealed; None when they cannot be read."""
    try:
        return letter.original_value(keys)
    except (SealedDeadLetter, SealError):
        return None


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


def _selected(letters: list[StoredLetter], args: argparse.Namespace) -> list[StoredLetter]:
    chosen = letters
    if getattr(args, "agent", None):
        chosen = [s for s in chosen if s.letter.agent == args.agent]
    if getattr(args, "topic", None):
        chosen = [s for s in chosen if s.letter.source_topic == args.topic]
    return chosen


def _preview(value: bytes, width: int = 60) -> str:
    text = value.decode("utf-8", "replace").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_dlq_list(args: argparse.Namespace, settings: Settings) -> int:
    """List dead letters: id, agent, source, reason."""
    letters, unreadable = asyncio.run(dead_letters(settings))
    chosen = _selected(letters, args)[-args.limit :] if args.limit else _selected(letters, args)
    if args.json:
        print(json.dumps([{"id": s.letter_id, **s.letter.model_dump(mode="json")} for s in chosen], indent=2))
        return 0
    for stored in chosen:
        letter = stored.letter
        print(
            f"{stored.letter_id:>9}  {letter.dead_at:%Y-%m-%d %H:%M:%S}  {letter.agent:<10} "
            f"{letter.source_topic}[{letter.source_partition}]@{letter.source_offset}  "
            f"{letter.reason[:100]}"
        )
    print(f"{len(chosen)} dead letter(s)" + (f"; {unreadable} unreadable record(s)" if unreadable else ""))
    return 0


def cmd_dlq_show(args: argparse.Namespace, settings: Settings) -> int:
    """Show one dead letter: reason, source, the original key and bytes."""
    letters, _ = asyncio.run(dead_letters(settings))
    found = {s.letter_id: s for s in letters}.get(args.id)
    if found is None:
        print(f"no dead letter {args.id!r} (ids are <partition>:<offset>)", file=sys.stderr)
        return 1
    letter = found.letter
    print(f"dead letter {found.letter_id}, {letter.dead_at.isoformat()}")
    print(f"  agent   {letter.agent}")
    print(f"  source  {letter.source_topic}[{letter.source_partition}]@{letter.source_offset}")
    print(f"  reason  {letter.reason}")
    key = None if letter.key_b64 is None else _b64(letter.key_b64)
    print(f"  key     {key!r}")
    value = _original(letter, keystore_from_settings(settings))
    if value is None:
        print(f"  value   sealed with key {letter.key_id}: erased (the user's key is destroyed)")
        return 0
    sealed = f", sealed with key {letter.key_id}" if letter.sealed else ""
    print(f"  value   ({len(value)} bytes{sealed})")
    print(value.decode("utf-8", "replace"))
    return 0


def cmd_dlq_retry(args: argparse.Namespace, settings: Settings) -> int:
    """Republish dead letters to their source topics (after a fix, or a transient failure)."""
    letters, _ = asyncio.run(dead_letters(settings))
    if args.all:
        chosen = _selected(letters, args)
    else:
        by_id = {s.letter_id: s for s in letters}
        missing = [i for i in args.ids if i not in by_id]
        if missing:
            print(f"no dead letter(s) {', '.join(missing)}", file=sys.stderr)
            return 1
        chosen = [by_id[i] for i in args.ids]
    if not chosen:
        print("nothing to retry")
        return 0
    keys = keystore_from_settings(settings)
    sent = asyncio.run(retry(settings, chosen, keys))
    for stored in chosen:
        value = _original(stored.letter, keys)
        shown = _preview(value) if value is not None else "erased (the user's key is destroyed): not retried"
        print(f"{stored.letter_id} → {stored.letter.source_topic}: {shown}")
    print(f"retried {sent} dead letter(s); one that fails again is dead-lettered again")
    return 0


Handler = Callable[[argparse.Namespace, Settings], int]


def add_dlq_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``memstream dlq list|show|retry`` on ``commands``."""
    dlq = commands.add_parser("dlq", help="inspect and retry dead letters")
    sub = dlq.add_subparsers(dest="dlq_command", required=True)

    def bind(handler: Handler) -> Callable[[argparse.Namespace, Container], int]:
        return lambda args, container: handler(args, container.settings)

    listing = sub.add_parser("list", help=cmd_dlq_list.__doc__)
    listing.add_argument("--agent", help="only this agent's (sessions, extraction, projector)")
    listing.add_argument("--topic", help="only those from this source topic")
    listing.add_argument("--limit", type=int, default=0, help="only the last N")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=bind(cmd_dlq_list))
    show = sub.add_parser("show", help=cmd_dlq_show.__doc__)
    show.add_argument("id", help="<partition>:<offset> as `dlq list` prints it")
    show.set_defaults(run=bind(cmd_dlq_show))
    again = sub.add_parser("retry", help=cmd_dlq_retry.__doc__)
    again.add_argument("ids", nargs="*", help="<partition>:<offset> ids")
    again.add_argument("--all", action="store_true", help="every dead letter (filtered below)")
    again.add_argument("--agent")
    again.add_argument("--topic")
    again.set_defaults(run=bind(cmd_dlq_retry))
