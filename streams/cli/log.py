"""``memstream replay``, ``verify`` and ``restore``: projections rebuilt from the log, checked, and the log brought back."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstream.models.settings import Settings

if TYPE_CHECKING:
    from memstream.streams.service.container import Container



class _ProgressBar:
    """A progress bar on stderr: records done, records per second, what remains."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=total, desc=self.what, unit=" events", file=sys.stderr)
        self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def cmd_replay(args: argparse.Namespace, container: Container) -> int:
    """Rebuild projections from the topics into shadow targets, verify, swap them in."""
    settings = container.settings
    if args.reextract:
        return _reextract(settings, args)
    chosen = ["sessions", "memories", "analytics"] if args.projection == "all" else [args.projection]
    status = 0
    for name in chosen:
        status = max(status, _REPLAYS[name](settings, args))
    return status


def _reextract(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.streams.agents.app import extractor_from_settings
    from memstream.streams.operations.reextract import LabelInUse, default_label, reextract

    if args.extractor is None:
        print("error: --reextract needs --extractor offline|llm", file=sys.stderr)
        return 2
    extractor = extractor_from_settings(settings.model_copy(update={"extractor": args.extractor}))
    label = args.label or default_label(extractor)
    bar = _ProgressBar(f"re-extract {label}")
    try:
        report = asyncio.run(reextract(settings, extractor, label, progress=bar))
    except (LabelInUse, ValueError) as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bar.close()
    print(
        f"re-extracted {report.spans} span(s) with {extractor.name} {extractor.version} in "
        f"{report.elapsed_s:.1f} s: {report.added} memories added, {report.changes} changes, "
        f"{report.failed} failed span(s)"
    )
    print(f"events: topic {report.topic}; table: {report.table} (the live table is untouched)")
    print(f"compare: memstream search QUERY --user U --table {report.table}")
    return 0


def _replay_memories(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.streams.operations.replay import LogShorterThanProjection, replay_memories
    from memstream.streams.projector.starts import TopicMissing

    bar = _ProgressBar("memories")
    try:
        report = asyncio.run(
            replay_memories(
                settings,
                until=args.until,
                swap=not args.no_swap,
                resume=not args.restart,
                progress=bar,
            )
        )
    except (LogShorterThanProjection, TopicMissing) as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    rate = report.records / report.elapsed_s if report.elapsed_s else 0.0
    print(
        f"memories: {report.records} events into table {report.table} in "
        f"{report.elapsed_s:.1f} s ({rate:,.0f} events/s); {report.fingerprint}"
    )
    if report.invalid:
        print(f"memories: {report.invalid} record(s) were not valid events (dead letters)")
    if report.matches_live is True:
        print(f"memories: identical to the live table {report.live_table}")
    elif report.matches_live is False:
        print(
            f"memories: DIFFERS from the live table {report.live_table} "
            f"({report.live_fingerprint}); the rebuilt one follows the log",
            file=sys.stderr,
        )
    if report.swapped:
        print(f"memories: swapped in; the previous table {report.live_table} is kept")
    elif args.until is not None:
        print(f"memories: as of {args.until.isoformat()}: memstream search --table {report.table}")
    return 0


def cmd_verify(args: argparse.Namespace, container: Container) -> int:
    """Fingerprint each live projection and one rebuilt from the log; exit 1 if they differ."""
    settings = container.settings
    chosen = ["sessions", "memories", "analytics"] if args.projection == "all" else [args.projection]
    differ = []
    for name in chosen:
        live, rebuilt = _VERIFIES[name](settings)
        same = live == rebuilt
        print(f"{'same' if same else 'DIFFERENT':9}  live    {live}")
        print(f"{'':9}  rebuilt {rebuilt}")
        if not same:
            differ.append(name)
    if differ:
        print(f"the live {', '.join(differ)} projection(s) differ from the log", file=sys.stderr)
        return 1
    return 0


def _verify_memories(settings: Settings) -> tuple[Any, Any]:
    from memstream.streams.operations.replay import verify_memories

    return asyncio.run(verify_memories(settings))


def _replay_sessions(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.projections.shadow import shadow_name, swap_in
    from memstream.streams.operations.rebuild_sessions import (
        live_sessions,
        rebuild_sessions,
        sessions_fingerprint,
    )

    base = settings.data_dir / "sessions"
    name = shadow_name("sessions-until" if args.until is not None else "sessions")
    bar = _ProgressBar("sessions")
    started = time.perf_counter()
    rebuilt = asyncio.run(rebuild_sessions(settings, base / name, until=args.until, progress=bar))
    bar.close()
    print(f"sessions: snapshot {base / name} in {time.perf_counter() - started:.1f} s; {rebuilt}")
    if args.until is not None:
        print(f"sessions: as of {args.until.isoformat()}, kept beside the live snapshot")
        return 0
    live = sessions_fingerprint(asyncio.run(live_sessions(settings)))
    if live == rebuilt:
        print("sessions: identical to the workers' live session tables")
    else:
        print(f"sessions: DIFFERS from the workers' live tables ({live})", file=sys.stderr)
    if not args.no_swap:
        swap_in(base, "sessions", name)
        print(f"sessions: swapped in as the sessions snapshot ({base / name})")
    return 0


def _verify_sessions(settings: Settings) -> tuple[Any, Any]:
    from memstream.streams.operations.rebuild_sessions import (
        fold_chat_topic,
        live_sessions,
        sessions_fingerprint,
    )

    live = sessions_fingerprint(asyncio.run(live_sessions(settings)))
    return live, sessions_fingerprint(asyncio.run(fold_chat_topic(settings)))


def _replay_analytics(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.projections.shadow import shadow_name, swap_in
    from memstream.streams.archive import (
        ArchiveError,
        archive_fingerprint,
        archive_positions,
        live_archive_dir,
        rebuild_archive,
    )

    name = shadow_name("archive-until" if args.until is not None else "archive")
    target = settings.archive_dir / name
    bar = _ProgressBar("analytics")
    started = time.perf_counter()
    try:
        records = asyncio.run(rebuild_archive(settings, target, until=args.until, progress=bar))
    except ArchiveError as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    rebuilt = archive_fingerprint(target)
    print(
        f"analytics: {records} records archived into {target} in "
        f"{time.perf_counter() - started:.1f} s; {rebuilt}"
    )
    if args.until is not None:
        print(f"analytics: as of {args.until.isoformat()}, kept beside the live archive")
        return 0
    live_dir = live_archive_dir(settings)
    if archive_positions(live_dir) == archive_positions(target):
        same = archive_fingerprint(live_dir) == rebuilt
        print(f"analytics: {'identical to' if same else 'DIFFERS from'} the live archive")
    else:
        print("analytics: the live archive is at other log positions (its sink flushes in batches)")
    if not args.no_swap:
        swap_in(settings.archive_dir, "archive", name)
        print(f"analytics: swapped in as the live archive ({target})")
    return 0


def _verify_analytics(settings: Settings) -> tuple[Any, Any]:
    import shutil
    import tempfile

    from memstream.streams.archive import (
        archive_fingerprint,
        archive_positions,
        live_archive_dir,
        rebuild_archive,
    )

    live_dir = live_archive_dir(settings)
    with tempfile.TemporaryDirectory(dir=settings.data_dir, prefix=".verify-") as scratch:
        asyncio.run(rebuild_archive(settings, Path(scratch) / "archive"))
        rebuilt = archive_fingerprint(Path(scratch) / "archive")
        behind = sum(archive_positions(Path(scratch) / "archive").values()) - sum(
            archive_positions(live_dir).values()
        )
        shutil.rmtree(scratch, ignore_errors=True)
    if behind:
        print(f"analytics: the live archive is {behind} record(s) behind the log (it flushes "
              f"every {settings.archive_flush_s:g} s); compare again once it has caught up")
    return archive_fingerprint(live_dir), rebuilt


_REPLAYS: dict[str, Any] = {
    "memories": _replay_memories,
    "sessions": _replay_sessions,
    "analytics": _replay_analytics,
}


_VERIFIES: dict[str, Any] = {
    "memories": _verify_memories,
    "sessions": _verify_sessions,
    "analytics": _verify_analytics,
}


def cmd_restore(args: argparse.Namespace, container: Container) -> int:
    """Re-seed an empty broker from the Parquet archive (same keys, ids, times, offsets)."""
    from memstream.streams.archive import ArchiveError, live_archive_dir, restore

    settings = container.settings
    source = Path(args.source) if args.source else live_archive_dir(settings)
    if not source.is_dir():
        print(f"error: no archive at {source}", file=sys.stderr)
        return 2
    bar = _ProgressBar("restore")
    try:
        report = asyncio.run(restore(settings, source, progress=bar))
    except ArchiveError as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    print(report.summary())
    print("next: memstream replay --projection all (or start the worker: it carries on)")
    return 0
