"""The settings a ``memstream`` command runs with.

Its own module so the commands defined outside :mod:`memstream.streams.cli` (``dlq``,
``erase``, ``forget``) share it without importing the CLI that imports them.
"""

from __future__ import annotations

import argparse

from memstream.models.settings import Settings


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings of a command: ``MEMSTREAM_*`` variables, and ``--broker`` over them."""
    overrides = {}
    if getattr(args, "broker", None):
        overrides["broker"] = args.broker
    return Settings(**overrides)
