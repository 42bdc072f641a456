"""Dead letters: events an agent could not process, kept with their bytes and the reason."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from pydantic import AwareDatetime

from memstream.models.events import Frozen


class DeadLetter(Frozen):
    """One event an agent gave up on. The original bytes are kept, base64-encoded."""

    agent: str
    reason: str
    source_topic: str
    source_partition: int
    source_offset: int
    key_b64: str | None
    value_b64: str
    dead_at: AwareDatetime

    @classmethod
    def of(
        cls,
        *,
        agent: str,
        reason: str,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
    ) -> DeadLetter:
        """A dead letter for the message at ``topic``/``partition``/``offset``."""
        return cls(
            agent=agent,
            reason=reason[:2000],
            source_topic=topic,
            source_partition=partition,
            source_offset=offset,
            key_b64=None if key is None else base64.b64encode(key).decode(),
            value_b64=base64.b64encode(value or b"").decode(),
            dead_at=datetime.now(UTC),
        )

    def original_value(self) -> bytes:
        """The bytes of the event as they were on the source topic."""
        return base64.b64decode(self.value_b64)
