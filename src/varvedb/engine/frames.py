"""Checking a logged frame before replay applies it.

A frame whose SHA-256 checked was written by some writer, not necessarily a
correct one. `check` takes the decoded record of one frame (storage/record.py
has already checked its layout: the arrays lie inside the payload and have
allowed dtypes) and the engine state it is about to be applied to, and raises
CorruptFileError unless applying it keeps the invariants of table.py and
costs work and memory proportional to the frame's own bytes. Nothing is
allocated, and no engine state touched, before the check passes. A live write
builds its frames itself and applies them unchecked; only replay (open,
refresh) runs these.

Grammar of each kind (meta keys, then arrays by name; `n` is meta["n"]; every
int is a msgpack int, never a bool; keys not listed are ignored):

COMMIT              (fixed struct, checked by the log's scan) timestamp within
                    years 1..9999, so the history can be read as datetimes.
CREATE_COLLECTION   cid: int >= 1 not yet used; name: a collection name not yet
                    used; schema: a dict that `Schema.from_dict` accepts.
                    No arrays.
INSERT              c: the cid of an existing table; first: int == that table's n;
                    n: int >= 0; fields: distinct names of schema fields;
                    lists: {field: list of n values} holding exactly the text and
                    json fields of `fields` (text values str or None);
                    ids: a list of n str when the table has text ids.
                    Arrays: ids <i8 (n,) when the table has int ids; for every
                    other field of `fields`, v:<field> — (n,) <i8 for int and
                    timestamp (a timestamp within years 1..9999), <f8 for float,
                    |b1 for bool; (n, dim) of the field's dtype (<f4 or <f2) for
                    vectors, finite if the field has a graph — and n:<field> |b1
                    (n,). No other arrays.
DELETE              c: the cid of an existing table. Arrays: rows <i8 (k,), each a
                    row in [0, n) that is alive (died == ALIVE). No other arrays.
CREATE_INDEX        c: the cid of an existing table; field: one of its vector
                    fields that has no vector index yet, whose vectors so far
                    are all finite; spec: HNSW.to_dict() with m, ef_construction,
                    ef_search within schema.HNSW_LIMITS. No arrays.

Vectors are checked to be finite only where a graph will walk them (its
kernels run with fastmath: a NaN distance can loop a greedy walk forever);
exact search over a NaN is merely a bad score, and the check costs a pass.

Every n is bounded by the frame itself: it equals the length of the ids array
or list, so each row an insert adds is paid for by at least one byte of the
file. (What a row then costs in memory is its columns' width: an absent vector
field is dim zeros, as a live insert would hold them.)
"""
from __future__ import annotations

import msgspec
import numpy as np

from ..errors import CorruptFileError, SchemaError, VarveError
from ..schema import (TS_MAX_US, TS_MIN_US, Schema, brief_from_file, hnsw_from_dict,
                      timestamps_readable, validate_name)
from ..storage import format as F
from .table import ALIVE

# What applying a well-hashed but malformed frame may still raise past the
# checks below; replay turns each into CorruptFileError (a backstop, not the
# way memory stays bounded: the checks are).
APPLY_ERRORS = (VarveError, KeyError, TypeError, ValueError, IndexError, AttributeError,
                AssertionError, RecursionError, OverflowError, MemoryError, msgspec.MsgspecError)

INT64_MAX = (1 << 63) - 1
SCALAR_DTYPES = {"int": "<i8", "timestamp": "<i8", "float": "<f8", "bool": "|b1"}
VECTOR_ARRAY_DTYPES = {"f32": "<f4", "f16": "<f2"}


def check_commit(rec: F.CommitRecord) -> None:
    """A commit frame's fields that its hashes do not vouch for: the timestamp."""
    if not TS_MIN_US <= rec.timestamp_us <= TS_MAX_US:
        raise CorruptFileError(f"commit of version {rec.version} has timestamp "
                               f"{rec.timestamp_us}, outside years 1..9999")


def check(engine, kind: int, meta: dict, arrays: dict) -> None:
    """Raise CorruptFileError unless the frame can be applied to the engine as it is."""
    fn = _CHECKS.get(kind)
    if fn is None:
        raise CorruptFileError(f"unknown frame kind {kind}")
    fn(engine, meta, arrays)


def check_create_collection(engine, meta: dict, arrays: dict) -> None:
    cid = int_of(meta, "cid", 1, INT64_MAX)
    if cid in engine.tables:
        raise CorruptFileError(f"collection id {cid} is created twice")
    name = meta.get("name")
    if not isinstance(name, str):
        raise CorruptFileError(f"collection name {brief_from_file(name)}")
    try:
        validate_name(name)
        Schema.from_dict(meta.get("schema"))
    except SchemaError as e:
        raise CorruptFileError(f"collection {brief_from_file(name)}: {e}") from None
    if name in engine.names:
        raise CorruptFileError(f"collection {name!r} is created twice")
    no_arrays(arrays)


