"""API keys and tenancy: who a bearer key is, and the user id the service sees for it.

A key file (TOML, or JSON when its name ends in ``.json``) lists each key by its sha256,
never the key itself, bound to a tenant (a short code), optionally to a set of users, and
optionally read-only::

    [[keys]]
    sha256 = "9f86d0818…"
    tenant = "acme"
    users = ["alice", "bob"]   # optional: the key may act for these users only
    read_only = true           # optional: no add, no delete

A presented key is hashed and compared with every entry in constant time
(``hmac.compare_digest``). Nothing here logs a key, or a hash whole.

The service sees ``tenant:user`` (:func:`tenant_user_id`): a tenant cannot hold ``:``, so the
first ``:`` splits the two and no pair of tenant and user ids maps onto another's; two
tenants' "alice" never meet.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

__all__ = [
    "TENANT_PATTERN",
    "ApiKey",
    "KeyFile",
    "KeyFileError",
    "Refused",
    "add_key",
    "bearer_key",
    "check_user_id",
    "hash_key",
    "tenant_user_id",
]

log = logging.getLogger(__name__)

#: A tenant id: a short code, never holding ":" (what keeps :func:`tenant_user_id` injective).
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
#: The longest user id the service takes (the events' ``Identifier``), namespaced included.
MAX_USER_ID_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The longest user id a caller may name, with the shortest tenant (one character and ":");
#: a tenant of n characters leaves ``MAX_USER_ID_CHARS - 1 - n``.
MAX_CALLER_USER_ID_CHARS = MAX_USER_ID_CHARS - 2
#: What a caller's user id may hold: no control characters (what :func:`check_user_id` checks).
CALLER_USER_ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
CALLER_USER_ID_RULE = (
    f"Your user id (within your tenant): 1 to {MAX_USER_ID_CHARS - 1} characters less the "
    f"length of your tenant id ({MAX_USER_ID_CHARS - 1 - len('acme')} for tenant 'acme'), "
    "no control characters."
)
#: Keys memstream makes start with this, so a leaked one is recognisable in a scan.
KEY_PREFIX = "msk_"
#: A presented key longer than this is not looked up (none is; memstream's are 47 characters).
MAX_PRESENTED_KEY_BYTES = 1024


class KeyFileError(ValueError):
    """The key file cannot be read, or an entry of it is malformed."""


class Refused(Exception):
    """A caller may not do what it asked: ``status`` is 403 (not for that user, or a write
    with a read-only key) or 422 (a user id no event can carry)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _Entry(BaseModel):
    """One entry of the key file, as written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    tenant: Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]
    users: list[Annotated[str, Field(min_length=1)]] | None = None
    read_only: bool = False


@dataclass(frozen=True)
class ApiKey:
    """What a key lets its holder do: act for ``tenant``'s users (only ``users``, when set),
    reading only when ``read_only``. ``key_id`` is the first 8 hex digits of the hash, to
    name the key in logs without revealing it."""

    tenant: str
    users: frozenset[str] | None = None
    read_only: bool = False
    key_id: str = ""

    def user_id(self, user_id: str, *, write: bool = False) -> str:
        """The id the service knows the caller's ``user_id`` by (``tenant:user``).

        Raises
        ------
        Refused
            403 for a write with a read-only key or a user outside the key's set; 422 for a
            user id no event can carry (empty, control characters, too long).

        Examples
        --------
        >>> ApiKey("acme").user_id("alice")
        'acme:alice'
        """
        if write and self.read_only:
            raise Refused(403, "this key is read-only")
        if self.users is not None and user_id not in self.users:
            raise Refused(403, "this key may not act for that user")
        return tenant_user_id(self.tenant, check_user_id(user_id, self.tenant))


def check_user_id(user_id: str, tenant: str) -> str:
    """``user_id`` if ``tenant:user_id`` is an id the events can carry; Refused(422) if not."""
    if not user_id:
        raise Refused(422, "user_id must not be empty")
    if len(tenant) + 1 + len(user_id) > MAX_USER_ID_CHARS:
        raise Refused(422, f"user_id is too long (at most {MAX_USER_ID_CHARS - len(tenant) - 1})")
    if _CONTROL.search(user_id):
        raise Refused(422, "user_id must not hold control characters")
    try:
        user_id.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(422, "user_id must be valid Unicode text") from None
    return user_id


def tenant_user_id(tenant: str, user_id: str) -> str:
    """The service's user id of ``user_id`` in ``tenant``: ``tenant:user_id``.

    Examples
    --------
    >>> tenant_user_id("acme", "alice:1")
    'acme:alice:1'
    """
    if not re.fullmatch(TENANT_PATTERN, tenant):
        raise ValueError("not a tenant id")
    return f"{tenant}:{user_id}"


def hash_key(key: str | bytes) -> str:
    """The sha256 (hex) a key file holds for ``key``."""
    raw = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
    return hashlib.sha256(raw).hexdigest()


class KeyFile:
    """The keys of one key file, read again whenever the file changes (size or mtime), so
    ``memstream api-key add`` takes effect without a restart. A file that no longer parses
    keeps the keys read before (and says so in the log); a missing file means no keys.

    Parameters
    ----------
    path
        The key file; None for no file (only ``keys``).
    keys
        Keys held in memory, beside the file's: ``(sha256, ApiKey)`` pairs.
    """

    def __init__(self, path: Path | None, keys: Iterable[tuple[str, ApiKey]] = ()) -> None:
        self.path = path
        self._extra = list(keys)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._loaded: list[tuple[bytes, ApiKey]] = []
        if path is not None and path.exists():
            self._loaded = _read(path)  # a malformed file at start is an error, not a warning
            self._stamp = _stamp(path)

    @classmethod
    def of(cls, keys: dict[str, ApiKey]) -> KeyFile:
        """Keys held in memory only: ``{key: ApiKey}`` (tests, embedding)."""
        return cls(None, [(hash_key(key), api_key) for key, api_key in keys.items()])

    def authenticate(self, presented: bytes) -> ApiKey | None:
        """The key ``presented`` is, or None; every entry compared in constant time."""
        digest = hashlib.sha256(presented).digest()
        found: ApiKey | None = None
        for known, api_key in self._entries():
            # No early exit: the time taken does not tell which entry matched.
            if hmac.compare_digest(known, digest) and found is None:
                found = api_key
        return found

    def tenants(self) -> list[str]:
        """The tenants the keys are bound to, sorted, each once."""
        return sorted({api_key.tenant for _, api_key in self._entries()})

    def _entries(self) -> list[tuple[bytes, ApiKey]]:
        extra = [(bytes.fromhex(digest), key) for digest, key in self._extra]
        if self.path is None:
            return extra
        with self._lock:
            stamp = _stamp(self.path)
            if stamp != self._stamp:
                try:
                    self._loaded = _read(self.path) if stamp is not None else []
                    self._stamp = stamp
                except KeyFileError as exc:
                    log.warning(
                        "api keys: %s; keeping the %d keys read before", exc, len(self._loaded)
                    )
            return self._loaded + extra


def bearer_key(keys: KeyFile, authorization: Sequence[bytes]) -> ApiKey | None:
    """The key of a request whose ``Authorization`` header values are ``authorization``: one
    ``Bearer <key>`` header naming a key of ``keys``; None for anything else (no header, two,
    another scheme, an unknown or overlong key).

    Examples
    --------
    >>> keys = KeyFile.of({"msk_example": ApiKey("acme")})
    >>> bearer_key(keys, [b"Bearer msk_example"])
    ApiKey(tenant='acme', users=None, read_only=False, key_id='')
    >>> bearer_key(keys, [b"Basic msk_example"]) is None
    True
    """
    if len(authorization) != 1:
        return None
    scheme, _, token = authorization[0].partition(b" ")
    token = token.strip(b" ")
    if scheme.lower() != b"bearer" or not token or len(token) > MAX_PRESENTED_KEY_BYTES:
        return None
    return keys.authenticate(token)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return (status.st_mtime_ns, status.st_size)


def _read(path: Path) -> list[tuple[bytes, ApiKey]]:
    try:
        text = path.read_text(encoding="utf-8")
        document: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        # ValueError covers both parsers' errors; only the type is told, never the text.
        raise KeyFileError(f"cannot read the key file {path.name}: {type(exc).__name__}") from None
    entries = document.get("keys", []) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise KeyFileError(f"the key file {path.name} must hold a list of keys under 'keys'")
    found = []
    for number, raw in enumerate(entries):
        try:
            entry = _Entry.model_validate(raw)
        except ValidationError as exc:
            fields = sorted({".".join(map(str, e["loc"])) for e in exc.errors()})
            raise KeyFileError(f"key {number} of {path.name}: bad {', '.join(fields)}") from None
        users = frozenset(entry.users) if entry.users is not None else None
        api_key = ApiKey(entry.tenant, users, entry.read_only, entry.sha256[:8])
        found.append((bytes.fromhex(entry.sha256), api_key))
    return found


def add_key(
    path: Path, tenant: str, users: Sequence[str] | None = None, *, read_only: bool = False
) -> str:
    """Append a new random key to the key file (created, mode 0600) and return the key: the
    file keeps only its sha256, so this is the one time it is seen.

    Raises
    ------
    ValueError
        ``tenant`` is not a short code, or a user id no event can carry.
    """
    if not re.fullmatch(TENANT_PATTERN, tenant):
        raise ValueError(
            "the tenant must be 1 to 64 lower-case letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    for user in users or ():
        check_user_id(user, tenant)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    entry: dict[str, Any] = {"sha256": hash_key(key), "tenant": tenant}
    if users:
        entry["users"] = sorted(set(users))
    if read_only:
        entry["read_only"] = True
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        _read(path)  # never append to a file that does not parse
    if path.suffix == ".json":
        document = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"keys": []}
        document["keys"].append(entry)
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
        os.replace(temporary, path)
    else:
        # JSON strings without ASCII escapes are TOML basic strings (no control characters:
        # checked above).
        lines = ["", "[[keys]]"] + [
            f"{name} = {json.dumps(value, ensure_ascii=False)}" for name, value in entry.items()
        ]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    return key
