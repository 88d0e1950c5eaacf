"""Field types, index specs, and the validation and coercion of incoming rows.

A collection's schema maps field names to `Field`s. Rows arrive either as a
list of dicts (`insert`) or as numpy arrays (`insert_arrays`); both are turned
into one columnar `Batch` here, fully validated, before anything is written:
a batch that leaves this module is known to fit the schema.

Column representations (what the engine stores and the file carries):
int -> int64, float -> float64, bool -> bool, timestamp -> int64 microseconds
since the Unix epoch (UTC), text -> Python str (dictionary-coded by the engine),
json -> any msgpack-able value, vector -> float32/float16 (n, dim) block.
Every scalar column has a null mask; a vector may be null too.
"""
from __future__ import annotations

import datetime as _dt
import math
import re
import reprlib
from dataclasses import dataclass, field as _field
from functools import cached_property
from typing import Any

import numpy as np

from .errors import (DimensionError, FieldTypeError, NonFiniteVectorError,
                     SchemaError, UnknownFieldError)

SCALAR_KINDS = ("int", "float", "bool", "text", "json", "timestamp")
METRICS = ("cosine", "l2", "dot")
VECTOR_DTYPES = {"f32": np.float32, "f16": np.float16}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class HNSW:
    """HNSW graph index parameters for a vector field."""
    m: int = 16
    ef_construction: int = 200
    ef_search: int = 100

    def to_dict(self) -> dict:
        return {"kind": "hnsw", "m": self.m, "ef_construction": self.ef_construction,
                "ef_search": self.ef_search}


@dataclass(frozen=True)
class Field:
    """One field of a collection. Use the helpers `Int`, `Text`, `Vector`, ..."""
    kind: str
    index: str | None = None          # "hash" or "sorted" on scalar fields
    fts: bool = False                 # full-text index on text fields
    dim: int = 0                      # vectors only
    metric: str = "cosine"            # vectors only
    dtype: str = "f32"                # vectors only
    vector_index: HNSW | None = _field(default=None)

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind}
        if self.kind == "vector":
            d.update(dim=self.dim, metric=self.metric, dtype=self.dtype)
            if self.vector_index is not None:
                d["index"] = self.vector_index.to_dict()
        else:
            if self.index:
                d["index"] = self.index
            if self.fts:
                d["fts"] = True
        return d

    @staticmethod
    def from_dict(d: dict) -> "Field":
        """The field `to_dict` wrote. The dict comes from a file, so every key is
        checked (SchemaError), not trusted: it becomes the table's layout."""
        if not isinstance(d, dict) or not isinstance(d.get("kind"), str):
            raise SchemaError(f"a field is a dict with a 'kind', got {_shown(d)}")
        kind = d["kind"]
        if kind == "vector":
            ix = d.get("index")
            hnsw = hnsw_from_dict(ix) if ix is not None else None
            dim, metric, dtype = d.get("dim"), d.get("metric"), d.get("dtype")
            if type(dim) is not int or metric not in METRICS or not isinstance(dtype, str) \
                    or dtype not in VECTOR_DTYPES:
                raise SchemaError(f"a vector field has an int dim, a metric and a dtype, got "
                                  f"{_shown(d)}")
            return Vector(dim, metric=metric, dtype=dtype, index=hnsw)
        if kind not in SCALAR_KINDS:
            raise SchemaError(f"unknown field kind {_shown(kind)}")
        fts, index = d.get("fts", False), d.get("index")
        if not isinstance(fts, bool) or (fts and kind != "text"):
            raise SchemaError(f"fts is a bool of text fields, got {_shown(fts)} on {kind}")
        if index not in (None, "hash", "sorted"):
            raise SchemaError(f"unknown index {_shown(index)}; expected 'hash' or 'sorted'")
        return Field(kind, index=_scalar(kind, index).index, fts=fts)


# The bounds of an HNSW spec read from a file: beyond them the graph's
# per-search scratch (ef) or per-node lists (m) would be sized by the file.
HNSW_BOUNDS = {"m": (2, 100), "ef_construction": (1, 4096), "ef_search": (1, 4096)}


