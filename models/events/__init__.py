"""Event schema: frozen pydantic v2 events sharing one envelope, one module per topic.

``envelope``: :class:`~memstream.models.events.envelope.Event` and the field types; ``chat``:
the chat topic's events (and ``UserErased``); ``consolidation``: the span a session's close
cuts; ``memory``: extractions, memories and every change to them, and retrievals;
``catalog``: the union of them all (``AnyEvent``) and their JSON Schemas.
"""
