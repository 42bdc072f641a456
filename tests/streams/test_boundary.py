"""The record boundary: a record's fault is dead-lettered, a broker's or store's is waited
out without skipping, and a dead letter is never lost to a broker failure or its size."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import errors as kafka_errors

from memstream.models.codec import InvalidEvent
from memstream.streams.agents.boundary import Backoff, RecordBoundary, is_data_fault, supervise
from memstream.streams.kafka.deadletters import DeadLetter, DeadLetterSink


class Sent:
    """A dead-letter topic that keeps what it is sent, and can fail as a broker would."""

    def __init__(self, failures: Sequence[BaseException] = ()) -> None:
        self.letters: list[DeadLetter] = []
        self.failures = list(failures)

    async def __call__(self, key: bytes | None, value: bytes) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.letters.append(DeadLetter.model_validate_json(value))


class Switch:
    """A probe that answers as told."""

    name = "store"

    def __init__(self, healthy: bool = True) -> None:
        self.up = healthy
        self.asked = 0

    async def healthy(self) -> bool:
        self.asked += 1
        return self.up


def record(offset: int, value: bytes = b"{}") -> Any:
    return SimpleNamespace(topic="t", partition=0, offset=offset, key=b"ann", value=value)


def boundary(sent: Sent, probe: Switch, **kwargs: Any) -> RecordBoundary:
    return RecordBoundary("agent", DeadLetterSink(sent, None, backoff_s=(0.001, 0.01)), [probe],
                          backoff=Backoff(0.001, 0.01), **kwargs)


async def test_a_fault_of_the_record_is_dead_lettered_with_its_reason_and_the_agent_moves_on() -> None:
    sent, probe = Sent(), Switch()
    guard = boundary(sent, probe)

    async def step() -> None:
        raise OverflowError("date value out of range")

    applied, _ = await guard.run(record(7), step)
    assert not applied
    assert [(letter.source_offset, letter.reason) for letter in sent.letters] == [
        (7, "cannot be processed: OverflowError")
    ]
    assert probe.asked == 0  # a data fault never needs the probes


async def test_while_the_store_is_down_the_same_record_is_tried_again_and_never_dead_lettered() -> None:
    sent, probe = Sent(), Switch(healthy=False)
    states: list[str | None] = []
    guard = boundary(sent, probe, report=lambda name, state: states.append(state))
    attempts = 0

    async def step() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 5:
            probe.up = True
        if attempts <= 5:
            raise OSError(28, "No space left on device")
        return "written"

    assert await guard.run(record(1), step) == (True, "written")
    assert sent.letters == [] and attempts == 6
    assert states[0] is not None and states[0].startswith("retrying") and states[-1] is None


async def test_a_failure_that_persists_while_broker_and_store_answer_is_the_records() -> None:
    sent, probe = Sent(), Switch()
    guard = boundary(sent, probe, attempts=3)
    attempts = 0

    async def step() -> None:
        nonlocal attempts
        attempts += 1
        raise RuntimeError("lance refused the row")

    assert await guard.run(record(3), step) == (False, None)
    assert attempts == 3 and len(sent.letters) == 1
    assert sent.letters[0].reason == "cannot be processed: RuntimeError"


async def test_a_batch_with_a_poison_record_is_applied_one_record_at_a_time() -> None:
    sent, probe = Sent(), Switch()
    guard = boundary(sent, probe)
    applied: list[int] = []

    async def step(records: Sequence[Any]) -> None:
        if any(r.value == b"poison" for r in records):
            raise ValueError("cannot project")
        applied.extend(r.offset for r in records)

    await guard.run_batch([record(0), record(1, b"poison"), record(2)], step)
    assert applied == [0, 2]
    assert [letter.source_offset for letter in sent.letters] == [1]


async def test_the_exception_message_goes_to_the_sealed_detail_not_the_plain_reason() -> None:
    sent, probe = Sent(), Switch()
    guard = boundary(sent, probe)

    async def step() -> None:
        raise KeyError("the user's secret words")

    await guard.run(record(0), step)
    letter = sent.letters[0]
    assert "secret" not in letter.reason
    assert "secret" in (letter.original_detail() or "")


async def test_an_invalid_event_keeps_its_reason_in_clear() -> None:
    sent, probe = Sent(), Switch()

    async def step() -> None:
        raise InvalidEvent("message_added.occurred_at is before 2000-01-01T00:00:00+00:00")

    await boundary(sent, probe).run(record(0), step)
    assert sent.letters[0].reason == "invalid event: message_added.occurred_at is before 2000-01-01T00:00:00+00:00"


async def test_a_dead_letter_waits_for_the_broker_and_is_never_dropped() -> None:
    sent = Sent([kafka_errors.KafkaConnectionError(), kafka_errors.KafkaTimeoutError()])
    sink = DeadLetterSink(sent, None, backoff_s=(0.001, 0.01))
    await sink.record("agent", record(4), "invalid event: not JSON")
    assert [letter.source_offset for letter in sent.letters] == [4]


async def test_a_letter_the_broker_refuses_for_its_size_becomes_a_reference() -> None:
    sent = Sent([kafka_errors.MessageSizeTooLargeError()])
    sink = DeadLetterSink(sent, None)
    await sink.record("agent", record(9, b"x" * 300_000), "invalid event: too large")
    (letter,) = sent.letters
    assert letter.truncated and letter.value_size == 300_000 and len(letter.original_prefix()) == 4096
    with pytest.raises(LookupError):
        letter.original_value()


def test_data_faults_and_dependency_faults_are_told_apart() -> None:
    for fault in (InvalidEvent("x"), OverflowError(), RecursionError(), KeyError("k"), ValueError(),
                  kafka_errors.MessageSizeTooLargeError()):
        assert is_data_fault(fault), fault
    for fault in (OSError(5, "EIO"), TimeoutError(), kafka_errors.KafkaConnectionError(), RuntimeError("commit conflict")):
        assert not is_data_fault(fault), fault


async def test_a_supervised_task_that_crashes_is_started_again_and_reports_it() -> None:
    runs = 0
    states: list[str | None] = []

    async def task() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError("boom")

    await asyncio.wait_for(
        supervise("projector", task, backoff=Backoff(0.001, 0.01), report=lambda n, s: states.append(s)), 5
    )
    assert runs == 3
    assert states == ["restarting after RuntimeError", "restarting after RuntimeError"]
