"""Builders of realistic chat events for tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.envelope import Event


def conversation(
    user: str,
    session: str,
    turns: Sequence[tuple[str, str]],
    *,
    start: datetime = datetime(2026, 11, 2, 9, 0, tzinfo=UTC),
    close: bool = True,
    first: int = 0,
) -> list[Event]:
    """The events of one session: a start, its messages a minute apart, and a close.

    ``first`` numbers the messages from there on, to continue a session in another call.
    """
    events: list[Event] = [
        SessionStarted(event_id=f"{user}/{session}/start", user_id=user, session_id=session, occurred_at=start)
    ]
    for i, (role, text) in enumerate(turns, start=first):
        events.append(
            MessageAdded(
                event_id=f"{user}/{session}/m{i}",
                user_id=user,
                session_id=session,
                occurred_at=start + timedelta(minutes=i + 1),
                role=role,  # type: ignore[arg-type]
                content=text,
            )
        )
    if close:
        events.append(
            SessionClosed(
                event_id=f"{user}/{session}/close",
                user_id=user,
                session_id=session,
                occurred_at=start + timedelta(minutes=first + len(turns) + 2),
            )
        )
    return events
