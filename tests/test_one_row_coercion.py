"""A one-row write's values take a shorter path through coercion
(schema._coerce_one); it must agree with the general path on every value:
the same stored array (dtype, shape, bits) and null mask, or the same error.

The general path is reached with the same value followed by a null (two
rows), and its first row compared.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varvedb as vv
from varvedb.schema import coerce_values


@pytest.fixture(scope="module")
def fields():
    db = vv.connect(":memory:")
    c = db.create_collection("c", {"i": "int", "f": "float", "b": "bool",
                                   "v": vv.Vector(4), "h": vv.Vector(4, dtype="f16"),
                                   "q": vv.Vector(4, dtype="int8"), "t": "text",
                                   "s": vv.Field("text", max_length=3), "j": "json"})
    out = dict(c.schema.fields)
    db.close()
    return out


def _outcome(name, f, values):
    try:
        vals, nulls = coerce_values(name, f, values)
    except Exception as e:    # the error's type is what both paths must share
        return type(e)
    return np.asarray(vals)[:1], np.asarray(nulls)[:1]


def _same(a, b) -> bool:
    if isinstance(a, type) or isinstance(b, type):
        return a is b
    (va, na), (vb, nb) = a, b
    return (va.dtype == vb.dtype and va.shape == vb.shape
            and va.tobytes() == vb.tobytes() and np.array_equal(na, nb))


SCALARS = (st.integers(min_value=-(1 << 65), max_value=1 << 65) | st.booleans()
           | st.floats(allow_nan=True, allow_infinity=True) | st.none()
           | st.text(max_size=2) | st.integers(-5, 5).map(np.int64)
           | st.floats(-1e3, 1e3).map(np.float32))
NUMBERS = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-300, 300)
           | st.sampled_from([1e39, -1e39, 70000.0, 1e-45]) | st.booleans())
DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int8, np.bool_]


def _array(dtype, values, shape):
    """values as an array of dtype where they fit (float64 where they do not)."""
    try:
        with np.errstate(all="ignore"):
            a = np.array(values, dtype=dtype)
    except (ValueError, OverflowError, TypeError):
        a = np.array(values, dtype=np.float64)
    return a.reshape(shape) if shape and a.size == 4 else a


VECTORS = (st.lists(NUMBERS, min_size=3, max_size=5)
           | st.lists(st.none() | st.text(max_size=1) | NUMBERS, min_size=4, max_size=4)
           | st.builds(_array, st.sampled_from(DTYPES),
                       st.lists(NUMBERS.filter(lambda x: not isinstance(x, bool)), min_size=3,
                                max_size=5),
                       st.sampled_from([None, (1, 4)]))
           | st.none())


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["i", "f", "b"]), value=SCALARS)
def test_one_scalar_is_coerced_as_the_general_path_does(fields, name, value):
    f = fields[name]
    assert _same(_outcome(name, f, [value]), _outcome(name, f, [value, None]))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["v", "h", "q"]), value=VECTORS)
def test_one_vector_is_coerced_as_the_general_path_does(fields, name, value):
    f = fields[name]
    assert _same(_outcome(name, f, [value]), _outcome(name, f, [value, None]))


TEXTS = (st.text(max_size=5) | st.text(alphabet=st.characters(codec="ascii"), max_size=5)
         | st.sampled_from(["\ud800", "a\udfff", "x" * 4]) | st.none() | st.integers(0, 3)
         | st.just(np.str_("ab")) | st.just(b"ab"))
JSONS = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 65), 1 << 65)
                     | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=3)
                     | st.just(np.float64(1.5)) | st.just("\ud800"),
                     lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.text(max_size=2) | st.integers(0, 2), kids,
                                       max_size=3), max_leaves=6)


def _listed(name, f, values):
    try:
        vals, nulls = coerce_values(name, f, values)
    except Exception as e:
        return type(e)
    return vals[0], bool(np.asarray(nulls)[0])


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["t", "s"]), value=TEXTS)
def test_one_text_is_coerced_as_the_general_path_does(fields, name, value):
    f = fields[name]
    one, two = _listed(name, f, [value]), _listed(name, f, [value, None])
    assert one == two and type(one) is type(two)
    if not isinstance(one, type):
        assert type(one[0]) is type(two[0])


@settings(max_examples=300, deadline=None)
@given(value=JSONS)
def test_one_json_value_is_coerced_as_the_general_path_does(fields, value):
    f = fields["j"]
    one, two = _listed("j", f, [value]), _listed("j", f, [value, None])
    assert repr(one) == repr(two)


IDS = (st.integers(min_value=-(1 << 64), max_value=1 << 64) | st.booleans()
       | st.floats(-3, 3) | st.text(max_size=2) | st.integers(-5, 5).map(np.int64)
       | st.integers(0, 5).map(np.uint64) | st.just([1]))


def _ids_outcome(table, raw):
    try:
        ids = table.assign_ids(raw)
    except Exception as e:
        return type(e)
    return np.asarray(ids)[:1].tolist()


@settings(max_examples=300, deadline=None)
@given(value=IDS)
def test_one_given_id_is_taken_as_in_a_batch(value):
    """A one-row write that names its id skips the batch's search for missing
    ids: the id it gets, or the error, is the one a two-row batch gives it."""
    db = vv.connect(":memory:")
    try:
        t = db.create_collection("c", {"i": "int"}).table
        one = _ids_outcome(t, [value])
        two = _ids_outcome(t, [value, 7])
        assert one == two
    finally:
        db.close()


def test_the_shared_not_null_mask_stays_unwritten():
    """One-row columns without a null share one read-only mask: the writes that
    merge, fill or keep masks copy it, so it reads all-valid after them."""
    from varvedb import schema
    db = vv.connect(":memory:")
    c = db.create_collection("c", {"i": "int", "t": vv.Text(default="d"),
                                   "v": vv.Vector(4)})
    c.insert({"id": 1, "i": 1, "v": [1.0, 0, 0, 0]})
    c.upsert({"id": 1, "i": 2})                 # merged with the live row
    c.upsert({"id": 2, "v": [0, 1.0, 0, 0]})
    c.replace({"id": 1, "i": 3})
    c.update({"i": 9}, where="id = 2")
    assert c.get(1)["i"] == 3 and c.get(2)["i"] == 9 and c.get(1)["t"] == "d"
    assert not schema._NOT_NULL.flags.writeable and not schema._NOT_NULL.any()
    db.close()