def check_insert(engine, meta: dict, arrays: dict) -> None:
    t = table_of(engine, meta)
    first = int_of(meta, "first", 0, INT64_MAX)
    if first != t.n:
        raise CorruptFileError(f"insert into {t.name!r} starts at row {first}; "
                               f"the collection has {t.n}")
    n = int_of(meta, "n", 0, INT64_MAX)
    fields = meta.get("fields")
    if not isinstance(fields, list) or not all_of_types(fields, {str}) \
            or len(set(fields)) != len(fields) or not set(fields) <= t.schema.fields.keys():
        raise CorruptFileError(f"insert into {t.name!r} names fields {brief_from_file(fields)}")
    lists = meta.get("lists", {})
    if not isinstance(lists, dict):
        raise CorruptFileError(f"insert 'lists' is {brief_from_file(lists)}")
    listed = {f for f in fields if t.schema.fields[f].kind in ("text", "json")}
    if lists.keys() != listed:
        raise CorruptFileError(f"insert into {t.name!r} lists {brief_from_file(list(lists))}, "
                               f"its text and json fields are {sorted(listed)}")
    expected = set()
    if t.schema.id_kind == "text":
        ids = meta.get("ids")
        if not isinstance(ids, list) or len(ids) != n or not all_of_types(ids, {str}):
            raise CorruptFileError(f"insert of {n} rows has text ids {brief_from_file(ids)}")
    else:
        array_of(arrays, "ids", "<i8", (n,))
        expected.add("ids")
    for name in fields:
        f = t.schema.fields[name]
        if name in listed:
            vals = lists[name]
            allowed = {str, type(None)} if f.kind == "text" else None
            if not isinstance(vals, list) or len(vals) != n \
                    or (allowed and not all_of_types(vals, allowed)):
                raise CorruptFileError(f"insert of {n} rows: {f.kind} field {name!r} holds "
                                       f"{brief_from_file(vals)}")
            continue
        if f.kind == "vector":
            v = array_of(arrays, f"v:{name}", VECTOR_ARRAY_DTYPES[f.dtype], (n, f.dim))
            # the writer refuses NaN and inf; a graph's kernels rely on it (all_finite)
            if name in t.vector_indexes and not all_finite(v):
                raise CorruptFileError(f"insert: vector field {name!r} holds NaN or inf")
        else:
            v = array_of(arrays, f"v:{name}", SCALAR_DTYPES[f.kind], (n,))
            if f.kind == "timestamp" and not timestamps_readable(v):
                raise CorruptFileError(f"insert: timestamp field {name!r} holds values "
                                       "outside years 1..9999")
        array_of(arrays, f"n:{name}", "|b1", (n,))
        expected |= {f"v:{name}", f"n:{name}"}
    only_arrays(arrays, expected)


def check_delete(engine, meta: dict, arrays: dict) -> None:
    t = table_of(engine, meta)
    rows = array_of(arrays, "rows", "<i8", None)
    only_arrays(arrays, {"rows"})
    if not len(rows):
        return
    if int(rows.min()) < 0 or int(rows.max()) >= t.n:
        raise CorruptFileError(f"delete names rows outside [0, {t.n}) of {t.name!r}")
    # writers delete only live rows: a row dies once
    if not (t.died.data[rows] == ALIVE).all():
        raise CorruptFileError(f"delete names rows of {t.name!r} that are already dead")


def check_create_index(engine, meta: dict, arrays: dict) -> None:
    t = table_of(engine, meta)
    name = meta.get("field")
    f = t.schema.fields.get(name) if isinstance(name, str) else None
    if f is None or f.kind != "vector":
        raise CorruptFileError(f"index on {brief_from_file(name)}, not a vector field of {t.name!r}")
    if name in t.vector_indexes:
        raise CorruptFileError(f"{name!r} of {t.name!r} is indexed twice")
    try:
        hnsw_from_dict(meta.get("spec"))
    except SchemaError as e:
        raise CorruptFileError(f"index on {name!r}: {e}") from None
    no_arrays(arrays)
    # the rows so far were checked only if a graph already walked them
    if not all_finite(t.columns[name].arena.view()):
        raise CorruptFileError(f"index on {name!r}: its vectors hold NaN or inf")


_CHECKS = {F.Kind.CREATE_COLLECTION: check_create_collection, F.Kind.INSERT: check_insert,
           F.Kind.DELETE: check_delete, F.Kind.CREATE_INDEX: check_create_index}


# ---- helpers (shared with checkpoint.py) ------------------------------------------

def int_of(meta: dict, key: str, lo: int, hi: int) -> int:
    v = meta.get(key)
    if type(v) is not int or not lo <= v <= hi:
        raise CorruptFileError(f"{key!r} is {brief_from_file(v)}, not an integer in {lo}..{hi}")
    return v


def table_of(engine, meta: dict):
    cid = meta.get("c")
    t = engine.tables.get(cid) if type(cid) is int else None
    if t is None:
        raise CorruptFileError(f"frame names collection id {brief_from_file(cid)}, which does not exist")
    return t


def array_of(arrays: dict, name: str, dtype: str, shape: tuple | None) -> np.ndarray:
    """arrays[name], which must have this dtype and shape (None: any 1-d)."""
    a = arrays.get(name)
    if a is None:
        raise CorruptFileError(f"array {name!r} is missing")
    if a.dtype.str != dtype or (a.ndim != 1 if shape is None else a.shape != shape):
        raise CorruptFileError(f"array {name!r} is {a.dtype.str} {a.shape}, expected "
                               f"{dtype} {shape if shape is not None else '(k,)'}")
    return a


def only_arrays(arrays: dict, names: set) -> None:
    extra = arrays.keys() - names
    if extra:
        raise CorruptFileError(f"unexpected arrays {sorted(extra)[:4]}")


def no_arrays(arrays: dict) -> None:
    only_arrays(arrays, set())


def all_finite(vectors: np.ndarray, rows: int = 1 << 16) -> bool:
    """No NaN or infinity among the vectors, checked a block of rows at a time (no
    temporary the size of the arena)."""
    for lo in range(0, len(vectors), rows):
        block = vectors[lo:lo + rows]
        if block.dtype == np.float16:   # exponent bits all set = inf or NaN; 6x faster
            if ((block.view(np.uint16) & 0x7C00) == 0x7C00).any():
                return False
        elif not np.isfinite(block).all():
            return False
    return True


def all_of_types(values: list, types: set) -> bool:
    # the set of types is built in C: no Python-level loop per value
    return set(map(type, values)) <= types


