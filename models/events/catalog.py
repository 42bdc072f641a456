"""Every event type at once: AnyEvent, the union a record of any topic decodes into, and the
JSON Schema of each type (``memstream schema``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from memstream.models.events.chat import (
    EntityMentioned,
    MessageAdded,
    ScratchpadUpdated,
    SessionClosed,
    SessionStarted,
    TaskProgress,
    TaskSet,
    ToolCalled,
    UserErased,
)
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    ExtractionFailure,
    ExtractionRecorded,
    MemoriesRetrieved,
    MemoryAdded,
    MemoryChange,
    MemoryDeleted,
    MemoryExpired,
    MemoryForgotten,
    MemoryOutdated,
    MemoryPromoted,
    MemoryReinforced,
    MemorySuperseded,
)

__all__ = ["AnyEvent", "json_schemas"]

AnyEvent = Annotated[
    SessionStarted
    | MessageAdded
    | ToolCalled
    | TaskSet
    | TaskProgress
    | ScratchpadUpdated
    | EntityMentioned
    | SessionClosed
    | ConsolidationRequested
    | ExtractionRecorded
    | ExtractionFailure
    | MemoryAdded
    | MemoryChange
    | MemoriesRetrieved
    | UserErased,
    Field(discriminator="type"),
]


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every event type, keyed by its ``type`` value."""
    models: tuple[type[Event], ...] = (
        SessionStarted,
        MessageAdded,
        ToolCalled,
        TaskSet,
        TaskProgress,
        ScratchpadUpdated,
        EntityMentioned,
        SessionClosed,
        ConsolidationRequested,
        ExtractionRecorded,
        ExtractionFailure,
        MemoryAdded,
        MemoryReinforced,
        MemorySuperseded,
        MemoryOutdated,
        MemoryDeleted,
        MemoryPromoted,
        MemoryExpired,
        MemoryForgotten,
        MemoriesRetrieved,
        UserErased,
    )
    return {
        model.model_fields["type"].default: model.model_json_schema(mode="validation")
        for model in models
    }
