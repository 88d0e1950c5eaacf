"""Tables in and out (issue 31): insert / upsert of a pandas DataFrame, a pyarrow
Table or RecordBatch, a polars DataFrame; Hits' and SqlResult's to_arrow /
to_pandas / to_polars. Each against the same rows written as dicts (the oracle).
The cases that take `db` run through vv.Client too (tests/test_client.py)."""
from __future__ import annotations

import subprocess
import sys

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varvedb as vv
from conftest import lazy_module

# imported by the tests that use them (lazy_module: not at every worker's collection)
pd, pa, pl = lazy_module("pandas"), lazy_module("pyarrow"), lazy_module("polars")


def _rows(n=5, dim=3):
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    return [{"id": i, "tag": f"t{i % 2}", "n": i * 10, "x": i / 4, "ok": bool(i % 2),
             "emb": vecs[i]} for i in range(n)], vecs


SCHEMA = {"tag": "text", "n": "int", "x": "float", "ok": "bool", "emb": "vector(3)"}


def _frames(rows, vecs):
    cols = {k: [r[k] for r in rows] for k in rows[0] if k != "emb"}
    pdf = pd.DataFrame({**cols, "emb": list(vecs)})
    arrow = pa.table({**cols, "emb": pa.FixedSizeListArray.from_arrays(
        pa.array(vecs.reshape(-1)), 3)})
    listed = pa.table({**cols, "emb": pa.array(vecs.tolist(), pa.list_(pa.float32()))})
    batch = arrow.to_batches()[0]
    pldf = pl.DataFrame({**cols, "emb": vecs}, schema_overrides={"emb": pl.Array(pl.Float32, 3)})
    return {"pandas": pdf, "arrow": arrow, "arrow-list": listed, "batch": batch,
            "polars": pldf}


def _same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("kind", ["pandas", "arrow", "arrow-list", "batch", "polars"])
def test_insert_table_equals_dicts(db, kind):
    rows, vecs = _rows()
    want = db.create_collection("want", SCHEMA)
    got = db.create_collection("got", SCHEMA)
    assert want.insert(rows) == got.insert(_frames(rows, vecs)[kind]) == list(range(5))
    for i in range(5):
        _same(got.get(i), want.get(i))
    assert got.search(vecs[2], limit=1).ids == [2]


def test_number_and_vector_columns_are_taken_without_a_copy():
    """A number column and a fixed-size-list vector column of an Arrow table (a
    polars frame's are Arrow's), and a pandas number column, reach insert_arrays
    as views of the table's own memory."""
    from varvedb.tabular import frame_columns
    rows, vecs = _rows()
    frames = _frames(rows, vecs)
    arrow = frames["arrow"]
    cols = frame_columns(arrow)
    assert np.shares_memory(cols["n"], arrow.column("n").chunk(0).to_numpy())
    emb = arrow.column("emb").chunk(0).flatten().to_numpy()
    assert np.shares_memory(cols["emb"], emb) and cols["emb"].shape == (5, 3)
    pdf = frames["pandas"]
    assert np.shares_memory(frame_columns(pdf)["n"], pdf["n"].to_numpy())
    pldf = frames["polars"]
    assert np.shares_memory(frame_columns(pldf)["n"], pldf["n"].to_numpy())


@pytest.mark.parametrize("kind", ["pandas", "arrow", "polars"])
def test_upsert_table_merges_and_replace_replaces(db, kind):
    rows, vecs = _rows()
    c = db.create_collection("c", SCHEMA)
    c.insert(rows)
    change = {"pandas": pd.DataFrame({"id": [1, 7], "n": [111, 777]}),
              "arrow": pa.table({"id": [1, 7], "n": [111, 777]}),
              "polars": pl.DataFrame({"id": [1, 7], "n": [111, 777]})}[kind]
    assert c.upsert(change) == [1, 7]
    one = c.get(1)
    assert one["n"] == 111 and one["tag"] == "t1"          # merged: tag kept
    np.testing.assert_array_equal(one["emb"], vecs[1])
    assert c.get(7)["n"] == 777 and c.get(7)["tag"] is None
    c.upsert(change, merge=False)
    assert c.get(1)["tag"] is None and c.get(1)["emb"] is None


