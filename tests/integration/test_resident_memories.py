"""Searches served from memory while the worker, another process, writes the table: the
client's resident memories follow the log, so what ``add(wait=True)`` made is found at once,
a changed fact comes first at once, and the answers are those of the table itself."""

from __future__ import annotations

from harness import wait_for_async

from memstream.models.settings import Settings
from memstream.projections.resident import ResidentMemories
from memstream.streams.client import AsyncMemoryClient

BERLIN = [
    {"role": "user", "content": "I live in Berlin and I work at Siemens as a data engineer."},
    {"role": "assistant", "content": "Nice. How can I help?"},
]
PORTO = [{"role": "user", "content": "Big news: I moved to Porto last month."}]


async def test_what_an_add_made_is_found_from_memory_at_once_and_a_change_comes_first(
    worker_settings: Settings,
) -> None:
    async with AsyncMemoryClient(worker_settings) as memory:
        service = memory.backend.service  # type: ignore[attr-defined]
        assert await memory.search("anything", user_id="ana") == []
        resident = service.container.projection
        assert isinstance(resident, ResidentMemories)
        await wait_for_async(lambda: _live(resident), "the follower to catch up", until=bool)
        assert await memory.search("anything", user_id="ana") == []
        assert resident.holds("ana")  # held (empty) before anything of hers is written
        loads = resident.loads

        made = await memory.add(BERLIN, user_id="ana", wait=True)
        assert made["status"] == "searchable"
        hits = await memory.search("where does ana live", user_id="ana")
        assert hits and "Berlin" in hits[0]["memory"]
        # Answered from memory, kept current by the follower: never read from the table again.
        assert resident.holds("ana") and resident.loads == loads

        await memory.add(PORTO, user_id="ana", wait=True)
        hits = await memory.search("where does ana live", user_id="ana", limit=5)
        assert "Porto" in hits[0]["memory"], [hit["memory"] for hit in hits]
        assert resident.holds("ana") and resident.loads == loads
        for hit in hits:
            if "Berlin" in hit["memory"] and "Porto" not in hit["memory"]:
                assert hit["stale"], hit

        # The table, read by itself, ranks the same memories first.
        table = resident.projection
        from_memory = resident.search("ana", "where does ana live", limit=5)
        from_table = table.search("ana", "where does ana live", limit=5)
        assert from_memory[0].memory_id == from_table[0].memory_id


async def _live(resident: ResidentMemories) -> bool:
    return resident.live
