"""The one settings object. Nothing else in memstream reads the environment.

Sources, first wins: arguments to ``Settings(...)``, ``MEMSTREAM_*`` environment variables,
``MEMSTREAM_*`` lines of a ``.env`` file in the working directory, a TOML file (the one
``MEMSTREAM_CONFIG_FILE`` names, else ``memstream.toml`` in the working directory; keys are
the field names, ``log_level = "debug"``), then the defaults.
"""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

#: The TOML settings file read when ``MEMSTREAM_CONFIG_FILE`` names none (if it exists).
DEFAULT_CONFIG_FILE = Path("memstream.toml")
#: The dotenv file read (if it exists): its ``MEMSTREAM_*`` lines only.
ENV_FILE = Path(".env")
#: The environment variable that names the TOML settings file.
CONFIG_FILE_VARIABLE = "MEMSTREAM_CONFIG_FILE"

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
#: A bearer token (the web token, the metrics token) shorter than this is refused: the token
#: is all that guards the pages.
MIN_TOKEN_CHARS = 16


def weak_token_problem(variable: str, token: SecretStr | None) -> str | None:
    """Why the bearer token of ``variable`` is too weak to use (shorter than
    :data:`MIN_TOKEN_CHARS`, or not printable ASCII without spaces, which an HTTP header must
    carry unchanged), or None if it is strong enough or unset. Never quotes the token.

    Examples
    --------
    >>> weak_token_problem("MEMSTREAM_WEB_TOKEN", SecretStr("short")) is not None
    True
    >>> weak_token_problem("MEMSTREAM_WEB_TOKEN", SecretStr("x" * 16)) is None
    True
    """
    if token is None:
        return None
    value = token.get_secret_value()
    if len(value) >= MIN_TOKEN_CHARS and all("!" <= c <= "~" for c in value):
        return None
    return (
        f"{variable} must be at least {MIN_TOKEN_CHARS} printable ASCII characters without "
        "spaces, e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(32))'`."
    )


class SettingsFileError(SettingsError):
    """A settings file cannot be read: it is missing (when named), or not valid TOML. The
    message names the file and the place, never its values."""


class _TomlFile(TomlConfigSettingsSource):
    """pydantic-settings' TOML source, with errors that say which file is wrong.

    ``named``: the file was named (``MEMSTREAM_CONFIG_FILE``), so it must exist; the default
    one (:data:`DEFAULT_CONFIG_FILE`) is read only if it does.
    """

    def __init__(self, settings_cls: type[BaseSettings], path: Path, *, named: bool) -> None:
        if named and not path.is_file():
            raise SettingsFileError(
                f"{CONFIG_FILE_VARIABLE} names {str(path)!r}, which is not a readable file"
            )
        try:
            super().__init__(settings_cls, toml_file=path)
        except tomllib.TOMLDecodeError as exc:
            # The decoder's message says where (line and column) and what, not the values.
            raise SettingsFileError(f"settings file {str(path)!r} is not valid TOML: {exc}") from None
        except OSError as exc:
            raise SettingsFileError(
                f"settings file {str(path)!r} cannot be read: {exc.strerror}"
            ) from None


