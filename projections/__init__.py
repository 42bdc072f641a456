"""Read models built from the topics: LanceDB memories, retrieval, DuckDB analytics."""
