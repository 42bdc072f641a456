"""Creating the memstream topics (their names: :class:`memstream.models.topics.Topics`)."""

from __future__ import annotations

import aiokafka.errors as kafka_errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.models.settings import Settings
from memstream.models.topics import Topics

__all__ = ["Topics", "ensure_topics"]


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
