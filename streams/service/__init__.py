"""The application layer: what memstream does for its users, whichever interface asks.

``container`` builds every part once from one :class:`~memstream.models.settings.Settings`;
``memories`` holds the memory operations (add, search, get, list, history, delete, erase),
with ``accesses`` publishing what searches used and ``user_log`` reading a user's events back,
``sessions`` a session's working-memory context, ``reports`` the analytics reports;
``results`` the plain shapes they answer with; ``chat_events`` the chat events an add (or
``memstream publish``) makes and publishes; ``app`` the :class:`Service` that joins them.
The CLI, the Python client and the web interfaces are adapters over a :class:`Service`.
"""
