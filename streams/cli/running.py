"""``memstream broker``, ``worker``, ``publish``, ``schema`` and ``demo``: running memstream and feeding it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memstream.models.codec import EventLimits
from memstream.models.events.catalog import json_schemas
from memstream.models.events.envelope import Event
from memstream.streams.cli.serving import in_tenant, untenanted_note

if TYPE_CHECKING:
    from memstream.streams.service.container import Container



def cmd_broker(args: argparse.Namespace, container: Container) -> int:
    """Run the embedded broker (Tansu, memory storage) until Ctrl-C."""
    from memstream.streams.kafka.broker import run_broker_forever
    from memstream.streams.observability.logs import configure_logging

    settings = container.settings
    configure_logging(settings)
    return run_broker_forever(settings, args.port or settings.broker_port)


def cmd_worker(args: argparse.Namespace, container: Container) -> int:
    """Run the Faust worker: session state, consolidation, extraction, projection."""
    from memstream.streams.agents.app import run_worker
    from memstream.streams.worker.web import UnsafeWebExposure

    try:
        run_worker(container.settings)
    except UnsafeWebExposure as exc:
        print(f"error: the worker will not start: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_publish(args: argparse.Namespace, container: Container) -> int:
    """Publish chat events from JSONL (file or stdin) or the quick form."""
    from memstream.streams.service.chat_events import (
        LineError,
        publish_events,
        quick_events,
        read_events,
    )

    settings = container.settings
    if args.text is not None or args.close:
        if not (args.user and args.session):
            print("error: the quick form needs --user and --session", file=sys.stderr)
            return 2
        events = quick_events(
            user_id=args.user,
            session_id=args.session,
            role=args.role,
            text=args.text,
            agent_id=args.agent,
            close=args.close,
        )
        errors: list[LineError] = []
    else:
        limits = EventLimits.from_settings(settings)
        # Read as bytes: a line that is not UTF-8 is one bad line, not the end of the file.
        if args.file in (None, "-"):
            events, errors = read_events(sys.stdin.buffer, settings.max_event_bytes, limits)
        else:
            with Path(args.file).open("rb") as source:
                events, errors = read_events(source, settings.max_event_bytes, limits)
        if args.tenant is not None:
            try:
                events = [_in_tenant(args.tenant, event) for event in events]
            except ValueError as exc:
                print(f"memstream publish: nothing published: {exc}", file=sys.stderr)
                return 2
    for error in errors:
        print(f"line {error.line}: {error.reason}", file=sys.stderr)
    from memstream.streams.kafka.logid import LogLost

    try:
        published = asyncio.run(publish_events(settings, events)) if events else 0
    except (ValueError, LogLost) as exc:
        print(f"memstream publish: nothing published: {exc}", file=sys.stderr)
        return 2
    print(f"published {published} event(s); {len(errors)} line(s) rejected")
    note = untenanted_note(settings, {event.user_id for event in events}) if published else None
    if note:
        sys.stdout.flush()  # the count first, then the note
        print(note, file=sys.stderr)
    return 1 if errors else 0


def _in_tenant(tenant: str, event: Event) -> Event:
    """``event`` as tenant ``tenant``'s user's: its user id stored as ``tenant:user_id``."""
    stored = in_tenant(tenant, event.user_id, named_by=f"event {event.event_id}'s user_id")
    return event.model_copy(update={"user_id": stored})


def cmd_schema(args: argparse.Namespace, container: Container) -> int:
    """Write one JSON Schema file per event type."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for event_type, schema in json_schemas().items():
        path = out / f"{event_type}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        print(path)
    return 0


def cmd_demo(args: argparse.Namespace, container: Container) -> int:
    """Run the whole path on the bundled sample (on a broker and data directory of its own,
    never yours) and print what memory holds."""
    from memstream.streams.cli.demo import run_demo

    return run_demo(container.settings)
