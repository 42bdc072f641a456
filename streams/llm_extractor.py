"""An :class:`~memstream.models.extraction.Extractor` backed by an OpenAI-compatible chat API.

:class:`LLMExtractor` sends a consolidation request's transcript to any server that speaks the
OpenAI chat-completions protocol (OpenAI, vLLM, Ollama, llama.cpp, LM Studio, ...) through the
official ``openai`` client, and turns the JSON it returns into memory candidates.

Local and open models are where structured extraction usually breaks (malformed JSON, an
ignored or rejected ``response_format``, facts silently lost), so every step here is guarded:

* **Structured output where supported.** The first call asks for a strict JSON schema
  (``response_format={"type": "json_schema", ...}``); a server that rejects it with a 4xx
  naming the response format is asked again with ``{"type": "json_object"}``, then with no
  ``response_format`` at all. The downgrade is remembered for later requests.
* **Tolerant parsing, strict validation.** Code fences, prose around the object,
  ``<think>`` blocks and trailing commas are tolerated; the object is then validated with
  pydantic (:class:`ExtractionReply`).
* **Bounded, observable retries.** The client's own retries are off. A reply that does not
  validate, a timeout, a connection error, a 408/409/429 or a 5xx is a failed attempt; at most
  ``max_retries`` more attempts follow, each logged, and a reply that did not validate is
  answered with the validation error so the model can fix it. When every attempt fails,
  :class:`ExtractionFailed` carries the last raw text, the attempt count and the tokens spent,
  so the caller can dead-letter the request: nothing is dropped silently.
* **Source roles.** Only user and assistant turns are shown (system and tool messages hold
  prompts and recalled memories; extracting those again is how junk multiplies). Each turn
  carries its event id and role; a preference, fact or correction whose cited messages are
  all the assistant's is the assistant's statement, not the user's, and is dropped.
* **Language.** The prompt asks for every memory in the conversation's own language.

Conventions of the candidates: preferences and facts keep the model's importance and are
dropped below :data:`~memstream.models.extraction.MIN_IMPORTANCE`; corrections score at least
:data:`CORRECTION_MIN_IMPORTANCE`; the summary scores
:data:`~memstream.models.extraction.SUMMARY_IMPORTANCE` and cites every transcript message;
the entities the model names are listed on each candidate whose content mentions them.
"""

from __future__ import annotations

