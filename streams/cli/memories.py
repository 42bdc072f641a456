"""``memstream search``, ``timeline``, ``profile``, ``memories list|get|history|delete`` and
``session show``: one user's memory, through the service.

A memory whose statement no longer holds (a fact the user changed, an episode that said the
old value) is marked on its line: ``[stale since 2026-04-02, replaced by <id>]`` in a search,
``<superseded by <id>, until 2026-04-02>`` in a listing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstream.streams.cli.answers import print_answer

if TYPE_CHECKING:
    from memstream.streams.service.container import Container
    from memstream.streams.service.results import ProfileDict, TimelineDict


def _day(iso: str) -> str:
    """The UTC day of an ISO 8601 time of the service ("2026-04-02").

    Examples
    --------
    >>> _day("2026-04-02T23:30:00-02:00")
    '2026-04-03'
    """
    return f"{datetime.fromisoformat(iso).astimezone(UTC):%Y-%m-%d}"


def stale_mark(hit: Mapping[str, Any]) -> str:
    """How a search line marks a hit that no longer held when searched ("" for one that
    holds): since when, and the memory that replaced it; or one a newer statement may have
    outdated.

    Examples
    --------
    >>> stale_mark({"stale": True, "valid_until": "2026-04-02T09:00:00+00:00",
    ...             "superseded_by": "m-7"})
    '[stale since 2026-04-02, replaced by m-7]'
    >>> stale_mark({"stale": False, "valid_until": None, "superseded_by": None})
    ''
    >>> stale_mark({"stale": False, "possibly_outdated_by": "m-9"})
    '[possibly outdated by the newer m-9]'
    """
    if not hit.get("stale"):
        newer = hit.get("possibly_outdated_by")
        return f"[possibly outdated by the newer {newer}]" if newer else ""
    parts = ["stale"]
    if hit.get("valid_until"):
        parts[0] += f" since {_day(hit['valid_until'])}"
    if hit.get("superseded_by"):
        parts.append(f"replaced by {hit['superseded_by']}")
    return f"[{', '.join(parts)}]"


def timeline_lines(found: TimelineDict) -> list[str]:
    """``memstream timeline``'s lines: a heading, then one line per value, oldest first:
    from → until (or "now"), the value, the statement, the status.

    Examples
    --------
    >>> berlin = {"memory_id": "m-1", "value": "Berlin", "polarity": True,
    ...     "statement": "User lives in Berlin", "valid_from": "2026-03-01T09:00:00+00:00",
    ...     "valid_until": "2026-04-02T09:00:00+00:00", "status": "superseded",
    ...     "superseded_by": "m-2", "turns": ["e-1"], "stated_in": []}
    >>> found = {"about": "where I live", "subject": "User", "attribute": "home",
    ...     "entries": [berlin]}
    >>> for line in timeline_lines(found):
    ...     print(line)
    home of User, oldest first:
    2026-03-01 → 2026-04-02  Berlin · User lives in Berlin · superseded by m-2
    """
    if found["attribute"] is None:
        return [f"nothing the user said matches {found['about']!r}: try other words"]
    lines = [f"{found['attribute']} of {found['subject']}, oldest first:"]
    for entry in found["entries"]:
        until = _day(entry["valid_until"]) if entry["valid_until"] else "now"
        value = entry["value"] if entry["polarity"] else f"not {entry['value']}"
        status = entry["status"]
        if entry["superseded_by"]:
            status = f"{status} by {entry['superseded_by']}"
        lines.append(
            f"{_day(entry['valid_from'])} → {until:<10}  {value} · {entry['statement']} · {status}"
        )
    return lines


def cmd_search(args: argparse.Namespace, container: Container) -> int:
    """Search one user's memories (hybrid: vectors + full text), now or as of a past time;
    a search of the live memories counts as use, as a client's does."""
    from memstream.projections.memories import SearchFilters
    from memstream.projections.retrieval import RankedMemory
    from memstream.streams.service.app import Service
    from memstream.streams.service.results import hit_dict

    filters = SearchFilters(
        memory_types=tuple(args.type) if args.type else None,
        session_id=args.session,
        min_importance=args.min_importance,
        since=args.since,
        until=args.until,
    )

    async def search() -> tuple[list[RankedMemory], int]:
        # Closing the service sends the access event (in the background until then).
        async with Service(container) as service:
            found = await service.memories.ranked(
                args.query, user_id=args.user, limit=args.limit, filters=filters,
                as_of=args.as_of, table=args.table, count_as_use=True,
            )
        return found, service.memories.accesses.lost

    try:
        ranked, lost = asyncio.run(search())
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Lost access events were said on stderr (one line); the answer stands, but not counted.
    status = 1 if lost else 0
    if args.json:
        print(json.dumps([ranked_json(item) for item in ranked], default=str, indent=2))
        return status
    if not ranked:
        print(f"no memories found for user {args.user!r}")
        _note_if_untenanted(container, args.user)
        return status
    print(SCORE_LEGEND)
    for item in ranked:
        hit = item.memory
        line = f"{item.rank_score:5.2f}  [{hit.memory_type}] {hit.content}"
        mark = stale_mark(
            hit_dict(hit, stale=item.stale, possibly_outdated_by=item.possibly_outdated_by)
        )
        print(f"{line} {mark}" if mark else line)
        if args.explain:
            print(f"       {item.explain()}")
        for line in hit.context.splitlines():
            print(f"       | {line}")
        print(
            f"       memory {hit.memory_id} · session {hit.session_id} · importance "
            f"{hit.importance:.2f} · from {', '.join(hit.source_event_ids) or '-'} · "
            f"{hit.source_topic}[{hit.source_partition}]@{hit.source_offset}"
        )
    return status


