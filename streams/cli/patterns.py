"""``memstream patterns``: one user's learned patterns, through the service: what they
usually ask about, the tools they use, the corrections they repeat, when they are active;
each with the sessions that show it and its decay score."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from memstream.streams.cli.answers import print_answer

if TYPE_CHECKING:
    from memstream.streams.service.container import Container
    from memstream.streams.service.results import PatternsDict


def pattern_lines(found: PatternsDict) -> list[str]:
    """``memstream patterns``'s lines: a heading, then one line per pattern: its line, the
    sessions that show it out of those counted, its decay score and its memory.

    Examples
    --------
    >>> found = {"as_of": None, "patterns": [{"memory_id": "m-1", "pattern": "tool:calc",
    ...     "kind": "tool", "content": "uses the tool calc (3 sessions)", "session_count": 3,
    ...     "sessions_seen": 4, "sessions": ["s1", "s2", "s3"], "event_ids": ["t1"],
    ...     "importance": 0.5, "decay": 0.61, "learned_at": "2026-03-02T09:00:00+00:00"}]}
    >>> for line in pattern_lines(found):
    ...     print(line)
    patterns learned, now:
    uses the tool calc (3 sessions) · 3 of 4 sessions · decay 0.61 · m-1
    """
    when = f"as of {found['as_of']}" if found["as_of"] else "now"
    if not found["patterns"]:
        return [f"no patterns learned {when}: a habit needs at least three sessions"]
    lines = [f"patterns learned, {when}:"]
    for pattern in found["patterns"]:
        lines.append(
            f"{pattern['content']} · {pattern['session_count']} of {pattern['sessions_seen']}"
            f" sessions · decay {pattern['decay']:.2f} · {pattern['memory_id']}"
        )
    return lines


def cmd_patterns(args: argparse.Namespace, container: Container) -> int:
    """Show a user's learned patterns (what they usually ask about, their tools, repeated
    corrections, when they are active), one line each with its evidence."""
    return print_answer(
        container,
        lambda client: client.patterns(user_id=args.user, as_of=args.as_of),
        pattern_lines,
        args.json,
    )
