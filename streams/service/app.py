"""The one service object every interface calls: memories, sessions and reports over one
:class:`~memstream.streams.service.container.Container`."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self

from aiokafka.errors import KafkaError

from memstream.models.settings import Settings
from memstream.streams.kafka.logid import LogLost
from memstream.streams.kafka.publisher import EventPublisher
from memstream.streams.keys.store import KeyStore
from memstream.streams.service.container import Container
from memstream.streams.service.memories import MemoryService
from memstream.streams.service.reports import ReportService
from memstream.streams.service.sessions import SessionService

if TYPE_CHECKING:
    from memstream.projections.memories import MemoryIndex

__all__ = ["BROKER_SILENT", "LOG_LOST", "Service", "Unavailable", "unavailable"]

#: What a caller is told when the broker lost its log (the details, naming paths and
#: addresses, go to the operator's log).
LOG_LOST = (
    "the broker lost its log (the embedded broker keeps it in memory, so a restart empties "
    "it): nothing was written; an operator must run `memstream restore`, then send again"
)
#: What a caller is told when the broker does not answer.
BROKER_SILENT = (
    "the broker does not answer, so this may not have been carried out: send it again in a "
    "few seconds (GET /v1/ready says when the broker is back)"
)


@dataclass(frozen=True)
class Unavailable:
    """What a call needed and could not reach (``what``: ``broker``, ``worker``), why and
    what to do (``reason``, one line), and in how many seconds to ask again, when that may
    help (``retry_after_s``)."""

    what: str
    reason: str
    retry_after_s: int | None = None


def unavailable(exc: BaseException) -> Unavailable | None:
    """What ``exc``, raised by a call of the service, says is not available; None when it
    is not about availability (then it is a fault of its own).

    Examples
    --------
    >>> unavailable(TimeoutError()).what
    'broker'
    >>> unavailable(ValueError("bad")) is None
    True
    """
    if isinstance(exc, LogLost):
        return Unavailable("broker", LOG_LOST)
    if isinstance(exc, KafkaError | TimeoutError):
        return Unavailable("broker", BROKER_SILENT, retry_after_s=5)
    return None


class Service:
    """memstream for its users: ``memories`` (add, search, get, list, history, delete,
    erase), ``sessions`` (a session's working-memory context) and ``reports``.

    Examples
    --------
    >>> async with Service.from_settings(Settings()) as service:  # doctest: +SKIP
    ...     await service.memories.add("I live in Oslo", user_id="ann")
    ...     await service.memories.search("where do I live", user_id="ann")
    """

    def __init__(self, container: Container) -> None:
        self.container = container
        self.settings = container.settings
        self.memories = MemoryService(container)
        self.sessions = SessionService(container)
        self.reports = ReportService(container.settings)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        keys: KeyStore | None = None,
        projection: MemoryIndex | None = None,
        publisher: EventPublisher | None = None,
    ) -> Service:
        """A service over a new container of ``settings`` (the parts: see :class:`Container`)."""
        return cls(Container(settings, keys=keys, projection=projection, publisher=publisher))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Flush the access events still going out, then release the container's parts."""
        await self.memories.close()
        await self.container.close()