#: What the score column of ``memstream search`` means.
SCORE_LEGEND = (
    "score 0-1: how well the memory matches the query (meaning and words, equally), nudged "
    "by its importance, recency and use (--explain shows each part)"
)


def ranked_json(item: Any) -> dict[str, Any]:
    """A ranked memory for ``--json``: the memory's fields, whether it no longer held when
    searched (``stale``), and every part of its score."""
    return {
        **item.memory.__dict__,
        "stale": item.stale,
        "possibly_outdated_by": item.possibly_outdated_by,
        "score": item.rank_score,
        "relevance": item.relevance,
        "importance_part": item.importance,
        "recency": item.recency,
        "use": item.use,
    }


def cmd_memories_list(args: argparse.Namespace, container: Container) -> int:
    """List one user's memories, newest first (--all: every status)."""
    from memstream.streams.client import MemoryClient
    from memstream.streams.service.app import Service

    with MemoryClient(service=Service(container)) as client:
        memories = client.get_all(user_id=args.user, include_inactive=args.all)
    for memory in memories:
        marked = memory["status"] != "active" or memory.get("valid_until")
        status = f"  <{_status(memory)}>" if marked else ""
        print(f"[{memory['type']}] ({memory['importance']:.2f}) {memory['memory']}{status}")
        print(f"         memory {memory['memory_id']} · session {memory['session_id']}")
    print(f"{len(memories)} memories")
    if not memories:
        _note_if_untenanted(container, args.user)
    return 0


def _note_if_untenanted(container: Container, user_id: str) -> None:
    """Tell, on stderr, that ``user_id`` is in no tenant when API keys exist: the memories
    someone looks for here may be a tenant's user's (``--tenant``)."""
    from memstream.streams.cli.serving import untenanted_note

    note = untenanted_note(container.settings, [user_id])
    if note:
        sys.stdout.flush()  # the answer first, then the note
        print(note, file=sys.stderr)


def _status(memory: Mapping[str, Any]) -> str:
    """A memory's status as a listing shows it: what replaced it, and until when what it
    states held (an active episode that stated a changed fact is marked too).

    Examples
    --------
    >>> _status({"status": "active", "superseded_by": "m-2",
    ...          "valid_until": "2026-04-02T09:00:00+00:00"})
    'active, until 2026-04-02, replaced by m-2'
    """
    status = str(memory["status"])
    if memory["status"] == "superseded" and memory.get("superseded_by"):
        status = f"superseded by {memory['superseded_by']}"
    if memory.get("valid_until"):
        status += f", until {_day(memory['valid_until'])}"
        if memory["status"] != "superseded" and memory.get("superseded_by"):
            status += f", replaced by {memory['superseded_by']}"
    return status


