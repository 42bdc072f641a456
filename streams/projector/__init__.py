"""The single writer of the memory projection: memory and access events into LanceDB (``memories``),
and the tier keeper beside it (``tiers``)."""
