"""Crypto-shredding: the content of an event sealed with its user's key (AES-256-GCM).

:func:`seal` encrypts the JSON of an event's ``content_fields`` into
``encryption.ciphertext`` and leaves placeholders in the fields, so the sealed event still
validates and everything that routes, orders or deduplicates events (ids, user, session,
times, types) works on it unopened. :func:`unseal` gives the original event back. Erasing a
user destroys the key, and every sealed copy of the user's content, in every topic, archive
and changelog, can never be read again.

**What a ciphertext is bound to.** Scheme ``aes-256-gcm-v2`` (:data:`SCHEME`, every new
seal) authenticates, as AES-GCM associated data (:func:`event_aad`), the length-prefixed
sequence ``tag, user_id, session_id, type, event_id, key_id, *fields``: each part is its
UTF-8 bytes (``surrogatepass``, as JSON strings may hold lone surrogates) after a 4-byte
big-endian length. A ciphertext copied onto an event of another user, session, type or id,
relabelled with another key id, or with its field list changed, does not open. The first
scheme, ``aes-256-gcm`` (:data:`LEGACY_SCHEME`), bound the event id alone; its events still
open unless ``accept_legacy=False``, and the key store refuses a key of another user for
every scheme (:func:`memstream.streams.keys.sealing.open_event`).

:func:`seal_bytes` / :func:`open_bytes` do the same for opaque values (a session table
value, a dead letter's original bytes), with the key id in a small clear header.

Pure: keys come from the caller (:mod:`memstream.streams.keys.store` keeps them).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
from collections.abc import Sequence
from typing import Annotated, Any, TypeVar, cast, get_origin

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel, TypeAdapter, ValidationError

from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.events.envelope import ContentEncryption, Event, SealScheme

E = TypeVar("E", bound=Event)

#: The scheme of new seals: associated data binds the envelope (see the module docstring).
SCHEME: SealScheme = "aes-256-gcm-v2"
#: The first scheme: associated data is the event id alone. Read, never written.
LEGACY_SCHEME: SealScheme = "aes-256-gcm"
#: First part of a v2 event's associated data. Its length prefix starts with a NUL, which no
#: legacy event id, session table key or dead-letter position starts with (the other
#: associated data sealed under the same user key), so none of them can stand for another.
AAD_TAG = "memstream.event.aes-256-gcm-v2"
KEY_BYTES = 32
NONCE_BYTES = 12
#: The placeholder of a text field that may not be empty, and of transcript messages.
ENCRYPTED = "[encrypted]"
#: Starts every sealed opaque value: neither JSON (``{``) nor zlib (``x``) starts so.
SEALED_MAGIC = b"\x00ms-aes256gcm\x00"


class SealError(ValueError):
    """A sealed event or value cannot be opened with the key given: a wrong key, a key of
    another user, the ciphertext or what it is bound to was altered, or a legacy seal that
    is no longer accepted."""


def is_sealed(event: Event) -> bool:
    """Whether ``event``'s content is encrypted."""
    return event.encryption is not None


def seal(event: E, key: bytes, key_id: str) -> E:
    """``event`` with its content fields encrypted under ``key`` (named ``key_id``), by
    :data:`SCHEME`: bound to the event's user, session, type and id, ``key_id`` and the
    names of the sealed fields.

    An event without content fields, or one sealed already, is returned unchanged.

    Examples
    --------
    >>> key = os.urandom(32)
    >>> sealed = seal(message, key, "k-1")  # doctest: +SKIP
    >>> sealed.content, unseal(sealed, key) == message  # doctest: +SKIP
    ('', True)
    """
    fields = type(event).content_fields
    if not fields or event.encryption is not None:
        return event
    _check_key(key)
    plaintext = json.dumps(
        event.model_dump(mode="json", include=set(fields)),
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8", "surrogatepass")
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, plaintext, event_aad(event, key_id, fields))
    encryption = ContentEncryption(
        scheme=SCHEME,
        key_id=key_id,
        fields=fields,
        ciphertext=base64.b64encode(nonce + sealed).decode(),
    )
    payload = event.model_dump()
    payload.update({name: _placeholder(event, name) for name in fields})
    payload["encryption"] = encryption
    return cast(E, type(event).model_validate(payload))


def unseal(event: E, key: bytes, *, accept_legacy: bool = True) -> E:
    """The original of a sealed event (validated, ``encryption`` None); an event that is
    not sealed is returned unchanged.

    The sealed fields may be fewer than the class's ``content_fields`` today: an event
    sealed before a field became content keeps that field as it was written.

    Parameters
    ----------
    event
        The event as read from the log.
    key
        The key named by ``event.encryption.key_id``.
    accept_legacy
        Whether an event of the first scheme (bound to its event id only) may open.

    Raises
    ------
    SealError
        ``key`` is not the key the event was sealed with; the ciphertext, the fields it
        names, the key id or the envelope it is bound to (user, session, type, event id)
        were altered; or a legacy seal with ``accept_legacy`` off.
    """
    encryption = event.encryption
    if encryption is None:
        return event
    _check_key(key)
    if encryption.scheme == LEGACY_SCHEME:
        if not accept_legacy:
            raise SealError(
                f"event {event.event_id} is sealed with the legacy scheme {LEGACY_SCHEME} "
                "(bound to its event id only), which is no longer accepted "
                "(accept_legacy_seals is off)"
            )
        associated = _legacy_aad(event)
    else:
        associated = event_aad(event, encryption.key_id, encryption.fields)
    try:
        blob = base64.b64decode(encryption.ciphertext, validate=True)
    except (binascii.Error, ValueError):
        raise SealError(f"event {event.event_id}: the ciphertext is not base64") from None
    if len(blob) < NONCE_BYTES + 16:
        raise SealError(f"event {event.event_id}: the ciphertext is truncated")
    try:
        plaintext = AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated)
    except InvalidTag:
        raise SealError(
            f"event {event.event_id} does not open with key {encryption.key_id}: a wrong key, "
            "or the event (its user, session, type, id, key id or sealed fields) was altered"
        ) from None
    values = json.loads(plaintext.decode("utf-8", "surrogatepass"))
    # Any subset of today's content fields: older seals named fewer (see the docstring).
    allowed = set(type(event).content_fields)
    if not isinstance(values, dict) or set(values) != set(encryption.fields) or not (
        set(values) <= allowed
    ):
        raise SealError(f"event {event.event_id}: the sealed fields are not the ones named")
    payload = event.model_dump(mode="json", exclude={"encryption", *values})
    payload.update(values)
    try:
        return cast(E, type(event).model_validate(payload))
    except ValidationError as exc:
        raise SealError(f"event {event.event_id}: the opened content does not validate: {exc}")


