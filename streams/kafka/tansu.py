"""Every workaround memstream needs for the Tansu broker, in one place.

Tansu (the embedded broker, memory storage) speaks the Kafka protocol but differs from Apache
Kafka in ways that hurt faust-streaming and aiokafka:

1. ListOffsets(LATEST) answers ``base offset of the newest batch + 1`` instead of the log end
   offset; the high watermark in a Fetch response is right. Faust sizes table recovery with
   ``end_offsets()`` (ListOffsets), so it stops early and loses the last table updates of any
   changelog whose last batch held more than one record. Patched: recovery takes the high
   watermark from a Fetch response (:func:`true_end_offsets`).
2. The first consumer-group generation is 0, and aiokafka only sends LeaveGroup for
   generations > 0. A member of generation 0 that stops cleanly is not removed, so the next
   join waits for its session to expire (about 1.8 x the session timeout). Patched: LeaveGroup
   is sent for generation 0 too.
3. JoinGroup is held for ``session_timeout / 2``: keep the session timeout short
   (:func:`faust_settings_for`).
4. InitProducerId fails for aiokafka's request version, so there is no idempotent producer and
   no transaction: faust runs ``at_least_once``, and every consumer must be idempotent.
5. A Fetch is held for its whole ``fetch_max_wait_ms`` even when records arrive meanwhile
   (Apache Kafka answers as soon as there are records). faust-streaming hard-codes 1,500 ms,
   so each hop between two agents (a close to its consolidation request, the request to the
   memory events) took 0.5-1.2 s. Patched: the worker's consumer fetches with
   ``settings.fetch_max_wait_ms`` (100 ms), set by :func:`prepare_for_broker`.

Both patches give the same answers on Apache Kafka (there the Fetch high watermark equals the
true end offset, and generation 0 is never a joined generation), so they are harmless there; we
still install them only when ``settings.broker_kind == "tansu"`` (:func:`prepare_for_broker`).
They replace private methods of exactly the faust-streaming and aiokafka versions pinned in
pyproject.toml, hence the version guard. ``tests/integration/test_tansu_quirks.py`` fails the
day Tansu fixes ListOffsets, which is the signal to drop patch 1.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from importlib.metadata import version
from typing import Any, cast

import aiokafka
import aiokafka.errors as kafka_errors
from aiokafka.consumer import group_coordinator
from aiokafka.protocol.group import LeaveGroupRequest
from aiokafka.structs import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from memstream.models.settings import Settings

__all__ = [
    "SUPPORTED_VERSIONS",
    "faust_settings_for",
    "install_tansu_workarounds",
    "prepare_for_broker",
    "true_end_offsets",
    "workarounds_installed",
]

log = logging.getLogger(__name__)

#: Distribution name -> version prefix the patches were written and tested against.
SUPPORTED_VERSIONS: Mapping[str, str] = {"faust-streaming": "0.15.", "aiokafka": "0.14."}


async def true_end_offsets(
    bootstrap: str | list[str],
    topic_partitions: Iterable[TopicPartition],
    *,
    timeout_s: float = 10.0,
    **consumer_config: Any,
) -> dict[TopicPartition, int]:
    """Return the real log end offset (high watermark) of each partition.

    ``AIOKafkaConsumer.end_offsets()`` uses ListOffsets, which on Tansu can be smaller than
    the real end. This asks ListOffsets for a lower bound, then fetches from just below it: a
    Fetch response carries the high watermark, which is correct on Tansu and on Kafka. Use it
    wherever an exact end matters, e.g. "wait until a consumer has caught up".

    Parameters
    ----------
    bootstrap
        Kafka bootstrap address(es), ``host:port``.
    topic_partitions
        Partitions to look up.
    timeout_s
        How long to wait for the Fetch responses. A partition with no answer by then gets its
        ListOffsets value (logged as a warning): a lower bound, never an overshoot.
    **consumer_config
        Extra ``AIOKafkaConsumer`` arguments (security settings, ``client_id``, ...).

    Returns
    -------
    dict
        ``{TopicPartition: end offset}``; the offset the next record will get.

    Examples
    --------
    >>> await true_end_offsets("127.0.0.1:9092", [TopicPartition("memstream.chat", 0)])
    ... # doctest: +SKIP
    {TopicPartition(topic='memstream.chat', partition=0): 10}
    """
    tps = [TopicPartition(tp.topic, tp.partition) for tp in topic_partitions]
    if not tps:
        return {}
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, **consumer_config
    )
    try:
        await consumer.start()  # stopped below even when it fails: no leak
        consumer.assign(tps)
        listed: dict[TopicPartition, int] = await consumer.end_offsets(tps)
        # ListOffsets is a lower bound on Tansu, and 0 only for a partition with no batch.
        result = {tp: 0 for tp in tps if listed[tp] == 0}
        pending = [tp for tp in tps if listed[tp] > 0]
        for tp in pending:
            # Any offset that exists will do: every Fetch response carries the high watermark.
            # Fetching from the last listed offset keeps the response to about one batch.
            consumer.seek(tp, listed[tp] - 1)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            await consumer.getmany(*pending, timeout_ms=200, max_records=1)
            for tp in list(pending):
                highwater = consumer.highwater(tp)
                if highwater is not None:
                    result[tp] = max(highwater, listed[tp])
                    pending.remove(tp)
        for tp in pending:
            log.warning(
                "No Fetch high watermark for %s within %.1f s; using ListOffsets (%d), "
                "which may be too small on Tansu",
                tp,
                timeout_s,
                listed[tp],
            )
            result[tp] = listed[tp]
        return result
    finally:
        await consumer.stop()


async def _highwaters_from_fetch(
    self: faust_aiokafka.AIOKafkaConsumerThread, partitions: list[TP]
) -> Mapping[TP, int]:
    """Faust's ``AIOKafkaConsumerThread._highwaters``, with Fetch-based end offsets.

    Faust recovers a table until ``highwater - 1`` of each changelog partition. The original
    asks ``end_offsets()`` (ListOffsets), which Tansu answers too small, so recovery stopped
    before the end of the last changelog batch and the newest table values were lost.
    """
    consumer = self._ensure_consumer()
    if self.consumer.in_transaction:
        # Unchanged from faust: the last stable offset already comes from Fetch responses.
        return {tp: consumer.last_stable_offset(tp) for tp in partitions}
    conf = self.app.conf
    transport = cast(faust_aiokafka.Transport, self.transport)
    ends = await true_end_offsets(
        # The same bootstrap and credentials as faust's own consumer.
        faust_aiokafka.server_list(transport.url, transport.default_port),
        [TopicPartition(tp.topic, tp.partition) for tp in partitions],
        timeout_s=conf.broker_request_timeout,
        client_id=conf.broker_client_id,
        request_timeout_ms=int(conf.broker_request_timeout * 1000.0),
        **faust_aiokafka.credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
    )
    return {tp: ends[TopicPartition(tp.topic, tp.partition)] for tp in partitions}


async def _maybe_leave_group_from_generation_zero(
    self: group_coordinator.GroupCoordinator,
) -> None:
    """aiokafka's ``GroupCoordinator._maybe_leave_group``, sending LeaveGroup at generation 0.

    Tansu numbers the first generation 0; aiokafka sends LeaveGroup only for ``generation > 0``
    (the "no generation" value is -1), so a first member that stops cleanly stayed in the group
    and the next member's join waited for its session to expire.
    """
    # Static members (group_instance_id) must not leave, as in aiokafka.
    if self.generation >= 0 and self._group_instance_id is None:
        request = LeaveGroupRequest(self.group_id, self.member_id)
        try:
            await self._send_req(request)
        except kafka_errors.KafkaError as err:
            # Best effort, as in aiokafka: the session timeout removes the member anyway.
            group_coordinator.log.error("LeaveGroup request failed: %s", err)
        else:
            group_coordinator.log.info("LeaveGroup request succeeded")
    self.reset_generation()


def _check_versions() -> None:
    found = {name: version(name) for name in SUPPORTED_VERSIONS}
    wrong = {n: v for n, v in found.items() if not v.startswith(SUPPORTED_VERSIONS[n])}
    if wrong:
        expected = ", ".join(f"{n} {p}x" for n, p in SUPPORTED_VERSIONS.items())
        installed = ", ".join(f"{n} {v}" for n, v in found.items())
        raise RuntimeError(
            f"memstream's Tansu workarounds patch private methods of {expected}, but "
            f"{installed} is installed. Install the versions pinned in pyproject.toml, or "
            f"re-check the patches in memstream.streams.kafka.tansu against the new versions."
        )


#: What the worker's consumer lets a fetch wait, in ms (patch 5; ``prepare_for_broker``).
_fetch_max_wait_ms = 100
_create_worker_consumer = faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer


def _create_worker_consumer_waiting_less(self: Any, transport: Any) -> aiokafka.AIOKafkaConsumer:
    """faust's worker consumer, with ``_fetch_max_wait_ms`` instead of its fixed 1,500 ms
    (read by the consumer's fetcher when it starts)."""
    consumer = _create_worker_consumer(self, transport)
    consumer._fetch_max_wait_ms = _fetch_max_wait_ms
    return consumer


def workarounds_installed() -> bool:
    """Whether the patches of :func:`install_tansu_workarounds` are in place."""
    return (
        faust_aiokafka.AIOKafkaConsumerThread._highwaters is _highwaters_from_fetch
        and group_coordinator.GroupCoordinator._maybe_leave_group
        is _maybe_leave_group_from_generation_zero
        and faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer
        is _create_worker_consumer_waiting_less
    )


def install_tansu_workarounds() -> bool:
    """Patch faust and aiokafka for Tansu; idempotent.

    Installs (a) table-recovery high watermarks from a Fetch response instead of ListOffsets,
    (b) LeaveGroup at generation 0 and (c) the worker consumer's shorter fetch wait. Call it
    before a faust app or an aiokafka consumer group starts. The patches are correct on
    Apache Kafka too.

    Returns
    -------
    bool
        True once the patches are installed.

    Raises
    ------
    RuntimeError
        If faust-streaming is not 0.15.x or aiokafka is not 0.14.x.
    """
    _check_versions()
    if not workarounds_installed():
        faust_aiokafka.AIOKafkaConsumerThread._highwaters = _highwaters_from_fetch  # type: ignore[method-assign]
        group_coordinator.GroupCoordinator._maybe_leave_group = (
            _maybe_leave_group_from_generation_zero
        )
        faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer = (  # type: ignore[method-assign]
            _create_worker_consumer_waiting_less
        )
        log.debug("Tansu workarounds installed")
    return True


def prepare_for_broker(settings: Settings) -> bool:
    """Install the broker workarounds ``settings.broker_kind`` needs.

    Parameters
    ----------
    settings
        ``broker_kind``: ``"tansu"`` installs the workarounds (with ``fetch_max_wait_ms``),
        ``"kafka"`` leaves faust and aiokafka untouched.

    Returns
    -------
    bool
        True when the Tansu workarounds were installed (or already were).
    """
    if settings.broker_kind == "tansu":
        global _fetch_max_wait_ms
        _fetch_max_wait_ms = settings.fetch_max_wait_ms
        return install_tansu_workarounds()
    return False


def faust_settings_for(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``faust.App`` that the broker needs.

    Processing is ``at_least_once`` on every broker: Tansu cannot start an idempotent or
    transactional producer, and one guarantee everywhere keeps tests honest. A record can
    therefore be processed twice after a crash or rebalance, so **every consumer (agent,
    projection writer) must be idempotent**.

    Parameters
    ----------
    settings
        Reads ``session_timeout_s`` and ``heartbeat_interval_s``.

    Returns
    -------
    dict
        ``broker_session_timeout``, ``broker_heartbeat_interval`` and ``processing_guarantee``.
        The broker address, replication factor and offset reset belong to the app factory.

    Examples
    --------
    >>> faust_settings_for(Settings())["broker_session_timeout"]
    10.0
    """
    if settings.heartbeat_interval_s >= settings.session_timeout_s:
        raise ValueError(
            f"heartbeat_interval_s ({settings.heartbeat_interval_s}) must be below "
            f"session_timeout_s ({settings.session_timeout_s}); a third of it is usual"
        )
    return {
        # Tansu answers JoinGroup after session_timeout/2: faust's 60 s default meant 30 s joins.
        "broker_session_timeout": settings.session_timeout_s,
        "broker_heartbeat_interval": settings.heartbeat_interval_s,
        # InitProducerId fails on Tansu, so exactly_once cannot even start.
        "processing_guarantee": "at_least_once",
    }
