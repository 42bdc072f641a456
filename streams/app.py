"""The composition root: ``create_app(settings)`` builds the Faust app and its agents.

Topics → agents → projections::

    chat ──► session agent ──(sessions table)──► consolidation ──► extraction agent
                                                                        │
    deadletters ◄── anything an agent cannot process                    ▼
                                         LanceDB ◄── memory projector ◄── memories

Processing is at-least-once (Tansu has no transactions), so every step is idempotent: the
session state records the last applied offset, derived events have deterministic ids, and
the projection tracks its source offsets in the rows it writes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from memstream.models.codec import InvalidEvent, encode_event
from memstream.models.events import ConsolidationRequested, Event
from memstream.models.extraction import Extractor, OfflineExtractor
from memstream.models.session import SessionState, WindowLimits, apply, session_key
from memstream.models.settings import Settings
from memstream.streams.agents import (
    CHAT_TYPES,
    CONSOLIDATION_TYPES,
    decode_checked,
    extract_memories,
)
from memstream.streams.deadletters import DeadLetter
from memstream.streams.projector import run_memory_projector
from memstream.streams.tansu import faust_settings_for, prepare_for_broker
from memstream.streams.topics import Topics

log = logging.getLogger(__name__)


def window_limits(settings: Settings) -> WindowLimits:
    """The short-term memory bounds configured in ``settings``."""
    return WindowLimits(
        max_messages=settings.max_messages,
        max_tokens=settings.max_tokens,
        max_tool_calls=settings.max_tool_calls,
        max_entities=settings.max_entities,
    )


def create_app(settings: Settings, *, extractor: Extractor | None = None) -> faust.App:
    """Build the memstream Faust app for ``settings``; nothing starts until a worker runs it.

    Examples
    --------
    >>> app = create_app(Settings(topic_prefix="doc"))  # doctest: +SKIP
    >>> app.conf.id
    'doc.worker'
    """
    prepare_for_broker(settings)
    topics = Topics.from_settings(settings)
    extractor = extractor or OfflineExtractor()
    limits = window_limits(settings)
    app = faust.App(
        f"{settings.topic_prefix}.{settings.app_id}",
        broker=[f"kafka://{address}" for address in settings.broker.split(",")],
        store="memory://",
        datadir=str(settings.faust_dir),
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_in_thread=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        # Table keys and values are JSON; the event topics carry raw bytes that we validate
        # ourselves, so a malformed event never reaches Faust's deserialiser.
        key_serializer="json",
        value_serializer="json",
        **faust_settings_for(settings),
    )

    def raw_topic(name: str) -> Any:
        return app.topic(
            name, key_serializer="raw", value_serializer="raw", partitions=settings.partitions
        )

    chat = raw_topic(topics.chat)
    consolidation = raw_topic(topics.consolidation)
    memories = raw_topic(topics.memories)
    deadletters = raw_topic(topics.deadletters)
    sessions = app.Table("sessions", default=None, partitions=settings.partitions)

    async def publish(topic: Any, event: Event) -> None:
        # Wait for the broker's ack: the state change that follows must never get ahead of it.
        future = await topic.send(key=event.user_id.encode(), value=encode_event(event))
        await future

    async def dead_letter(agent: str, message: Any, reason: str) -> None:
        log.warning(
            "%s: dead-lettered %s[%s]@%s: %s",
            agent, message.topic, message.partition, message.offset, reason,
        )
        letter = DeadLetter.of(
            agent=agent,
            reason=reason,
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            key=message.key,
            value=message.value,
        )
        future = await deadletters.send(key=message.key, value=letter.model_dump_json().encode())
        await future

    @app.agent(chat, name="sessions")
    async def session_agent(stream: Any) -> None:
        """Keep one state per open session; hand transcripts to consolidation."""
        async for event in stream.events():
            message = event.message
            try:
                chat_event = decode_checked(
                    message.value, message.key, CHAT_TYPES, settings.max_event_bytes
                )
                key = session_key(chat_event.user_id, chat_event.session_id)
                current = sessions.get(key)
                state = None if current is None else SessionState.model_validate(current)
                transition = apply(state, chat_event, message.offset, limits)
                if transition.skipped:
                    log.info("sessions: %s: %s", chat_event.event_id, transition.skipped)
                    continue
                for request in transition.consolidations:
                    await publish(consolidation, request)
                if transition.state is None:
                    if key in sessions:
                        del sessions[key]
                else:
                    sessions[key] = transition.state.model_dump(mode="json")
            except InvalidEvent as exc:
                await dead_letter("sessions", message, f"invalid event: {exc}")
            except Exception as exc:
                log.exception("sessions: failed on %s@%s", message.partition, message.offset)
                await dead_letter("sessions", message, f"{type(exc).__name__}: {exc}")

    @app.agent(consolidation, name="extraction")
    async def extraction_agent(stream: Any) -> None:
        """Turn consolidation requests into recorded extractions and memory events."""
        async for event in stream.events():
            message = event.message
            try:
                request = decode_checked(
                    message.value, message.key, CONSOLIDATION_TYPES, settings.max_event_bytes
                )
                assert isinstance(request, ConsolidationRequested)
                # Extraction may be slow (an LLM): keep it off the event loop.
                recorded, added = await asyncio.to_thread(extract_memories, request, extractor)
                await publish(memories, recorded)
                for memory in added:
                    await publish(memories, memory)
            except InvalidEvent as exc:
                await dead_letter("extraction", message, f"invalid event: {exc}")
            except Exception as exc:
                log.exception("extraction: failed on %s@%s", message.partition, message.offset)
                await dead_letter("extraction", message, f"{type(exc).__name__}: {exc}")

    @app.task
    async def project_memories() -> None:
        """Project memory events into LanceDB (single writer, tracks its own offsets)."""
        await run_memory_projector(settings)

    @app.page("/health/")
    async def health(web: Any, request: Any) -> Any:
        return web.json({"ok": True, "app": app.conf.id})

    @app.page("/sessions/")
    async def session_view(web: Any, request: Any) -> Any:
        """Open sessions held by this worker, optionally filtered by user and session."""
        user = request.query.get("user")
        session = request.query.get("session")
        if user is not None and session is not None:
            value = sessions.get(session_key(user, session))
            return web.json({"sessions": [] if value is None else [value]})
        found = [
            value
            for value in sessions.values()
            if value is not None and (user is None or value["user_id"] == user)
        ]
        return web.json({"sessions": found})

    return app