def seal_bytes(data: bytes, key: bytes, key_id: str, associated: bytes) -> bytes:
    """``data`` encrypted under ``key``: ``SEALED_MAGIC``, the key id, a NUL, the nonce and
    the AES-GCM output. ``associated`` (not stored) must be given again to open it.

    Examples
    --------
    >>> key = bytes(32)
    >>> blob = seal_bytes(b"state", key, "k-1", b"ann/s1")
    >>> sealed_key_id(blob), open_bytes(blob, key, b"ann/s1")
    ('k-1', b'state')
    """
    _check_key(key)
    if "\x00" in key_id:
        raise ValueError("a key id cannot hold NUL")
    nonce = os.urandom(NONCE_BYTES)
    return (
        SEALED_MAGIC
        + key_id.encode()
        + b"\x00"
        + nonce
        + AESGCM(key).encrypt(nonce, data, associated)
    )


def sealed_key_id(blob: bytes) -> str | None:
    """The key id of a value from :func:`seal_bytes`; None for a value that is not sealed."""
    if not blob.startswith(SEALED_MAGIC):
        return None
    key_id, separator, _ = blob[len(SEALED_MAGIC) :].partition(b"\x00")
    if not separator:
        raise SealError("a sealed value without the end of its key id")
    return key_id.decode()


def open_bytes(blob: bytes, key: bytes, associated: bytes) -> bytes:
    """The data of a value from :func:`seal_bytes`.

    Raises
    ------
    SealError
        Not a sealed value, a wrong key, or altered bytes or associated data.
    """
    _check_key(key)
    if sealed_key_id(blob) is None:
        raise SealError("not a sealed value")
    rest = blob[len(SEALED_MAGIC) :].partition(b"\x00")[2]
    if len(rest) < NONCE_BYTES + 16:
        raise SealError("a sealed value is truncated")
    try:
        return AESGCM(key).decrypt(rest[:NONCE_BYTES], rest[NONCE_BYTES:], associated)
    except InvalidTag:
        raise SealError("a sealed value does not open: a wrong key, or altered bytes") from None


def _check_key(key: bytes) -> None:
    if len(key) != KEY_BYTES:
        raise ValueError(f"an AES-256-GCM key is {KEY_BYTES} bytes, not {len(key)}")


def event_aad(event: Event, key_id: str, fields: Sequence[str]) -> bytes:
    """The associated data of a :data:`SCHEME` seal of ``event`` with ``key_id`` over
    ``fields``: each of ``AAD_TAG``, user id, session id, type, event id, key id and the
    field names, as a 4-byte big-endian length and its UTF-8 (``surrogatepass``) bytes.

    Examples
    --------
    >>> event_aad(message, "k-1", ("content",))[:4]  # doctest: +SKIP
    b'\\x00\\x00\\x00\\x1e'
    """
    parts = (AAD_TAG, event.user_id, event.session_id, event.type, event.event_id, key_id, *fields)
    out = bytearray()
    for part in parts:
        # surrogatepass: a lone surrogate (legal in a decoded JSON string) still encodes.
        encoded = part.encode("utf-8", "surrogatepass")
        out += len(encoded).to_bytes(4, "big") + encoded
    return bytes(out)


def _legacy_aad(event: Event) -> bytes:
    return event.event_id.encode("utf-8", "surrogatepass")


def _placeholder(event: Event, name: str) -> Any:
    """What a sealed content field holds instead of its value: valid for its declared type
    (text: empty, or ``[encrypted]`` where it may not be empty; a dict: empty; a transcript:
    the same messages without their words and names; other tuples and lists: empty;
    anything else, optional text and JSON values: null)."""
    annotation = type(event).model_fields[name].annotation
    origin = get_origin(annotation)
    if annotation is str:
        return "" if _accepts(type(event), name, "") else ENCRYPTED
    if origin is dict:
        return {}
    if origin is tuple:
        value = getattr(event, name)
        if value and all(isinstance(item, TranscriptMessage) for item in value):
            # The transcript keeps its shape (ids, roles, times); the words and the
            # speakers' names go.
            return tuple(
                item.model_copy(update={"content": ENCRYPTED, "name": None}) for item in value
            )
        return ()
    if origin is list:
        return []
    return None


@functools.cache
def _field_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = model.model_fields[name]
    assert field.annotation is not None
    if not field.metadata:
        return TypeAdapter(field.annotation)
    return TypeAdapter(Annotated[(field.annotation, *field.metadata)])  # type: ignore[arg-type]


def _accepts(model: type[BaseModel], name: str, value: Any) -> bool:
    try:
        _field_adapter(model, name).validate_python(value)
    except ValidationError:
        return False
    return True
