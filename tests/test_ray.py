"""Ray Data over varvedb: read_varve, VarveDatasink, build_index (integrations/ray.py).

One local Ray serves every Ray test of the file (conftest.py's local_ray)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import varvedb as vv
from conftest import lazy_callables, lazy_module
from server_proc import ServerProcess
from test_hnsw_index import clustered, exact_top_k, recall
from varvedb.errors import (DuplicateIdError, FilterError, NotFoundError, OptionError,
                            VarveError)

# imported by the tests (lazy_module: not at every pytest worker's collection)
pa, ray = lazy_module("pyarrow"), lazy_module("ray")
VarveDatasink, build_index, read_varve = lazy_callables(
    "varvedb.integrations.ray", "VarveDatasink", "build_index", "read_varve")

ROOT = Path(__file__).resolve().parents[1]
N, DIM = 3000, 16


pytestmark = pytest.mark.usefixtures("local_ray")


def _source(path: str, n: int = N) -> tuple[int, int]:
    """A collection of n documents at version v1 (m: n % 7), then a second commit
    (v2) that updates a seventh of them and adds 100; returns (v1, v2)."""
    rng = np.random.default_rng(5)
    with vv.connect(path) as db:
        c = db.create_collection("docs", {"title": "text", "n": "int", "m": "int",
                                          "x": "float", "vec": f"vector({DIM})"})
        c.insert_arrays(id=np.arange(n), title=[f"doc {i}" for i in range(n)],
                        n=np.arange(n), m=np.arange(n) % 7, x=rng.random(n),
                        vec=rng.standard_normal((n, DIM)).astype(np.float32))
        v1 = db.version
        with db.transaction():
            c.update({"title": "changed"}, where="m = 0")
            c.insert_arrays(id=np.arange(n, n + 100), title=["new"] * 100,
                            n=np.arange(n, n + 100), m=np.full(100, 3), x=rng.random(100),
                            vec=rng.standard_normal((100, DIM)).astype(np.float32))
        return v1, db.version


def _columns(table, names) -> dict:
    """An Arrow table's columns sorted by id (vectors as one block)."""
    order = np.argsort(table.column("id").to_numpy())
    out = {}
    for name in names:
        col = table.column(name).combine_chunks()
        if hasattr(col.type, "list_size"):
            out[name] = np.asarray(col.flatten().to_numpy()).reshape(len(col), -1)[order]
        else:
            out[name] = np.asarray(col.to_numpy(zero_copy_only=False))[order]
    return out


def _arrow(ds):
    """A Dataset's rows as one Arrow table."""
    return pa.concat_tables(ray.get(ds.to_arrow_refs()))


def _found(c, names, **args) -> dict:
    hits = c.find(select=[n for n in names if n != "id"], **args)
    if not len(hits):
        return {name: np.empty(0) for name in names}
    return _columns(hits.to_arrow(), names)


def _equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype.kind == b[name].dtype.kind or name == "title", name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def _side_dirs(folder) -> list:
    return [p for p in os.listdir(folder) if ".ray-" in p]


