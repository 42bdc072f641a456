"""The ``memstream`` command: ``command`` (the parser, and the container every command runs
with), and one module per family of commands: ``running``, ``memories``, ``log``,
``reports``, ``serving``, ``chatting``, and ``demo`` (the body of ``memstream demo``); the
operations add the arguments of ``dlq``, ``erase`` and ``forget``
(:mod:`memstream.streams.operations`)."""

from memstream.streams.cli.command import main

__all__ = ["main"]
