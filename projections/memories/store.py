"""Where the memory projection lives (:class:`ProjectionStore`): a local directory for one
machine, or an object store (``s3://bucket/prefix``) that any number of machines share.

Everything that opens the projection goes through it: the LanceDB connection, the live-table
pointer ``memories.CURRENT`` and a replay's ``memories.REPLAY`` beside the tables, the
probe of a writable store, and whether the writers' lock files mean anything. On a local
directory it does exactly what the projection did before it had a store: ``lancedb.connect``
of the directory, pointer files replaced with ``os.replace``, ``flock`` files. On an object
store a pointer is one object written with one PUT (a whole object or nothing, in S3), and
there are no locks: each partition's single writer is the worker the consumer group assigned
it to (docs/long-term-memory.md, "Memories on an object store").
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Hashable
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
from pydantic import BaseModel, ConfigDict, SecretStr

from memstream.models.settings import Settings
from memstream.projections.shadow import pointer_target, swap_in, target_name

__all__ = ["ObjectStoreOptions", "ProjectionStore"]

#: The scheme of an object-store location (LanceDB's S3 support; also S3-compatible
#: stores such as MinIO, given an endpoint).
S3_SCHEME = "s3://"


class ObjectStoreOptions(BaseModel):
    """How to reach an S3-compatible object store. Unset fields leave it to the AWS defaults
    (environment, profile, instance role), which both LanceDB and pyarrow read themselves.

    The secrets are ``SecretStr``: they show as ``**********`` in a repr or a log line.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str | None = None
    region: str | None = None
    allow_http: bool = False
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None

    def lancedb_options(self) -> dict[str, str]:
        """The ``storage_options`` of ``lancedb.connect`` (LanceDB's keys, lower case).

        Examples
        --------
        >>> ObjectStoreOptions(region="eu-west-1", allow_http=True).lancedb_options()
        {'aws_region': 'eu-west-1', 'allow_http': 'true'}
        """
        options: dict[str, str] = {}
        if self.endpoint:
            options["aws_endpoint"] = self.endpoint
        if self.region:
            options["aws_region"] = self.region
        if self.allow_http:
            options["allow_http"] = "true"
        if self.access_key_id is not None:
            options["aws_access_key_id"] = self.access_key_id.get_secret_value()
        if self.secret_access_key is not None:
            options["aws_secret_access_key"] = self.secret_access_key.get_secret_value()
        return options


@functools.lru_cache(maxsize=8)
def _filesystem(options: ObjectStoreOptions) -> Any:
    """The pyarrow S3 filesystem of ``options`` (one per process and options)."""
    from pyarrow import fs

    return fs.S3FileSystem(
        access_key=options.access_key_id.get_secret_value() if options.access_key_id else None,
        secret_key=(
            options.secret_access_key.get_secret_value() if options.secret_access_key else None
        ),
        region=options.region,
        endpoint_override=options.endpoint,
        scheme="http" if options.allow_http else "https",
        # The bucket is the operator's to create (and to give a lifecycle, versioning,
        # access policy); a typo in the setting must not create another one.
        allow_bucket_creation=False,
        allow_bucket_deletion=False,
        # Without it an output stream starts a multipart upload when it opens; with it a
        # stream that stays below one part (a pointer) is sent on close as one PutObject.
        allow_delayed_open=True,
    )


