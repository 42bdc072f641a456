"""The memstream topics, their keys, and creating them."""

from __future__ import annotations

from dataclasses import dataclass

import aiokafka.errors as kafka_errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.models.settings import Settings


@dataclass(frozen=True)
class Topics:
    """Names of the memstream topics under one prefix.

    Every topic is keyed by ``user_id``: one user's events land on one partition and stay in
    order, which the session table, consolidation and memory decisions rely on.
    """

    prefix: str = "memstream"

    @property
    def chat(self) -> str:
        """Chat events from clients: messages, tool calls, tasks, session closes."""
        return f"{self.prefix}.chat"

    @property
    def consolidation(self) -> str:
        """Transcript spans ready to be turned into memories."""
        return f"{self.prefix}.consolidation"

    @property
    def memories(self) -> str:
        """Extraction records and memory events; the truth behind the LanceDB projection."""
        return f"{self.prefix}.memories"

    @property
    def accesses(self) -> str:
        """Retrievals: which memories were returned for which query (use counts, promotion)."""
        return f"{self.prefix}.accesses"

    @property
    def deadletters(self) -> str:
        """Events an agent could not process, with the original bytes and the reason."""
        return f"{self.prefix}.deadletters"

    @property
    def log(self) -> str:
        """The log's identity: its first record names the log (see
        :mod:`memstream.streams.logid`), so a broker that lost its log is recognised."""
        return f"{self.prefix}.log"

    def all(self) -> tuple[str, ...]:
        """Every topic memstream creates."""
        return (
            self.chat, self.consolidation, self.memories, self.accesses, self.deadletters, self.log
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Topics:
        """The topics named by ``settings``."""
        return cls(prefix=settings.topic_prefix)


async def ensure_topics(settings: Settings) -> None:
    """Create every memstream topic that does not exist yet; idempotent.

    Topics get ``settings.partitions`` partitions and replication factor 1 (one broker: the
    embedded Tansu, or the docker-compose Kafka). Works the same on both.

    Parameters
    ----------
    settings
        Broker address, topic prefix and partition count.

    Raises
    ------
    ValueError
        If a topic already exists with another partition count: keys would then map to
        other partitions, and per-user ordering would break.
    aiokafka.errors.KafkaError
        If the broker refuses to create a topic for any other reason.

    Examples
    --------
    >>> await ensure_topics(Settings(broker="127.0.0.1:19092"))  # doctest: +SKIP
    """
    names = Topics.from_settings(settings).all()
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, settings.partitions, replication_factor=1) for name in names]
        )
        existing = []
        for topic, error_code, *_ in response.topic_errors:
            error = kafka_errors.for_code(error_code)
            if error is kafka_errors.TopicAlreadyExistsError:
                existing.append(topic)
            elif error is not kafka_errors.NoError:
                raise error(f"creating topic {topic!r}")
        # Only partition 0 of the log's mark topic is used: a broker may have created it
        # with its own default when a client asked for it.
        keyed = [topic for topic in existing if topic != Topics.from_settings(settings).log]
        if keyed:
            for description in await admin.describe_topics(keyed):
                found = len(description["partitions"])
                if found != settings.partitions:
                    raise ValueError(
                        f"topic {description['topic']!r} exists with {found} partitions, "
                        f"but settings ask for {settings.partitions}"
                    )
    finally:
        await admin.close()
