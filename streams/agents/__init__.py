"""The Faust app and its agents: sessions folded from chat, consolidation into memories.

``app`` builds the app and wires the agents; ``session`` is the session agent and its idle
closer, ``session_table`` its state; ``consolidation`` is the extraction agent, ``decisions``
the memory decisions it makes; ``decoding`` checks and opens the records off a topic;
``publishing`` seals and sends what the agents publish; ``ordering`` and ``boundary`` keep
every record processed once, in offset order, with no record able to stop a partition.
"""
