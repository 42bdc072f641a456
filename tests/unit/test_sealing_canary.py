"""Generated events of every type, arbitrary text in every field that takes text: once sealed
and encoded for a topic, none of that text is left in the bytes, and opening gives the event
back.

The event types are read from ``AnyEvent`` (every topic's union), so a new type is covered
without touching this test. Which fields are plain ids is decided here, on its own (not read
from ``models/events/``): a field the model lets through unsealed gets the canary unless it
is on this test's short list of identifiers, so widening the model's allow-list by mistake
fails here too.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import string
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AwareDatetime, BaseModel, JsonValue, StringConstraints, TypeAdapter

from memstream.models.codec import decode_event, encode_event
from memstream.models.events import chat, consolidation, memory
from memstream.models.events.catalog import AnyEvent
from memstream.models.events.envelope import Event
from memstream.streams.keys.sealing import open_event, seal_event
from memstream.streams.keys.store import FileKeyStore

#: Put into every text a field can hold; must never reach a topic in the clear.
CANARY = "Qz7CanaryXw4"
#: Fields that hold identifiers (of events, memories, users, sessions, the extractor that
#: ran): generated without the canary. Everything else that takes text gets it.
PLAIN_IDS = frozenset({
    "event_id", "user_id", "agent_id", "session_id", "memory_id", "superseded_by",
    "extraction_event_id", "consolidation_event_id", "source_event_ids", "last_event_id",
    "erasure_id", "extractor", "extractor_version", "model", "prompt_version",
    "embedding_model", "stated_in", "states", "claim_memory_id",
})
USERS = ("ann", "bob", "o'hara ünï")
#: Every event type of every topic.
EVENT_TYPES: tuple[type[Event], ...] = get_args(get_args(AnyEvent)[0])

_IDS = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)
_NO_CONTROL = st.characters(exclude_categories=("Cc", "Cs"))
_ANY_CHAR = st.characters(exclude_categories=("Cs",))  # pydantic refuses lone surrogates
_TIMES = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1), timezones=st.just(dt.UTC)
)


def test_every_event_type_of_the_schema_is_generated() -> None:
    """``AnyEvent`` holds every event class ``models/events/`` defines (so enumerating its
    union members here misses none), and every topic's union is part of it."""
    defined = {
        value
        for module in (chat, consolidation, memory)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Event) and value is not Event
    }
    assert set(EVENT_TYPES) == defined
    for union in (chat.ChatEvent, memory.MemoryEvent):
        assert set(get_args(get_args(union)[0])) <= set(EVENT_TYPES)


