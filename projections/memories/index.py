"""The ``MemoryIndex`` port: what the memory projection offers the code that writes it and
the code that reads it, whatever holds the memories.

:class:`~memstream.projections.memories.table.MemoryProjection` (LanceDB) is the adapter;
``tests/fakes.py`` holds an in-memory one for unit tests, and
``tests/projections/test_memory_index_contract.py`` runs the same tests against both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memstream.models.events.memory import MemoryAdded, MemoryChange
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
)


class MemoryIndex(Protocol):
    """Memory events folded into one current view per memory, read one user at a time.

    Writes are idempotent by source position: the first add of a memory id wins, a change
    at or below the offset its memory last took is skipped, so applying events again leaves
    the index as it was, and :meth:`positions` says where a consumer resumes. Every read
    names its user and sees that user's memories only.
    """

    def apply(self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]) -> int:
        """Project a batch of memory events; return the number of memories written."""
        ...

    def positions(self, user_id: str | None = None) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition): the highest projected + 1; with
        ``user_id``, of that user's rows only (one past the user's last applied event)."""
        ...

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        memory_types: Sequence[str] | None = None,
        filters: SearchFilters | None = None,
    ) -> list[MemoryHit]:
        """The user's memories most relevant to ``query``, best first, at most ``limit``."""
        ...

    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        """One of the user's memories by id, active or not; None if it is not theirs."""
        ...

    def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The user's memories among ``memory_ids`` (active or not), by id; others' and
        unknown ids are left out."""
        ...

    def list_memories(self, user_id: str, *, include_inactive: bool = False) -> list[MemoryRecord]:
        """The user's memories (active ones unless asked otherwise), newest first."""
        ...

    def claim_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's memories that assert a claim, whatever their status but deleted, by
        when the claim began (then memory id): what a timeline is made of."""
        ...

    def task_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's task memories, whatever their status but deleted, by memory id: what
        a project's history is made of."""
        ...