import json
import logging
import re
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import openai
from openai import Omit, OpenAI, omit
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memstream.models.events import (
    ConsolidationRequested,
    MemoryCandidate,
    MemoryType,
    TokenUsage,
    TranscriptMessage,
)
from memstream.models.extraction import (
    MAX_ANALYSED_CHARS,
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MIN_IMPORTANCE,
    SUMMARY_IMPORTANCE,
    Extraction,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
    from openai.types.chat.completion_create_params import ResponseFormat

    from memstream.models.settings import Settings

log = logging.getLogger(__name__)

#: Identifies the prompt below in ``ExtractionRecorded.prompt_version``; bump it on any change.
PROMPT_VERSION = "extract-v1"
#: Used when no base URL is configured, passed explicitly so the client never falls back to
#: the ``OPENAI_BASE_URL`` environment variable (settings are the only source of config).
OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Sent when no API key is configured: local servers ignore it, and the client refuses to
#: start without one (vLLM's documentation uses the same placeholder).
PLACEHOLDER_API_KEY = "EMPTY"
#: Corrections are what the user took the trouble to fix: they rank high whatever the model says.
CORRECTION_MIN_IMPORTANCE = 0.8
#: A summary may run longer than one statement.
MAX_SUMMARY_CHARS = 2 * MAX_CONTENT_CHARS
#: Names the model may list; more is noise, and longer strings are not names.
MAX_REPLY_ENTITIES = 50
MAX_ENTITY_CHARS = 200
#: Longest validation error fed back to the model or kept in a failure reason.
MAX_ERROR_CHARS = 1_000
#: Backoff between attempts after a transport or server error is capped at this.
MAX_BACKOFF_S = 30.0

FormatMode = Literal["json_schema", "json_object", "text"]
_FORMAT_MODES: tuple[FormatMode, ...] = ("json_schema", "json_object", "text")
#: Roles shown to the model. System and tool messages hold prompts and recalled memories.
_TRANSCRIPT_ROLES = frozenset({"user", "assistant"})
#: HTTP statuses worth another attempt; other 4xx (bad key, unknown model, context too long)
#: would fail the same way again.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: Words in a 400/422 body that mean the server does not support the response format we sent.
_FORMAT_REJECTION_HINTS = (
    "response_format",
    "response format",
    "json_schema",
    "json_object",
    "structured output",
    "guided",
    "grammar",
    "schema",
)

SYSTEM_PROMPT = """\
You extract long-term memories about a user from one chat transcript.

The transcript is a JSON list of messages, each with an "id", a "role" ("user" or \
"assistant") and its "text".

Reply with one JSON object and nothing else, in exactly this shape:
{"preferences": [{"content": "...", "importance": 0.8, "source_event_ids": ["<id>"]}],
 "facts": [{"content": "...", "importance": 0.8, "source_event_ids": ["<id>"]}],
 "summary": "...",
 "entities": ["..."],
 "corrections": [{"content": "...", "importance": 0.9, "source_event_ids": ["<id>"]}]}

Rules:
- Only what the USER says about themselves is a preference or fact. Assistant messages are \
context only: never record the assistant's suggestions, recommendations, questions or claims \
as the user's. If the user accepts a suggestion, the user's reply is the source.
- preferences: lasting likes, dislikes, habits and standing instructions \
("always answer briefly").
- facts: lasting facts about the user: name, home, work, family, diet, health, plans with \
dates. Skip greetings, small talk, one-off requests and what only matters in this chat.
- corrections: what the user corrected (the assistant, or something said earlier), as the \
lesson to remember, e.g. "User lives in Lisbon, not Porto".
- content: one short standalone statement about the user, e.g. "User prefers window seats".
- importance, from 0 to 1: 0.9 identity and hard constraints (name, allergies); 0.7-0.8 clear \
preferences and facts; 0.3-0.6 minor ones; below 0.3 trivia.
- source_event_ids: the ids of the user messages each item comes from.
- summary: 2-3 sentences on what happened in the conversation.
- entities: names of people, places, organisations, products and projects mentioned.
- Language: write every content, the summary and the entities in the language the \
conversation is written in. Never translate.
- Empty lists are fine. Never invent anything that is not in the transcript.
"""


class ExtractedItem(BaseModel):
    """One preference, fact or correction as the model returns it."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(description="One short standalone statement about the user.")
    importance: float = Field(ge=0, le=1, description="0 (trivia) to 1 (identity).")
    source_event_ids: list[str] = Field(
        default_factory=list, description="Ids of the user messages this comes from."
    )

    @field_validator("source_event_ids", mode="before")
    @classmethod
    def _one_id_is_a_list(cls, value: Any) -> Any:
        # Models often cite a single id as a bare string; that is not worth a retry.
        return [value] if isinstance(value, str) else value


class ExtractionReply(BaseModel):
    """The JSON object the model is asked for, validated before anything is kept.

    ``preferences``, ``facts`` and ``summary`` are required, so an unrelated object is a
    failed attempt, not an empty extraction; ``entities`` and ``corrections`` may be left out.
    """

    model_config = ConfigDict(extra="ignore")

    preferences: list[ExtractedItem]
    facts: list[ExtractedItem]
    summary: str = Field(description="2-3 sentences on what happened in the conversation.")
    entities: list[str] = Field(default_factory=list, description="Names mentioned.")
    corrections: list[ExtractedItem] = Field(
        default_factory=list, description="What the user corrected, as lessons."
    )


class ExtractionFailed(RuntimeError):
    """Every attempt to extract from one request failed.

    Parameters
    ----------
    reason
        Why the last attempt failed.
    raw_response
        The last text the server sent back (a reply, or an error body), ``""`` if none.
    attempts
        Calls made, not counting requests the server rejected for their response format.
    usage
        Tokens spent over all attempts.
    """

    def __init__(self, reason: str, raw_response: str, attempts: int, usage: TokenUsage) -> None:
        super().__init__(f"LLM extraction failed after {attempts} attempt(s): {reason}")
        self.reason = reason
        self.raw_response = raw_response
        self.attempts = attempts
        self.usage = usage


class ReplyInvalid(ValueError):
    """A reply that could not be parsed or validated; its message is fed back to the model."""


@dataclass
class _AttemptLog:
    """What the attempts of one request have produced so far."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_raw: str = ""
    last_reason: str = ""
    feedback: list[ChatCompletionMessageParam] = field(default_factory=list)

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens
        )


