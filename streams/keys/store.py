"""Per-user content keys, and sealing and opening events with them (crypto-shredding).

Every producer of the durable log seals an event's content with its user's key
(:func:`seal_event`); every consumer opens it (:func:`open_event`). Erasing a user destroys
the user's keys (:meth:`KeyStore.destroy`): every sealed copy in the topics, the archive
and the sessions changelog becomes unreadable, and consumers skip those events (they are
not errors: nothing is dead-lettered).

**Clients and workers must share the key store.** :class:`FileKeyStore` keeps keys in a
directory (``MEMSTREAM_DATA_DIR/keys``); a client on another machine with its own
directory creates a key there on first use, and the workers, which cannot read it, skip
that user's events as if the user had been erased (they log the unknown key id). Run
clients and workers on one machine, share the directory, or put a KMS behind the
:class:`KeyStore` protocol.

Keys have generations: after an erasure, the user's next event creates a new key, so a
returning user starts afresh and nothing of the erased generation can be read with it.
Derived events (consolidation spans, extractions, memories) are sealed with the key of the
events they come from (:func:`seal_event` with ``key_id``): if that key is destroyed while
they are worked out, they are dropped, never sealed again with a newer key.

**A key opens only its own user's events.** A key id starts with the user's
:func:`key_prefix`; :func:`open_event` refuses (``SealError``, a dead letter for the
agents) an event whose key id names another user, whatever its scheme, and
:func:`seal_event` refuses to seal with one. Any :class:`KeyStore` must name keys so.
Events of the first scheme (bound to their event id only) open while the key store's
``accept_legacy_seals`` is on (``MEMSTREAM_ACCEPT_LEGACY_SEALS``, the default).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from memstream.models.crypto import KEY_BYTES, SealError, seal, unseal
from memstream.models.events import Event
from memstream.models.settings import Settings

__all__ = [
    "ACCEPT_LEGACY_SEALS",
    "BatchKeys",
    "FileKeyStore",
    "KeyStore",
    "KeyStoreError",
    "SealError",
    "key_belongs_to",
    "key_prefix",
    "keystore_from_settings",
    "legacy_seals_accepted",
    "open_event",
    "seal_event",
]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)

_KEY_ID = re.compile(r"[0-9a-f]{24}-[0-9a-f]{8}")
#: How often :meth:`FileKeyStore.key_for` re-reads after losing a race before it gives up.
_CREATE_ATTEMPTS = 20
#: Whether legacy seals open when neither the caller nor the key store says (a key store
#: from :func:`keystore_from_settings` carries ``Settings.accept_legacy_seals``).
ACCEPT_LEGACY_SEALS = True


class KeyStoreError(RuntimeError):
    """The key store could not settle on a key (it keeps changing under us)."""


class KeyStore(Protocol):
    """Where the per-user content keys live: a directory, or a KMS behind this protocol.

    Key ids must start with the user's :func:`key_prefix` and a ``-``: a key opens only
    events of the user its id names (:func:`open_event`). A store may carry a boolean
    ``accept_legacy_seals`` (see :func:`legacy_seals_accepted`).
    """

    def key_for(self, user_id: str, *, create: bool) -> tuple[str, bytes] | None:
        """The user's current ``(key_id, key)``; with ``create``, a new one if there is
        none (first use, or after an erasure); None otherwise."""
        ...

    def key_by_id(self, key_id: str) -> bytes | None:
        """The key named ``key_id``; None once it is destroyed (or was never here)."""
        ...

    def destroy(self, user_id: str) -> int:
        """Destroy every key of the user, every generation; return how many."""
        ...


def key_prefix(user_id: str) -> str:
    """The first 24 hex digits of sha256(user id): how key ids name a user without holding
    the id.

    Examples
    --------
    >>> key_prefix("ann")
    '49915e0d7d4b402e3017d010'
    """
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:24]


def key_belongs_to(key_id: str, user_id: str) -> bool:
    """Whether ``key_id`` names a key of ``user_id`` (it starts with the user's prefix).

    Examples
    --------
    >>> key_belongs_to("49915e0d7d4b402e3017d010-0a1b2c3d", "ann")
    True
    >>> key_belongs_to("49915e0d7d4b402e3017d010-0a1b2c3d", "bob")
    False
    """
    return key_id.startswith(key_prefix(user_id) + "-")


def legacy_seals_accepted(keys: KeyStore) -> bool:
    """Whether events of the legacy scheme may open with ``keys``: its
    ``accept_legacy_seals`` attribute (set from the settings), else
    :data:`ACCEPT_LEGACY_SEALS`."""
    return bool(getattr(keys, "accept_legacy_seals", ACCEPT_LEGACY_SEALS))


class FileKeyStore:
    """Keys as files in one directory: the file name is the key id, the content 32 bytes.

    A key id is ``<first 24 hex of sha256(user id)>-<8 random hex>``: neither it nor any
    file name holds the user id. The user's current key is named by a small pointer file,
    ``<prefix>.current``, put in place with ``link`` (which fails if it exists), so two
    processes creating a key at once agree on one: the loser shreds its own and re-reads.
    Files are created with ``O_CREAT | O_EXCL`` and mode 0600, fsynced with their directory.
    :meth:`destroy` overwrites each of the user's key files with zeros, fsyncs and unlinks it.

    Nothing is cached: a key destroyed by another process is gone for every reader at once.

    Examples
    --------
    >>> keys = FileKeyStore(tmp_path / "keys")  # doctest: +SKIP
    >>> key_id, key = keys.key_for("ann", create=True)  # doctest: +SKIP
    >>> keys.key_by_id(key_id) == key, keys.destroy("ann"), keys.key_by_id(key_id)
    ... # doctest: +SKIP
    (True, 1, None)
    """

    def __init__(self, directory: Path, *, accept_legacy_seals: bool = ACCEPT_LEGACY_SEALS) -> None:
        self.directory = Path(directory)
        #: Whether :func:`open_event` opens legacy seals with these keys.
        self.accept_legacy_seals = accept_legacy_seals

    def key_for(self, user_id: str, *, create: bool) -> tuple[str, bytes] | None:
        """The user's current key; with ``create``, a new generation when there is none."""
        prefix = key_prefix(user_id)
        for _ in range(_CREATE_ATTEMPTS):
            current = self._current(prefix)
            if current is not None:
                key = self.key_by_id(current)
                if key is not None:
                    return current, key
                if not create:
                    return None
                # A pointer to a destroyed key: an erasure is under way, or was cut short.
                self._drop_pointer(prefix, current)
            elif not create:
                return None
            created = self._create(prefix)
            if created is not None:
                return created
            time.sleep(0.001)  # another process created one first: read it
        raise KeyStoreError(f"no stable key for key prefix {prefix} in {self.directory}")

    def key_by_id(self, key_id: str) -> bytes | None:
        """The key named ``key_id``, or None (destroyed, unknown, or not a key id)."""
        if not _KEY_ID.fullmatch(key_id):
            return None
        try:
            # os-level: this runs once per sealed event read, pathlib costs twice as much.
            fd = os.open(os.path.join(self.directory, key_id), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            key = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
        if len(key) != KEY_BYTES or not any(key):
            return None  # zeroed by a destroy that did not get to unlink it
        return key

    def destroy(self, user_id: str) -> int:
        """Shred every key of the user (overwrite with zeros, fsync, unlink); return how many.

        The pointer goes first, so a key created while this runs is shredded too rather
        than left behind: writes racing an erasure are lost, never kept readable.
        """
        prefix = key_prefix(user_id)
        if not self.directory.is_dir():
            return 0
        with contextlib.suppress(FileNotFoundError):
            (self.directory / f"{prefix}.current").unlink()
        destroyed = 0
        for path in sorted(self.directory.glob(f"{prefix}-*")):
            if _KEY_ID.fullmatch(path.name) and _shred(path):
                destroyed += 1
        for leftover in self.directory.glob(f".{prefix}*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        _fsync_dir(self.directory)
        return destroyed

    def _current(self, prefix: str) -> str | None:
        try:
            key_id = (self.directory / f"{prefix}.current").read_text(encoding="ascii").strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except UnicodeDecodeError:
            return None
        if not _KEY_ID.fullmatch(key_id) or not key_id.startswith(prefix):
            return None
        return key_id

    def _create(self, prefix: str) -> tuple[str, bytes] | None:
        """A new key made current; None if another process made one current first."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        key_id = f"{prefix}-{secrets.token_hex(4)}"
        key = secrets.token_bytes(KEY_BYTES)
        try:
            _write_new(self.directory / key_id, key)
        except FileExistsError:
            return None  # the same random suffix: try again
        staged = self.directory / f".{prefix}.{secrets.token_hex(8)}.tmp"
        _write_new(staged, key_id.encode("ascii"))
        try:
            # link() is the atomic "create if absent" for a file that already has content.
            os.link(staged, self.directory / f"{prefix}.current")
        except FileExistsError:
            _shred(self.directory / key_id)
            return None
        finally:
            staged.unlink(missing_ok=True)
        _fsync_dir(self.directory)
        log.info("keys: created key %s", key_id)
        return key_id, key

    def _drop_pointer(self, prefix: str, stale: str) -> None:
        if self._current(prefix) == stale:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{prefix}.current").unlink()


class BatchKeys:
    """A key store that remembers the keys it looked up by id, for the span of one batch of
    reads (a fold, a fetch): the batch's events mostly share a few keys. A key destroyed
    meanwhile is still used to the end of the batch, as if it had gone just after; anything
    derived from the batch is sealed with a fresh look-up, so it is dropped then.
    """

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self.accept_legacy_seals = legacy_seals_accepted(keys)
        self._by_id: dict[str, bytes | None] = {}
        self._by_user: dict[str, tuple[str, bytes]] = {}

    def key_for(self, user_id: str, *, create: bool) -> tuple[str, bytes] | None:
        """As :meth:`KeyStore.key_for`; a key found is remembered for the batch."""
        found = self._by_user.get(user_id)
        if found is None:
            found = self.keys.key_for(user_id, create=create)
            if found is not None:
                self._by_user[user_id] = found
        return found

    def key_by_id(self, key_id: str) -> bytes | None:
        """As :meth:`KeyStore.key_by_id`, looked up once per batch."""
        if key_id not in self._by_id:
            self._by_id[key_id] = self.keys.key_by_id(key_id)
        return self._by_id[key_id]

    def destroy(self, user_id: str) -> int:
        """As :meth:`KeyStore.destroy`; forgets what it remembered."""
        self._by_id.clear()
        self._by_user.clear()
        return self.keys.destroy(user_id)


def keystore_from_settings(settings: Settings) -> FileKeyStore:
    """The key store of ``settings`` (``data_dir/keys``), opening legacy seals as
    ``accept_legacy_seals`` says."""
    return FileKeyStore(settings.keys_dir, accept_legacy_seals=settings.accept_legacy_seals)


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


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist), mode 0600, with ``data``, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _shred(path: Path) -> bool:
    """Overwrite ``path`` with zeros, fsync, unlink; False if it was gone already."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return False
    try:
        size = os.fstat(fd).st_size
        os.write(fd, bytes(max(size, KEY_BYTES)))
        os.fsync(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
