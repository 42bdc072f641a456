"""The OpenAI-compatible embedder through the real ``openai`` client and a local server."""

from __future__ import annotations

import numpy as np
from llm_server import Reply, ScriptedServer

from memstream.models.settings import Settings
from memstream.projections.embedder import OpenAIEmbedder, embedder_from_settings


def embeddings_reply(vectors: list[list[float]]) -> Reply:
    return Reply(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ],
            "model": "local-embed",
            "usage": {"prompt_tokens": 7, "total_tokens": 7},
        }
    )


def test_vectors_come_back_normalised_in_order_with_the_model_in_their_id() -> None:
    server = ScriptedServer([embeddings_reply([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]])])
    server.start()
    try:
        settings = Settings(
            embedder="openai", embedder_base_url=server.base_url,
            embedder_api_key="sk-e", embedder_model="local-embed",
        )
        embedder = embedder_from_settings(settings)
        assert isinstance(embedder, OpenAIEmbedder)
        vectors = embedder.embed(["first text", "second text"])
    finally:
        server.stop()
    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], rtol=1e-6)
    assert embedder.dimensions == 3
    assert "local-embed" in embedder.model_id
    (request,) = server.received
    assert request.path.endswith("/embeddings")
    assert request.body["input"] == ["first text", "second text"]
    assert request.headers["authorization"] == "Bearer sk-e"