def cmd_memories_get(args: argparse.Namespace, container: Container) -> int:
    """Show one of a user's memories, whatever its status."""
    from memstream.streams.client import MemoryClient
    from memstream.streams.service.app import Service

    with MemoryClient(service=Service(container)) as client:
        memory = client.get(args.memory_id, user_id=args.user)
    if memory is None:
        print(f"no memory {args.memory_id!r} for user {args.user!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(memory, indent=2))
        return 0
    print(f"[{memory['type']}] ({memory['importance']:.2f}) {memory['memory']}")
    print(f"  memory   {memory['memory_id']}")
    print(f"  status   {_status(memory)} · tier {memory['tier']}")
    claim = memory.get("claim")
    if claim:
        value = claim["value"] if claim["polarity"] else f"not {claim['value']}"
        print(
            f"  claim    {claim['subject']} · {claim['attribute']} = {value} · since "
            f"{_day(claim['valid_from'])}"
        )
    print(f"  session  {memory['session_id']} · created {memory['created_at']}")
    print(f"  from     {', '.join(memory['source_event_ids']) or '-'}")
    print(f"  reinforced {memory['reinforcement_count']}× · retrieved {memory['access_count']}×")
    return 0


def cmd_timeline(args: argparse.Namespace, container: Container) -> int:
    """Show how one attribute of a user changed over time ("budget", "where I live"): each
    value it held, oldest first, with its interval."""
    return print_answer(
        container,
        lambda client: client.timeline(args.about, user_id=args.user, subject=args.subject),
        timeline_lines,
        args.json,
    )


def profile_lines(found: ProfileDict) -> list[str]:
    """``memstream profile``'s lines: a heading, then each subject, its kinds, and one line
    per claim: the attribute, the value, since when, the memory.

    Examples
    --------
    >>> porto = {"attribute": "home", "value": "Porto", "polarity": True,
    ...     "statement": "User lives in Porto", "valid_from": "2026-04-02T09:00:00+00:00",
    ...     "memory_id": "m-2", "turns": ["e-2"]}
    >>> found = {"subject": None, "as_of": None, "subjects": [
    ...     {"subject": "User", "kinds": [{"kind": "fact", "entries": [porto]}]}]}
    >>> for line in profile_lines(found):
    ...     print(line)
    what holds now:
    User
      fact
        home: Porto (since 2026-04-02) · m-2
    """
    when = f"as of {found['as_of']}" if found["as_of"] else "now"
    if not found["subjects"]:
        whose = f" about {found['subject']!r}" if found["subject"] else ""
        return [f"nothing holds{whose} {when}: no facts or preferences yet"]
    lines = [f"what holds {when}:"]
    for who in found["subjects"]:
        lines.append(who["subject"])
        for kind in who["kinds"]:
            lines.append(f"  {kind['kind']}")
            for entry in kind["entries"]:
                value = entry["value"] if entry["polarity"] else f"not {entry['value']}"
                attribute = entry["attribute"] or "-"
                lines.append(
                    f"    {attribute}: {value} (since {_day(entry['valid_from'])})"
                    f" · {entry['memory_id']}"
                )
    return lines


def cmd_profile(args: argparse.Namespace, container: Container) -> int:
    """Show what holds about a user now (or as of a past time): their facts and preferences
    by subject and kind, one line each."""
    return print_answer(
        container,
        lambda client: client.profile(user_id=args.user, subject=args.subject, as_of=args.as_of),
        profile_lines,
        args.json,
    )


def cmd_memories_history(args: argparse.Namespace, container: Container) -> int:
    """Show the life of a memory from the memories topic: each event, its time and sources."""
    from memstream.streams.client import MemoryClient
    from memstream.streams.service.app import Service

    with MemoryClient(service=Service(container)) as client:
        entries = client.history(args.memory_id, user_id=args.user)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    if not entries:
        print(f"no history for memory {args.memory_id!r} of user {args.user!r}", file=sys.stderr)
        return 1
    for entry in entries:
        details = " · ".join(f"{name} {value}" for name, value in entry["details"].items())
        print(f"{entry['occurred_at']}  {entry['type']:<18} {details}")
        print(
            f"    event {entry['event_id']} at [{entry['partition']}]@{entry['offset']} · from "
            f"{', '.join(entry['source_event_ids']) or '-'}"
        )
    return 0


def cmd_memories_delete(args: argparse.Namespace, container: Container) -> int:
    """Delete one of a user's memories (publishes a memory_deleted event)."""
    from memstream.streams.client import MemoryClient
    from memstream.streams.service.app import Service

    with MemoryClient(service=Service(container)) as client:
        try:
            event_id = client.delete(args.memory_id, user_id=args.user, reason=args.reason)
        except KeyError:
            print(f"no memory {args.memory_id!r} for user {args.user!r}", file=sys.stderr)
            return 1
    print(f"published memory_deleted {event_id}; the memory leaves search once projected")
    return 0


def cmd_session_show(args: argparse.Namespace, container: Container) -> int:
    """Show a session's working-memory context (asks the worker that owns it)."""
    from memstream.streams.service.app import Service
    from memstream.streams.service.sessions import NoSession, WorkerRefused, WorkerUnreachable

    context = Service(container).sessions.context(
        user_id=args.user, session_id=args.session, budget=args.budget
    )
    try:
        reply = asyncio.run(context)
    except NoSession as exc:
        print(exc, file=sys.stderr)
        return 1
    except (WorkerRefused, WorkerUnreachable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(reply, indent=2))
    else:
        print(reply["prompt"])
    return 0


def cmd_erase(args: argparse.Namespace, container: Container) -> int:
    """Erase a user from every store (crypto-shredding the log) and print the receipt."""
    from memstream.streams.service.app import Service

    receipt = asyncio.run(
        Service(container).memories.erase(args.user, reason=args.reason, wait_s=args.wait)
    )
    print(receipt.render())
    return 0 if receipt.complete else 1