def hnsw_from_dict(d: dict) -> HNSW:
    """The HNSW spec `HNSW.to_dict` wrote, each value checked against HNSW_BOUNDS."""
    if not isinstance(d, dict) or d.get("kind") != "hnsw":
        raise SchemaError(f"a vector index spec is {{'kind': 'hnsw', ...}}, got {_shown(d)}")
    for key, (lo, hi) in HNSW_BOUNDS.items():
        v = d.get(key)
        if type(v) is not int or not lo <= v <= hi:
            raise SchemaError(f"HNSW {key} must be an integer in {lo}..{hi}, got {_shown(v)}")
    return HNSW(d["m"], d["ef_construction"], d["ef_search"])


def Int(index: str | None = None) -> Field:
    """A 64-bit integer field; `index` is "hash" (equality) or "sorted" (ranges)."""
    return _scalar("int", index)


def Float(index: str | None = None) -> Field:
    """A 64-bit float field."""
    return _scalar("float", index)


def Bool() -> Field:
    """A boolean field."""
    return Field("bool")


def Text(fts: bool = False, index: str | None = None) -> Field:
    """A text field; `fts=True` asks for a full-text (BM25) index."""
    f = _scalar("text", index)
    return Field("text", index=f.index, fts=bool(fts))


def Json() -> Field:
    """A field holding any JSON-like value (dict, list, str, number, bool)."""
    return Field("json")


def Timestamp(index: str | None = None) -> Field:
    """A point in time (datetime), stored as UTC microseconds."""
    return _scalar("timestamp", index)


def Vector(dim: int, metric: str = "cosine", dtype: str = "f32",
           index: HNSW | None = None) -> Field:
    """A fixed-dimension vector. metric: cosine | l2 | dot; dtype: f32 | f16."""
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 65535:
        raise SchemaError(f"vector dimension must be an integer in 1..65535, got {dim!r}")
    if metric not in METRICS:
        raise SchemaError(f"unknown metric {metric!r}; expected one of {METRICS}")
    if dtype not in VECTOR_DTYPES:
        raise SchemaError(f"unknown vector dtype {dtype!r}; expected f32 or f16")
    if index is not None and not isinstance(index, HNSW):
        raise SchemaError(f"vector index must be vv.HNSW(...), got {index!r}")
    return Field("vector", dim=dim, metric=metric, dtype=dtype, vector_index=index)


def _scalar(kind: str, index: str | None) -> Field:
    if index not in (None, "hash", "sorted"):
        raise SchemaError(f"unknown index {index!r}; expected 'hash' or 'sorted'")
    if index and kind in ("json", "bool"):
        raise SchemaError(f"a {kind} field cannot carry a {index} index")
    return Field(kind, index=index)


_VECTOR_SPEC = re.compile(r"^vector\((\d+)\)$")


def parse_field(name: str, spec: Any) -> Field:
    """Turn a schema entry ("int", "vector(128)", vv.Int(...)) into a Field."""
    if isinstance(spec, Field):
        return spec
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s in SCALAR_KINDS:
            return Field(s)
        m = _VECTOR_SPEC.match(s)
        if m:
            return Vector(int(m.group(1)))
    raise SchemaError(f"field {name!r}: unknown type {spec!r}; expected one of "
                      f"{SCALAR_KINDS + ('vector(N)',)} or a vv.Field")


