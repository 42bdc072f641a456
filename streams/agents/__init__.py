"""The Faust app and its agents: sessions folded from chat, consolidation into memories.

``app`` builds the app and wires the agents; ``session_table`` is the session agent's state;
``steps`` holds what the agents run apart from Faust; ``ordering`` and ``boundary`` keep every
record processed once, in offset order, with no record able to stop a partition.
"""