class Settings(BaseSettings):
    """memstream configuration: arguments, ``MEMSTREAM_*`` environment variables, ``.env``,
    a TOML file, defaults, the first that sets a field winning (see the module docstring).

    Raises ``pydantic.ValidationError`` for a bad or unknown value from any source, and
    :class:`SettingsFileError` for a TOML file that is named but missing, or not TOML.

    Examples
    --------
    >>> Settings(broker="127.0.0.1:19092").broker_port
    19092
    """

    model_config = SettingsConfigDict(
        env_prefix="MEMSTREAM_",
        frozen=True,
        extra="forbid",
        env_file=ENV_FILE,
        # Only the file's MEMSTREAM_* lines are settings (a .env is often shared with
        # docker compose and other tools); an unknown MEMSTREAM_* line is an error.
        dotenv_filtering="match_prefix",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then ``.env``, then the TOML file (first wins).

        The TOML file is the one ``config_file`` names in the first three (so
        ``MEMSTREAM_CONFIG_FILE`` may stand in ``.env`` too), else :data:`DEFAULT_CONFIG_FILE`.
        """
        named = next(
            (
                found["config_file"]
                for source in (init_settings, env_settings, dotenv_settings)
                if (found := source()).get("config_file")
            ),
            None,
        )
        toml = _TomlFile(
            settings_cls,
            Path(named) if named is not None else DEFAULT_CONFIG_FILE,
            named=named is not None,
        )
        return init_settings, env_settings, dotenv_settings, toml

    #: The TOML settings file (see the module docstring); unset, ``memstream.toml`` in the
    #: working directory if there is one. Named as an argument, in the environment or in
    #: ``.env`` (not in the TOML file itself).
    config_file: Path | None = None

    # --- broker -------------------------------------------------------------------------
    broker: str = Field(
        "127.0.0.1:9092", description="Kafka bootstrap address (host:port, comma separated)."
    )
    broker_kind: Literal["tansu", "kafka"] = Field(
        "tansu",
        description="tansu = the embedded broker (memory storage, quirks patched); "
        "kafka = Apache Kafka, e.g. from docker-compose.yml.",
    )
    partitions: int = Field(4, ge=1, le=256, description="Partitions of every memstream topic.")
    topic_prefix: str = Field("memstream", pattern=r"^[A-Za-z0-9._-]+$")
    app_id: str = Field(
        "worker", pattern=r"^[A-Za-z0-9._-]+$", description="Faust app id, under the topic prefix."
    )
    # Tansu holds JoinGroup for session_timeout/2: 10 s gives a ~5 s join (research/tansu.md).
    session_timeout_s: float = Field(10.0, gt=2)
    heartbeat_interval_s: float = Field(2.0, gt=0)
    # Tansu holds a Fetch for its whole max wait even when records arrive meanwhile (Apache
    # Kafka answers at once): the wait is the latency of every hop between two agents.
    fetch_max_wait_ms: int = Field(
        100, ge=1, le=1500, description="How long a worker's consumer lets a fetch wait for records."
    )

    # --- storage ------------------------------------------------------------------------
    data_dir: Path = Field(Path(".memstream"), description="Faust state and LanceDB live here.")
    #: Where the memory projection lives: empty, ``data_dir/lancedb`` (one machine); or an
    #: object store, ``s3://bucket/prefix`` (the bucket must exist), which any number of
    #: machines share (docs/long-term-memory.md, "Memories on an object store"). The other
    #: ``memory_store_*`` settings apply to an object store only.
    memory_store: str = Field(
        "", pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?)?$"
    )
    #: The S3 endpoint of a store other than AWS (MinIO, Ceph, ...): ``http(s)://host:port``.
    memory_store_endpoint: str | None = Field(None, pattern=r"^https?://[^\s/]+/?$")
    #: The store's region (AWS finds it from the environment when unset; most S3-compatible
    #: stores need one).
    memory_store_region: str | None = Field(None, pattern=r"^[a-z0-9-]+$")
    #: Allow an ``http://`` endpoint (a store on a trusted network only).
    memory_store_allow_http: bool = False
    #: Credentials; unset, the AWS defaults (environment, profile, instance role) apply.
    memory_store_access_key_id: SecretStr | None = None
    memory_store_secret_access_key: SecretStr | None = None
    #: How late a read of an object store may see its changes: a reader reads the live-table
    #: pointer again (one GET) at most this often, so it sees a replay's swap up to this
    #: late; and the service's reads (``memstream serve``, the client, the worker's API) look
    #: up a table's newest version at most this often (LanceDB's read_consistency_interval),
    #: so they see the owner's writes up to this late. 0: both before every read, about 3x
    #: the requests of a search. The workers' own reads (the decider's) are always current.
    memory_store_read_lag_s: float = Field(2.0, ge=0)

    #: Open events sealed by the first scheme (``aes-256-gcm``, bound to the event id only;
    #: still opened only with a key of the event's own user). Turn off once the log holds
    #: none: every record sealed before the upgrade has left the topics' retention.
    accept_legacy_seals: bool = True

    # --- worker -------------------------------------------------------------------------
    #: The worker's web server listens here. Without ``web_token`` only a loopback address
    #: is allowed (the worker refuses to start otherwise).
    web_host: str = "127.0.0.1"
    web_port: int = Field(6066, ge=1, le=65535)
    #: When set, every worker page that returns data requires ``Authorization: Bearer
    #: <token>`` (at least 16 printable ASCII characters); clients send it from here.
    web_token: SecretStr | None = None
    #: Level of memstream's own log records (the long-running commands: worker, serve,
    #: broker); Faust, mode, aiokafka and uvicorn log at ``log_level_libraries`` or above.
    log_level: LogLevel = "info"
    log_level_libraries: LogLevel = "warning"
    #: ``json``: one JSON object per line (time, level, logger, message, request_id, ...);
    #: ``text``: one readable line, for a terminal.
    log_format: Literal["json", "text"] = "json"
    max_event_bytes: int = Field(1_000_000, ge=1024)
    #: The largest record the worker's producer sends (a session's state in the changelog,
    #: a consolidation request, an extraction); a Kafka broker must accept records this
    #: large (``message.max.bytes``; docker-compose.yml sets it). Tansu has no limit.
    max_record_bytes: int = Field(4 * 1024 * 1024, ge=1024 * 1024)
    max_content_chars: int = Field(100_000, ge=1)
    #: Event times outside ``[event_time_earliest, now + event_time_skew_s]`` are refused,
    #: by producers (their clock) and by workers (the time the log received the record).
    event_time_earliest: AwareDatetime = datetime(2000, 1, 1, tzinfo=UTC)
    event_time_skew_s: float = Field(86_400.0, ge=0, le=366 * 86_400)

    #: What this worker runs: any of sessions, extraction, projector, archive (comma
    #: separated), so the CPU-heavy embedding can run in its own process or on its own machine.
    roles: str = Field(
        "sessions,extraction,projector,archive", pattern=r"^[a-z]+(,[a-z]+)*$"
    )
    #: Tune glibc for a long-running worker (2 arenas, a fixed 128 KiB mmap threshold) and
    #: make pyarrow allocate with malloc (see memstream.projections.allocator).
    tune_malloc: bool = True

    # --- HTTP API (memstream serve) -----------------------------------------------------
    #: ``memstream serve`` listens here.
    api_host: str = "127.0.0.1"
    api_port: int = Field(8080, ge=1, le=65535)
    #: The API keys (TOML, or JSON when the name ends in ``.json``): each key's sha256, the
    #: tenant it is bound to, optionally its users and read-only. None: ``api_keys.toml`` in
    #: the data directory (see :attr:`api_keys_path`).
    api_keys_file: Path | None = None
    #: Serve the HTTP API inside each worker too (on ``api_port``, sharing the worker's
    #: key store and memory table), instead of or beside ``memstream serve``.
    serve_in_worker: bool = False
    #: When set, ``GET /metrics`` of ``memstream serve`` requires ``Authorization: Bearer
    #: <token>`` (at least 16 printable ASCII characters); unset, it is open (it holds
    #: counts by route template and status, no user data). The worker's /metrics follows
    #: ``web_token`` like its other pages.
    metrics_token: SecretStr | None = None

    # --- MCP server (memstream mcp) -----------------------------------------------------
    #: The API key ``memstream mcp --transport stdio`` acts with (one of the key file's: its
    #: tenant, users and read-only apply); over HTTP every request brings its own.
    mcp_api_key: SecretStr | None = None
    #: The user a tool call acts for when it names none (``--user`` overrides it).
    mcp_user: str | None = None
    #: ``memstream mcp --transport http`` listens here.
    mcp_host: str = "127.0.0.1"
    mcp_port: int = Field(8090, ge=1, le=65535)
    #: A tool's answer is cut to about this many characters, and each memory's text (and an
    #: episode's conversation) to ``mcp_max_memory_chars``: answers go into a model's context.
    mcp_max_result_chars: int = Field(16_000, ge=1000)
    mcp_max_memory_chars: int = Field(1000, ge=100)

    # --- short-term memory --------------------------------------------------------------
    max_messages: int = Field(50, ge=2)
    max_tokens: int = Field(100_000, ge=1)
    #: Characters of message content in a session's window (bounds the state's size).
    max_window_chars: int = Field(200_000, ge=1)
    max_tool_calls: int = Field(20, ge=1)
    max_entities: int = Field(100, ge=1)
    #: Close a session after this long without events (processing time, see
    #: docs/short-term-memory.md).
    idle_timeout_s: float = Field(1800.0, gt=0)
    #: Close a session whose events span longer than this (event time).
    max_session_age_s: float = Field(86_400.0, gt=0)
    #: How often the worker looks for idle and over-age sessions.
    session_scan_interval_s: float = Field(10.0, gt=0)
    #: How long a closed session's marker is kept to recognise late events and double closes.
    closed_retention_s: float = Field(86_400.0, gt=0)
    #: The session agent folds events in batches and writes each session once per batch.
    session_batch_size: int = Field(10_000, ge=1)
    session_batch_wait_s: float = Field(0.5, gt=0)
    #: The extraction agent takes consolidation requests in batches of up to this many, or
    #: what came within the wait: their decisions' texts are embedded in one call.
    extraction_batch_size: int = Field(16, ge=1)
    extraction_batch_wait_s: float = Field(0.01, gt=0)
    #: Parsed session states kept in memory (the table itself holds compact bytes).
    session_cache_size: int = Field(5_000, ge=0)
    #: Default token budget of the working-memory context (`memstream session show`).
    context_tokens: int = Field(4000, ge=1)

    # --- embeddings ---------------------------------------------------------------------
    embedder: Literal["minilm-onnx", "openai"] = "minilm-onnx"
    #: onnxruntime threads of the bundled embedder; 0: one per core of the machine.
    embedder_threads: int = Field(0, ge=0, le=16)
    embedder_base_url: str | None = None
    embedder_api_key: SecretStr = SecretStr("")
    embedder_model: str = "text-embedding-3-small"

    # --- extraction ---------------------------------------------------------------------
    extractor: Literal["offline", "llm"] = "offline"
    llm_base_url: str | None = None
    llm_api_key: SecretStr = SecretStr("")
    llm_model: str = "gpt-4o-mini"
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(2, ge=0)
    #: A span whose extraction failed is tried again after this delay, up to this many times
    #: in all; every failure is recorded and dead-lettered with the raw reply.
    llm_retry_delay_s: float = Field(60.0, ge=0)
    llm_attempts_per_span: int = Field(3, ge=1)
    #: Prices for the cost report, per million tokens (0: cost is not reported).
    llm_price_prompt_per_mtok: float = Field(0.0, ge=0)
    llm_price_completion_per_mtok: float = Field(0.0, ge=0)

    # --- the memory-augmented agent (memstream chat) -----------------------------------
    #: The agent's model; None: ``llm_model``. It talks to ``llm_base_url`` with
    #: ``llm_api_key``, ``llm_timeout_s`` and ``llm_max_retries``, as extraction does.
    chat_model: str | None = None
    #: Everything the agent sends the model on a turn (instructions, long-term memories,
    #: working memory, the user's message) fits this many tokens.
    chat_prompt_tokens: int = Field(6000, ge=256)

    # --- long-term memory ---------------------------------------------------------------
    #: Memories at or above this importance go straight to long-term; below, short-term.
    long_term_importance: float = Field(0.8, ge=0, le=1)
    #: After a start or a rebalance, extraction waits up to this long for the projector of
    #: the same worker to catch up with the log before it decides (a decision made again
    #: after a crash must see the memories the first one saw).
    decision_catch_up_s: float = Field(120.0, ge=0)
    #: A short-term memory expires this long after memstream learned it (see
    #: docs/interfaces/client.md, "Tiers")...
    short_term_ttl_s: float = Field(86_400.0, gt=0)
    #: ...unless it was retrieved this many times, which promotes it to long-term.
    promote_after_retrievals: int = Field(3, ge=1)
    #: Retrieval: memories per type in a context (the seed's 3 / 5 / 2, plus episodes).
    quota_preference: int = Field(3, ge=0)
    quota_fact: int = Field(5, ge=0)
    quota_summary: int = Field(2, ge=0)
    quota_episode: int = Field(3, ge=0)
    quota_correction: int = Field(2, ge=0)
    #: Composite rank weights. Relevance decides; importance, recency (of the event time) and
    #: use together move a memory by at most 0.04 of relevance, so they reorder near-ties
    #: only (raise them to let them weigh more). Their 4 : 3 : 1 ratio is also the decay
    #: score's, which only uses the ratio. Chosen on the dialogue benchmark (docs/performance.md).
    weight_relevance: float = Field(1.0, ge=0)
    weight_importance: float = Field(0.02, ge=0)
    weight_recency: float = Field(0.015, ge=0)
    weight_use: float = Field(0.005, ge=0)
    #: Half-life of the recency term, days (event time of the memory).
    recency_half_life_days: float = Field(30.0, gt=0)
    #: Token budget of a retrieved memory context.
    memory_context_tokens: int = Field(1500, ge=1)
    #: Recall steps (docs/search.md), each measured on and off on real chats
    #: (``realtalk_recall.py --steps``); on by default only where it raised recall there.
    #: Entity expansion: the names the best hits mention (people, places, ...) pull in the
    #: user's other memories naming them, one hop and one more, each hop scored 0.9 of the
    #: hit that led to it and ranked below it.
    recall_entity_expansion: bool = False
    #: The user's own names in a question ("Where does Ines work now?") read as ``User``,
    #: the subject their statements are written about; the names are their current
    #: ``(User, name, ...)`` claims (:mod:`memstream.projections.own_names`).
    recall_own_names: bool = False
    #: Most hits of one session among a search's first ones before another session's next
    #: hit gets a place (0: no cap), so evidence spread over sessions is not crowded out.
    recall_session_cap: int = Field(0, ge=0)
    #: Reranking of a search's candidates: ``none``, or ``lexical`` (the share of the
    #: question's content words a memory holds, added to its relevance). No cross-encoder
    #: installs from the package registry with its weights inside (docs/search.md).
    recall_rerank: Literal["none", "lexical"] = "none"
    #: Of two hits a question finds almost equally, the newer first (a value said again
    #: differently, "my rent went up to 950", is the likelier to hold now).
    recall_newer_on_near_ties: bool = True
    #: A hit that no longer holds (superseded, or a claim that ended) is marked and ranked
    #: below what holds in its place, which is placed right above it (read from the store
    #: when the search did not find it). Off: such hits rank as found, unmarked.
    recall_stale_below_current: bool = True
    #: A hit whose every cited turn a hit above it cites already waits below the hits that
    #: bring turns not shown yet (asks the index for twice the hits, as a session cap does).
    recall_new_turns_first: bool = True

    # --- forgetting (memstream forget --policy decay, the decay report) -------------------
    #: A memory whose decay score (importance, recency and use, weighted as in the rank)
    #: falls below this is forgotten by the decay policy...
    forget_threshold: float = Field(0.1, ge=0, le=1)
    #: ...unless it is younger than this (event time), or of a type listed here.
    forget_min_age_days: float = Field(30.0, ge=0)
    forget_keep_types: str = Field("correction", pattern=r"^[a-z_]*(,[a-z_]+)*$")
    #: Accesses at which the use term of the decay score reaches 1 (log scale).
    decay_use_saturation: int = Field(10, ge=1)

    # --- projection ---------------------------------------------------------------------
    projection_batch_size: int = Field(256, ge=1)
    projection_batch_wait_s: float = Field(0.2, ge=0)
    #: The projector folds new rows into the indexes (and compacts the files and drops old
    #: table versions) this long after its last refresh, if anything was written since...
    index_refresh_interval_s: float = Field(5.0, gt=0)
    #: ...or sooner, once this many rows were written (never within 5 s of the last one, so
    #: it matters only with a longer interval). Every refresh commits new versions and index
    #: files; rows not yet folded in are scanned flat, which slows searches as they pile up
    #: (at 30 s under 15 chat events/s a search's p50 went from 30 to 100 ms).
    index_refresh_rows: int = Field(5_000, ge=1)
    #: The projector writes retrievals' access counts at most this often, all accesses read
    #: meanwhile in one commit (a bounded run, a replay, writes them at its end). Every such
    #: write is a table version with a deletion file: writing after every fetch made half of
    #: all versions under steady searches. 0 writes after every fetch.
    access_flush_interval_s: float = Field(2.0, ge=0)

    #: Memory the process that answers searches may use to hold its active users' memories
    #: (vectors, words, rows), MiB; the least recently searched go beyond it, and a user
    #: larger than it is searched in the table. 0: every search reads the LanceDB table.
    resident_memory_mb: int = Field(512, ge=0)

    # --- archive ------------------------------------------------------------------------
    #: The archive sink writes a Parquet file per partition and day once this many records
    #: are buffered, or ``archive_flush_s`` after the first buffered record, whichever first.
    archive_batch_size: int = Field(5000, ge=1)
    archive_flush_s: float = Field(2.0, gt=0)

    @field_validator("log_level", "log_level_libraries", mode="before")
    @classmethod
    def _level_in_lower_case(cls, value: object) -> object:
        # MEMSTREAM_LOG_LEVEL=INFO as Faust and uvicorn accept it.
        return value.lower() if isinstance(value, str) else value

    @field_validator(
        "web_token",
        "metrics_token",
        "mcp_api_key",
        "mcp_user",
        "memory_store_access_key_id",
        "memory_store_secret_access_key",
        "memory_store_endpoint",
        "memory_store_region",
        mode="before",
    )
    @classmethod
    def _empty_token_is_none(cls, value: object) -> object:
        # MEMSTREAM_WEB_TOKEN= (empty) means no token, not an empty one that matches
        # "Authorization: Bearer " (the same for the MCP key and user, and the memory
        # store's endpoint, region and credentials). Nothing here may
        # raise: pydantic's errors quote input.
        if value == "" or (isinstance(value, SecretStr) and not value.get_secret_value()):
            return None
        return value

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, value: str) -> str:
        unknown = set(value.split(",")) - {"sessions", "extraction", "projector", "archive"}
        if unknown:
            raise ValueError(f"unknown worker role(s): {', '.join(sorted(unknown))}")
        return value

    @property
    def role_set(self) -> frozenset[str]:
        """The roles this worker runs."""
        return frozenset(self.roles.split(","))

    @property
    def broker_host(self) -> str:
        """Host of the first bootstrap address."""
        return self.broker.split(",")[0].rsplit(":", 1)[0]

    @property
    def broker_port(self) -> int:
        """Port of the first bootstrap address."""
        return int(self.broker.split(",")[0].rsplit(":", 1)[1])

    @property
    def lancedb_dir(self) -> Path:
        """Directory of the LanceDB database."""
        return self.data_dir / "lancedb"

    @property
    def archive_dir(self) -> Path:
        """Directory of the Parquet archive of the event log (and its live pointer)."""
        return self.data_dir / "archive"

    @property
    def keys_dir(self) -> Path:
        """Directory of the per-user content keys (one file per key; see
        :class:`memstream.streams.keys.store.FileKeyStore`). Clients and workers must share it."""
        return self.data_dir / "keys"

    @property
    def api_keys_path(self) -> Path:
        """The API key file of ``memstream serve`` and ``memstream api-key add``."""
        return self.api_keys_file or self.data_dir / "api_keys.toml"

    @property
    def faust_dir(self) -> Path:
        """Directory Faust keeps its table state in."""
        return self.data_dir / "faust"

    def to_env(self) -> dict[str, str]:
        """These settings as ``MEMSTREAM_*`` variables, to hand to a child process."""
        env: dict[str, str] = {}
        for name, value in self:
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            env[f"MEMSTREAM_{name.upper()}"] = str(value)
        return env