class ProjectionStore(BaseModel):
    """Where the memory projection lives: a local directory or an ``s3://`` location.

    Parameters
    ----------
    location
        A directory path, or ``s3://bucket/prefix``.
    options
        How to reach the object store (``s3://`` only).
    pointer_check_s
        On an object store, how long a reader goes on with the live table it knows before it
        reads the pointer object again (a GET); 0 reads it before every read and write. A
        local directory stats its pointer file every time (a stat costs nothing). Also the
        staleness :meth:`reader_options` allows.

    Examples
    --------
    >>> local = ProjectionStore.of(Path("data/lancedb"))
    >>> local.is_local, local.locks_apply, str(local)
    (True, True, 'data/lancedb')
    >>> shared = ProjectionStore(location="s3://memories/prod")
    >>> shared.is_local, shared.locks_apply, shared.object_path("memories.CURRENT")
    (False, False, 'memories/prod/memories.CURRENT')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: str
    options: ObjectStoreOptions | None = None
    pointer_check_s: float = 0.0

    @classmethod
    def of(cls, where: Path | str | ProjectionStore) -> ProjectionStore:
        """``where`` as a store: a store as it is, a path (or ``s3://`` text) with defaults."""
        if isinstance(where, ProjectionStore):
            return where
        return cls(location=str(where))

    @classmethod
    def from_settings(cls, settings: Settings) -> ProjectionStore:
        """The store ``settings`` name: ``memory_store`` when set, else ``data_dir/lancedb``."""
        if not settings.memory_store:
            return cls(location=str(settings.lancedb_dir))
        return cls(
            location=settings.memory_store,
            options=ObjectStoreOptions(
                endpoint=settings.memory_store_endpoint,
                region=settings.memory_store_region,
                allow_http=settings.memory_store_allow_http,
                access_key_id=settings.memory_store_access_key_id,
                secret_access_key=settings.memory_store_secret_access_key,
            ),
            pointer_check_s=settings.memory_store_read_lag_s,
        )

    def __str__(self) -> str:
        # The location only: options hold credentials.
        return self.location

    # --- what kind of store -------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        """Whether the store is a directory of this machine."""
        return not self.location.startswith(S3_SCHEME)

    @property
    def locks_apply(self) -> bool:
        """Whether a partition's writer holds a lock file (``flock``): on a local directory.
        On an object store the consumer group's assignment is the one writer of a partition."""
        return self.is_local

    @property
    def directory(self) -> Path:
        """The local directory (only a local store has one)."""
        if not self.is_local:
            raise ValueError(f"the projection lives in {self.location}, not in a directory")
        return Path(self.location)

    def object_path(self, name: str) -> str:
        """The pyarrow path (``bucket/prefix/name``) of an object beside the tables."""
        if self.is_local:
            raise ValueError("a local store has files, not objects")
        return f"{self.location[len(S3_SCHEME):].rstrip('/')}/{name}"

    # --- LanceDB ------------------------------------------------------------------------

    def reader_options(self) -> dict[str, Any]:
        """Options of a projection that only answers reads (the service's): on an object
        store, look up a table's newest version at most every ``pointer_check_s`` (every
        lookup LISTs the table's versions and GETs a manifest: of ~16 requests of a search
        on moto, 10 went to it); nothing on a local directory, where the lookup is a
        directory listing.

        Examples
        --------
        >>> ProjectionStore.of("data/lancedb").reader_options()
        {}
        >>> ProjectionStore(location="s3://b/p", pointer_check_s=2.0).reader_options()
        {'read_consistency_interval': datetime.timedelta(seconds=2)}
        """
        if self.is_local:
            return {}
        return {"read_consistency_interval": timedelta(seconds=self.pointer_check_s)}

    def connect(self, **kwargs: Any) -> lancedb.DBConnection:
        """``lancedb.connect`` of the store (``kwargs``: its other arguments)."""
        if self.is_local:
            return lancedb.connect(self.directory, **kwargs)
        options = (self.options or ObjectStoreOptions()).lancedb_options()
        return lancedb.connect(self.location, storage_options=options, **kwargs)

    def exists(self) -> bool:
        """Whether anything was written to the store yet (the directory, or an object under
        the prefix)."""
        if self.is_local:
            return self.directory.is_dir()
        from pyarrow import fs

        info = self._filesystem().get_file_info(self.object_path("").rstrip("/"))
        return bool(info.type != fs.FileType.NotFound)

    def _filesystem(self) -> Any:
        return _filesystem(self.options or ObjectStoreOptions())

    # --- small objects beside the tables (pointers) ------------------------------------

    def read_text(self, name: str) -> str | None:
        """The text of the file (object) ``name`` beside the tables; None if there is none."""
        try:
            if self.is_local:
                return (self.directory / name).read_text(encoding="utf-8")
            with self._filesystem().open_input_stream(self.object_path(name)) as stream:
                return bytes(stream.read()).decode("utf-8")
        except FileNotFoundError:
            return None

    def write_text(self, name: str, text: str) -> None:
        """Replace the file (object) ``name`` beside the tables, whole: a local file through
        a synced staging file and ``os.replace``, an object with one PUT."""
        if self.is_local:
            self.directory.mkdir(parents=True, exist_ok=True)
            target = self.directory / name
            staging = target.with_name(target.name + ".tmp")
            staging.write_text(text, encoding="utf-8")
            with staging.open("rb") as handle:
                os.fsync(handle.fileno())
            os.replace(staging, target)
            return
        # Far below pyarrow's multipart threshold: the stream sends one PutObject on close.
        with self._filesystem().open_output_stream(self.object_path(name)) as stream:
            stream.write(text.encode("utf-8"))

    def delete(self, name: str) -> None:
        """Remove the file (object) ``name`` beside the tables, if it is there."""
        if self.is_local:
            (self.directory / name).unlink(missing_ok=True)
            return
        try:
            self._filesystem().delete_file(self.object_path(name))
        except FileNotFoundError:
            pass

    def live_name(self, projection: str, default: str) -> str:
        """The live target of ``projection`` (``default`` until a replay swapped one in);
        see :func:`memstream.projections.shadow.live_name`."""
        return pointer_target(
            self.read_text(f"{projection}.CURRENT"), default, f"{self}/{projection}.CURRENT"
        )

    def swap_in(self, projection: str, name: str) -> str | None:
        """Make ``name`` the live target of ``projection``; return the previous one (None if
        there was no pointer). Readers see the old name or the new one, never anything else."""
        if self.is_local:
            return swap_in(self.directory, projection, name)
        target_name(name)
        previous = self.read_text(f"{projection}.CURRENT")
        self.write_text(f"{projection}.CURRENT", name + "\n")
        return previous.strip() if previous is not None else None

    def pointer_stamp(self, projection: str) -> Hashable | None:
        """What changes when ``projection``'s pointer does: the file's (mtime, inode) on a
        local directory (one ``stat``), the object's text on an object store (one GET);
        None while there is no pointer."""
        if self.is_local:
            try:
                info = (self.directory / f"{projection}.CURRENT").stat()
            except FileNotFoundError:
                return None
            return (info.st_mtime_ns, info.st_ino)
        return self.read_text(f"{projection}.CURRENT")

    # --- probing ------------------------------------------------------------------------

    def probe_writable(self) -> None:
        """Raise unless a small file (object) can be written, synced and removed in the
        store: a full disk or a store that refuses writes fails here."""
        name = f".probe-{os.getpid()}-{threading.get_ident()}"
        if self.is_local:
            self.directory.mkdir(parents=True, exist_ok=True)
            probe = self.directory / name
            with probe.open("wb") as handle:
                handle.write(b"memstream store probe")
                handle.flush()
                os.fsync(handle.fileno())
            probe.unlink()
            return
        self.write_text(name, "memstream store probe")
        self.delete(name)
