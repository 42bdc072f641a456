"""Search over HTTP (``memstream serve``) against the same search in-process, at 10k and 100k
memories, and searches/s with 1 and 16 concurrent clients.

Per size (10,000 memories per user by default, as ``retrieval.py``: 10k = 1 user, 100k = 10
users; ``--per-user 100`` spreads them over 100 and 1,000 users), in a
fresh temporary data directory, the script

1. builds the memory table in bulk (``memory_tables.py``: real texts embedded once, clustered
   vectors, the projection's schema and the worker's full-text and scalar indexes), the user
   ids in the tenant ``bench`` (``bench:user-0003``, what the API makes of ``user-0003``);
2. writes an API key (``add_key``) and starts the real ``memstream serve`` (uvicorn, as
   shipped) over that data directory, on an embedded broker it started itself: every search
   publishes its access event in the background, in the server as in-process;
3. times, query by query, in turns (so none gains from running first or last):

   - **LanceDB hybrid, direct**: what a user could write in 30 lines with the same libraries
     (the query embedded by the same embedder, ``table.search(query_type="hybrid")`` with RRF,
     prefiltered to the user's active rows through the indexed user digest);
   - **in-process**: ``Service.memories.search``, the plain path a Python caller uses;
   - **HTTP**: ``POST /v1/memories/search`` with one ``httpx.Client`` (keep-alive), as a
     Python caller would search;

   and reports p50 / p95 / p99 of each and HTTP minus in-process. Each search's access
   event goes out before the next call (untimed, 20 ms between calls), in this process or
   the server, so no call is timed with the previous one's background work;
4. drives the server with 1 and 16 concurrent clients (``--concurrency``; asyncio tasks on one
   ``httpx.AsyncClient`` with a connection each), and the in-process service with 16
   concurrent calls on one event loop (the ceiling without HTTP), each for ``--duration``
   seconds in ``--rounds`` parts taken in turns, and reports searches/s and the latencies
   under load.

The load generator runs in this process, on the same two cores as the server and the broker.
The CPU time of each (server, broker, this process) is read from ``/proc`` over every phase
and reported per search, so the server's own cost is known apart from the clients', and the
rate it could reach with both cores to itself follows (2 cores / its CPU per search).

Run from the repository root::

    python benchmarks/service.py                        # 10k and 100k, about 5 min
    python benchmarks/service.py --quick                # 10k, fewer queries, short phases
    python benchmarks/service.py --sizes 100000 --queries 500 --concurrency 1,4,16

Goals from the issue: HTTP adds at most 3 ms at p95 over the in-process search, and the
service sustains at least 300 searches/s from 16 clients on 2 cores (issue 28; 200 before).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import lancedb
import numpy as np
from lancedb.rerankers import RRFReranker
from memory_tables import MEMORIES_PER_USER, Pool, asks, build_pool, write_table
from runner import log, run_to_end

from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder
from memstream.projections.memories import PartitionedMemories
from memstream.projections.memories.connection import partition_table
from memstream.projections.memories.schema import user_key
from memstream.streams.api.auth import add_key
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.service.app import Service

TENANT = "bench"
#: One partition: every user's memories in one table, as before the projection was
#: partitioned, so the figures compare with the earlier ones and the baseline reads the same table.
PARTITIONS = 1
TABLE = partition_table("memories", 0)
HTTP_ONE = "HTTP, 1 client (keep-alive)"
#: Hits per search, as the client's default page of results.
LIMIT = 10
GOAL_HTTP_OVERHEAD_P95_MS = 3.0
GOAL_SEARCHES_PER_S = 300.0
CORES = 2
#: Between two calls timed one at a time: time for the server's access event to go out.
PAUSE_S = 0.02
#: The columns a search hit shows (the direct LanceDB baseline selects the same).
HIT_COLUMNS = [
    "memory_id", "memory_type", "content", "context", "importance", "created_at", "session_id",
    "source_event_ids", "access_count",
]
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


# --- the three ways to search ----------------------------------------------------------


class DirectLanceDB:
    """The baseline a user could write with LanceDB and the same embedder: one hybrid query
    (vector + full-text, fused by RRF), prefiltered to the user's active rows."""

    def __init__(self, db_dir: Path, embedder: Embedder, table: str) -> None:
        self.table = lancedb.connect(db_dir).open_table(table)
        self.embedder = embedder
        self.reranker = RRFReranker()

    def search(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` best of the user's active memories for ``query``."""
        where = f"user_key = '{user_key(user_id)}' AND status = 'active'"
        hits: list[dict[str, Any]] = (
            self.table.search(query_type="hybrid")
            .vector(self.embedder.embed([query])[0])
            .text(query)
            .where(where, prefilter=True)
            .select(HIT_COLUMNS)
            .rerank(self.reranker)
            .limit(limit)
            .to_list()
        )
        return hits


def search_body(user_id: str, query: str, limit: int) -> dict[str, Any]:
    """The request of a search; the caller names its user without the tenant."""
    return {"user_id": user_id.removeprefix(f"{TENANT}:"), "query": query, "limit": limit}


class Http:
    """``POST /v1/memories/search`` on one keep-alive ``httpx.Client``: how a Python caller
    searches, one request at a time."""

    def __init__(self, url: str, key: str) -> None:
        self.client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        )

    def search(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        """The hits the API answers with."""
        response = self.client.post("/memories/search", json=search_body(user_id, query, limit))
        response.raise_for_status()
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    def close(self) -> None:
        self.client.close()


class AsyncHttp:
    """The same on one ``httpx.AsyncClient`` with a connection per concurrent client."""

    def __init__(self, url: str, key: str, connections: int) -> None:
        self.client = httpx.AsyncClient(
            base_url=url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    async def search(self, user_id: str, query: str, limit: int) -> None:
        """One search; raises on an error answer."""
        response = await self.client.post(
            "/memories/search", json=search_body(user_id, query, limit)
        )
        response.raise_for_status()

    async def close(self) -> None:
        await self.client.aclose()


# --- measuring -------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linear interpolation."""
    return float(np.percentile(np.asarray(values), q))


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far; 0 if gone."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * _TICK_S


@dataclass
class Row:
    """One line of the table: latencies of one path, and its rate when driven under load."""

    size: int
    what: str
    clients: int
    latencies_ms: list[float]
    #: Searches per second; None for the query-by-query rows (one at a time, in turns).
    rate: float | None = None
    #: CPU milliseconds per search of each process over the phase ("server", "broker", "bench").
    cpu_ms: dict[str, float] = field(default_factory=dict)
    errors: int = 0


@dataclass
class Phase:
    """What a load phase counted."""

    latencies_ms: list[float]
    seconds: float
    errors: int


async def drive(
    call: Callable[[str, str], Awaitable[object]],
    questions: Sequence[tuple[str, str]],
    clients: int,
    warmup_s: float,
    duration_s: float,
) -> Phase:
    """``clients`` tasks calling ``call`` back to back for ``warmup_s`` (not counted), then
    for ``duration_s``; latencies and searches of calls that started in the measured window."""
    cycle = itertools.cycle(questions)
    started = time.perf_counter()
    window = (started + warmup_s, started + warmup_s + duration_s)
    latencies: list[float] = []
    errors = 0

    async def client() -> None:
        nonlocal errors
        while (now := time.perf_counter()) < window[1]:
            user_id, question = next(cycle)
            try:
                await call(user_id, question)
            except (httpx.HTTPError, ValueError):
                errors += 1
                continue
            if now >= window[0]:
                latencies.append((time.perf_counter() - now) * 1000)

    await asyncio.gather(*(client() for _ in range(clients)))
    # Calls that began inside the window but ended after it count; so does their time.
    ended = time.perf_counter()
    return Phase(latencies, ended - window[0], errors)


class ServiceBench:
    """Everything one run starts (broker, servers) and deletes (the data), and the run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="memstream-service-bench-", dir=args.dir))
        self.broker: EmbeddedBroker | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.rows: list[Row] = []
        self.loads: list[tuple[float, ...]] = []
        #: Per size, the access events the server logged as not published.
        self.unpublished: dict[int, int] = {}

    def run(self) -> list[Row]:
        """Build, serve and time every size; the rows measured."""
        args = self.args
        self.loads.append(os.getloadavg())
        self.broker = EmbeddedBroker(free_port(), log_dir=self.workdir / "broker").start()
        started = time.perf_counter()
        pool = build_pool(args.pool, args.seed)
        log(f"pool: {len(pool.texts):,} texts embedded in {time.perf_counter() - started:.1f} s")
        for size in args.sizes:
            asyncio.run(self.measure_size(size, pool))
            if not args.keep:
                shutil.rmtree(self.workdir / f"size-{size}", ignore_errors=True)
        self.loads.append(os.getloadavg())
        return self.rows

    def settings(self, size: int) -> Settings:
        """Settings of one size: its own data directory, topics and port."""
        assert self.broker is not None
        return Settings(
            broker=self.broker.address,
            data_dir=self.workdir / f"size-{size}",
            topic_prefix=f"svc{uuid.uuid4().hex[:8]}",
            api_port=free_port(),
            web_port=free_port(),
            partitions=PARTITIONS,
        )

    async def measure_size(self, size: int, pool: Pool) -> None:
        """Build the table of ``size`` memories, serve it, and time the three paths."""
        args = self.args
        users = size // args.per_user
        settings = self.settings(size)
        service = Service.from_settings(settings)
        embedder = service.container.embedder()
        write_s = write_table(
            settings.lancedb_dir, pool, embedder.model_id, users,
            np.random.default_rng(args.seed + size), user_prefix=f"{TENANT}:",
            per_user=args.per_user,
            progress=lambda line: log(f"[{size:,}] {line}"),
            name=TABLE,
        )
        started = time.perf_counter()
        PartitionedMemories.from_settings(settings, embedder).refresh_indexes()
        log(f"[{size:,}] {users} user(s): written in {write_s:.1f} s, indexed in "
            f"{time.perf_counter() - started:.1f} s")
        key = add_key(settings.api_keys_path, TENANT)
        url = self.serve(settings, size)
        http = Http(url, key)
        direct = DirectLanceDB(settings.lancedb_dir, embedder, TABLE)
        questions = asks(users, args.queries, args.seed, user_prefix=f"{TENANT}:")
        try:
            await self.check_same_hits(service, http, questions[:20])
            await self.time_in_turns(size, service, http, direct, questions)
            await self.time_under_load(size, service, url, key, questions)
        finally:
            http.close()
            await service.close()
            self.stop_server()
        log_text = (self.workdir / f"serve-{size}.log").read_text(errors="replace")
        self.unpublished[size] = sum(
            int(n) for n in re.findall(r"(\d+) access event\(s\) not published", log_text)
        )

    def serve(self, settings: Settings, size: int) -> str:
        """Start ``memstream serve`` on ``settings``; its ``/v1`` URL once it answers."""
        env = {**os.environ, **settings.to_env(), "PYTHONUNBUFFERED": "1"}
        log_path = self.workdir / f"serve-{size}.log"
        with log_path.open("ab") as out:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "memstream.streams.cli", "serve"],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{settings.api_port}/v1"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"memstream serve exited:\n{log_path.read_text()}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError("memstream serve did not answer within 60 s")

    def stop_server(self) -> None:
        """Stop the server this run started, if it runs."""
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.server = None

    async def check_same_hits(
        self, service: Service, http: Http, questions: Sequence[tuple[str, str]]
    ) -> None:
        """The server and the in-process service find the same memories (and warm both up:
        the first calls load the model, open the table and start the publisher). Each
        answers from the table until its follower of the log has caught up, then from the
        users it holds in memory, whose BM25 counts one user's words only: the two agree
        once both are caught up, which takes a few seconds after they start."""
        deadline = time.monotonic() + 60
        while True:
            differ = None
            for user_id, question in questions:
                over_http = [hit["memory_id"] for hit in http.search(user_id, question, LIMIT)]
                local = await service.memories.search(question, user_id=user_id, limit=LIMIT)
                if over_http != [hit["memory_id"] for hit in local] or not local:
                    differ = question
                    break
            if differ is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"HTTP and in-process answers differ for {differ!r}")
            await asyncio.sleep(0.5)

    async def time_in_turns(
        self,
        size: int,
        service: Service,
        http: Http,
        direct: DirectLanceDB,
        questions: Sequence[tuple[str, str]],
    ) -> None:
        """One query at a time, the three paths back to back in an order that turns."""

        async def direct_search(user_id: str, question: str) -> object:
            # Called as a script would call it: on this thread, no hop to another.
            return direct.search(user_id, question, LIMIT)

        async def http_search(user_id: str, question: str) -> object:
            return http.search(user_id, question, LIMIT)

        calls: dict[str, Callable[[str, str], Awaitable[object]]] = {
            "LanceDB hybrid, direct": direct_search,
            "Service.memories.search, in-process": lambda u, q: service.memories.search(
                q, user_id=u, limit=LIMIT
            ),
            HTTP_ONE: http_search,
        }
        names = list(calls)
        for user_id, question in questions[: self.args.warmup]:
            for name in names:
                await calls[name](user_id, question)
        samples: dict[str, list[float]] = {name: [] for name in names}
        # CPU of this process per call (the search itself in-process and direct, the client
        # over HTTP), and the server's over the whole phase (it serves only these calls).
        bench_cpu_s = dict.fromkeys(names, 0.0)
        assert self.server is not None
        server_before = cpu_s(self.server.pid)
        for index, (user_id, question) in enumerate(questions):
            for name in names[index % 3 :] + names[: index % 3]:
                cpu_before = time.process_time()
                started = time.perf_counter()
                await calls[name](user_id, question)
                samples[name].append((time.perf_counter() - started) * 1000)
                # Each search publishes its access event in the background (in-process in
                # this process, over HTTP in the server): let it go out before the next call,
                # or its work would be timed in that call, whichever path it is on.
                await service.memories.close()
                bench_cpu_s[name] += time.process_time() - cpu_before
                await asyncio.sleep(PAUSE_S)
        server_s = cpu_s(self.server.pid) - server_before
        for name in names:
            cpu_ms = {"bench": bench_cpu_s[name] * 1000 / len(questions)}
            if name == HTTP_ONE:
                cpu_ms["server"] = server_s * 1000 / len(questions)
            self.rows.append(Row(size, name, 1, samples[name], cpu_ms=cpu_ms))
        log(f"[{size:,}] {len(questions)} queries timed on each path")

    async def time_under_load(
        self,
        size: int,
        service: Service,
        url: str,
        key: str,
        questions: Sequence[tuple[str, str]],
    ) -> None:
        """HTTP with each number of ``--concurrency`` clients, then the in-process service
        with the most, each for ``--duration`` seconds in ``--rounds`` parts taken in turns
        (so a change in the machine's load falls on every phase alike)."""
        assert self.server is not None and self.broker is not None
        clients_most = max(self.args.concurrency)
        phases: list[tuple[str, int]] = [("HTTP under load", c) for c in self.args.concurrency]
        phases.append(("in-process under load", clients_most))
        pids = {"server": self.server.pid, "broker": self.broker.pid, "bench": os.getpid()}
        clients = {c: AsyncHttp(url, key, c) for c in self.args.concurrency}

        def caller(what: str, count: int) -> Callable[[str, str], Awaitable[object]]:
            if what.startswith("HTTP"):
                return lambda u, q: clients[count].search(u, q, LIMIT)
            return lambda u, q: service.memories.search(q, user_id=u, limit=LIMIT)

        totals = {phase: Phase([], 0.0, 0) for phase in phases}
        cpu = {phase: dict.fromkeys(pids, 0.0) for phase in phases}
        part_s = self.args.duration / self.args.rounds
        try:
            for round_ in range(self.args.rounds):
                for what, count in phases if round_ % 2 == 0 else phases[::-1]:
                    call = caller(what, count)
                    await drive(call, questions, count, 1.0, 0.0)  # warm-up: connections, threads
                    before = {name: cpu_s(pid) for name, pid in pids.items()}
                    phase = await drive(call, questions, count, 0.0, part_s)
                    for name, pid in pids.items():
                        cpu[(what, count)][name] += cpu_s(pid) - before[name]
                    total = totals[(what, count)]
                    total.latencies_ms.extend(phase.latencies_ms)
                    total.seconds += phase.seconds
                    total.errors += phase.errors
                    if what.startswith("in-process"):
                        await service.memories.close()  # its access events, untimed
        finally:
            for client in clients.values():
                await client.close()
        for (what, count), total in totals.items():
            searches = max(len(total.latencies_ms), 1)
            used = {n: s * 1000 / searches for n, s in cpu[(what, count)].items()}
            if what.startswith("in-process"):
                del used["server"]  # idle: the searches ran in this process
            self.rows.append(
                Row(size, what, count, total.latencies_ms, rate=searches / total.seconds,
                    cpu_ms=used, errors=total.errors)
            )
            log(f"[{size:,}] {what}, {count} client(s): {searches / total.seconds:.0f} searches/s")

    def close(self) -> None:
        """Stop what this run started; delete the data unless ``--keep``."""
        self.stop_server()
        if self.broker is not None:
            self.broker.stop()
        if self.args.keep:
            log(f"kept logs and data in {self.workdir}")
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)


# --- the table -------------------------------------------------------------------------


def print_table(bench: ServiceBench) -> None:
    """The result table and the notes under it."""
    rows, args, loads = bench.rows, bench.args, bench.loads or [os.getloadavg()]
    header = (
        f"{'memories':>9}  {'what':<37} {'clients':>7} {'searches/s':>10} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'p99 ms':>7}  {'CPU ms/search: server':>21} {'broker':>6} {'bench':>6}"
    )
    print()
    print(header)
    print("-" * len(header))
    for size in dict.fromkeys(r.size for r in rows):
        of_size = [r for r in rows if r.size == size]
        by_name = {r.what: r for r in of_size if r.rate is None}
        for r in of_size:
            rate = f"{r.rate:10.0f}" if r.rate is not None else f"{1000 / np.mean(r.latencies_ms):10.0f}"
            cpu = " ".join(
                f"{r.cpu_ms[name]:>{width}.1f}" if name in r.cpu_ms else " " * width
                for name, width in (("server", 21), ("broker", 6), ("bench", 6))
            )
            print(
                f"{size:>9,}  {r.what:<37} {r.clients:>7} {rate} "
                f"{percentile(r.latencies_ms, 50):>7.1f} {percentile(r.latencies_ms, 95):>7.1f} "
                f"{percentile(r.latencies_ms, 99):>7.1f}  {cpu}"
                + (f"  ({r.errors} errors)" if r.errors else "")
            )
            if r.what == HTTP_ONE:
                local = by_name["Service.memories.search, in-process"].latencies_ms
                diffs = [percentile(r.latencies_ms, q) - percentile(local, q) for q in (50, 95, 99)]
                print(
                    f"{size:>9,}  {'  HTTP minus in-process':<37} {'':>7} {'':>10} "
                    f"{diffs[0]:>+7.1f} {diffs[1]:>+7.1f} {diffs[2]:>+7.1f}"
                )
    print()
    print(f"- {args.queries} queries per size (random user and question, limit {LIMIT}), each "
          "on the three paths back to back in turns, after a warm-up; searches/s of those rows "
          f"is 1 / mean latency. {args.per_user:,} memories per user.")
    print(f"- Under load: asyncio clients calling back to back, {args.duration:.0f} s per row in "
          f"{args.rounds} parts (rows taken in turns, 1 s of warm-up each); p50-p99 are "
          "latencies under that load. The clients run in this process (bench), on the same "
          "cores as the server and the broker (Tansu, receiving each search's access event).")
    print("- CPU ms/search: each process's CPU time per search; one at a time, bench is this "
          "process's during the call (the search itself in-process and direct, the client "
          "over HTTP) and server the server's over the phase.")
    print("- LanceDB hybrid, direct: the query embedded (same embedder), table.search("
          "query_type='hybrid') with RRF, prefiltered on the indexed user digest and status.")
    print(f"- Load average (1/5/15 min) at the start {loads[0][0]:.2f}/{loads[0][1]:.2f}/"
          f"{loads[0][2]:.2f}, at the end {loads[-1][0]:.2f}/{loads[-1][1]:.2f}/{loads[-1][2]:.2f}.")
    for size in dict.fromkeys(r.size for r in rows):
        of_size = [r for r in rows if r.size == size]
        local = next(r for r in of_size if r.what.startswith("Service.memories.search"))
        http = next(r for r in of_size if r.what == HTTP_ONE)
        overhead = percentile(http.latencies_ms, 95) - percentile(local.latencies_ms, 95)
        paired = float(np.median(np.subtract(http.latencies_ms, local.latencies_ms)))
        loaded = [r for r in of_size if r.what == "HTTP under load"]
        best = max(loaded, key=lambda r: r.rate or 0.0) if loaded else None
        verdict = "met" if overhead <= GOAL_HTTP_OVERHEAD_P95_MS else "NOT met"
        print(f"- {size:,}: HTTP adds {overhead:+.1f} ms at p95 (goal <= "
              f"{GOAL_HTTP_OVERHEAD_P95_MS:.0f} ms: {verdict}; query by query, median "
              f"{paired:+.1f} ms).", end="")
        if best is not None and best.rate is not None:
            server_ms = best.cpu_ms["server"] + best.cpu_ms["broker"]
            verdict = "met" if best.rate >= GOAL_SEARCHES_PER_S else "NOT met"
            print(f" Best rate {best.rate:.0f} searches/s with {best.clients} clients (goal >= "
                  f"{GOAL_SEARCHES_PER_S:.0f}: {verdict}); server + broker use "
                  f"{server_ms:.1f} CPU ms a search, so with {CORES} cores to themselves at "
                  f"most {CORES * 1000 / server_ms:.0f} searches/s.")
        else:
            print()
    for size, count in bench.unpublished.items():
        print(f"- {size:,}: the server logged {count} access events as not published.")


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every size, print the table, delete the data."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated table sizes (multiples of 10,000)")
    parser.add_argument("--queries", type=int, default=300,
                        help="queries timed one at a time on each path, per size")
    parser.add_argument("--concurrency", default="1,16",
                        help="comma-separated numbers of concurrent HTTP clients")
    parser.add_argument("--duration", type=float, default=20.0,
                        help="seconds of each load phase, in --rounds parts")
    parser.add_argument("--rounds", type=int, default=2,
                        help="parts of each load phase, the phases taken in turns")
    parser.add_argument("--warmup", type=int, default=20, help="untimed queries per path first")
    parser.add_argument("--pool", type=int, default=3000, help="distinct texts embedded")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--per-user", type=int, default=MEMORIES_PER_USER,
        help="memories of each user (default 10,000: 10k = 1 user; 100 gives 100 users per 10k)",
    )
    parser.add_argument("--quick", action="store_true",
                        help="10k only, 60 queries, 6 s phases, a 500-text pool (about 1 min)")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary data")
    parser.add_argument("--keep", action="store_true", help="keep the data and the logs")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.duration, args.pool = "10000", 60, 6.0, 500
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if args.per_user < 1 or any(s <= 0 or s % args.per_user for s in args.sizes):
        parser.error("sizes must be positive multiples of --per-user")
    if not args.concurrency or min(args.concurrency) < 1:
        parser.error("--concurrency takes positive numbers")
    bench = ServiceBench(args)
    run_to_end(bench)
    if bench.rows:
        print_table(bench)
    return 0


if __name__ == "__main__":
    sys.exit(main())