def test_text_ids_and_nulls_from_a_table(tmp_path):
    with vv.connect(tmp_path / "a.varve") as db:
        c = db.create_collection("c", {"id": "text", "n": "int", "s": "text"})
        df = pd.DataFrame({"id": ["a", "b"], "n": pd.array([1, None], "Int64"),
                           "s": ["x", None]})
        assert c.insert(df) == ["a", "b"]
        assert c.get("b") == {"id": "b", "n": None, "s": None}
        c.insert(pa.table({"id": ["c"], "n": pa.array([None], pa.int64()), "s": ["z"]}))
        assert c.get("c")["n"] is None and c.get("c")["s"] == "z"


@pytest.mark.parametrize("kind", ["pandas", "arrow", "polars"])
def test_wrong_column_type_names_it_and_writes_nothing(db, kind):
    c = db.create_collection("c", SCHEMA)
    bad = {"n": ["one", "two"], "x": [1.0, 2.0]}
    table = {"pandas": pd.DataFrame(bad), "arrow": pa.table(bad),
             "polars": pl.DataFrame(bad)}[kind]
    with pytest.raises(vv.FieldTypeError, match="'n'"):
        c.insert(table)
    with pytest.raises(vv.FieldTypeError, match="'n'"):
        c.upsert(table)
    short = {"emb": [[1.0, 2.0], [3.0, 4.0]]}
    table = {"pandas": pd.DataFrame({"emb": [np.ones(2), np.ones(2)]}),
             "arrow": pa.table(short), "polars": pl.DataFrame(short)}[kind]
    with pytest.raises(vv.DimensionError, match="'emb'"):
        c.insert(table)
    with pytest.raises(vv.UnknownFieldError, match="'nope'"):
        c.insert(pd.DataFrame({"nope": [1]}) if kind == "pandas" else
                 pa.table({"nope": [1]}) if kind == "arrow" else pl.DataFrame({"nope": [1]}))
    assert c.count() == 0


@pytest.mark.parametrize("kind", ["pandas", "arrow", "polars"])
def test_lists_of_several_lengths_go_to_the_field(db, kind):
    """A column of number lists of several lengths was refused FieldTypeError ("lists
    of different lengths") before the field was asked, though create_collection(data=)
    infers json for it: a json field now takes them, and a vector field refuses the
    first row of another width, as insert refuses that row given as a dict."""
    lists = {"id": [1, 2], "m": [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]]}
    table = {"pandas": pd.DataFrame(lists), "arrow": pa.table(lists),
             "polars": pl.DataFrame(lists)}[kind]
    made = db.create_collection("j", data=table)
    assert made.schema.fields["m"].kind == "json"
    assert [d["m"] for d in made.get(ids=[1, 2])] == lists["m"]
    c = db.create_collection("v", {"m": "vector(3)"})
    with pytest.raises(vv.DimensionError, match=r"'m' expects vectors of dimension 3, got one "
                                                r"of shape \(4,\)"):
        c.insert(table)
    assert c.count() == 0


def test_an_arrow_json_column_reads_as_values_and_bad_text_is_refused(db):
    """Arrow's json type (what to_arrow writes for json values of mixed shapes)
    comes in as the values; a text in it that is not JSON is a FieldTypeError
    naming the column, and nothing is written."""
    c = db.create_collection("j", {"meta": "json"})
    good = pa.table({"id": [1, 2, 3], "meta": pa.array(['{"k": [1]}', None, "[1, 2]"],
                                                      pa.json_())})
    c.insert(good)
    assert [h.fields["meta"] for h in c.find(select=["meta"])] == [{"k": [1]}, None, [1, 2]]
    bad = pa.table({"id": [4], "meta": pa.array(["{not json"], pa.json_())})
    with pytest.raises(vv.FieldTypeError, match="'meta'"):
        c.insert(bad)
    assert c.count() == 3


def test_hits_to_tables(db):
    rows, vecs = _rows()
    c = db.create_collection("c", SCHEMA)
    c.insert(rows)
    hits = c.search(vecs[0], limit=3, select=["tag", "n", "emb"])
    want = hits.to_dicts()
    frame = hits.to_pandas()
    assert list(frame.columns) == ["id", "score", "tag", "n", "emb"]
    assert frame["id"].tolist() == hits.ids and frame["n"].dtype == np.int64
    np.testing.assert_array_equal(frame["score"].to_numpy(), hits.scores)
    table = hits.to_arrow()
    assert table.column_names == ["id", "score", "tag", "n", "emb"]
    assert pa.types.is_fixed_size_list(table.schema.field("emb").type)
    assert table.column("tag").to_pylist() == [h["tag"] for h in want]
    np.testing.assert_array_equal(np.stack(table.column("emb").to_numpy(
        zero_copy_only=False)), np.stack([h["emb"] for h in want]))
    plf = hits.to_polars()
    assert plf["id"].to_list() == hits.ids and plf["n"].to_list() == [h["n"] for h in want]
    # built Hit objects (after iteration) give the same tables
    list(hits)
    assert hits.to_arrow().equals(table)
    empty = c.search(vecs[0], limit=3, where="n < 0")
    assert empty.to_pandas().shape[0] == 0 and empty.to_arrow().num_rows == 0
    # round trip: the table of a find inserts into a new collection as the rows
    copy = db.create_collection("copy", SCHEMA)
    copy.insert(c.find(select=list(SCHEMA)).to_arrow().drop(["score"]))
    for i in range(5):
        _same(copy.get(i), c.get(i))


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                     | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


