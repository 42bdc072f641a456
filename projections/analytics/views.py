"""The documented views (:data:`VIEWS`): each one's name, what a row is, its columns and how
``since`` applies. Their SQL is in :mod:`memstream.projections.analytics.view_sql`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memstream.projections.memories import VIEW_COLUMNS


@dataclass(frozen=True)
class View:
    """One documented view: its name, what a row is, its columns and how ``since`` applies."""

    name: str
    description: str
    columns: tuple[tuple[str, str], ...]
    since: str
    #: Reads the archive (True) or only the memory projection (False).
    archive: bool = True

    @property
    def column_names(self) -> tuple[str, ...]:
        """The view's column names, in order."""
        return tuple(name for name, _ in self.columns)


_MEMORY_COLUMN_DOCS: Mapping[str, str] = {
    "memory_id": "the memory's id",
    "user_id": "whose memory it is",
    "agent_id": "the agent of the event that added it, if any",
    "session_id": "the session it was extracted from",
    "memory_type": "preference, fact, summary, episode, correction or entity",
    "content": "the memory's text",
    "context": "the conversation around it (day, neighbouring turns, speakers); empty if none",
    "importance": "0..1, from the extractor",
    "tier": "short_term or long_term",
    "created_at": "event time of the memory (its memory_added event)",
    "entities": "entities the extractor named (list)",
    "source_event_ids": "chat events it was extracted from (list)",
    "extraction_event_id": "the extraction_recorded event that proposed it",
    "extractor": "extractor name/version",
    "event_id": "its memory_added event",
    "status": "active, superseded, deleted, expired or forgotten",
    "superseded_by": "the memory that replaced it",
    "ended_at": "event time it left the current view",
    "reinforcement_count": "times a near-duplicate reinforced it",
    "last_reinforced_at": "event time of the last reinforcement",
    "learned_at": "broker time of its memory_added event",
    "access_count": "retrievals counted by the projector",
    "last_accessed_at": "event time of the last retrieval",
    "embedding_model": "model of its vector (the vector itself is left out)",
    "claim_subject": "a claim's subject: User, a speaker's name, or User's sister (null: no claim)",
    "claim_attribute": "a claim's attribute key: home, employer, budget, ...",
    "claim_value": "a claim's value",
    "claim_polarity": "false: the claim takes its value back (no longer vegetarian)",
    "claim_cardinality": "one (a new value replaces) or many (values add up)",
    "valid_from": "event time a claim began to hold (the turn that said it)",
    "valid_until": "event time it stopped holding: replaced, taken back, or its stated end",
    "stated_until": "the end a claim stated itself (in Berlin this week)",
    "stated_in": "a claim's: the memories stating it too (episodes, summaries; list)",
    "states": "an episode's or summary's: the claims it states (list)",
    "ended_claims": "of those claims, the ones that ended (list); one ended: it no longer holds as a whole",
}