@dataclass
class Schema:
    """The fields of a collection, plus the kind of its ids ("int" or "text")."""
    fields: dict[str, Field]
    id_kind: str = "int"

    @staticmethod
    def parse(spec: dict) -> "Schema":
        if not isinstance(spec, dict):
            raise SchemaError("a schema is a dict of field name -> type")
        fields: dict[str, Field] = {}
        id_kind = "int"
        for name, ftype in spec.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise SchemaError(f"invalid field name {name!r}")
            if name == "id":
                if ftype not in ("int", "text"):
                    raise SchemaError("the id field is 'int' or 'text'")
                id_kind = ftype
                continue
            fields[name] = parse_field(name, ftype)
        return Schema(fields, id_kind)

    @cached_property
    def vector_fields(self) -> list[str]:
        # a schema is replaced, never edited, so the answer is kept
        return [n for n, f in self.fields.items() if f.kind == "vector"]

    def to_dict(self) -> dict:
        return {"id": self.id_kind, "fields": {n: f.to_dict() for n, f in self.fields.items()}}

    @staticmethod
    def from_dict(d: dict) -> "Schema":
        """The schema `to_dict` wrote (from a file: checked, SchemaError)."""
        if not isinstance(d, dict) or d.get("id") not in ("int", "text") \
                or not isinstance(d.get("fields"), dict):
            raise SchemaError(f"a schema is {{'id': 'int' | 'text', 'fields': {{...}}}}, "
                              f"got {_shown(d)}")
        fields = {}
        for name, f in d["fields"].items():
            if not isinstance(name, str) or not _NAME.match(name) or name == "id":
                raise SchemaError(f"invalid field name {_shown(name)}")
            fields[name] = Field.from_dict(f)
        return Schema(fields, d["id"])

    def check_names(self, names, what: str = "row") -> None:
        unknown = [n for n in names if n != "id" and n not in self.fields]
        if unknown:
            raise UnknownFieldError(f"unknown field {unknown[0]!r} in {what}; "
                                    f"fields are {sorted(self.fields)}")


@dataclass
class Batch:
    """A validated, columnar set of rows: ids plus one (values, nulls) per field.

    Fields absent from `columns` are null for every row of the batch.
    """
    ids: list | np.ndarray
    columns: dict[str, tuple[Any, np.ndarray]]

    def __len__(self) -> int:
        return len(self.ids)


def validate_name(name: str, what: str = "collection") -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(f"invalid {what} name {name!r}: letters, digits and _, "
                          "not starting with a digit")
    return name


# ---- coercion -------------------------------------------------------------

def coerce_ids(schema: Schema, ids: Any) -> np.ndarray | list:
    """Validate ids: an int64 array for int ids, a list of str for text ids."""
    if schema.id_kind == "int":
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise FieldTypeError(f"ids of this collection are integers, got {_show(ids)}")
        return arr.astype(np.int64, copy=False)
    vals = list(ids)
    bad = next((v for v in vals if not isinstance(v, str)), None)
    if bad is not None:
        raise FieldTypeError(f"ids of this collection are text, got {bad!r}")
    _check_utf8("id", vals)
    return vals


def coerce_values(name: str, f: Field, values: list) -> tuple[Any, np.ndarray]:
    """Coerce one column given as a Python list (None = null)."""
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    k = f.kind
    if k == "vector":
        return _coerce_vectors(name, f, values, nulls)
    if k in ("text", "json"):
        if k == "text":
            bad = next((v for v in values if v is not None and not isinstance(v, str)), None)
            if bad is not None:
                raise FieldTypeError(f"field {name!r} is text, got {bad!r}")
            _check_utf8(name, [v for v in values if v is not None])
        else:
            for v in values:
                _check_json(name, v)
        return list(values), nulls
    if k == "timestamp":
        try:
            out = np.fromiter((0 if v is None else to_micros(name, v) for v in values),
                              dtype=np.int64, count=len(values))
        except OverflowError:   # a datetime64 beyond int64 microseconds
            raise FieldTypeError(f"field {name!r}: a timestamp is out of range") from None
        return _check_timestamps(name, out), nulls
    # int / float / bool
    for v in values:
        if v is not None and not _scalar_ok(k, v):
            raise FieldTypeError(f"field {name!r} is {k}, got {v!r}")
    fill = {"int": 0, "float": 0.0, "bool": False}[k]
    dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_}[k]
    try:
        arr = np.array([fill if v is None else v for v in values], dtype=dtype)
    except OverflowError:
        raise FieldTypeError(f"field {name!r}: integer out of the 64-bit range") from None
    return arr, nulls


