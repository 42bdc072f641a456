"""Sealing and opening events with their users' keys (crypto-shredding).

Every producer of the durable log seals an event's content with its user's key
(:func:`seal_event`); every consumer opens it (:func:`open_event`). Once the user's keys are
destroyed (an erasure: :meth:`~memstream.streams.keys.store.KeyStore.destroy`), every sealed
copy is unreadable, and consumers skip those events (they are not errors: nothing is
dead-lettered).

Derived events (consolidation spans, extractions, memories) are sealed with the key of the
events they come from (:func:`seal_event` with ``key_id``): if that key is destroyed while
they are worked out, they are dropped, never sealed again with a newer key.

**A key opens only its own user's events.** :func:`open_event` refuses (``SealError``, a
dead letter for the agents) an event whose key id names another user, whatever its scheme,
and :func:`seal_event` refuses to seal with one. Events of the first scheme (bound to their
event id only) open while the key store's ``accept_legacy_seals`` is on
(``MEMSTREAM_ACCEPT_LEGACY_SEALS``, the default).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from memstream.models.crypto import SealError, seal, unseal
from memstream.models.events.envelope import Event
from memstream.streams.keys.store import (
    BatchKeys,
    KeyStore,
    key_belongs_to,
    legacy_seals_accepted,
)

__all__ = ["open_event", "seal_event", "seal_events"]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)


def seal_event(
    event: E, keys: KeyStore, *, key_id: str | None = None, create: bool = True
) -> E | None:
    """``event`` sealed for the durable log; None if there is no key it may be sealed with.

    With ``key_id`` (the key of the events this one derives from) that key seals it: if it
    is gone, the user was erased while this event was worked out, and it must not be
    published under a newer key (None). Without, the user's current key seals it, created
    on first use; with ``create=False`` (events memstream makes about a memory the user
    already has: a promotion, an expiry, a forgetting, a deletion) never created: None when
    the user has none, erased or being erased, and the event must be dropped, never
    published unsealed. Events without content, and sealed ones, are returned as they are.

    Raises
    ------
    SealError
        ``key_id`` names a key of another user than the event's: it would never open.
    """
    if not type(event).content_fields or event.encryption is not None:
        return event
    if key_id is not None:
        if not key_belongs_to(key_id, event.user_id):
            raise SealError(
                f"{event.type} {event.event_id}: key {key_id} is not a key of the event's user"
            )
        key = keys.key_by_id(key_id)
        if key is None:
            return None
        return seal(event, key, key_id)
    found = keys.key_for(event.user_id, create=create)
    if found is None:
        return None
    return seal(event, found[1], found[0])


def seal_events(
    events: Sequence[E],
    keys: KeyStore,
    *,
    key_ids: Sequence[str | None] | None = None,
    create: bool = True,
    source: str = "publish",
) -> list[E]:
    """``events`` sealed for the durable log (:func:`seal_event`), each with the key id
    beside it in ``key_ids`` (None, or no ``key_ids``: its user's current key, created on
    first use unless ``create=False``). An event no key may seal (its user erased, or being
    erased) is dropped and logged (as ``source``), never published unsealed."""
    looked_up = BatchKeys(keys)  # one look-up per user, not per event
    kept: list[E] = []
    for event, key_id in zip(events, key_ids or [None] * len(events), strict=True):
        found = seal_event(event, looked_up, key_id=key_id, create=create)
        if found is None:
            log.info("%s: %s %s dropped: no key may seal it", source, event.type, event.event_id)
            continue
        kept.append(found)
    return kept


_reported: set[str] = set()


def open_event(event: E, keys: KeyStore, *, accept_legacy: bool | None = None) -> E | None:
    """``event`` with its content readable; None if its key is destroyed (an erased user).

    Parameters
    ----------
    event
        An event as decoded from a topic; returned as it is when not sealed.
    keys
        Where the key its ``encryption`` names is looked up.
    accept_legacy
        Whether an event of the legacy scheme (bound to its event id only) opens; None:
        as the key store says (:func:`legacy_seals_accepted`).

    Raises
    ------
    SealError
        The key id names a key of another user than the event's (its ciphertext was
        copied onto this event), the key exists but the event does not open with it
        (altered in the log), or a legacy seal that is not accepted.
    """
    encryption = event.encryption
    if encryption is None:
        return event
    # Before any look-up: another user's key must not even be read for this event. For a
    # legacy seal (bound to the event id alone) this is what keeps it to its user.
    if not key_belongs_to(encryption.key_id, event.user_id):
        raise SealError(
            f"{event.type} {event.event_id} names key {encryption.key_id}, which is not a key "
            "of its user: a ciphertext moved onto another user's event is never opened"
        )
    if accept_legacy is None:
        accept_legacy = legacy_seals_accepted(keys)
    key = keys.key_by_id(encryption.key_id)
    if key is None:
        if encryption.key_id not in _reported and len(_reported) < 10_000:
            _reported.add(encryption.key_id)
            log.warning(
                "keys: key %s is not in the key store: its user was erased (or this process "
                "does not share the producers' key store); its events are skipped",
                encryption.key_id,
            )
        return None
    return unseal(event, key, accept_legacy=accept_legacy)