class LLMExtractor:
    """Extract memories with an LLM behind any OpenAI-compatible chat-completions endpoint.

    Parameters
    ----------
    base_url
        The API root, e.g. ``https://api.openai.com/v1`` or ``http://localhost:11434/v1``.
    api_key
        Sent as a Bearer token; empty means a placeholder, for servers that need none.
    model
        The model name the server knows.
    timeout_s
        Per-call timeout; a call that runs over it is a failed attempt.
    max_retries
        Attempts after the first, for replies that do not validate and transient errors.
    prompt_version
        Recorded with every extraction; change it when the prompt changes.
    temperature
        Sampling temperature; ``None`` leaves it to the server (some reasoning models reject
        any value but their default).
    retry_backoff_s
        Pause before the second attempt after a transport or server error, doubling after
        each; validation failures are retried at once.

    Examples
    --------
    >>> extractor = LLMExtractor(
    ...     base_url="http://127.0.0.1:8000/v1", api_key="", model="qwen2.5-7b-instruct")
    >>> (extractor.name, extractor.version, extractor.prompt_version)
    ('llm', '1', 'extract-v1')
    >>> extractor.close()
    """

    name: str = "llm"
    version: str = "1"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        prompt_version: str = PROMPT_VERSION,
        temperature: float | None = 0.0,
        retry_backoff_s: float = 0.5,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.prompt_version = prompt_version
        self.temperature = temperature
        self.retry_backoff_s = retry_backoff_s
        api_key = api_key or PLACEHOLDER_API_KEY
        # The client's retries are off: ours are bounded, logged and count every failure.
        self._client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        # The client also reads OPENAI_CUSTOM_HEADERS, OPENAI_ORG_ID and OPENAI_PROJECT_ID; an
        # Authorization line in the first replaces the key given here. Per-request headers win
        # over all of them, so the settings stay the only source of credentials.
        self._auth_headers: dict[str, str | Omit] = {
            "Authorization": f"Bearer {api_key}",
            "OpenAI-Organization": omit,
            "OpenAI-Project": omit,
        }
        self._format_index = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMExtractor:
        """An extractor configured by the ``MEMSTREAM_LLM_*`` settings.

        Examples
        --------
        >>> from memstream.models.settings import Settings
        >>> settings = Settings(llm_base_url=None, llm_model="gpt-4o-mini", llm_max_retries=2)
        >>> extractor = LLMExtractor.from_settings(settings)
        >>> (extractor.base_url, extractor.model, extractor.max_retries)
        ('https://api.openai.com/v1', 'gpt-4o-mini', 2)
        >>> extractor.close()
        """
        return cls(
            base_url=settings.llm_base_url or OPENAI_BASE_URL,
            api_key=settings.llm_api_key.get_secret_value(),
            model=settings.llm_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )

    @property
    def response_format_mode(self) -> FormatMode:
        """The response format the next call will ask for (it only ever downgrades)."""
        return _FORMAT_MODES[self._format_index]

    def close(self) -> None:
        """Close the HTTP connections of the underlying client."""
        self._client.close()

    def extract(self, request: ConsolidationRequested) -> Extraction:
        """Ask the model for memories in ``request``'s transcript and validate its reply.

        Raises
        ------
        ExtractionFailed
            When every attempt failed, or the server refused the call outright.
        """
        transcript = [m for m in request.messages if m.role in _TRANSCRIPT_ROLES]
        if not any(m.role == "user" for m in transcript):
            # Nothing the user said, so nothing to remember: spend no tokens.
            return Extraction(
                candidates=(),
                raw_response="",
                model=None,
                prompt_version=self.prompt_version,
                usage=TokenUsage(),
            )
        prompt: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": render_transcript(transcript)},
        ]
        attempts = _AttemptLog()
        for attempt in range(1, self.max_retries + 2):
            attempts.attempts = attempt
            if attempt > 1:
                log.info("llm extractor: attempt %d/%d", attempt, self.max_retries + 1)
            completion = self._call(prompt + attempts.feedback, attempts)
            if completion is None:
                self._pause_before(attempt)
                continue
            raw = _reply_text(completion)
            attempts.last_raw = raw or attempts.last_raw
            try:
                reply = parse_reply(raw, finish_reason=_finish_reason(completion))
            except ReplyInvalid as exc:
                self._note_failure(attempts, f"reply did not validate: {exc}")
                attempts.feedback = [
                    {"role": "assistant", "content": raw or "(empty reply)"},
                    {
                        "role": "user",
                        "content": f"Your reply could not be used: {exc}\n"
                        "Reply again with only the JSON object described above.",
                    },
                ]
                continue
            return Extraction(
                candidates=build_candidates(reply, transcript),
                raw_response=raw,
                model=_model_name(completion, self.model),
                prompt_version=self.prompt_version,
                usage=attempts.usage,
            )
        raise ExtractionFailed(
            attempts.last_reason, attempts.last_raw, attempts.attempts, attempts.usage
        )

    # --- one call -------------------------------------------------------------------------

    def _call(
        self, messages: list[ChatCompletionMessageParam], attempts: _AttemptLog
    ) -> ChatCompletion | None:
        """One attempt: a completion, or ``None`` after a failure worth retrying.

        A server that rejects the response format is asked again at once with the next one;
        that is not a failed attempt, and happens at most twice per extractor.
        """
        while True:
            format_index = self._format_index
            body = ""
            try:
                # The raw response keeps the body as sent, for when it is not a completion.
                response = self._client.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=messages,
                    response_format=self._response_format(format_index),
                    temperature=omit if self.temperature is None else self.temperature,
                    extra_headers=self._auth_headers,
                )
                body = response.http_response.text
                completion = response.parse()
            except openai.APIStatusError as exc:
                body = _error_text(exc)
                attempts.last_raw = body or attempts.last_raw
                if self._rejects_response_format(exc, body, format_index):
                    log.warning(
                        "llm extractor: server rejected response_format %s (HTTP %s), trying %s",
                        _FORMAT_MODES[format_index],
                        exc.status_code,
                        _FORMAT_MODES[format_index + 1],
                    )
                    # max(): concurrent extractions may both have seen the rejection.
                    self._format_index = max(self._format_index, format_index + 1)
                    continue
                reason = f"HTTP {exc.status_code}: {_shorten(body or str(exc))}"
                if exc.status_code in _RETRYABLE_STATUSES or exc.status_code >= 500:
                    self._note_failure(attempts, reason)
                    return None
                # A bad key, an unknown model or an oversized prompt fails the same way again.
                log.error("llm extractor: giving up: %s", reason)
                raise ExtractionFailed(
                    reason, attempts.last_raw, attempts.attempts, attempts.usage
                ) from exc
            except openai.APITimeoutError:
                self._note_failure(attempts, f"no reply within {self.timeout_s:g} s")
                return None
            except openai.APIConnectionError as exc:
                self._note_failure(attempts, f"connection failed: {exc.__cause__ or exc}")
                return None
            except (openai.APIError, json.JSONDecodeError) as exc:
                # E.g. a 200 whose body is not JSON (a proxy's error page).
                attempts.last_raw = body or attempts.last_raw
                self._note_failure(attempts, f"unusable response: {_shorten(str(exc))}")
                return None
            usage = getattr(completion, "usage", None)
            attempts.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
            attempts.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
            if not getattr(completion, "choices", None):
                # JSON, but not a completion (some proxies answer errors with a 200).
                attempts.last_raw = body or attempts.last_raw
                self._note_failure(attempts, f"reply had no choices: {_shorten(body)}")
                return None
            return completion

    def _response_format(self, format_index: int) -> ResponseFormat | Omit:
        mode = _FORMAT_MODES[format_index]
        if mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": "memory_extraction",
                    "schema": reply_json_schema(),
                    "strict": True,
                },
            }
        if mode == "json_object":
            return {"type": "json_object"}
        return omit

    def _rejects_response_format(
        self, exc: openai.APIStatusError, body: str, format_index: int
    ) -> bool:
        if exc.status_code not in (400, 422) or format_index + 1 >= len(_FORMAT_MODES):
            return False
        text = f"{exc} {body}".lower()
        return any(hint in text for hint in _FORMAT_REJECTION_HINTS)

    def _note_failure(self, attempts: _AttemptLog, reason: str) -> None:
        attempts.last_reason = reason
        log.warning(
            "llm extractor: attempt %d/%d failed: %s",
            attempts.attempts,
            self.max_retries + 1,
            reason,
        )

    def _pause_before(self, attempt: int) -> None:
        """Back off after a transport or server error, unless no attempt is left."""
        if attempt <= self.max_retries and self.retry_backoff_s > 0:
            time.sleep(min(self.retry_backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S))