def _text(metadata: tuple[Any, ...]) -> st.SearchStrategy[str]:
    """Text holding the canary, within the field's constraints; or, for a string whose
    constraints refuse the canary (a short code), a valid value of it."""
    constraints = [m for m in metadata if isinstance(m, StringConstraints)]
    adapter: TypeAdapter[str] = TypeAdapter(Annotated[(str, *metadata)] if metadata else str)  # type: ignore[arg-type]
    try:
        adapter.validate_python(CANARY)
    except ValueError:
        pattern = next(c.pattern for c in constraints if c.pattern)
        return st.from_regex(pattern, fullmatch=True).filter(lambda text: CANARY not in text)
    longest = min([c.max_length for c in constraints if c.max_length] or [200])
    room = max(0, (longest - len(CANARY)) // 2)
    pattern = next((c.pattern for c in constraints if c.pattern), None)
    side: st.SearchStrategy[str]
    if pattern is not None:
        # Text around the canary that the pattern allows (a packed vector: base64); most
        # random characters would be refused, and hypothesis gives up on such a filter.
        side = st.from_regex(pattern, fullmatch=True).map(lambda text: text[: min(room, 20)])
    else:
        side = st.text(_ANY_CHAR, max_size=min(room, 20))
    return st.tuples(side, side).map(lambda parts: parts[0] + CANARY + parts[1]).filter(
        lambda text: _valid(adapter, text)
    )


def _valid(adapter: TypeAdapter[str], text: str) -> bool:
    try:
        adapter.validate_python(text)
    except ValueError:
        return False
    return True


def _json() -> st.SearchStrategy[Any]:
    leaves = (
        st.none()
        | st.booleans()
        | st.integers(-(2**53), 2**53)
        | st.floats(allow_nan=False, allow_infinity=False)
        | _text(())
    )
    return st.recursive(
        leaves,
        lambda children: st.lists(children, max_size=3)
        | st.dictionaries(_text(()), children, max_size=3),
        max_leaves=6,
    )


def _bounds(metadata: tuple[Any, ...]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, annotated_types.Ge):
            found["min_value"] = m.ge
        elif isinstance(m, annotated_types.Le):
            found["max_value"] = m.le
    return found


def strategy(annotation: Any, metadata: tuple[Any, ...], plain: bool) -> st.SearchStrategy[Any]:
    """Valid values of a field's type; text (unless ``plain``) always holds the canary, and
    collections of text are never empty, so every text-capable field carries it."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        return strategy(base, (*metadata, *extra), plain)
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin is Union or isinstance(annotation, type(int | None)):
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        (inner,) = options
        if plain or not _takes_text(inner):
            return st.none() | strategy(inner, metadata, plain)
        return strategy(inner, metadata, plain)  # always the text, never None
    if annotation is str:
        return _IDS if plain else _text(metadata)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        bounds = {"min_value": 0, "max_value": 1000} | _bounds(metadata)
        return st.integers(**bounds)
    if annotation is float:
        bounds = {"min_value": -1e6, "max_value": 1e6} | _bounds(metadata)
        return st.floats(allow_nan=False, allow_infinity=False, **bounds)
    if annotation is AwareDatetime or annotation is dt.datetime:
        return _TIMES
    if annotation is JsonValue:
        return _json()
    if origin is dict:
        key_type, value_type = get_args(annotation)
        return st.dictionaries(
            strategy(key_type, (), plain), strategy(value_type, (), plain), min_size=1, max_size=3
        )
    if origin is tuple:
        item = get_args(annotation)[0]
        return st.lists(strategy(item, (), plain), min_size=0 if plain else 1, max_size=3).map(
            tuple
        )
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_strategy(annotation)
    raise AssertionError(f"no strategy for {annotation!r}: teach this test the new type")


def _takes_text(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _takes_text(get_args(annotation)[0])
    return annotation is str or annotation is JsonValue or origin in (dict, tuple)


def model_strategy(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Instances of ``model`` with every field given (defaults too), users from ``USERS``."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in model.model_fields.items():
        if name == "encryption":
            continue  # generated unsealed: sealing is what is tested
        if name == "user_id":
            fields[name] = st.sampled_from(USERS)  # a key per user, not per example
            continue
        fields[name] = strategy(field.annotation, tuple(field.metadata), name in PLAIN_IDS)
    return st.fixed_dictionaries(fields).map(lambda values: model(**values))


def takes_text(model: type[BaseModel]) -> bool:
    """Whether some field of ``model`` outside :data:`PLAIN_IDS` takes the canary."""
    for name, field in model.model_fields.items():
        if name in PLAIN_IDS or name == "encryption":
            continue
        annotation = field.annotation
        inner = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
        for candidate in inner:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                if takes_text(candidate):
                    return True
            elif _takes_text(candidate) and _canary_fits(candidate, tuple(field.metadata)):
                return True
    return False


def _canary_fits(annotation: Any, metadata: tuple[Any, ...]) -> bool:
    if get_origin(annotation) is not Annotated and annotation is not str:
        return True  # dicts, tuples, JSON: their text takes it
    adapter: TypeAdapter[Any] = TypeAdapter(
        Annotated[(annotation, *metadata)] if metadata else annotation  # type: ignore[arg-type]
    )
    return _valid(adapter, CANARY)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> FileKeyStore:
    return FileKeyStore(Path(tmp_path_factory.mktemp("canary")) / "keys")


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda cls: cls.__name__)
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_text_of_any_field_reaches_the_topic_in_the_clear(
    event_type: type[Event], data: st.DataObject, keys: FileKeyStore
) -> None:
    event = data.draw(model_strategy(event_type))
    clear = json.dumps(event.model_dump(mode="json"), ensure_ascii=False)
    # The generator is honest: every type with a field that takes text carries the canary.
    assert (CANARY in clear) == takes_text(event_type), event_type.__name__
    sealed = seal_event(event, keys)
    assert sealed is not None
    encoded = encode_event(sealed)
    assert CANARY.encode() not in encoded
    if sealed.encryption is not None:
        assert CANARY.encode() not in base64.b64decode(sealed.encryption.ciphertext)
    # What a consumer reads opens to what the producer had.
    assert open_event(decode_event(encoded), keys) == event


def test_the_canary_alphabet_is_plain_json() -> None:
    # JSON escapes nothing in it, so a leak shows as the bytes themselves.
    assert set(CANARY) <= set(string.ascii_letters + string.digits)
    assert json.dumps(CANARY)[1:-1] == CANARY
