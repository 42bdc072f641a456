"""The single writer of the memory projection: memory and access events into LanceDB
(``memories`` runs it: where it starts, ``starts``; its loop, ``loop``; which partitions it
writes, ``ownership``), and the tier keeper beside it (``tiers``)."""