# --- prompt ------------------------------------------------------------------------------


def render_transcript(messages: Sequence[TranscriptMessage]) -> str:
    """The transcript as the model sees it: a JSON list of ``{id, role, text}``.

    JSON keeps ids and roles unambiguous whatever the text contains (a message cannot pose as
    another turn), and ``ensure_ascii=False`` keeps the text in its own script.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 1, 5, tzinfo=timezone.utc)
    >>> print(render_transcript([
    ...     TranscriptMessage(event_id="m-1", role="user", content="Ich wohne in Zürich",
    ...                       occurred_at=at)]))
    Transcript:
    [{"id": "m-1", "role": "user", "text": "Ich wohne in Zürich"}]
    """
    turns = [
        {"id": m.event_id, "role": m.role, "text": _cut(m.content, MAX_ANALYSED_CHARS)}
        for m in messages
    ]
    return "Transcript:\n" + json.dumps(turns, ensure_ascii=False)


def reply_json_schema() -> dict[str, Any]:
    """The JSON schema sent as ``response_format``: :class:`ExtractionReply`, made strict.

    Strict structured output wants every property required, no extra properties and no
    ``$ref``s on some servers, so the pydantic schema is inlined and tightened.
    """
    schema = ExtractionReply.model_json_schema()
    definitions = schema.pop("$defs", {})

    def tighten(node: Any) -> Any:
        if isinstance(node, list):
            return [tighten(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return tighten(definitions[node["$ref"].rsplit("/", 1)[-1]])
        tightened = {
            key: tighten(value) for key, value in node.items() if key not in ("title", "default")
        }
        if tightened.get("type") == "object":
            # Class docstrings are written for developers, not for the model.
            tightened.pop("description", None)
            tightened["required"] = list(tightened.get("properties", {}))
            tightened["additionalProperties"] = False
        return tightened

    result: dict[str, Any] = tighten(schema)
    return result


# --- parsing -----------------------------------------------------------------------------

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
#: Start positions tried when scanning prose for an embedded object.
_MAX_SCAN_STARTS = 50


def parse_json_reply(text: str) -> dict[str, Any]:
    """The JSON object in a model's reply, tolerating what chat models wrap around it.

    Tries, in order: the whole text; each ``` fenced block; the span from the first ``{``
    to the last ``}``; each of those with trailing commas removed; then the first object
    that decodes at any ``{``. Reasoning blocks (``<think>...</think>``) are ignored.

    Raises
    ------
    ReplyInvalid
        When no JSON object can be found.

    Examples
    --------
    >>> parse_json_reply('Sure!\\n```json\\n{"facts": [1, 2,],}\\n```\\nHope that helps.')
    {'facts': [1, 2]}
    """
    text = _THINK_RE.sub("", text).strip()
    if not text:
        raise ReplyInvalid("the reply is empty")
    pieces = [text, *(block.strip() for block in _FENCE_RE.findall(text))]
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        pieces.append(text[first : last + 1])
    error = "no JSON object found"
    for piece in _unique(pieces):
        for candidate in (piece, _TRAILING_COMMA_RE.sub(r"\1", piece)):
            try:
                value = json.loads(candidate)
            except json.JSONDecodeError as exc:
                error = f"not valid JSON ({exc})"
                continue
            if isinstance(value, dict):
                return value
            error = f"expected a JSON object, got {type(value).__name__}"
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char == "{"][:_MAX_SCAN_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ReplyInvalid(error)


def parse_reply(text: str, *, finish_reason: str | None = None) -> ExtractionReply:
    """Parse and validate a model's reply.

    Raises
    ------
    ReplyInvalid
        With a short, model-readable description of what is wrong.
    """
    cut_off = " (the reply was cut off: keep it shorter)" if finish_reason == "length" else ""
    try:
        return ExtractionReply.model_validate(parse_json_reply(text))
    except ReplyInvalid as exc:
        raise ReplyInvalid(f"{exc}{cut_off}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'reply'}: {error['msg']}"
            for error in exc.errors()[:20]
        )
        raise ReplyInvalid(_shorten(f"{problems}{cut_off}")) from None


# --- candidates --------------------------------------------------------------------------


def build_candidates(
    reply: ExtractionReply, transcript: Sequence[TranscriptMessage]
) -> tuple[MemoryCandidate, ...]:
    """Memory candidates from a validated reply: preferences, facts, corrections, summary.

    Cited ids are checked against the transcript: unknown ids are dropped, and an item that
    cites no known id is credited to every user message. An item that cites only assistant
    messages is the assistant's statement and is dropped. Within a type, items with the same
    text (ignoring case, punctuation and spacing) are merged.
    """
    roles = {m.event_id: m.role for m in transcript}
    user_ids = tuple(m.event_id for m in transcript if m.role == "user")
    entities = _clean_entities(reply.entities)
    drafts: dict[tuple[MemoryType, str], MemoryCandidate] = {}

    def add(
        memory_type: MemoryType, content: str, importance: float, sources: tuple[str, ...]
    ) -> None:
        content = _cut(" ".join(content.split()), _content_limit(memory_type))
        key = (memory_type, _dedup_key(content))
        if not key[1]:
            return
        mentioned = tuple(name for name in entities if _mentions(content, name))[:MAX_ENTITIES]
        earlier = drafts.get(key)
        if earlier is not None:
            sources = _unique([*earlier.source_event_ids, *sources])
            mentioned = _unique([*earlier.entities, *mentioned])[:MAX_ENTITIES]
            importance = max(importance, earlier.importance)
            content = earlier.content
        drafts[key] = MemoryCandidate(
            memory_type=memory_type,
            content=content,
            importance=round(importance, 2),
            source_event_ids=sources,
            entities=mentioned,
        )

    groups: tuple[tuple[MemoryType, list[ExtractedItem]], ...] = (
        ("preference", reply.preferences),
        ("fact", reply.facts),
        ("correction", reply.corrections),
    )
    for memory_type, items in groups:
        for item in items:
            cited = _unique(i for i in item.source_event_ids if i in roles)
            if cited and not any(roles[i] == "user" for i in cited):
                log.info("llm extractor: dropped an assistant statement: %r", item.content)
                continue
            if memory_type == "correction":
                importance = max(item.importance, CORRECTION_MIN_IMPORTANCE)
            elif item.importance < MIN_IMPORTANCE:
                continue
            else:
                importance = item.importance
            add(memory_type, item.content, importance, cited or user_ids)
    if reply.summary.strip():
        # The summary covers the whole span, both sides of it.
        add("summary", reply.summary, SUMMARY_IMPORTANCE, tuple(roles))
    return tuple(drafts.values())


# --- helpers -----------------------------------------------------------------------------


def _reply_text(completion: ChatCompletion) -> str:
    """The text of the first choice; a refusal counts as the text (it will not validate)."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        return ""
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    refusal = getattr(message, "refusal", None)
    return f"(refused) {refusal}" if isinstance(refusal, str) else ""


def _model_name(completion: ChatCompletion, configured: str) -> str:
    """The model the server says answered; the configured name if that is unusable."""
    name = getattr(completion, "model", None)
    usable = isinstance(name, str) and 0 < len(name) <= 256 and name.isprintable()
    return name if usable and isinstance(name, str) else configured


def _finish_reason(completion: ChatCompletion) -> str | None:
    choices = getattr(completion, "choices", None) or []
    reason = getattr(choices[0], "finish_reason", None) if choices else None
    return reason if isinstance(reason, str) else None


def _error_text(exc: openai.APIStatusError) -> str:
    """The body of an error response, as sent (the client reads it before raising)."""
    return exc.response.text


def _content_limit(memory_type: MemoryType) -> int:
    return MAX_SUMMARY_CHARS if memory_type == "summary" else MAX_CONTENT_CHARS


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, ending with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _shorten(text: str) -> str:
    return _cut(" ".join(text.split()), MAX_ERROR_CHARS)


def _dedup_key(text: str) -> str:
    kept = (c for c in text.casefold() if not unicodedata.category(c).startswith(("P", "S")))
    return " ".join("".join(kept).split())


def _clean_entities(names: Iterable[str]) -> tuple[str, ...]:
    cleaned = (" ".join(name.split()) for name in names if isinstance(name, str))
    usable = [name for name in cleaned if 0 < len(name) <= MAX_ENTITY_CHARS]
    seen: set[str] = set()
    unique = []
    for name in usable:
        if name.casefold() not in seen:
            seen.add(name.casefold())
            unique.append(name)
    return tuple(unique[:MAX_REPLY_ENTITIES])


def _mentions(content: str, name: str) -> bool:
    """Whether ``content`` names ``name`` (case-insensitive, whole words in spaced scripts).

    Word boundaries are only checked at ASCII edges: in scripts written without spaces
    (Chinese, Japanese, Thai) a name sits directly between other letters.
    """
    start = r"(?<!\w)" if name[0].isascii() else ""
    end = r"(?!\w)" if name[-1].isascii() else ""
    return re.search(start + re.escape(name) + end, content, re.IGNORECASE) is not None


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
