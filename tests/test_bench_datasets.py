"""varvedb_bench/datasets.py: every file layout the bench reads, the named sets, the
ground truth it computes, and the errors a wrong file gets.

Files are written here by hand (h5py, numpy) in the layouts the outside
world uses; truth is checked against a brute force written in the test.
"""
from __future__ import annotations

import json
import subprocess

import h5py
import numpy as np
import pytest

from varvedb import demo_data
from varvedb_bench import datasets
from varvedb.errors import FileMissingError, OptionError, VarveError

from conftest import PYTHON, child_env


def brute(train, test, metric, k=10):
    """Exact top-k by full distance matrices (no blocking, no shortcuts)."""
    if metric == "l2":
        d = ((test[:, None, :].astype(np.float64) - train[None, :, :]) ** 2).sum(-1)
    elif metric == "cosine":
        a = test / np.linalg.norm(test, axis=1, keepdims=True)
        b = train / np.linalg.norm(train, axis=1, keepdims=True)
        d = -(a.astype(np.float64) @ b.T.astype(np.float64))
    else:
        d = -(test.astype(np.float64) @ train.T.astype(np.float64))
    return np.argsort(d, axis=1, kind="stable")[:, :k]


def vectors(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def write_hdf5(path, train, test, neighbors=None, distance="euclidean", skip=()):
    with h5py.File(path, "w") as f:
        if "train" not in skip:
            f["train"] = train
        f["test"] = test
        if neighbors is not None:
            f["neighbors"] = neighbors.astype(np.int32)
            f["distances"] = np.zeros(neighbors.shape, np.float32)
        f.attrs["distance"] = distance


def write_vecs(path, x):
    """A TEXMEX file by hand: each record an int32 dimension, then the values."""
    x = np.asarray(x)
    head = np.full((len(x), 1), x.shape[1], np.int32)
    if x.dtype == np.uint8:
        rec = np.concatenate([head.view(np.uint8), x], axis=1)
    else:
        rec = np.concatenate([head, x.view(np.int32)], axis=1)
    rec.tofile(path)


def echoes():
    said = []
    return said, said.append


@pytest.mark.parametrize("distance,metric", [("euclidean", "l2"), ("angular", "cosine"),
                                             ("dot", "dot"), ("ip", "dot")])
def test_hdf5_round_trips_with_its_metric_and_truth(tmp_path, distance, metric):
    train, test = vectors(300, 8, 1), vectors(20, 8, 2)
    truth = brute(train, test, metric, 12)
    write_hdf5(tmp_path / "toy.hdf5", train, test, truth, distance)
    ds = datasets.load(str(tmp_path / "toy.hdf5"), str(tmp_path / "cache"))
    assert ds.metric == metric and ds.name == "toy"
    assert np.array_equal(ds.train, train) and ds.train.flags.c_contiguous
    assert ds.train.dtype == np.float32 and np.array_equal(ds.test, test)
    assert ds.neighbors.dtype == np.int64 and np.array_equal(ds.neighbors, truth)
    assert "ground truth from the file" in ds.source and f"distance {distance}" in ds.source


def test_hdf5_without_truth_gets_exact_truth_cached(tmp_path):
    train, test = vectors(500, 6, 3), vectors(30, 6, 4)
    write_hdf5(tmp_path / "bare.hdf5", train, test, distance="angular")
    ds = datasets.load(str(tmp_path / "bare.hdf5"), str(tmp_path / "cache"))
    assert np.array_equal(ds.neighbors, brute(train, test, "cosine"))
    assert "ground truth computed" in ds.source
    cached = list((tmp_path / "cache").glob("truth-bare-500x6-q30-cosine-k10-*.npy"))
    assert len(cached) == 1
    np.save(cached[0], np.zeros_like(ds.neighbors))      # the cache is what is read next
    assert not datasets.load(str(tmp_path / "bare.hdf5"), str(tmp_path / "cache")).neighbors.any()


def test_rows_and_queries_cut_the_file_and_recompute_its_truth(tmp_path):
    train, test = vectors(400, 5, 5), vectors(25, 5, 6)
    write_hdf5(tmp_path / "cut.hdf5", train, test, brute(train, test, "l2"))
    said, echo = echoes()
    ds = datasets.load(str(tmp_path / "cut.hdf5"), str(tmp_path / "cache"), echo,
                       rows=150, queries=7)
    assert ds.train.shape == (150, 5) and ds.test.shape == (7, 5)
    assert np.array_equal(ds.neighbors, brute(train[:150], test[:7], "l2"))
    assert any("not used (it is for all rows" in s for s in said)
    # another metric than the file's: its truth is not used either
    ds = datasets.load(str(tmp_path / "cut.hdf5"), str(tmp_path / "cache"), echo, metric="dot")
    assert ds.metric == "dot" and np.array_equal(ds.neighbors, brute(train, test, "dot"))


def test_npy_pair_with_truth_and_explicit_queries(tmp_path):
    train, test = vectors(200, 4, 7), vectors(10, 4, 8)
    np.save(tmp_path / "emb.npy", train.astype(np.float64))      # any float dtype is read
    np.save(tmp_path / "emb.query.npy", test)
    np.save(tmp_path / "emb.truth.npy", brute(train, test, "l2"))
    ds = datasets.load(str(tmp_path / "emb.npy"), str(tmp_path / "cache"))
    assert ds.train.dtype == np.float32 and np.array_equal(ds.train, train)
    assert np.array_equal(ds.neighbors, brute(train, test, "l2"))
    assert "ground truth from the file" in ds.source
    other = vectors(6, 4, 9)
    np.save(tmp_path / "mine.npy", other)
    ds = datasets.load(str(tmp_path / "emb.npy"), str(tmp_path / "cache"),
                       query_file=str(tmp_path / "mine.npy"), metric="cosine")
    assert np.array_equal(ds.test, other)
    assert np.array_equal(ds.neighbors, brute(train, other, "cosine"))


def test_npy_alone_holds_queries_out_of_its_rows(tmp_path):
    x = vectors(300, 4, 10)
    np.save(tmp_path / "alone.npy", x)
    ds = datasets.load(str(tmp_path / "alone.npy"), str(tmp_path / "cache"), queries=20)
    assert ds.train.shape == (150, 4) and ds.test.shape == (20, 4)   # half held out at most
    rows = {r.tobytes() for r in x}
    assert all(r.tobytes() in rows for r in ds.test)
    assert not {r.tobytes() for r in ds.test} & {r.tobytes() for r in ds.train}
    assert np.array_equal(ds.neighbors, brute(ds.train, ds.test, "l2"))
    # by default: as many queries as it can hold out (at most 1 000, at most half)
    assert datasets.load(str(tmp_path / "alone.npy"), str(tmp_path / "cache")).test.shape \
        == (150, 4)


def test_a_file_gives_its_first_thousand_queries_by_default(tmp_path):
    train, test = vectors(40, 3, 18), vectors(1200, 3, 19)
    write_hdf5(tmp_path / "many.hdf5", train, test)
    ds = datasets.load(str(tmp_path / "many.hdf5"), str(tmp_path / "cache"))
    assert np.array_equal(ds.test, test[:1000]) and ds.neighbors.shape == (1000, 10)
    ds = datasets.load(str(tmp_path / "many.hdf5"), str(tmp_path / "cache"), queries=1200)
    assert len(ds.test) == 1200


def test_texmex_files_by_their_suffixes_and_explicitly(tmp_path):
    train, test = vectors(120, 6, 11), vectors(9, 6, 12)
    write_vecs(tmp_path / "toy_base.fvecs", train)
    write_vecs(tmp_path / "toy_query.fvecs", test)
    write_vecs(tmp_path / "toy_groundtruth.ivecs", brute(train, test, "l2", 15).astype(np.int32))
    ds = datasets.load(str(tmp_path / "toy_base.fvecs"), str(tmp_path / "cache"))
    assert ds.name == "toy" and np.array_equal(ds.train, train) and np.array_equal(ds.test, test)
    assert ds.neighbors.shape == (9, 15) and "ground truth from the file" in ds.source
    assert np.array_equal(ds.neighbors, brute(train, test, "l2", 15))
    # bytes, with the queries and truth named explicitly
    b = np.random.default_rng(13).integers(0, 256, (80, 12)).astype(np.uint8)
    write_vecs(tmp_path / "b.bvecs", b)
    write_vecs(tmp_path / "q.bvecs", b[:5])
    write_vecs(tmp_path / "t.ivecs", brute(b.astype(np.float32), b[:5].astype(np.float32),
                                           "l2").astype(np.int32))
    ds = datasets.load(str(tmp_path / "b.bvecs"), str(tmp_path / "cache"),
                       query_file=str(tmp_path / "q.bvecs"), truth_file=str(tmp_path / "t.ivecs"))
    assert ds.train.dtype == np.float32 and np.array_equal(ds.train, b.astype(np.float32))
    assert (ds.neighbors[:, 0] == np.arange(5)).all()      # each query is its own nearest


def test_generator_spec_is_the_generator(tmp_path):
    ds = datasets.load("clustered", str(tmp_path), rows=500, queries=20, dim=8)
    ref = demo_data.make(500, 8, 20, "clustered")
    assert np.array_equal(ds.train, ref.vectors) and np.array_equal(ds.test, ref.queries)
    assert np.array_equal(ds.neighbors, brute(ref.vectors, ref.queries, "l2"))


def test_bad_inputs_raise_varve_errors_that_say_what(tmp_path):
    cache = str(tmp_path / "cache")
    with pytest.raises(FileMissingError, match="no such file, and not a named set"):
        datasets.load(str(tmp_path / "nope.hdf5"), cache)
    train = vectors(50, 4, 14)
    np.save(tmp_path / "d.npy", train)
    np.save(tmp_path / "d.query.npy", vectors(5, 3, 15))
    with pytest.raises(OptionError, match="mismatched dims: the rows of d.npy have "
                                          "dimension 4, its queries 3"):
        datasets.load(str(tmp_path / "d.npy"), cache)
    with pytest.raises(FileMissingError, match="q.npy: no such file"):
        datasets.load(str(tmp_path / "d.npy"), cache, query_file=str(tmp_path / "q.npy"))
    (tmp_path / "bad.fvecs").write_bytes(np.array([4, 1, 2, 3, 4, 1], np.int32).tobytes())
    with pytest.raises(OptionError, match="not a .fvecs file"):
        datasets.load(str(tmp_path / "bad.fvecs"), cache)
    mixed = np.array([2, 0, 0, 3, 0, 0], np.int32)     # records of dims 2 then 3... in 24 bytes
    (tmp_path / "mixed.fvecs").write_bytes(mixed.tobytes())
    with pytest.raises(OptionError, match="record 1 says dimension 3"):
        datasets.load(str(tmp_path / "mixed.fvecs"), cache)
    write_hdf5(tmp_path / "notrain.hdf5", train, train[:3], skip=("train",))
    with pytest.raises(OptionError, match="not the ann-benchmarks layout .no dataset train"):
        datasets.load(str(tmp_path / "notrain.hdf5"), cache)
    write_hdf5(tmp_path / "ham.hdf5", train, train[:3], distance="hamming")
    with pytest.raises(OptionError, match="distance 'hamming' is not one"):
        datasets.load(str(tmp_path / "ham.hdf5"), cache)
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(OptionError, match="not a layout the bench reads"):
        datasets.load(str(tmp_path / "x.csv"), cache)
    (tmp_path / "fake.npy").write_text("not numpy")
    with pytest.raises(OptionError, match="not a .npy file"):
        datasets.load(str(tmp_path / "fake.npy"), cache)
    np.save(tmp_path / "t.npy", train)
    np.save(tmp_path / "t.query.npy", train[:4])
    np.save(tmp_path / "t.truth.npy", np.zeros((2, 10), np.int64))
    with pytest.raises(OptionError, match="not one row per query"):
        datasets.load(str(tmp_path / "t.npy"), cache)
    np.save(tmp_path / "lone.npy", train)
    with pytest.raises(OptionError, match="needs the queries it was computed for"):
        datasets.load(str(tmp_path / "lone.npy"), cache, truth_file=str(tmp_path / "t.truth.npy"))
    with pytest.raises(OptionError, match="metric is one of"):
        datasets.load("clustered", cache, metric="l1")


def test_glove_50_is_a_fixed_held_out_split(tmp_path):
    small = datasets.load("glove-50", str(tmp_path), rows=1000, queries=50)
    big = datasets.load("glove-50", str(tmp_path), rows=3000, queries=50)
    assert small.metric == "cosine" and small.train.shape == (1000, 50)
    assert small.test.shape == (50, 50) and np.array_equal(small.test, big.test)
    assert np.array_equal(small.train, big.train[:1000])      # a prefix of the same order
    assert not {r.tobytes() for r in small.test} & {r.tobytes() for r in big.train}
    assert np.array_equal(small.neighbors, brute(small.train, small.test, "cosine"))
    with pytest.raises(OptionError, match="holds out 1,000 queries"):
        datasets.load("glove-50", str(tmp_path), rows=1000, queries=5000)


def test_minilm_embeds_a_corpus_once(tmp_path):
    corpus = tmp_path / "tiny.jsonl"
    words = ["database", "editor", "compiler", "font", "game", "library", "server", "shell"]
    with open(corpus, "w") as f:
        for i, w in enumerate(words * 3):
            f.write(json.dumps({"id": f"p{i}", "body": "x",
                                "summary": f"{w} tool number {i}"}) + "\n")
    said, echo = echoes()
    ds = datasets.load("minilm-debian", str(tmp_path), echo, corpus=str(corpus))
    assert ds.dim == 384 and ds.metric == "cosine" and len(ds.train) + len(ds.test) == 24
    assert np.allclose(np.linalg.norm(ds.train, axis=1), 1, atol=1e-4)
    assert any("embedding 24 summaries" in s for s in said)
    said.clear()
    again = datasets.load("minilm-debian", str(tmp_path), echo, corpus=str(corpus))
    assert not said and np.array_equal(again.train, ds.train)       # from the cache


def test_harness_runs_on_a_dataset_file(tmp_path):
    train, test = vectors(1500, 8, 16), vectors(20, 8, 17)
    np.save(tmp_path / "mine.npy", train)
    np.save(tmp_path / "mine.query.npy", test)
    r = subprocess.run([PYTHON, "-m", "varvedb_bench", "ann", "--dataset",
                        str(tmp_path / "mine.npy"), "--peers", "hnswlib", "--no-varvedb",
                        "--runs", "1", "--exact-queries", "3", "--ef", "10,80",
                        "--out", str(tmp_path / "out")],
                       env=child_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "bench-mine-1500x8.json").read_text())
    cfg = summary["config"]
    assert (cfg["rows"], cfg["dim"], cfg["queries"], cfg["metric"]) == (1500, 8, 20, "l2")
    assert "mine.npy" in cfg["source"] and cfg["dataset"]
    figs = summary["engines"]["hnswlib"]["figures"]
    assert figs["exact_recall"]["median"] == 1.0 and figs["ann_ef80_recall"]["median"] > 0.9


def test_cli_names_a_bad_dataset_without_a_traceback(tmp_path):
    r = subprocess.run([PYTHON, "-m", "varvedb_bench", "ann", "--dataset",
                        str(tmp_path / "missing.hdf5"), "--out", str(tmp_path)],
                       env=child_env(), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "missing.hdf5" in r.stderr and "no such file" in r.stderr
    assert issubclass(FileMissingError, VarveError)