VIEWS: tuple[View, ...] = (
    View(
        "memories",
        "The current view of every memory, every status (the live LanceDB table, no vectors).",
        tuple((name, _MEMORY_COLUMN_DOCS.get(name, "see the memory projection")) for name in VIEW_COLUMNS),
        since="created_at",
        archive=False,
    ),
    View(
        "entity_nodes",
        "One row per entity of each user's graph (the graph verb's nodes, built by the same "
        "code from the memory projection), now or at --now.",
        (
            ("user_id", "whose graph"),
            ("entity_key", "the entity's key: its name in normal form (case, punctuation aside)"),
            ("name", "its name (User for the user; a name before a description)"),
            ("kind", "user, person, pet, organisation, place, project or thing (null: unknown)"),
            ("aliases", "its other names: descriptions (User's sister), spellings (list)"),
            ("mentions", "memories that name it"),
            ("memory_ids", "those memories (list)"),
            ("sessions", "their sessions (list)"),
            ("turns", "the chat events they came from (list)"),
            ("first_seen", "event time of the first memory naming it"),
            ("last_seen", "event time of the last memory naming it"),
        ),
        since="last_seen",
        archive=False,
    ),
    View(
        "entity_edges",
        "One row per relation of each user's graph (the graph verb's edges): a claim whose "
        "value is an entity, or two entities mentioned in one memory, with its validity.",
        (
            ("user_id", "whose graph"),
            ("source", "the entity the relation is of (its name)"),
            ("source_key", "its entity_key"),
            ("relation", "the claim's attribute (sister, home, employer), or mentioned with"),
            ("target", "the entity it relates to (its name)"),
            ("target_key", "its entity_key"),
            ("kind", "claim or co-mention"),
            ("valid_from", "event time the relation began to hold"),
            ("valid_until", "event time it ended (null: it has not)"),
            ("ended", "valid_until is set: replaced, taken back or run out"),
            ("holds", "it holds now (or at --now)"),
            ("memory_ids", "the memories stating it (list)"),
            ("turns", "the chat events that said it (list)"),
            ("sessions", "the sessions of those memories (list)"),
        ),
        since="valid_from",
        archive=False,
    ),
    View(
        "memory_history",
        "One row per memory event of the memories topic (added, reinforced, superseded, "
        "outdated, deleted, promoted, expired, forgotten), once per event id.",
        (
            ("partition", "partition of the memories topic"),
            ("offset", "offset of the event"),
            ("learned_at", "broker time of the event"),
            ("event_id", "the event's id"),
            ("type", "memory_added, memory_reinforced, ... memory_forgotten"),
            ("user_id", "whose memory"),
            ("session_id", "session of the event"),
            ("agent_id", "agent of the event, if any"),
            ("occurred_at", "event time"),
            ("memory_id", "the memory the event is about"),
            ("memory_type", "memory_added: the memory's type"),
            ("content", "memory_added: the text (null when sealed)"),
            ("importance", "memory_added: 0..1"),
            ("tier", "memory_added: short_term or long_term"),
            ("extractor", "memory_added: extractor name/version"),
            ("extraction_event_id", "memory_added, memory_reinforced: the extraction"),
            ("source_event_ids", "chat events behind it (list)"),
            ("entities", "memory_added: entities (list)"),
            ("superseded_by", "memory_superseded, memory_outdated: what replaced it"),
            ("change", "memory_superseded: updated or retracted"),
            ("decided_by", "memory_superseded: rules or llm"),
            ("valid_until", "memory_superseded, memory_outdated: when its claim stopped holding"),
            ("claim_memory_id", "memory_outdated: the claim whose end outdates it"),
            ("reason", "superseded, deleted, promoted, expired, forgotten: why (null when sealed)"),
            ("similarity", "reinforced, superseded: cosine similarity to the candidate"),
            ("policy", "memory_forgotten: the forgetting policy (decay)"),
            ("score", "memory_forgotten: the decay score the policy saw"),
            ("threshold", "memory_forgotten: the threshold it was under"),
            ("sealed", "content encrypted with the user's key (content, entities, reason: null)"),
        ),
        since="occurred_at",
    ),
    View(
        "accesses",
        "One row per memory a retrieval returned (memories_retrieved events of the accesses "
        "topic, once per event id).",
        (
            ("event_id", "the retrieval event"),
            ("user_id", "who retrieved"),
            ("session_id", "session of the retrieval"),
            ("agent_id", "agent of the retrieval, if any"),
            ("occurred_at", "event time of the retrieval"),
            ("rank", "position of the memory in the retrieval, from 1"),
            ("memory_id", "the memory returned"),
            ("score", "its rank score"),
        ),
        since="occurred_at",
    ),
    View(
        "sessions",
        "One row per user and session, folded from the chat topic's events.",
        (
            ("user_id", "whose session"),
            ("session_id", "the session"),
            ("started_at", "session_started event time (else the first event's)"),
            ("last_event_at", "event time of the last chat event"),
            ("events", "chat events"),
            ("messages", "message_added events"),
            ("user_messages", "message_added events with role user"),
            ("tool_calls", "tool_called events"),
            ("entity_mentions", "entity_mentioned events"),
            ("closed", "a session_closed event was recorded"),
            ("closed_at", "event time of the last session_closed"),
            ("close_reason", "explicit, idle or max_age (the last close)"),
        ),
        since="started_at",
    ),
    View(
        "extractions",
        "One row per extraction (extraction_recorded and extraction_failed events).",
        (
            ("event_id", "the extraction event"),
            ("user_id", "whose transcript"),
            ("session_id", "its session"),
            ("agent_id", "agent, if any"),
            ("occurred_at", "event time"),
            ("consolidation_event_id", "the consolidation request it answered"),
            ("extractor", "extractor name"),
            ("extractor_version", "extractor version"),
            ("model", "LLM model (null for the offline extractor)"),
            ("prompt_version", "prompt version, if any"),
            ("prompt_tokens", "LLM prompt tokens (0 without usage)"),
            ("completion_tokens", "LLM completion tokens (0 without usage)"),
            ("latency_ms", "extraction latency"),
            ("candidates", "candidates returned (null when failed or sealed)"),
            ("ok", "true for extraction_recorded, false for extraction_failed"),
            ("reason", "why it failed (null when sealed)"),
            ("attempts", "failed: attempts made"),
            ("retry_scheduled", "failed: the span will be tried again"),
            ("sealed", "its content is encrypted with the user's key"),
        ),
        since="occurred_at",
    ),
    View(
        "entity_mentions",
        "One row per entity_mentioned chat event (once per event id).",
        (
            ("event_id", "the event"),
            ("user_id", "who mentioned it"),
            ("session_id", "in which session"),
            ("occurred_at", "event time"),
            ("name", "the entity (null when sealed)"),
            ("kind", "its kind, if given (null when sealed)"),
        ),
        since="occurred_at",
    ),
    View(
        "dead_letters",
        "One row per record of the dead-letter topic: an event an agent gave up on.",
        (
            ("partition", "partition of the dead-letter topic"),
            ("offset", "offset of the dead letter"),
            ("dead_at", "when the agent gave up"),
            ("agent", "the agent (sessions, extraction, projector, ...)"),
            ("reason", "why"),
            ("source_topic", "topic of the original record"),
            ("source_partition", "its partition"),
            ("source_offset", "its offset"),
            ("key", "the original key (text)"),
            ("user_id", "user_id of the original event, else its key"),
            ("event_id", "event_id of the original event, if readable"),
            ("type", "type of the original event, if readable"),
            ("sealed", "the original bytes are encrypted with the user's key"),
        ),
        since="dead_at",
    ),
    View(
        "events",
        "Every archived record of every topic, with its envelope fields and JSON payload.",
        (
            ("topic", "the topic"),
            ("partition", "partition"),
            ("offset", "offset"),
            ("timestamp", "broker time"),
            ("date", "UTC day of the broker time (the archive's directory)"),
            ("key", "the record key (text)"),
            ("event_id", "envelope: event id (null when the value is not an event)"),
            ("type", "envelope: event type"),
            ("user_id", "envelope: user id (for a dead letter, its original event's)"),
            ("session_id", "envelope: session"),
            ("agent_id", "envelope: agent"),
            ("occurred_at", "envelope: event time"),
            ("schema_version", "envelope: schema version"),
            ("payload", "the value as JSON (null when it is not JSON)"),
        ),
        since="occurred_at (the broker time for a record without one)",
    ),
)

_VIEWS_BY_NAME: Mapping[str, View] = {view.name: view for view in VIEWS}
#: The topic (a ``Topics`` property) of each view that folds events of one topic.
_VIEW_TOPICS: Mapping[str, str] = {
    "memory_history": "memories",
    "extractions": "memories",
    "accesses": "accesses",
    "sessions": "chat",
    "entity_mentions": "chat",
}
