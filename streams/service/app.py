"""The one service object every interface calls: memories, sessions and reports over one
:class:`~memstream.streams.service.container.Container`."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Self

from memstream.models.settings import Settings
from memstream.streams.runtime.keys import KeyStore
from memstream.streams.runtime.publisher import EventPublisher
from memstream.streams.service.container import Container
from memstream.streams.service.memories import MemoryService
from memstream.streams.service.reports import ReportService
from memstream.streams.service.sessions import SessionService

if TYPE_CHECKING:
    from memstream.projections.memories import MemoryIndex

__all__ = ["Service"]


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
