"""The memstream domain: events, session state, memory records and pure functions.

Nothing in this package does I/O or imports from ``memstream.streams`` or
``memstream.projections``.
"""
