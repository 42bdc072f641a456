"""Where the per-user content keys live: the KeyStore port, keys as files in a directory,
and key ids that name their user.

Erasing a user destroys the user's keys (:meth:`KeyStore.destroy`): every copy sealed with
them (:mod:`memstream.streams.keys.sealing`) in the topics, the archive and the sessions
changelog becomes unreadable.

**Clients and workers must share the key store.** :class:`FileKeyStore` keeps keys in a
directory (``MEMSTREAM_DATA_DIR/keys``); a client on another machine with its own
directory creates a key there on first use, and the workers, which cannot read it, skip
that user's events as if the user had been erased (they log the unknown key id). Run
clients and workers on one machine, share the directory, or put a KMS behind the
:class:`KeyStore` protocol.

Keys have generations: after an erasure, the user's next event creates a new key, so a
returning user starts afresh and nothing of the erased generation can be read with it.

A key id starts with the user's :func:`key_prefix` (:func:`key_belongs_to`), so a key opens
only its own user's events; any :class:`KeyStore` must name keys so.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import time
from pathlib import Path
from typing import Protocol

from memstream.models.crypto import KEY_BYTES
from memstream.models.settings import Settings

__all__ = [
    "ACCEPT_LEGACY_SEALS",
    "BatchKeys",
    "FileKeyStore",
    "KeyStore",
    "KeyStoreError",
    "key_belongs_to",
    "key_prefix",
    "keystore_from_settings",
    "legacy_seals_accepted",
]

log = logging.getLogger(__name__)

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
    events of the user its id names (:func:`~memstream.streams.keys.sealing.open_event`). A
    store may carry a boolean ``accept_legacy_seals`` (see :func:`legacy_seals_accepted`).
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
        #: Whether legacy seals open with these keys
        #: (:func:`~memstream.streams.keys.sealing.open_event`).
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