def coerce_array(name: str, f: Field, arr: Any, n: int) -> tuple[Any, np.ndarray]:
    """Coerce one column given as a numpy array (the `insert_arrays` path)."""
    if f.kind in ("text", "json"):
        vals = list(arr)
        if len(vals) != n:
            raise FieldTypeError(f"field {name!r}: {len(vals)} values for {n} ids")
        return coerce_values(name, f, vals)
    if f.kind == "vector":
        a = np.asarray(arr)
        if a.ndim != 2 or a.shape[0] != n:
            raise DimensionError(f"field {name!r}: expected an ({n}, {f.dim}) array, "
                                 f"got shape {a.shape}")
        return _check_vector_block(name, f, a), np.zeros(n, dtype=bool)
    a = np.asarray(arr)
    if a.ndim != 1 or a.shape[0] != n:
        raise FieldTypeError(f"field {name!r}: expected {n} values, got shape {a.shape}")
    nulls = np.zeros(n, dtype=bool)
    if a.dtype == object:
        return coerce_values(name, f, a.tolist())
    if f.kind == "timestamp":
        if a.dtype.kind != "M":
            raise FieldTypeError(f"field {name!r} is timestamp, got a {a.dtype} array")
        return _check_timestamps(name, a.astype("datetime64[us]").astype(np.int64)), nulls
    ok = {"int": "iu", "float": "iuf", "bool": "b"}[f.kind]
    if a.dtype.kind not in ok:
        raise FieldTypeError(f"field {name!r} is {f.kind}, got a {a.dtype} array")
    dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_}[f.kind]
    if f.kind == "int" and a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        raise FieldTypeError(f"field {name!r}: integer out of the 64-bit range")
    return a.astype(dtype, copy=False), nulls


def coerce_query_vector(f: Field, q: Any) -> np.ndarray:
    """A query vector for field f as float32 (dim,), checked like stored ones."""
    try:
        a = np.asarray(q, dtype=np.float32) if not isinstance(q, np.ndarray) else q
    except (ValueError, TypeError):
        # e.g. a list of strings: numpy's ValueError is not a VarveError
        raise FieldTypeError(f"query vector must be numeric, got {_show(q)}") from None
    if a.ndim != 1 or a.shape[0] != f.dim:
        raise DimensionError(f"query vector has shape {a.shape}; field expects ({f.dim},)")
    if a.dtype.kind not in "iuf":
        raise FieldTypeError(f"query vector must be numeric, got {a.dtype}")
    a = a.astype(np.float32, copy=False)
    if not np.isfinite(a).all():
        raise NonFiniteVectorError("query vector holds NaN or inf")
    return a


def _coerce_vectors(name, f: Field, values, nulls) -> tuple[np.ndarray, np.ndarray]:
    n = len(values)
    out = np.zeros((n, f.dim), dtype=VECTOR_DTYPES[f.dtype])
    idx = np.flatnonzero(~nulls)
    if idx.size:
        present = [values[i] for i in idx]
        try:
            block = np.asarray(present)
        except ValueError:
            block = None
        if block is None or block.ndim != 2 or block.shape[1] != f.dim:
            bad = next(v for v in present if np.shape(v) != (f.dim,))
            raise DimensionError(f"field {name!r} expects vectors of dimension {f.dim}, "
                                 f"got one of shape {np.shape(bad)}")
        out[idx] = _check_vector_block(name, f, block)
    return out, nulls


def _check_vector_block(name, f: Field, a: np.ndarray) -> np.ndarray:
    if a.shape[1] != f.dim:
        raise DimensionError(f"field {name!r} expects vectors of dimension {f.dim}, "
                             f"got {a.shape[1]}")
    if a.dtype.kind not in "iuf":
        raise FieldTypeError(f"field {name!r}: vectors must be numeric, got {a.dtype}")
    out = a.astype(VECTOR_DTYPES[f.dtype], copy=False)
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        what = "overflows f16" if np.isfinite(a[bad]).all() else "holds NaN or inf"
        raise NonFiniteVectorError(f"field {name!r}: vector at position {bad} {what}")
    return np.ascontiguousarray(out)


