"""`varvedb bench walk` (varvedb_bench/walk.py): its walks are faithful to the
graph they walk, the coded walks only ever skip exact distances (an eps too
wide to reject anything gives the plain walk's results), the package's walk
over a renumbered graph (and, under `make soak`, without its prefetches) finds
what it finds, and wrong engine names are refused before any data is read."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("hnswlib")

from varvedb.errors import OptionError  # noqa: E402
from varvedb_bench import walk  # noqa: E402

ROWS = 2000
# The package's walk without its prefetches ("varvedb:nopf") is a copy of the
# package's kernel compiled uncached in every process (~9 s of CPU an arena
# type, most of this file's): `make soak` (VARVEDB_SOAK=1) walks it over the
# float32 arena, plain and renumbered; CI walks the renumbered graph with the
# prefetches. (The bench's own walks without prefetches, plain:nopf and
# edge:1000:nopf, are cached kernels: CI walks them.)
SOAK = bool(os.environ.get("VARVEDB_SOAK"))
RCM = "varvedb:rcm:nopf" if SOAK else "varvedb:rcm"


# Whether a copy is faithful does not depend on the arena it walks, so the int8
# walk is renumbered here with its prefetches.
@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return walk.run("clustered", str(tmp_path_factory.mktemp("cache")), rows=ROWS, dim=40,
                    queries=40, efs=(10, 40, ROWS), rounds=1,
                    engines=("varvedb", "hnswlib", "plain", "coded", "edge", "coded:1000",
                             "edge:1000:nopf", "oracle", "plain:nopf",
                             *(("varvedb:nopf",) if SOAK else ()),
                             "varvedb:bfs", RCM, "varvedb:int8", "varvedb:int8:bfs"),
                    echo=lambda *_: None)


def _curve(report, engine):
    return report["engines"][engine]["curve"]


def test_the_plain_walk_finds_what_the_package_walk_finds(report):
    for ef in (10, 40, ROWS):
        plain = _curve(report, "plain")[ef]
        assert abs(plain["recall"] - _curve(report, "varvedb")[ef]["recall"]) <= 0.02
        assert _curve(report, "plain:nopf")[ef]["recall"] == plain["recall"]
        assert abs(_curve(report, "oracle")[ef]["recall"] - plain["recall"]) <= 0.02
    assert _curve(report, "plain")[ROWS]["recall"] >= 0.99


def test_the_package_walk_varied_finds_what_it_finds(report):
    # no prefetch: the same kernel less its hints; renumbered: the same graph
    # under other row numbers (the ids mapped back before recall is counted)
    for ef in (10, 40, ROWS):
        own = _curve(report, "varvedb")[ef]["recall"]
        if SOAK:
            assert _curve(report, "varvedb:nopf")[ef]["recall"] == own
        for engine in ("varvedb:bfs", RCM):
            assert abs(_curve(report, engine)[ef]["recall"] - own) <= 0.01
    assert _curve(report, RCM)[ROWS]["recall"] == 1.0
    for ef in (10, 40, ROWS):
        assert abs(_curve(report, "varvedb:int8:bfs")[ef]["recall"]
                   - _curve(report, "varvedb:int8")[ef]["recall"]) <= 0.01
    assert _curve(report, "varvedb:int8")[ROWS]["recall"] == 1.0


def test_a_renumbering_is_a_permutation_that_keeps_every_list(tmp_path):
    import numpy as np
    from varvedb.index.hnsw import HnswIndex
    x = np.random.default_rng(0).normal(size=(600, 8)).astype(np.float32)
    norms = np.linalg.norm(x, axis=1).astype(np.float32)
    index = HnswIndex(8, "cosine", m=4, ef_construction=32, quantize="int8")
    index.add(x, norms, np.arange(600))
    for how in walk.ORDERS:
        order = walk.node_order(index, how)
        assert sorted(order.tolist()) == list(range(600))
        moved, mx, _ = walk.renumbered(index, x, norms, order)     # validates it
        a, b = index.to_arrays(), moved.to_arrays()
        np.testing.assert_array_equal(mx, x[order])
        np.testing.assert_array_equal(b["codes"], a["codes"][order])
        links = np.where(b["links0"] >= 0, order[np.maximum(b["links0"], 0)], -1)
        np.testing.assert_array_equal(links, a["links0"][order])
        assert order[b["params"][7]] == a["params"][7]              # the entry point


def test_an_eps_that_rejects_nothing_gives_the_plain_walk(report):
    for ef in (10, 40, ROWS):
        plain = _curve(report, "plain")[ef]
        for engine in ("coded:1000", "edge:1000:nopf"):
            coded = _curve(report, engine)[ef]
            assert coded["recall"] == plain["recall"]
            assert coded["exact_per_query"] == plain["exact_per_query"]
            assert coded["estimated_per_query"] == plain["exact_per_query"]


def test_the_estimates_skip_exact_distances_and_keep_recall(report):
    for engine in ("coded", "edge"):
        for ef in (10, 40):
            coded, plain = _curve(report, engine)[ef], _curve(report, "plain")[ef]
            assert coded["exact_per_query"] < plain["exact_per_query"]
            assert coded["recall"] >= plain["recall"] - 0.05


def test_figures_are_there(report):
    engines = report["engines"]
    # 40-d pads to 64 bits: 8 code bytes and 2 correction bytes per link, 32 links
    assert engines["coded"]["bytes_per_vector"] == engines["varvedb"]["bytes_per_vector"] + 320
    assert engines["hnswlib"]["vs_hnswlib@0.99"]["median"] == 1.0
    for entry in engines.values():
        assert all(point["qps"]["min"] > 0 for point in entry["curve"].values())
    assert report["load"]["median"] >= 0 and report["build_s"]["varvedb"] > 0


@pytest.mark.parametrize("spec", ["nosuch", "coded:wide", "plain:0.5", "hnswlib:nopf",
                                  "plain:rcm", "varvedb:gorder"])
def test_a_wrong_engine_is_refused(spec, tmp_path):
    with pytest.raises(OptionError):
        walk.run("clustered", str(tmp_path), rows=100, engines=("hnswlib", spec))
    assert not list(tmp_path.iterdir())      # refused before any data was made
