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
  pydantic (:class:`~memstream.models.llm_reply.ExtractionReply`).
* **Bounded, observable retries.** The client's own retries are off. A reply that does not
  validate, a timeout, a connection error, a 408/409/429 or a 5xx is a failed attempt; at most
  ``max_retries`` more attempts follow, each logged (what kind of failure, never the
  reply: it may quote the user), and a reply that did not validate is
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
:data:`~memstream.models.llm_reply.CORRECTION_MIN_IMPORTANCE`; the summary scores
:data:`~memstream.models.extraction.SUMMARY_IMPORTANCE` and cites every transcript message;
the entities the model names are listed on each candidate whose content mentions them.
The prompt, the reply's shape, its parsing and the candidates are domain rules, in
:mod:`memstream.models.llm_reply`; this module is the client, its retries and its fallbacks.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import openai
from openai import Omit, OpenAI, omit

from memstream.models.beliefs import KnownClaim
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.memory import TokenUsage
from memstream.models.extraction import (
    Extraction,
)
from memstream.models.extraction.tasks import task_candidates, with_task_candidates
from memstream.models.llm_reply import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    TRANSCRIPT_ROLES,
    ReplyInvalid,
    build_candidates,
    parse_reply,
    render_claims,
    render_transcript,
    reply_json_schema,
    shorten,
    shown_claims,
)
from memstream.streams.llm.endpoint import OPENAI_BASE_URL, PLACEHOLDER_API_KEY, request_headers
from memstream.streams.observability.metrics import LLM_TOKENS, Children

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
    from openai.types.chat.completion_create_params import ResponseFormat

    from memstream.models.settings import Settings

log = logging.getLogger(__name__)

#: Backoff between attempts after a transport or server error is capped at this.
MAX_BACKOFF_S = 30.0

FormatMode = Literal["json_schema", "json_object", "text"]
_FORMAT_MODES: tuple[FormatMode, ...] = ("json_schema", "json_object", "text")
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
    response_format
        The response format to ask for first (it only ever downgrades from there):
        ``json_object`` or ``text`` for a server known to handle a JSON schema badly, or to
        see what a model writes unconstrained.
    on_reply
        Called with every reply's text and finish reason, before it is parsed (the rejected
        ones too): how a benchmark keeps what a model actually answers. It sees user
        content; nothing in the worker sets it.

    Examples
    --------
    >>> extractor = LLMExtractor(
    ...     base_url="http://127.0.0.1:8000/v1", api_key="", model="qwen2.5-7b-instruct")
    >>> (extractor.name, extractor.version, extractor.prompt_version)
    ('llm', '2', 'extract-v3')
    >>> extractor.close()
    """

    name: str = "llm"
    version: str = "2"
    reads_claims: bool = True

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
        response_format: FormatMode = "json_schema",
        on_reply: Callable[[str, str | None], None] | None = None,
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
        self.on_reply = on_reply
        api_key = api_key or PLACEHOLDER_API_KEY
        # The client's retries are off: ours are bounded, logged and count every failure.
        self._client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self._auth_headers = request_headers(api_key)
        self._format_index = _FORMAT_MODES.index(response_format)
        #: memstream_llm_tokens_total: every call's tokens, failed attempts' too.
        self._tokens = Children(LLM_TOKENS)

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

    def extract(
        self, request: ConsolidationRequested, known_claims: Sequence[KnownClaim] = ()
    ) -> Extraction:
        """Ask the model for memories in ``request``'s transcript and validate its reply.

        ``known_claims`` (the user's current claims) are shown to the model, numbered, so
        each claim it returns can say what it does to one of them (update, retract, none);
        a number it did not see is refused (see
        :func:`~memstream.models.llm_reply.build_candidates`).

        Raises
        ------
        ExtractionFailed
            When every attempt failed, or the server refused the call outright.
        """
        transcript = [m for m in request.messages if m.role in TRANSCRIPT_ROLES]
        if not any(m.role == "user" for m in transcript):
            # Nothing the user said, so nothing to remember: spend no tokens.
            return Extraction(
                candidates=task_candidates(request),
                raw_response="",
                model=None,
                prompt_version=self.prompt_version,
                usage=TokenUsage(),
            )
        shown = shown_claims(known_claims)
        prompt: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {
                "role": "user",
                "content": f"{render_claims(shown)}\n\n{render_transcript(transcript)}",
            },
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
            if self.on_reply is not None:
                self.on_reply(raw, _finish_reason(completion))
            try:
                reply = parse_reply(raw, finish_reason=_finish_reason(completion))
            except ReplyInvalid as exc:
                self._note_failure(attempts, f"reply did not validate: {exc}", "reply did not validate")
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
                # The task memories come from the request's task changes, not the model.
                candidates=with_task_candidates(
                    build_candidates(reply, transcript, shown), request
                ),
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
                reason = f"HTTP {exc.status_code}: {shorten(body or str(exc))}"
                if exc.status_code in _RETRYABLE_STATUSES or exc.status_code >= 500:
                    self._note_failure(attempts, reason, f"HTTP {exc.status_code}")
                    return None
                # A bad key, an unknown model or an oversized prompt fails the same way again.
                log.error("llm extractor: giving up: HTTP %s", exc.status_code)
                raise ExtractionFailed(
                    reason, attempts.last_raw, attempts.attempts, attempts.usage
                ) from exc
            except openai.APITimeoutError:
                self._note_failure(attempts, f"no reply within {self.timeout_s:g} s", "timeout")
                return None
            except openai.APIConnectionError as exc:
                self._note_failure(
                    attempts, f"connection failed: {exc.__cause__ or exc}", "connection failed"
                )
                return None
            except (openai.APIError, json.JSONDecodeError) as exc:
                # E.g. a 200 whose body is not JSON (a proxy's error page).
                attempts.last_raw = body or attempts.last_raw
                self._note_failure(
                    attempts, f"unusable response: {shorten(str(exc))}", "unusable response"
                )
                return None
            usage = getattr(completion, "usage", None)
            prompt_tokens = getattr(usage, "prompt_tokens", 0) or 0
            completion_tokens = getattr(usage, "completion_tokens", 0) or 0
            attempts.prompt_tokens += prompt_tokens
            attempts.completion_tokens += completion_tokens
            self._tokens.get(self.model, "prompt").inc(prompt_tokens)
            self._tokens.get(self.model, "completion").inc(completion_tokens)
            if not getattr(completion, "choices", None):
                # JSON, but not a completion (some proxies answer errors with a 200).
                attempts.last_raw = body or attempts.last_raw
                self._note_failure(
                    attempts, f"reply had no choices: {shorten(body)}", "reply had no choices"
                )
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

    def _note_failure(self, attempts: _AttemptLog, reason: str, kind: str) -> None:
        """Keep ``reason`` for the failure event (sealed: it may quote the reply, which may
        quote the user) and log ``kind`` only (a fixed text)."""
        attempts.last_reason = reason
        log.warning(
            "llm extractor: attempt %d/%d failed: %s",
            attempts.attempts,
            self.max_retries + 1,
            kind,
        )

    def _pause_before(self, attempt: int) -> None:
        """Back off after a transport or server error, unless no attempt is left."""
        if attempt <= self.max_retries and self.retry_backoff_s > 0:
            time.sleep(min(self.retry_backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S))


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