def _scalar_ok(kind: str, v: Any) -> bool:
    if kind == "bool":
        return isinstance(v, (bool, np.bool_))
    if isinstance(v, (bool, np.bool_)):
        return False
    if kind == "int":
        return isinstance(v, (int, np.integer))
    return isinstance(v, (int, float, np.integer, np.floating))


def _check_utf8(name: str, strings: list) -> None:
    # A lone surrogate cannot be encoded into the file: without this check the
    # encoder raised UnicodeEncodeError (not a VarveError) from inside the write.
    try:
        "".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        bad = next(s for s in strings if not _utf8_ok(s))
        raise FieldTypeError(f"field {name!r}: {bad!r} is not valid Unicode "
                             "(a lone surrogate cannot be stored)") from None


def _utf8_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


# msgpack stores integers in [-2**63, 2**64); a larger one made the encoder
# raise OverflowError (not a VarveError) from inside the write.
_JSON_INT_MIN, _JSON_INT_END = -(1 << 63), 1 << 64


def _check_json(name: str, v: Any) -> None:
    if v is None or isinstance(v, bool):
        return
    if isinstance(v, int):
        if not _JSON_INT_MIN <= v < _JSON_INT_END:
            raise FieldTypeError(f"field {name!r}: JSON integer {v} is outside the "
                                 "64-bit range")
        return
    if isinstance(v, str):
        _check_utf8(name, [v])
        return
    if isinstance(v, float):
        if not math.isfinite(v):
            raise FieldTypeError(f"field {name!r}: JSON has no NaN or infinity")
        return
    if isinstance(v, (list, tuple)):
        for x in v:
            _check_json(name, x)
        return
    if isinstance(v, dict):
        for key, x in v.items():
            if not isinstance(key, str):
                raise FieldTypeError(f"field {name!r}: JSON object keys must be str, got {key!r}")
            _check_utf8(name, [key])
            _check_json(name, x)
        return
    raise FieldTypeError(f"field {name!r} is json; {type(v).__name__} is not a JSON value")


def to_micros(name: str, v: Any) -> int:
    """A datetime (naive = UTC) or ISO-8601 string as UTC microseconds."""
    if isinstance(v, str):
        try:
            v = _dt.datetime.fromisoformat(v)
        except ValueError:
            raise FieldTypeError(f"field {name!r}: not an ISO-8601 timestamp: {v!r}") from None
    if isinstance(v, np.datetime64):
        return int(v.astype("datetime64[us]").astype(np.int64))
    if not isinstance(v, _dt.datetime):
        raise FieldTypeError(f"field {name!r} is timestamp, got {v!r}")
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.timezone.utc)
    delta = v - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(us: int) -> _dt.datetime:
    return _EPOCH + _dt.timedelta(microseconds=int(us))


# What from_micros can turn back into a datetime: years 1..9999 in UTC. A stored
# timestamp outside it (a NaT, a datetime64 of year 10000) could not be read.
TIMESTAMP_MIN_US, TIMESTAMP_MAX_US = (
    (d.replace(tzinfo=_dt.timezone.utc) - _EPOCH) // _dt.timedelta(microseconds=1)
    for d in (_dt.datetime.min, _dt.datetime.max))


def timestamps_readable(us: np.ndarray) -> bool:
    """Can every one of these int64 microsecond values be read back as a datetime?"""
    return not us.size or (int(us.min()) >= TIMESTAMP_MIN_US
                           and int(us.max()) <= TIMESTAMP_MAX_US)


def _check_timestamps(name: str, us: np.ndarray) -> np.ndarray:
    if not timestamps_readable(us):
        raise FieldTypeError(f"field {name!r}: a timestamp is NaT or outside years 1..9999 "
                             "in UTC (it could not be read back as a datetime)")
    return us


def _show(x: Any) -> str:
    s = repr(x)
    return s if len(s) < 60 else s[:57] + "..."


_FILE_REPR = reprlib.Repr()
_FILE_REPR.maxlevel, _FILE_REPR.maxstring, _FILE_REPR.maxother = 3, 40, 40


def _shown(x: Any) -> str:
    """_show for what a file holds: bounded depth too (a crafted value may nest deeply)."""
    return _FILE_REPR.repr(x)