def test_import_varvedb_never_imports_ray():
    out = subprocess.run([sys.executable, "-c", "import varvedb, sys; "
                          "assert 'ray' not in sys.modules, 'ray imported'; print('ok')"],
                         capture_output=True, text=True, env={**os.environ,
                                                              "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_read_then_write_round_trip_equals_the_source(tmp_path):
    src, dst = str(tmp_path / "src.varve"), str(tmp_path / "dst.varve")
    _source(src)
    ds = read_varve(src, "docs", parallelism=3)
    assert ds.schema().names == ["id", "title", "n", "m", "x", "vec"]
    ds.write_datasink(VarveDatasink(dst, "docs"))
    names = ["id", "title", "n", "m", "x", "vec"]
    with vv.connect(src, readonly=True) as a, vv.connect(dst, readonly=True) as b:
        # one commit made the collection and every row
        assert b.version == 1 and len(b.history()) == 1
        assert b.collection("docs").schema.fields["vec"].dim == DIM
        _equal(_found(b.collection("docs"), names), _found(a.collection("docs"), names))
    assert _side_dirs(tmp_path) == []


def test_upsert_merges_by_id_and_append_inserts(tmp_path):
    src, dst = str(tmp_path / "src.varve"), str(tmp_path / "dst.varve")
    _source(src, n=400)
    with vv.connect(dst) as db:
        c = db.create_collection("docs", {"title": "text", "n": "int", "m": "int",
                                          "x": "float", "vec": f"vector({DIM})",
                                          "keep": "text"})
        c.insert([{"id": 1, "title": "old", "keep": "mine"},
                  {"id": 10_000, "title": "other"}])
    read_varve(src, "docs", columns=["title"], where="n < 50").write_datasink(
        VarveDatasink(dst, "docs", mode="upsert"))
    with vv.connect(dst, readonly=True) as db:
        c = db.collection("docs")
        assert c.count() == 51
        assert c.get(1)["title"] == "doc 1" and c.get(1)["keep"] == "mine"  # merged
        assert c.get(10_000)["title"] == "other"
    with pytest.raises(OptionError):
        VarveDatasink(dst, "docs", mode="merge")
    with pytest.raises(OptionError):
        VarveDatasink("http://127.0.0.1:1/", "docs")


def test_where_columns_and_as_of_are_pushed_down(tmp_path):
    src = str(tmp_path / "src.varve")
    v1, v2 = _source(src)
    names = ["id", "title", "vec"]
    with vv.connect(src, readonly=True) as db:
        c = db.collection("docs")
        for where, as_of in [("m = 2", None), ("m = 2", v1), ("title = 'changed'", None),
                             ("title = 'changed'", v1), (None, v1)]:
            ds = read_varve(src, "docs", columns=["title", "vec"], where=where, as_of=as_of,
                            parallelism=2)
            want = _found(c, names, where=where, as_of=as_of)
            if not len(want["id"]):     # 'changed' at v1: no rows, no block
                assert where == "title = 'changed'" and ds.count() == 0
                continue
            got = _arrow(ds)
            assert got.column_names == names
            _equal(_columns(got, names), want)
        # the same rows as SQL's at the head, parameters pushed as $n
        got = _arrow(read_varve(src, "docs", columns=["n"], where="x < $1 AND n >= $2",
                         params=[0.5, 100]))
        rows = db.sql("SELECT id, n FROM docs WHERE x < 0.5 AND n >= 100 ORDER BY id").rows
        assert sorted(zip(got.column("id").to_pylist(), got.column("n").to_pylist())) == \
            [tuple(r) for r in rows]
    # a version pinned at planning: a commit after it is not read
    ds = read_varve(src, "docs", columns=["n"], parallelism=2)
    with vv.connect(src) as db:
        db.collection("docs").insert({"id": 99_999, "n": 1})
    assert ds.count() == N + 100
    assert read_varve(src, "docs", where="title = 'nothing'").count() == 0


def test_bad_arguments_are_refused_when_planned(tmp_path):
    src = str(tmp_path / "src.varve")
    _source(src, n=50)
    before = _digest(src)
    with pytest.raises(NotFoundError):
        read_varve(src, "nope")
    with pytest.raises(VarveError):
        read_varve(src, "docs", columns=["nope"])
    with pytest.raises(FilterError):
        read_varve(src, "docs", where="n >")
    for source in (":memory:", "", 42):
        with pytest.raises(OptionError):
            read_varve(source, "docs")
    with pytest.raises(OptionError):
        build_index(src, "docs", "vec", vv.IVFPQ(lists=4), tasks=0)
    with pytest.raises(OptionError):
        read_varve(src, "docs", parallelism=0)
    assert _digest(src) == before


def test_a_server_url_reads_the_same_rows(tmp_path):
    src = str(tmp_path / "src.varve")
    v1, _ = _source(src, n=500)
    names = ["id", "n", "vec"]
    with vv.connect(src, readonly=True) as db:
        want = _found(db.collection("docs"), names, where="m IN (1, 4)", as_of=v1)
    with ServerProcess(src, token="t") as srv:
        got = read_varve(srv.url, "docs", columns=["n", "vec"], where="m IN (1, 4)", as_of=v1,
                         token="t", parallelism=2)
        got = _arrow(got)
    _equal(_columns(got, names), want)


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class _Boom(Exception):
    pass


def _raise_on_the_last_block(batch):
    if int(np.max(batch["n"])) >= N - 1:
        raise _Boom("a task fails")
    return batch


def test_a_failed_job_leaves_the_target_unchanged_and_no_side_files(tmp_path):
    src, dst = str(tmp_path / "src.varve"), str(tmp_path / "dst.varve")
    _source(src)
    with vv.connect(dst) as db:
        db.create_collection("docs", {"title": "text", "n": "int", "m": "int",
                                      "x": "float", "vec": f"vector({DIM})"}
                             ).insert({"id": 5, "n": 5})
    before, size = _digest(dst), os.path.getsize(dst)
    with vv.connect(dst, readonly=True) as db:
        version = db.version
    # one task of the job raises: the others' side files are never applied
    ds = read_varve(src, "docs", parallelism=4).map_batches(_raise_on_the_last_block)
    with pytest.raises(Exception, match="a task fails"):
        ds.write_datasink(VarveDatasink(dst, "docs"))
    assert _digest(dst) == before and os.path.getsize(dst) == size
    assert _side_dirs(tmp_path) == []
    # every task succeeds but the commit fails (id 5 is taken): nothing is applied
    with pytest.raises(Exception) as err:
        read_varve(src, "docs", parallelism=4).write_datasink(VarveDatasink(dst, "docs"))
    assert isinstance(err.value, DuplicateIdError) or "DuplicateIdError" in str(err.value)
    assert _digest(dst) == before
    assert _side_dirs(tmp_path) == []
    with vv.connect(dst, readonly=True) as db:
        assert db.version == version and db.collection("docs").count() == 1


def test_the_ray_ivfpq_build_equals_the_single_process_build(tmp_path):
    one, dist = str(tmp_path / "one.varve"), str(tmp_path / "ray.varve")
    x = clustered(4000, DIM, seed=3)
    queries = clustered(40, DIM, seed=4)
    spec = vv.IVFPQ(lists=16, pq_m=4, nprobe=4, seed=7)
    for path in (one, dist):
        with vv.connect(path) as db:
            db.create_collection("docs", {"vec": vv.Vector(DIM, metric="l2")}).insert_arrays(
                id=np.arange(len(x)), vec=x)
    with vv.connect(one) as db:                       # the maintainer's build
        c = db.collection("docs")
        c.create_index("vec", spec)
        assert c.wait_indexed("vec", timeout=600)
        db.checkpoint()
    build_index(dist, "docs", "vec", spec, tasks=2)
    truth = exact_top_k(x, queries, "l2", k=10)
    found = {}
    for path in (one, dist):
        with vv.connect(path, readonly=True) as db:
            c = db.collection("docs")
            assert c.index_status("vec")["unlinked"] == 0     # loaded from the checkpoint
            hits = [c.search(vector=q, limit=10) for q in queries]
            assert {h.plan.input.strategy for h in hits} == {"lists"}
            found[path] = np.array([h.ids for h in hits])
            assert len(db.history()) == 3     # the collection, its rows, the index
    assert abs(recall(found[dist], truth) - recall(found[one], truth)) <= 0.01
    assert recall(found[dist], truth) > 0.5
    np.testing.assert_array_equal(found[dist], found[one])    # the same index
    with pytest.raises(OptionError):
        build_index(dist, "docs", "vec", vv.HNSW())


def test_bad_rows_are_refused_as_insert_refuses_them_and_nothing_is_applied(tmp_path):
    """A str in an int column made Ray keep the column as pickled Python values,
    which the sink read as a tensor: the job failed with pyarrow's ArrowInvalid.
    Vectors of several lengths (Ray's variable-shaped tensor column) were written
    as one-element lists and refused as "got one of shape (1, 3)". Each is now the
    error insert gives for the same rows, naming the row's real width, and the
    target is as it was; a json column of lists of several lengths is written."""
    dst = str(tmp_path / "o.varve")
    with vv.connect(dst) as db:
        db.create_collection("o", {"n": "int", "v": "vector(3)", "j": "json"})
    before = _digest(dst)
    cases = [([{"id": 1, "n": 1, "v": np.ones(3)}, {"id": 2, "n": "oops", "v": np.ones(3)}],
              vv.FieldTypeError, "field 'n' is int, got 'oops'"),
             ([{"id": 1, "n": 1, "v": np.ones(3)}, {"id": 2, "n": 2, "v": np.ones(4)}],
              vv.DimensionError, r"dimension 3, got one of shape \(4,\)")]
    for rows, error, message in cases:
        with pytest.raises(error, match=message):
            vv.connect(":memory:").create_collection(
                "o", {"n": "int", "v": "vector(3)"}).insert(rows)
        with pytest.raises(error, match=message):
            ray.data.from_items(rows, override_num_blocks=1).write_datasink(
                VarveDatasink(dst, "o"))
        assert _digest(dst) == before and _side_dirs(tmp_path) == []
    rows = [{"id": 1, "n": 1, "v": np.ones(3), "j": np.arange(2)},
            {"id": 2, "n": 2, "v": np.ones(3), "j": np.arange(3)}]
    ray.data.from_items(rows, override_num_blocks=1).write_datasink(VarveDatasink(dst, "o"))
    with vv.connect(dst, readonly=True) as db:
        assert [d["j"] for d in db.collection("o").get(ids=[1, 2])] == [[0, 1], [0, 1, 2]]
