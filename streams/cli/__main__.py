"""``python -m memstream.streams.cli``: the ``memstream`` command (how the worker's child
process is started)."""

import sys

from memstream.streams.cli.command import main

sys.exit(main())
