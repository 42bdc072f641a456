"""The worker process: what its parts are doing (``health``), its web pages (``web``), and a
worker seen and run from outside (``process``); the worker itself is built and run by
:mod:`memstream.streams.agents.app`."""