def _exact(v):
    """A JSON value with each part's type: 1 and 1.0 (or True) differ, and so do a
    dict and the same dict with a null key more."""
    if isinstance(v, dict):
        return "dict", [(k, _exact(x)) for k, x in v.items()]
    if isinstance(v, list):
        return "list", [_exact(x) for x in v]
    return type(v).__name__, v


def _decoded(texts) -> list:
    return [None if t is None else msgspec.json.decode(t) for t in texts]


def _json_comes_out_as_it_went_in(columns: dict, *results) -> None:
    """Each result (Hits or SqlResult of id and the json fields of `columns`) as
    Arrow (the json type), pandas (the values) and polars (Arrow's json type over
    the texts) gives each column's values, value by value, exactly."""
    for r in results:
        table, pandas, polars = r.to_arrow(), r.to_pandas(), r.to_polars()
        for name, values in columns.items():
            want = [_exact(v) for v in values]
            assert table.schema.field(name).type.extension_name == "arrow.json"
            got = _decoded(table.column(name).to_pylist())
            assert [_exact(v) for v in got] == [want[i] for i in table.column("id").to_pylist()]
            got = pandas[name].tolist()
            assert [_exact(v) for v in got] == [want[i] for i in pandas["id"]]
            got = _decoded(polars[name].to_list())
            assert [_exact(v) for v in got] == [want[i] for i in polars["id"].to_list()]


def test_json_fields_of_other_shapes_come_out_as_they_went_in(db):
    """Dicts of other keys stay themselves (not one struct of all their keys, with
    nulls), an empty dict too; a json 1 beside 2.5 stays 1 (not 1.0), a null null;
    values of every shape in one field."""
    columns = {"d": [{"a": 1}, {"b": 2}, {}, {"a": {"b": []}}],
               "k": [1, 2.5, None, 3],
               "j": [[1, [2, {"c": None}]], "x", True, {"a": 1}],
               "e": [None, "", "x", None]}    # (pandas 3 made these strings, None a NaN)
    c = db.create_collection("c", {n: "json" for n in columns})
    c.insert([{"id": i, **{n: v[i] for n, v in columns.items()}} for i in range(4)])
    _json_comes_out_as_it_went_in(columns, c.find(select=list(columns)),
                                  db.sql("SELECT id, d, k, j, e FROM c ORDER BY id"))


@settings(max_examples=100, deadline=None)
@given(values=st.lists(_JSON, min_size=1, max_size=6))
def test_json_of_any_shape_comes_out_of_every_table_as_it_went_in(values):
    with vv.connect(":memory:") as db:
        c = db.create_collection("c", {"j": "json"})
        c.insert([{"id": i, "j": v} for i, v in enumerate(values)])
        _json_comes_out_as_it_went_in({"j": values}, c.find(select=["j"]),
                                      db.sql("SELECT id, j FROM c ORDER BY id"))


def test_sql_result_to_polars(tmp_path):
    with vv.connect(tmp_path / "a.varve") as db:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, v vector(2), s text)")
        db.sql("INSERT INTO t VALUES (1, '[1,2]', 'a'), (2, '[3,4]', NULL)")
        r = db.sql("SELECT id, v, s FROM t ORDER BY id")
        df = r.to_polars()
        assert df["id"].to_list() == [1, 2] and df["s"].to_list() == ["a", None]
        assert df["v"].to_list() == [[1.0, 2.0], [3.0, 4.0]]


def test_import_varvedb_loads_no_frame_library():
    code = ("import sys, varvedb as vv; db = vv.connect(':memory:') if False else None; "
            "import varvedb.collection, varvedb.results; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'polars') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
