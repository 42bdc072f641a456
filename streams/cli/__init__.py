"""The ``memstream`` command: ``command`` (the parser, and the container every command runs
with), and one module per family of commands: ``running``, ``memories``, ``log``,
``reports``, ``serving``, ``chatting``; the tools add the arguments of ``dlq``, ``erase`` and ``forget``
(:mod:`memstream.streams.tools`)."""

from memstream.streams.cli.command import main

__all__ = ["main"]
