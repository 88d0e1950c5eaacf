"""Field types, index specs, and the validation and coercion of incoming rows.

A collection's schema maps field names to `Field`s. Rows arrive either as a
list of dicts (`insert`) or as numpy arrays (`insert_arrays`); both are turned
into one columnar `Batch` here, fully validated, before anything is written:
a batch that leaves this module is known to fit the schema.

Column representations (what the engine stores and the file carries):
int -> int64, float -> float64, bool -> bool, timestamp -> int64 microseconds
since the Unix epoch (UTC), text -> Python str (dictionary-coded by the engine),
json -> any msgpack-able value, bytes -> Python bytes (SQL's bytea), sparsevec ->
bytes (sparse.py's stored form: dim, indices, values), vector -> an (n, width) block of its dtype:
float32, float16, int8 (integers in -128..127), or bit (uint8, dim bits packed
8 a byte, big-endian bit order as np.packbits and pgvector's bit type; width
= ceil(dim / 8)). Vectors are read back as float32 (f32, f16), int8, or bool
arrays of length dim (bit): `vector_values`.
Every scalar column has a null mask; a vector may be null too.

Limits (a value outside them raises before anything is written, so nothing
stored can break a later open or read):
* ids: int64, [-2**63, 2**63); bools are not ids.
* json: at most MAX_JSON_DEPTH nested lists/dicts; one json or text value at
  most MAX_VALUE_BYTES encoded.
* timestamps: years 1..9999 in UTC (what a datetime can hold); NaT refused.
* HNSW: m in 2..100, ef_construction and ef_search in 1..4096 (HNSW_LIMITS);
  a search's ef in 1..MAX_EF.
* IVFPQ: lists and nprobe in 1..65536 (a search probes at most every list), pq_m dividing the dimension
  (at most 1024), rerank in 1..MAX_EF (IVF_LIMITS).
"""
from __future__ import annotations

import datetime as _dt
import math
import re
import reprlib
import warnings
from dataclasses import dataclass, field as _field, replace
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

import msgspec
import numpy as np

from .errors import (BitLengthError, CheckViolationError, DimensionError, FieldTypeError, NonFiniteVectorError,
                     NotNullViolationError, OptionError, SchemaError, UnknownFieldError, ValueTooLargeError,
                     ValueTooLongError, VarveError, VectorRangeError)
from .float_order import compare
from .storage.format import code_width

SCALAR_KINDS = ("int", "float", "bool", "text", "json", "timestamp", "bytes")
# kinds whose column is a list of Python values (None = null), not a numpy array
OBJECT_KINDS = ("text", "json", "bytes")
# kinds no scalar (hash, sorted) index serves
UNINDEXED_KINDS = ("vector", "json", "bool", "sparsevec", "bytes")
METRICS = ("cosine", "l2", "dot", "hamming")   # a field's (and its graph's) metric
QUERY_METRICS = METRICS + ("l1",)           # a search may ask any: l1 is answered exactly
# a vector dtype -> its arena's element type (bit: packed bytes)
VECTOR_DTYPES = {"f32": np.float32, "f16": np.float16, "int8": np.int8, "bit": np.uint8}
INT8_MIN, INT8_MAX = -128, 127
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\Z")   # (\Z: $ would take a final "\n")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
# A vector that overflows its dtype is refused with NonFiniteVectorError; the
# cast's own warning would only repeat it. (A filter costs nothing until a
# warning is raised, unlike np.errstate around every cast.)
warnings.filterwarnings("ignore", "overflow encountered in cast", RuntimeWarning, __name__)

ID_MIN, ID_END = -(1 << 63), 1 << 63
# Deeper json made msgspec raise RecursionError on every later open (and the
# checks below recursed in Python); 64 levels is far beyond any document.
MAX_JSON_DEPTH = 64
# One json or text value, encoded; a frame holds whole values, so a bound
# keeps one row from needing gigabytes to write and to replay.
MAX_VALUE_BYTES = 16 << 20
# A timestamp is read back as a datetime, so it must lie in datetime's range.
TS_MIN_US = -62_135_596_800_000_000      # 0001-01-01T00:00:00Z
TS_MAX_US = 253_402_300_799_999_999      # 9999-12-31T23:59:59.999999Z
# Graph parameters size the graph's arrays and every walk's scratch: without
# a bound, m=10**8 committed and then every open failed with MemoryError.
HNSW_LIMITS = {"m": (2, 100), "ef_construction": (1, 4096), "ef_search": (1, 4096)}
HNSW_QUANTIZERS = (None, "int8", "pq", "auto")
IVF_LIMITS = {"lists": (1, 65536), "nprobe": (1, 65536), "pq_m": (1, 1024),
              "rerank": (1, 100_000), "seed": (0, (1 << 63) - 1)}
MAX_EF = 100_000                         # a search's ef (scratch is ~16 x ef)
MAX_DIM = 65535                          # a vector field's dimension
SPARSE = "sparsevec"                     # the kind of a sparse vector field (sparse.py)


def is_int(v: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True)
class HNSW:
    """HNSW graph index parameters for a vector field (bounds in HNSW_LIMITS)."""
    m: int = 16
    ef_construction: int = 200
    ef_search: int = 100
    # None: the field's; else the graph's own (SQL's opclass), which the field takes
    # when this index is the first made on it (Table.create_index)
    metric: str | None = None
    name: str | None = None       # the index's name (SQL's CREATE INDEX name)
    # "int8": the walk reads one byte per dimension and reranks its best
    # candidates exactly from the stored vectors (index/hnsw.py); "pq": it reads
    # pq_m bytes a row, product-quantizer codes (pq_m divides the dimension);
    # None: it reads the vectors themselves; "auto": int8 where its codes are
    # smaller than the vectors, else None (fit_index decides, by the field)
    quantize: str | None = "auto"
    pq_m: int | None = None
    # An expression index (SQL's `USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops)`):
    # the graph is over each row's field value made into (how, start, count, dtype):
    # how "cast" (to `dtype`), "binary_quantize" (bit) or "subvector" (count
    # elements from the 1-based start, as `dtype`); None: the value itself.
    expr: tuple | None = None
    # A partial index (SQL's `... WHERE category_id = 123`): only rows whose
    # scalar fields meet every (field, op, value) are in it; op one of PREDICATE_OPS
    where: tuple | None = None

    def __post_init__(self):
        for key in ("expr", "where"):       # msgpack gives lists back
            val = getattr(self, key)
            if isinstance(val, list):
                object.__setattr__(self, key, tuple(tuple(v) if isinstance(v, list) else v
                                                    for v in val))
        for key in HNSW_LIMITS:
            val = getattr(self, key)
            if isinstance(val, np.integer) and not isinstance(val, np.bool_):
                object.__setattr__(self, key, int(val))   # msgpack stores only int
        self.check()

    def check(self) -> None:
        """SchemaError unless every parameter is an integer within HNSW_LIMITS."""
        for key, (low, high) in HNSW_LIMITS.items():
            val = getattr(self, key)
            # a plain int: __post_init__ converted numpy ones, and msgpack stores no other
            if type(val) is not int or not low <= val <= high:
                raise SchemaError(f"HNSW {key} must be an integer in {low}..{high}, "
                                  f"got {brief(val)}")
        # l1 (SQL's vector_l1_ops): a graph of l2 neighbours ranked by l1
        # (index/vector_index.py); the field keeps its own metric
        if self.metric is not None and (not isinstance(self.metric, str)
                                        or self.metric not in QUERY_METRICS):
            raise SchemaError(f"HNSW metric is one of {QUERY_METRICS}, got "
                              f"{brief(self.metric)}")
        if self.name is not None and (not isinstance(self.name, str) or not _NAME.match(self.name)):
            raise SchemaError(f"invalid index name {brief(self.name)}")
        if self.quantize not in HNSW_QUANTIZERS:
            raise SchemaError(f"HNSW quantize is one of {HNSW_QUANTIZERS}, "
                              f"got {brief(self.quantize)}")
        if isinstance(self.pq_m, np.integer):
            object.__setattr__(self, "pq_m", int(self.pq_m))
        if (self.quantize == "pq") != (self.pq_m is not None) or self.pq_m is not None and (
                type(self.pq_m) is not int or not 1 <= self.pq_m <= IVF_LIMITS["pq_m"][1]):
            raise SchemaError(f"HNSW quantize='pq' takes pq_m, an integer in 1.."
                              f"{IVF_LIMITS['pq_m'][1]} dividing the dimension (and no "
                              f"other quantizer takes one), got pq_m={brief(self.pq_m)}")
        check_index_expr(self.expr, self.where, self.metric)

    def to_dict(self) -> dict:
        d = {"kind": "hnsw", "m": self.m, "ef_construction": self.ef_construction,
             "ef_search": self.ef_search}
        if self.metric is not None:
            d["metric"] = self.metric
        if self.name is not None:
            d["name"] = self.name
        # always written: its default ("auto") is not what None means
        d["quantize"] = self.quantize
        if self.pq_m is not None:
            d["pq_m"] = self.pq_m
        if self.expr is not None:
            d["expr"] = list(self.expr)
        if self.where is not None:
            d["where"] = [list(c) for c in self.where]
        return d


@dataclass(frozen=True)
class IVFPQ:
    """An inverted-file index for a vector field: the rows split into `lists`
    k-means clusters, a search scanning the `nprobe` nearest (SQL: ivfflat.probes).

    pq_m=None is IVF-Flat: the probed rows are measured from the stored vectors.
    pq_m=M keeps an M-byte product-quantizer code of each row (M must divide
    the dimension) and measures only the `rerank` best by code exactly (None:
    8 x k). Training runs once, on a sample drawn from `seed`, when the field
    has 4 rows per list (and 1 024 with pq_m); build it after a bulk load."""
    lists: int = 100
    pq_m: int | None = None
    nprobe: int = 10
    rerank: int | None = None
    metric: str | None = None
    name: str | None = None
    seed: int = 0

    def __post_init__(self):
        for key in IVF_LIMITS:
            val = getattr(self, key)
            if isinstance(val, np.integer) and not isinstance(val, np.bool_):
                object.__setattr__(self, key, int(val))
        self.check()

    def check(self) -> None:
        """SchemaError unless every parameter is an integer within IVF_LIMITS."""
        for key, (low, high) in IVF_LIMITS.items():
            val = getattr(self, key)
            if val is None and key in ("pq_m", "rerank"):
                continue
            if type(val) is not int or not low <= val <= high:
                raise SchemaError(f"IVFPQ {key} must be an integer in {low}..{high}, "
                                  f"got {brief(val)}")
        if self.metric is not None and (not isinstance(self.metric, str)
                                        or self.metric not in ("cosine", "l2", "dot")):
            raise SchemaError(f"IVFPQ metric is one of ('cosine', 'l2', 'dot'), "
                              f"got {brief(self.metric)}")
        if self.name is not None and (not isinstance(self.name, str) or not _NAME.match(self.name)):
            raise SchemaError(f"invalid index name {brief(self.name)}")

    def to_dict(self) -> dict:
        d = {"kind": "ivfpq", "lists": self.lists, "nprobe": self.nprobe, "seed": self.seed}
        for key in ("pq_m", "rerank", "metric", "name"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d


VECTOR_INDEXES = (HNSW, IVFPQ)
MAX_MORE_INDEXES = 16       # a vector field's indexes beside its own (Field.more_indexes)


_ARRAY_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "text": (str,),
                "vector": (str,), "sparsevec": (str,)}


def _check_array(name: str, spec: str, v) -> None:
    """A value of an array field (array_of): a list of its element type's values or
    None (a vector element as its text, '[1,2,3]', as SQL keeps it, checked as SQL's
    write checks it: array_vector)."""
    kind, vtype, dim = array_element(spec)
    ok = _ARRAY_TYPES[kind]
    if not isinstance(v, list) or any(
            x is not None and (not isinstance(x, ok) or (kind != "bool" and isinstance(x, bool)))
            for x in v):
        raise FieldTypeError(f"field {name!r} holds arrays of {spec} (a list of "
                             f"{'texts like [1,2,3]' if ok == (str,) and kind != 'text' else kind}"
                             f" values or None), got {brief(v)}")
    if kind == "vector":
        for x in v:
            if x is not None:
                array_vector(vtype, dim, x)


_VECTOR_TEXT = re.compile(r"^\s*\[(.*)\]\s*$", re.S)


def vector_input(text: str, vtype: str = "vector") -> np.ndarray:
    """pgvector's text form of a vector, '[1,2,3]', as its float32 elements, checked as
    pgvector's input checks them (vector_elements). FieldTypeError (22P02) where the
    text is no such form, DimensionError (22000) where it has no element."""
    m = _VECTOR_TEXT.match(text)
    body = m.group(1).strip() if m is not None else ""
    if m is not None and not body:
        raise DimensionError("vector must have at least 1 dimension")
    try:
        a = np.array([float(x) for x in body.split(",")]) if body else None
    except ValueError:
        a = None
    if a is None:
        raise FieldTypeError(f'invalid input syntax for type vector: "{text}"')
    return vector_elements(a, vtype)


def vector_elements(a: np.ndarray, vtype: str = "vector") -> np.ndarray:
    """A vector's elements (numbers) as float32, checked as pgvector's input of `vtype`
    ("vector" or "halfvec") checks them: NonFiniteVectorError (22000) for a NaN or an
    infinity given as such, VectorRangeError (22003) for a finite value past float32's
    range, or past float16's for a halfvec (half_overflow's rounding)."""
    try:
        a = np.asarray(a, np.float64)
    except (ValueError, TypeError):
        raise FieldTypeError(f"invalid input for type {vtype}: {brief(a)}") from None
    if not np.isfinite(a).all():
        raise NonFiniteVectorError("NaN not allowed in vector" if np.isnan(a).any()
                                   else "infinite value not allowed in vector")
    with np.errstate(over="ignore"):
        out = a.astype(np.float32)
    if not np.isfinite(out).all():
        raise VectorRangeError("value out of range for type vector")
    if vtype == "halfvec" and half_overflow(out) is not None:
        raise VectorRangeError("value out of range for type halfvec")
    return out


def array_vector(vtype: str, dim: int | None, x) -> np.ndarray:
    """One vector element of an array of `vtype` ("vector" or "halfvec"; `dim` None: of
    any dimension), its text or its numbers, as float32, checked as pgvector's input
    checks it (vector_input, vector_elements) and of the array's dimension
    (DimensionError, 22000): what SQL's write and the API's both refuse."""
    a = vector_input(x, vtype) if isinstance(x, str) else vector_elements(x, vtype)
    if a.ndim != 1 or (dim is not None and len(a) != dim):
        raise DimensionError(f"expected {dim} dimensions, not "
                             f"{len(a) if a.ndim == 1 else a.shape}")
    return a


_ARRAY_ELEMENT = re.compile(r"(int|float|bool|text)|(vector|halfvec|sparsevec)(?:\((\d+)\))?")


def array_element(spec: str) -> tuple[str, str | None, int | None]:
    """(kind, vector type or None, dimension or None) of an array field's element type
    (Field.array_of: "int", "float", "bool", "text", "vector(3)", "halfvec", ...)."""
    m = _ARRAY_ELEMENT.fullmatch(spec) if isinstance(spec, str) else None
    if m is None or (m.group(3) is not None and not 1 <= int(m.group(3)) <= MAX_DIM):
        raise SchemaError(f"array_of is an element type ('int', 'vector(3)', ...), got "
                          f"{brief(spec)}")
    if m.group(1):
        return m.group(1), None, None
    vtype = m.group(2)
    return ("sparsevec" if vtype == "sparsevec" else "vector"), vtype, \
        (int(m.group(3)) if m.group(3) else None)


@dataclass(frozen=True)
class Field:
    """One field of a collection. Use the helpers `Int`, `Text`, `Vector`, ..."""
    kind: str
    index: str | None = None          # "hash" or "sorted" on scalar fields
    fts: bool = False                 # full-text index on text fields
    dim: int = 0                      # vectors only
    metric: str = "cosine"            # vectors only
    dtype: str = "f32"                # vectors only
    vector_index: HNSW | IVFPQ | None = _field(default=None)
    not_null: bool = False            # a null (given, or omitted without a default) is refused
    # what a row that omits the field gets (scalar kinds; None: no default);
    # checked and normalised like a row's value (a timestamp becomes a UTC datetime)
    default: Any = _field(default=None, hash=False)
    index_name: str | None = None     # the scalar index's name (SQL's CREATE INDEX name)
    max_length: int | None = None     # text: at most this many characters (SQL's varchar(n))
    stem: str | None = None           # fts: the Snowball language its words are stemmed in
    ts_config: str | None = None      # fts: analyzed as this PostgreSQL configuration instead
    k1: float = 1.2                   # fts: BM25's term-frequency saturation
    b: float = 0.75                   # fts: BM25's length normalisation
    embed: str | None = None          # vector: the embedder spec (embed.resolve) that fills it
    source: str | None = None         # vector: the text field it embeds
    # int, float, bool, text: a CHECK constraint (SQL's `CHECK (price > 0)`): (op, value)
    # conditions AND-ed (op one of PREDICATE_OPS) that every value written must not
    # make false (a null makes a comparison unknown, which passes, as in SQL); a
    # condition (op, value, name) belongs to the constraint of that name (SQL's:
    # constraint_name), else to the field's own, `{table}_{field}_check`; one of a
    # constraint over several fields is (op, value, name, place): its place in the
    # constraint as written (Schema.constraints lists them so); a vector
    # or halfvec field's are of its dimension (op one of DIMS_OPS, value an int:
    # pgvector's `CHECK (vector_dims(embedding) = 3)`)
    check: tuple | None = None
    # json: a column of SQL arrays of this element type ("int", "float", "vector(3)",
    # query/arrays.py), each a JSON list; SQL reads and checks it as one
    array_of: str | None = None
    # vector: its further indexes beside vector_index (SQL's second CREATE INDEX on
    # the column, pgvector's l2 and cosine graphs of one column), each named; a
    # search ranks through the one whose metric (and expression, predicate) fits it
    more_indexes: tuple = ()

    def __post_init__(self):
        # Fields are also built directly (vv.Field(...)) and from a file's
        # schema: refuse what no column or index serves, rather than store it.
        k = self.kind
        if self.array_of is not None and k != "json":
            raise SchemaError(f"array_of= is an option of json fields, not {brief(k)}")
        if not isinstance(self.not_null, (bool, np.bool_)):
            raise SchemaError(f"not_null is True or False, got {brief(self.not_null)}")
        object.__setattr__(self, "not_null", bool(self.not_null))
        if k == "vector":
            if self.default is not None:
                raise SchemaError("a vector field has no default")
            if not is_int(self.dim) or not 1 <= self.dim <= MAX_DIM:
                raise SchemaError(f"vector dimension must be an integer in 1..{MAX_DIM}, "
                                  f"got {brief(self.dim)}")
            if self.metric not in METRICS:
                raise SchemaError(f"unknown metric {self.metric!r}; expected one of {METRICS}")
            if not isinstance(self.dtype, str) or self.dtype not in VECTOR_DTYPES:
                raise SchemaError(f"unknown vector dtype {self.dtype!r}; expected one of "
                                  f"{tuple(VECTOR_DTYPES)}")
            check_metric_dtype(self.metric, self.dtype)
            if self.vector_index is not None:
                if not isinstance(self.vector_index, VECTOR_INDEXES):
                    raise SchemaError(f"vector index must be vv.HNSW(...) or vv.IVFPQ(...), "
                                      f"got {brief(self.vector_index)}")
                self.vector_index.check()
                object.__setattr__(self, "vector_index",
                                   fit_index(self.vector_index, self.dtype, self.dim))
            self._check_more_indexes()
            if self.embed is not None and self.dtype in ("int8", "bit"):
                raise SchemaError(f"an embedder fills float vectors: embed= goes with dtype "
                                  f"f32 or f16, not {self.dtype}")
            if self.index is not None or self.fts is not False:
                raise SchemaError("a vector field takes index=vv.HNSW(...), not a scalar "
                                  "or full-text index")
            if (self.embed is None) != (self.source is None) or not all(
                    v is None or (isinstance(v, str) and 0 < len(v) <= 256)
                    for v in (self.embed, self.source)):
                raise SchemaError(f"a vector filled by an embedder names both embed= (a spec "
                                  f"such as 'onnx') and source= (a text field), got embed="
                                  f"{brief(self.embed)}, source={brief(self.source)}")
            self._check_fts_options(False)
            self._check_check()     # (of its dimension: DIMS_OPS)
            object.__setattr__(self, "dim", int(self.dim))
            object.__setattr__(self, "_stored_default", None)
            return
        if k == SPARSE:
            from .sparse import MAX_DIM as SPARSE_MAX_DIM
            if not is_int(self.dim) or not 0 <= self.dim <= SPARSE_MAX_DIM:
                raise SchemaError(f"a sparsevec's dimension is an integer in 1.."
                                  f"{SPARSE_MAX_DIM} (0: any), got {brief(self.dim)}")
            if (self.default, self.index, self.fts, self.vector_index, self.embed,
                    self.source, self.max_length, self.more_indexes) \
                    != (None, None, False, None, None, None, None, ()):
                raise SchemaError("a sparsevec field takes dim= and not_null= only")
            self._check_fts_options(False)
            self._check_check()     # (none: a check is a scalar field's)
            object.__setattr__(self, "dim", int(self.dim))
            object.__setattr__(self, "_stored_default", None)
            return
        if not isinstance(k, str) or k not in SCALAR_KINDS:
            raise SchemaError(f"unknown field kind {k!r}; expected one of "
                              f"{SCALAR_KINDS + ('vector', SPARSE)}")
        if self.array_of is not None:
            array_element(self.array_of)
            if self.index or self.default is not None:
                raise SchemaError("array_of= is an option of a json field without an index "
                                  "or a default")
        if self.index not in (None, "hash", "sorted"):
            raise SchemaError(f"unknown index {self.index!r}; expected 'hash' or 'sorted'")
        if self.index and k in UNINDEXED_KINDS:
            raise SchemaError(f"a {k} field cannot carry a {self.index} index")
        if self.index_name is not None and (self.index is None or not isinstance(
                self.index_name, str) or not _NAME.match(self.index_name)):
            raise SchemaError(f"an index name names an index, got {brief(self.index_name)}")
        if not isinstance(self.fts, bool) or (self.fts and k != "text"):
            raise SchemaError(f"fts=True is for text fields only, got fts={self.fts!r} on "
                              f"a {k} field")
        self._check_fts_options(self.fts)
        if self.embed is not None or self.source is not None:
            raise SchemaError(f"embed= and source= are options of vector fields, not {k}")
        self._check_check()
        if self.dim != 0 or self.vector_index is not None or self.more_indexes:
            raise SchemaError(f"a {k} field has no dimension or vector index")
        if self.max_length is not None and (k != "text" or not is_int(self.max_length)
                                            or not 1 <= self.max_length <= MAX_VALUE_BYTES):
            raise SchemaError(f"max_length is a positive integer of text fields, got "
                              f"{brief(self.max_length)} on a {k} field")
        stored = None
        if self.default is not None:
            vals, _ = coerce_values("default", self, [self.default])
            stored = vals[0] if isinstance(vals, list) else vals.item()
            if k == "json":   # as the file gives it back (tuples become lists)
                stored = msgspec.msgpack.decode(msgspec.msgpack.encode(stored))
            object.__setattr__(self, "default", from_micros(stored) if k == "timestamp"
                               else stored)
        object.__setattr__(self, "_stored_default", stored)

    def _check_check(self) -> None:
        """`check` as the field says: (op, value), (op, value, constraint name) or
        (op, value, constraint name, its place in the constraint)
        conditions on an int, float, bool or text field, each value of the field's
        type (an int one a 64-bit integer: the log's encoding holds no other) and
        each name an identifier of at most 63 characters without NUL (it goes out in
        --pg's messages, whose fields NUL ends), read from a file too."""
        c = self.check
        if c is None:
            return
        if isinstance(c, list):             # msgpack gives lists back
            c = tuple(tuple(x) if isinstance(x, list) else x for x in c)
            object.__setattr__(self, "check", c)
        ok = {"int": (int,), "float": (int, float), "bool": (bool,), "text": (str,)}.get(self.kind)
        dims = self.kind == "vector" and self.dtype != "bit"
        if dims:
            ok = (int,)
        if ok is None or not (isinstance(c, tuple) and 1 <= len(c) <= 16 and all(
                isinstance(x, tuple) and len(x) in (2, 3, 4)
                and x[0] in PREDICATE_OPS + DIMS_OPS + WRITTEN_OPS
                and check_op(x[0])[0] in (DIMS_OPS if dims else PREDICATE_OPS)
                and (len(x) == 2 or isinstance(x[2], str) and 0 < len(x[2]) <= 63
                     and "\0" not in x[2])
                and (len(x) < 4 or type(x[3]) is int and 0 <= x[3] < 1 << 16)
                and (x[1] is None) == x[0].startswith("is ")
                and (_wide_constant(x[1]) if check_op(x[0])[3] and self.kind in ("int", "float")
                     else x[1] is None or (type(x[1]) in ok and not (
                         self.kind in ("int", "float") and type(x[1]) is bool)
                         and (type(x[1]) is not int or ID_MIN <= x[1] < ID_END)))
                for x in c)):
            raise SchemaError(f"a check is (op, value[, constraint name[, its place in the "
                              f"constraint]]) conditions on an "
                              f"int, float, bool or text field, or of a vector's dimension "
                              f"('vector_dims =', 3), an integer value of 64 bits (a "
                              f"wider one an int field's, its digits, op '< numeric'), a name "
                              f"of 1-63 characters without NUL; got {brief(c)} on a "
                              f"{self.kind} field")

    def _check_fts_options(self, fts: bool) -> None:
        """stem, k1 and b belong to a full-text index, and take sane values."""
        if not fts:
            if self.stem is not None or self.ts_config is not None \
                    or (self.k1, self.b) != (1.2, 0.75):
                raise SchemaError("stem=, ts_config=, k1= and b= are options of a full-text "
                                  "index (vv.Text(fts=True, ...))")
            return
        if self.ts_config is not None:
            from .text.tsconfig import CONFIGS
            if self.ts_config not in CONFIGS:
                raise SchemaError(f"ts_config is one of {', '.join(CONFIGS)}, got "
                                  f"{brief(self.ts_config)}")
            if self.stem is not None:
                raise SchemaError("a full-text index takes stem= or ts_config=, not both")
        if self.stem is not None:
            from .text.analyzer import Analyzer
            Analyzer(self.stem)         # an unknown language is refused here
        for name, v, low, high in (("k1", self.k1, 0.0, 10.0), ("b", self.b, 0.0, 1.0)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high:
                raise SchemaError(f"BM25's {name} is a number in {low:g}..{high:g}, got "
                                  f"{brief(v)}")
            object.__setattr__(self, name, float(v))

    @property
    def width(self) -> int:
        """Arena columns a row of this vector field takes: dim, or for bit its bytes."""
        return (self.dim + 7) // 8 if self.dtype == "bit" else self.dim

    @property
    def bytes_per_vector(self) -> int:
        """Bytes one stored vector takes in the arena (norms and null flag aside)."""
        return self.width * np.dtype(VECTOR_DTYPES[self.dtype]).itemsize

    def default_value(self) -> Any:
        """The default as a row's value: a json list or dict is a fresh copy."""
        v = self.default
        if isinstance(v, (dict, list)):
            return msgspec.msgpack.decode(msgspec.msgpack.encode(v))
        return v

    def default_column(self, n: int) -> tuple[Any, np.ndarray]:
        """(values, nulls) of n rows holding the default, as coerce_values returns
        them (a timestamp as int64 microseconds); the field must have a default."""
        v = self._stored_default
        if isinstance(v, (dict, list)):   # a row of its own each: a reader may edit its copy
            blob = msgspec.msgpack.encode(v)
            return [msgspec.msgpack.decode(blob) for _ in range(n)], np.zeros(n, bool)
        if self.kind in OBJECT_KINDS:
            return [v] * n, np.zeros(n, bool)
        dtype = {"int": np.int64, "timestamp": np.int64, "float": np.float64,
                 "bool": np.bool_}[self.kind]
        return np.full(n, v, dtype), np.zeros(n, bool)

    def _check_more_indexes(self) -> None:
        more = self.more_indexes
        if isinstance(more, list):          # msgpack gives lists back
            more = tuple(more)
        if not isinstance(more, tuple) or len(more) > MAX_MORE_INDEXES or more and (
                self.vector_index is None or not all(
                    isinstance(s, VECTOR_INDEXES) and s.name is not None for s in more)):
            raise SchemaError(f"a vector field's more_indexes are at most "
                              f"{MAX_MORE_INDEXES} named vv.HNSW(...) or vv.IVFPQ(...) beside "
                              f"its index, got {brief(self.more_indexes)}")
        names = [s.name for s in self.vector_specs if s.name is not None]
        if len(set(names)) != len(names):
            raise SchemaError(f"a vector field's indexes have names of their own, got "
                              f"{brief(names)}")
        for s in more:
            s.check()
        object.__setattr__(self, "more_indexes",
                           tuple(fit_index(s, self.dtype, self.dim) for s in more))

    def vector_spec(self, name: str | None):
        """Its further vector index spec named `name`, else its own index's."""
        return next((s for s in self.more_indexes if s.name == name), self.vector_index)

    @property
    def vector_specs(self) -> tuple:
        """Every vector index spec of the field, its own (vector_index) first."""
        return () if self.vector_index is None else (self.vector_index, *self.more_indexes)

    def null_column(self, n: int) -> tuple[Any, np.ndarray]:
        """(values, nulls) of n null rows, as coerce_values returns them."""
        if self.kind in (*OBJECT_KINDS, SPARSE):
            return [None] * n, np.ones(n, bool)
        if self.kind == "vector":
            return np.zeros((n, self.width), VECTOR_DTYPES[self.dtype]), np.ones(n, bool)
        dtype = {"int": np.int64, "timestamp": np.int64, "float": np.float64,
                 "bool": np.bool_}[self.kind]
        return np.zeros(n, dtype), np.ones(n, bool)

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind}
        if self.kind == "vector":
            d.update(dim=self.dim, metric=self.metric, dtype=self.dtype)
            if self.vector_index is not None:
                d["index"] = self.vector_index.to_dict()
            if self.more_indexes:
                d["more_indexes"] = [s.to_dict() for s in self.more_indexes]
            if self.embed is not None:
                d.update(embed=self.embed, source=self.source)
        elif self.kind == SPARSE:
            d["dim"] = self.dim
        else:
            if self.index:
                d["index"] = self.index
            if self.index_name:
                d["index_name"] = self.index_name
            if self.max_length is not None:
                d["max_length"] = int(self.max_length)
            if self.array_of is not None:
                d["array_of"] = self.array_of
            if self.fts:
                d["fts"] = True
                if self.stem is not None:
                    d["stem"] = self.stem
                if self.ts_config is not None:
                    d["ts_config"] = self.ts_config
                if (self.k1, self.b) != (1.2, 0.75):
                    d.update(k1=self.k1, b=self.b)
            if self.default is not None:    # a timestamp as int microseconds
                d["default"] = self._stored_default
        if self.check is not None:          # (a vector field's: of its dimension)
            d["check"] = [list(x) for x in self.check]
        if self.not_null:
            d["not_null"] = True
        return d

    @staticmethod
    def from_dict(d: dict) -> "Field":
        """The field `to_dict` wrote. The dict comes from a file, so every key is
        checked (SchemaError), not trusted: it becomes the table's layout."""
        if not isinstance(d, dict) or not isinstance(d.get("kind"), str):
            raise SchemaError(f"a field is a dict with a 'kind', got {brief(d)}")
        kind = d["kind"]
        not_null = d.get("not_null", False)
        if not isinstance(not_null, bool):
            raise SchemaError(f"not_null is a bool, got {brief(not_null)}")
        if kind == "vector":
            if "default" in d:
                raise SchemaError("a vector field has no default")
            ix = d.get("index")
            hnsw = index_spec_from_dict(ix) if ix is not None else None
            more = d.get("more_indexes", [])
            if not isinstance(more, list) or len(more) > MAX_MORE_INDEXES:
                raise SchemaError(f"a vector field's more_indexes are a list, got "
                                  f"{brief(more)}")
            dim, metric, dtype = d.get("dim"), d.get("metric"), d.get("dtype")
            if type(dim) is not int or metric not in METRICS or not isinstance(dtype, str) \
                    or dtype not in VECTOR_DTYPES:
                raise SchemaError(f"a vector field has an int dim, a metric and a dtype, got "
                                  f"{brief(d)}")
            return replace(Vector(dim, metric=metric, dtype=dtype, index=hnsw,
                                  not_null=not_null, embed=d.get("embed"),
                                  source=d.get("source"),
                                  more_indexes=tuple(index_spec_from_dict(x) for x in more)),
                           check=d.get("check"))
        if kind == SPARSE:
            if d.keys() - {"kind", "dim", "not_null"} or type(d.get("dim")) is not int:
                raise SchemaError(f"a sparsevec field has an int dim, got {brief(d)}")
            return SparseVec(d["dim"], not_null=not_null)
        if kind not in SCALAR_KINDS:
            raise SchemaError(f"unknown field kind {brief(kind)}")
        fts, index = d.get("fts", False), d.get("index")
        if not isinstance(fts, bool) or (fts and kind != "text"):
            raise SchemaError(f"fts is a bool of text fields, got {brief(fts)} on {kind}")
        if index not in (None, "hash", "sorted"):
            raise SchemaError(f"unknown index {brief(index)}; expected 'hash' or 'sorted'")
        default = d.get("default")
        if kind == "timestamp" and default is not None:
            if type(default) is not int or not TS_MIN_US <= default <= TS_MAX_US:
                raise SchemaError(f"a timestamp default is int microseconds in years "
                                  f"1..9999, got {brief(default)}")
            default = from_micros(default)
        if kind == "float" and type(default) is int:
            default = float(default)
        elif kind in ("int", "float", "bool", "text", "bytes") and default is not None \
                and type(default) is not {"int": int, "float": float, "bool": bool,
                                          "text": str, "bytes": bytes}[kind]:
            raise SchemaError(f"a {kind} field's default is {brief(default)}")
        try:
            return Field(kind, index=_scalar(kind, index).index, fts=fts, not_null=not_null,
                         default=default, index_name=d.get("index_name"),
                         max_length=d.get("max_length"), stem=d.get("stem"),
                         ts_config=d.get("ts_config"),
                         k1=d.get("k1", 1.2), b=d.get("b", 0.75), check=d.get("check"),
                         array_of=d.get("array_of"))
        except VarveError as e:    # a default that does not fit its kind
            raise SchemaError(f"a {kind} field: {e}") from None


def index_spec_from_dict(d: dict) -> HNSW | IVFPQ:
    """The spec `HNSW.to_dict` or `IVFPQ.to_dict` wrote (from a file: the spec checks
    its limits, so the index's arrays and per-search scratch are not sized by the file)."""
    if isinstance(d, dict) and d.get("kind") == "ivfpq":
        return IVFPQ(**{key: d.get(key) for key in IVF_LIMITS}, metric=d.get("metric"),
                     name=d.get("name"))
    if not isinstance(d, dict) or d.get("kind") != "hnsw":
        raise SchemaError(f"a vector index spec is {{'kind': 'hnsw' | 'ivfpq', ...}}, "
                          f"got {brief(d)}")
    return HNSW(**{key: d.get(key) for key in HNSW_LIMITS}, metric=d.get("metric"),
                name=d.get("name"), quantize=d.get("quantize"), pq_m=d.get("pq_m"),
                expr=d.get("expr"), where=d.get("where"))


PREDICATE_OPS = ("=", "<>", "<", "<=", ">", ">=", "is null", "is not null")
# a vector field's check of its dimension: vector_dims(field) <op> value
DIMS_OPS = tuple(f"vector_dims {op}" for op in PREDICATE_OPS[:6])
# a check condition's op as it was written, where that is not the field's op value
# (what pg_get_constraintdef shows): a comparison written constant first (`0 < price`)
# is kept as the field's (`price > 0`) followed by " reversed"; a dimension's read
# through a cast of the field (`vector_dims(e::vector)`) names it, "vector_dims::vector =";
# an int or float field's compared with an integer wider than 64 bits (`n <
# 99999999999999999999`, PostgreSQL's numeric) is "< numeric", its value the digits (a str)
WRITTEN_OPS = tuple(f"{op}{wide}{end}" for op in PREDICATE_OPS[:6]
                    for wide, end in ((" numeric", ""), (" numeric", " reversed"),
                                      ("", " reversed"))) + tuple(
    f"{op} reversed" for op in DIMS_OPS) + tuple(
    f"vector_dims::{cast} {op}{end}" for cast in ("vector", "halfvec")
    for op in PREDICATE_OPS[:6] for end in ("", " reversed"))


def check_op(op: str) -> tuple[str, str | None, bool, bool]:
    """A check condition's op (PREDICATE_OPS, DIMS_OPS or WRITTEN_OPS) as (the op it
    is enforced as, of PREDICATE_OPS or DIMS_OPS; the type its vector_dims casts the
    field to, None; whether it was written constant first; whether its value is an
    integer wider than 64 bits, as digits)."""
    reversed_ = op.endswith(" reversed")
    op = op.removesuffix(" reversed")
    wide = op.endswith(" numeric")
    op = op.removesuffix(" numeric")
    cast = None
    if op.startswith("vector_dims::"):
        cast, cmp = op[13:].split(" ", 1)
        op = f"vector_dims {cmp}"
    return op, cast, reversed_, wide


def _wide_constant(v) -> bool:
    """Is `v` the digits of an integer outside 64 bits (a "numeric" check's value)?"""
    return isinstance(v, str) and re.fullmatch(r"-?[1-9][0-9]{18,999}", v) is not None \
        and not ID_MIN <= int(v) < ID_END


def wide_comparison(op: str, digits: str) -> bool:
    """What `x op c` is for every 64-bit integer x, c the integer of `digits`, which
    is outside 64 bits (above every x, or below every x)."""
    above = int(digits) > 0
    return op == "<>" or op in (("<", "<=") if above else (">", ">="))
INDEX_EXPRS = ("cast", "binary_quantize", "subvector")


def further_index(f: Field, spec) -> bool:
    """May vector field `f` take the index `spec`: it has none, or `spec` has a
    name none of its indexes has (a further one, Field.more_indexes) and there
    is room for one more."""
    return f.vector_index is None or (
        getattr(spec, "name", None) is not None and len(f.more_indexes) < MAX_MORE_INDEXES
        and all(s.name != spec.name for s in f.vector_specs))


def check_index_expr(expr, where, metric) -> None:
    """SchemaError unless `expr` and `where` are an HNSW spec's expression and
    predicate as HNSW's fields say (read from a file too: checked, not trusted)."""
    if expr is not None:
        if not (isinstance(expr, tuple) and len(expr) == 4 and expr[0] in INDEX_EXPRS
                and all(type(v) is int and 0 <= v <= MAX_DIM for v in expr[1:3])
                and expr[3] in ("f32", "f16", "bit")
                and (expr[0] == "binary_quantize") == (expr[3] == "bit")
                and (expr[0] == "subvector") == (expr[2] > 0)):
            raise SchemaError(f"an index expression is (how, start, count, dtype), got "
                              f"{brief(expr)}")
        if metric is None:
            raise SchemaError("an index on an expression names its metric")
    if where is not None:
        if not (isinstance(where, tuple) and 1 <= len(where) <= 16 and all(
                isinstance(c, tuple) and len(c) == 3 and isinstance(c[0], str)
                and _NAME.match(c[0]) and c[1] in PREDICATE_OPS
                and (c[2] is None) == c[1].startswith("is ")
                and (c[2] is None or type(c[2]) in (int, float, bool, str))
                for c in where)):
            raise SchemaError(f"a partial index's predicate is (field, op, value) "
                              f"conditions, got {brief(where)}")


def check_index_where(spec, fields: dict) -> None:
    """SchemaError unless a partial index's predicate reads scalar fields of `fields`
    (int, float, bool, text; not the id) with values of their kind: its maintainer
    evaluates it over every row it links, where a wrong one would fail for good."""
    for name, op, value in getattr(spec, "where", None) or ():
        f = fields.get(name)
        if f is None or f.kind not in ("int", "float", "bool", "text"):
            raise SchemaError(f"a partial index's predicate reads {name!r}, which is not an "
                              "int, float, bool or text field of the collection")
        if value is None:
            continue
        ok = (type(value) is bool if f.kind == "bool" else
              isinstance(value, str) if f.kind == "text" else
              type(value) in (int, float))
        if not ok:
            raise SchemaError(f"a partial index's predicate compares the {f.kind} field "
                              f"{name!r} with {brief(value)}")


def index_shape(spec, dtype: str, dim: int) -> tuple[str, int]:
    """(dtype, dim) of the vectors an index over a field of `dtype` and `dim`
    holds: the field's own, or its expression's."""
    expr = getattr(spec, "expr", None)
    if expr is None:
        return dtype, dim
    return expr[3], expr[2] if expr[0] == "subvector" else dim


# Every helper takes not_null= (a null is refused on every write) and, but for
# Vector, default= (what a row that omits the field gets).

def Int(index: str | None = None, not_null: bool = False, default: Any = None) -> Field:
    """A 64-bit integer field; `index` is "hash" (equality) or "sorted" (ranges)."""
    return _scalar("int", index, not_null, default)


def Float(index: str | None = None, not_null: bool = False, default: Any = None) -> Field:
    """A 64-bit float field."""
    return _scalar("float", index, not_null, default)


def Bool(not_null: bool = False, default: Any = None) -> Field:
    """A boolean field."""
    return Field("bool", not_null=not_null, default=default)


def Text(fts: bool = False, index: str | None = None, not_null: bool = False,
         default: Any = None, stem: str | None = None, k1: float = 1.2,
         b: float = 0.75, ts_config: str | None = None) -> Field:
    """A text field; `fts=True` asks for a full-text (BM25) index, its words stemmed
    in `stem`'s language (a Snowball name such as "english"; None: not stemmed),
    or analyzed as PostgreSQL's text search configuration `ts_config` ("english",
    "simple": what SQL's to_tsvector(ts_config, col) finds through it), scored
    with BM25's `k1` and `b`."""
    f = _scalar("text", index)
    return Field("text", index=f.index, fts=bool(fts), not_null=not_null, default=default,
                 stem=stem, k1=k1, b=b, ts_config=ts_config)


def Json(not_null: bool = False, default: Any = None) -> Field:
    """A field holding any JSON-like value (dict, list, str, number, bool)."""
    return Field("json", not_null=not_null, default=default)


def Bytes(not_null: bool = False, default: Any = None) -> Field:
    """A binary string (bytes; SQL's bytea), at most 16 MiB a value. It has no index:
    a filter compares it (==, !=, <, ...) by scanning."""
    return Field("bytes", not_null=not_null, default=default)


def Timestamp(index: str | None = None, not_null: bool = False, default: Any = None) -> Field:
    """A point in time (datetime), stored as UTC microseconds."""
    return _scalar("timestamp", index, not_null, default)


def Vector(dim: int, metric: str | None = None, dtype: str = "f32",
           index: HNSW | IVFPQ | None = None, not_null: bool = False, embed: str | None = None,
           source: str | None = None, more_indexes: tuple = ()) -> Field:
    """A fixed-dimension vector. dtype: f32 | f16 | int8 (integers in -128..127) |
    bit (dim bits, packed 8 a byte). metric: cosine (the default) | l2 | dot, or
    for bit hamming (its only metric, and its default).
    `embed` names an embedder (varvedb.embed.resolve: "onnx", "onnx:/folder",
    "fastembed:MODEL", or a registered name) and `source` the text field it
    embeds: a row that gives that text and no vector gets its vector filled.
    `more_indexes`: further indexes of the field, each named (HNSW(name=...,
    metric=...)): a search ranks through the one built for its metric."""
    if metric is None:
        metric = "hamming" if dtype == "bit" else "cosine"
    return Field("vector", dim=dim, metric=metric, dtype=dtype, vector_index=index,
                 not_null=not_null, embed=embed, source=source, more_indexes=more_indexes)


def SparseVec(dim: int = 0, not_null: bool = False) -> Field:
    """A sparse vector (pgvector's sparsevec) of `dim` dimensions (0: any). Its
    values are varvedb.SparseVector (also given as pgvector-python's, or as
    text "{1:1.5,3:2}/5"); searched in SQL with <->, <#>, <=>, <+> by an exact
    scan."""
    return Field(SPARSE, dim=dim, not_null=not_null)


def check_metric_dtype(metric: str, dtype: str) -> None:
    """SchemaError unless `metric` measures vectors of `dtype`: hamming is the
    metric of bit vectors, and bit vectors have no other."""
    if (metric == "hamming") != (dtype == "bit"):
        raise SchemaError(f"metric {metric!r} does not measure {dtype} vectors: "
                          + ("a bit vector's metric is 'hamming'" if dtype == "bit" else
                             "hamming measures bit vectors (dtype='bit') only"))


def check_index_source(spec, dtype: str, dim: int) -> None:
    """SchemaError unless an index expression reads a field of `dtype` and `dim`:
    a float vector, and a subvector within it."""
    expr = getattr(spec, "expr", None)
    if expr is None:
        return
    if dtype not in ("f32", "f16"):
        raise SchemaError(f"an index expression reads a vector or halfvec field, not {dtype}")
    if expr[0] == "subvector" and not (1 <= expr[1] and expr[1] + expr[2] - 1 <= dim):
        raise SchemaError(f"subvector({expr[1]}, {expr[2]}) lies outside a {dim}-dimension "
                          "field")


def fit_index(spec: HNSW | IVFPQ, dtype: str, dim: int) -> HNSW | IVFPQ:
    """`spec` for vectors of `dtype` and `dim`, checked (_check_index_dtype), with
    quantize="auto" decided: int8 codes where they are smaller than the vectors
    (f32 or f16 of a dimension whose codes, padded to 64 bytes, read fewer bytes),
    else the vectors themselves. Measured (docs/bench.md): at recall 0.95 the int8
    walk answered 1.05-1.35x the plain one's queries a second on GloVe-50, MiniLM
    384-d and clustered 128-d sets, and still reaches 0.99."""
    check_index_source(spec, dtype, dim)
    dtype, dim = index_shape(spec, dtype, dim)
    if isinstance(spec, HNSW) and spec.quantize == "auto":
        small = dtype in ("f32", "f16") and code_width(dim) < dim * (4 if dtype == "f32" else 2)
        spec = replace(spec, quantize="int8" if small else None)
    _check_index_dtype(spec, dtype, dim)
    return spec


def _check_index_dtype(spec: HNSW | IVFPQ, dtype: str, dim: int) -> None:
    """SchemaError unless the index `spec` fits vectors of `dtype` and `dim`: its
    metric (see check_metric_dtype), quantize="int8" only over f32 or f16 vectors
    (int8 vectors are their own codes, bits have no scale), IVF lists never over
    bits (k-means has no mean of bits), and pq_m dividing the dimension."""
    if spec.metric is not None:
        check_metric_dtype(spec.metric, dtype)
    if isinstance(spec, IVFPQ):
        if dtype == "bit":
            raise SchemaError("an IVFPQ index clusters float vectors; a bit field takes "
                              "vv.HNSW()")
        if spec.pq_m is not None and dim % spec.pq_m:
            raise SchemaError(f"IVFPQ pq_m={spec.pq_m} must divide the dimension {dim}")
        return
    if spec.quantize is not None and dtype not in ("f32", "f16"):
        raise SchemaError(f"HNSW quantize={spec.quantize!r} walks codes of f32 or f16 "
                          f"vectors; a {dtype} vector field walks its own values")
    if spec.pq_m is not None and dim % spec.pq_m:
        raise SchemaError(f"HNSW pq_m={spec.pq_m} must divide the dimension {dim}")


def check_query_metric(f: Field, metric: str) -> None:
    """OptionError unless a search of field f may rank by `metric` (l1 too, but
    not on bit; hamming on bit only)."""
    if metric == "l1" and f.dtype != "bit":
        return
    try:
        check_metric_dtype(metric, f.dtype)
    except SchemaError as e:
        raise OptionError(str(e)) from None


def _scalar(kind: str, index: str | None, not_null: bool = False, default: Any = None
            ) -> Field:
    return Field(kind, index=index, not_null=not_null, default=default)  # Field checks them


_VECTOR_SPEC = re.compile(r"^vector\((\d+)\)$")
_SPARSE_SPEC = re.compile(r"^sparsevec(?:\((\d+)\))?$")


def parse_field(name: str, spec: Any) -> Field:
    """Turn a schema entry ("int", "vector(128)", vv.Int(...)) into a Field."""
    if isinstance(spec, Field):
        return spec
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s in SCALAR_KINDS:
            return Field(s)
        if s == "bytea":
            return Field("bytes")
        m = _VECTOR_SPEC.match(s)
        if m:
            return Vector(int(m.group(1)))
        m = _SPARSE_SPEC.match(s)
        if m:
            return SparseVec(int(m.group(1) or 0))
    raise SchemaError(f"field {name!r}: unknown type {spec!r}; expected one of "
                      f"{SCALAR_KINDS + ('vector(N)', 'sparsevec(N)')} or a vv.Field")


@dataclass
class Schema:
    """The fields of a collection, plus the kind of its ids ("int" or "text").

    Two flags come from SQL's CREATE TABLE: `id_hidden` (the table declared no
    primary key, so `*` leaves the id out) and `id_required` (an id column
    that is not serial: an INSERT must give it, as PostgreSQL requires); `key`
    is the name CREATE TABLE chose for its primary key where that is not
    `{table}_pkey` (another relation or constraint had it: key_name)."""
    fields: dict[str, Field]
    id_kind: str = "int"
    id_hidden: bool = False
    id_required: bool = False
    key: str | None = None

    def __post_init__(self):
        for name, f in self.fields.items():
            for spec in f.vector_specs:
                check_index_where(spec, self.fields)
            if f.source is not None and (f.source not in self.fields
                                         or self.fields[f.source].kind != "text"):
                raise SchemaError(f"vector field {name!r} embeds source={f.source!r}, "
                                  "which is not a text field of the collection")

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

    # what every write completes and checks, kept (as vector_fields is) so that a
    # one-row write loops over these fields only, not over every field

    @cached_property
    def defaulted(self) -> tuple:
        """The fields with a default."""
        return tuple(n for n, f in self.fields.items() if f.default is not None)

    @cached_property
    def not_null(self) -> tuple:
        """The fields declared not null."""
        return tuple(n for n, f in self.fields.items() if f.not_null)

    @cached_property
    def checked(self) -> tuple:
        """The fields with a check (CHECK constraint)."""
        return tuple(n for n, f in self.fields.items() if f.check is not None)

    def constraints(self, table: str) -> dict[str, list[tuple]]:
        """The CHECK constraints of the table `table` of this schema: name -> its
        (field, op, value) conditions (AND-ed) in the order they were written (a
        condition's place, where a constraint over several fields keeps one; else
        the fields' order), by name (as PostgreSQL checks them)."""
        out: dict[str, list[tuple]] = {}
        for name in self.checked:
            for c in self.fields[name].check:
                out.setdefault(constraint_name(table, name, c), []).append(
                    (c[3] if len(c) == 4 else -1, name, *c[:2]))
        return {k: [c[1:] for c in sorted(v, key=lambda c: c[0])]
                for k, v in sorted(out.items())}

    def constraint_names(self, table: str) -> set:
        """The names of the table's constraints: its CHECKs', and its primary key's
        (key_name) where its id is a column."""
        checks = set(self.constraints(table))
        return checks if self.id_hidden else checks | {self.key_name(table)}

    def key_name(self, table: str) -> str | None:
        """The name of the table's primary key (its constraint's and its index's),
        None where its id is hidden: the one CREATE TABLE chose (`key`), else
        PostgreSQL's `{table}_pkey`. (A table made before `key` was kept: `{table}_pkey1`,
        `{table}_pkey2`, ... the first no CHECK of the table has.)"""
        if self.id_hidden:
            return None
        if self.key is not None:
            return self.key
        return pkey_name(table, self.constraints(table))

    @cached_property
    def embedded(self) -> tuple:
        """The vector fields embedded from a text field (engine/embedding.py)."""
        return tuple(n for n, f in self.fields.items() if f.embed is not None)

    @cached_property
    def half_indexed(self) -> tuple:
        """The float32 vector fields whose index casts them to halfvec (an
        expression index), which a write's values may overflow."""
        return tuple(n for n, f in self.fields.items()
                     if f.kind == "vector" and f.dtype == "f32"
                     and any(getattr(s, "expr", None) is not None and s.expr[3] == "f16"
                             for s in f.vector_specs))

    @cached_property
    def row_names(self) -> frozenset:
        """The names a row may give: the fields and "id"."""
        return frozenset(self.fields).union(("id",))

    @cached_property
    def columns(self) -> list[str]:
        """The columns SQL shows, in order: id (unless hidden), then the fields."""
        return ([] if self.id_hidden else ["id"]) + list(self.fields)

    def to_dict(self) -> dict:
        d = {"id": self.id_kind, "fields": {n: f.to_dict() for n, f in self.fields.items()}}
        if self.id_hidden:
            d["id_hidden"] = True
        if self.id_required:
            d["id_required"] = True
        if self.key is not None:
            d["key"] = self.key
        return d

    @staticmethod
    def from_dict(d: dict) -> "Schema":
        """The schema `to_dict` wrote (from a file: checked, SchemaError)."""
        if not isinstance(d, dict) or d.get("id") not in ("int", "text") \
                or not isinstance(d.get("fields"), dict):
            raise SchemaError(f"a schema is {{'id': 'int' | 'text', 'fields': {{...}}}}, "
                              f"got {brief(d)}")
        fields = {}
        for name, f in d["fields"].items():
            if not isinstance(name, str) or not _NAME.match(name) or name == "id":
                raise SchemaError(f"invalid field name {brief(name)}")
            fields[name] = Field.from_dict(f)
        flags = {k: d.get(k, False) for k in ("id_hidden", "id_required")}
        if not all(isinstance(v, bool) for v in flags.values()):
            raise SchemaError(f"schema flags are bools, got {brief(flags)}")
        key = d.get("key")
        if key is not None and not (isinstance(key, str) and 0 < len(key.encode()) <= 63
                                    and "\0" not in key):
            raise SchemaError(f"a schema's key name is a name of 1-63 bytes without NUL, "
                              f"got {brief(key)}")
        return Schema(fields, d["id"], **flags, key=key)

    def check_names(self, names, what: str = "row") -> None:
        if self.row_names.issuperset(names):
            return
        unknown = [n for n in names if n != "id" and n not in self.fields]
        if unknown:
            raise UnknownFieldError(f"unknown field {unknown[0]!r} in {what}; "
                                    f"fields are {sorted(self.fields)}")


_INDEX_KEYS = ("index", "index_name")


def schema_difference(have: Schema, want: Schema) -> str | None:
    """What keeps a collection of schema `have` from being one asked for with
    `want` (create_collection(exist_ok=True)), or None: the same id kind and
    fields, each of the same type and options; an index `want` does not name
    may exist (one created later), one it names must be the same."""
    if have.id_kind != want.id_kind:
        return f"its ids are {have.id_kind}, the schema given has {want.id_kind} ids"
    for name, f in want.fields.items():          # in the order given, the first found
        if name not in have.fields:
            return f"it has no field {name!r}"
        a, b = have.fields[name].to_dict(), f.to_dict()
        if not any(k in b for k in _INDEX_KEYS):
            a = {k: v for k, v in a.items() if k not in _INDEX_KEYS}
        if a != b:
            return f"its field {name!r} is {a}, the schema given has {b}"
    extra = [name for name in have.fields if name not in want.fields]
    if extra:
        return f"its field {extra[0]!r} is not in the schema given"
    return None


@dataclass
class Batch:
    """A validated, columnar set of rows: ids plus one (values, nulls) per field.

    Fields absent from `columns` are null for every row of the batch.
    """
    ids: list | np.ndarray
    columns: dict[str, tuple[Any, np.ndarray]]

    def __len__(self) -> int:
        return len(self.ids)


def complete_columns(schema: Schema, columns: dict, n: int, table: str = "") -> dict:
    """The columns of n new rows (of `table`) with every absent field that has a
    default filled with it (absent fields without one stay absent: null); raises
    NotNullViolationError if a not_null field would hold a null, CheckViolationError
    if a value fails its field's check."""
    out = columns
    for name in schema.defaulted:
        if name not in columns and n:
            if out is columns:
                out = dict(columns)
            out[name] = schema.fields[name].default_column(n)
    check_not_null(schema, out, n)
    check_constraints(schema, out, n, table)
    return out


def check_not_null(schema: Schema, columns: dict, n: int) -> None:
    """NotNullViolationError if a not_null field is absent from, or null in,
    the columns of n rows."""
    if not n:
        return
    for name in schema.not_null:
        col = columns.get(name)
        if col is None:
            raise NotNullViolationError(f"field {name!r} is not null and has no default: "
                                        "every row must give it")
        vals, nulls = col
        if nulls is None:   # a list without its mask
            nulls = np.fromiter((v is None for v in vals), bool, len(vals))
        if np.any(nulls):
            raise NotNullViolationError(f"field {name!r} is not null; a row gives it null")


def check_constraints(schema: Schema, columns: dict, n: int, table: str = "") -> None:
    """CheckViolationError if a value of the columns of n rows (as coerce_values
    gives them) makes a field's check false; an absent field is null (passes
    but for IS NOT NULL)."""
    if not n:
        return
    failed = []
    for name in schema.checked:
        col = columns.get(name)
        if col is None:
            vals, nulls = None, np.ones(n, bool)
        else:
            vals, nulls = col
            if nulls is None:
                nulls = np.fromiter((v is None for v in vals), bool, len(vals))
            nulls = np.asarray(nulls, bool)
        for c in schema.fields[name].check:
            (op, _, _, wide), value = check_op(c[0]), c[1]
            if op == "is null":
                bad = ~nulls
            elif op == "is not null":
                bad = nulls
            elif vals is None:
                continue
            elif wide and schema.fields[name].kind == "int":    # the same for every int64
                bad = np.zeros(n, bool) if wide_comparison(op, value) else ~nulls
            elif op in DIMS_OPS:        # every vector of the field has its dimension
                met = compare(op.split()[1], np.array([schema.fields[name].dim]), value)
                bad = ~nulls if not bool(met[0]) else np.zeros(n, bool)
            else:
                if wide:                # a float's: as float8, PostgreSQL's cast of it
                    value = float(int(value))
                v = np.array([value if x is None else x for x in vals], object) \
                    if isinstance(vals, list) else np.asarray(vals)
                # in PostgreSQL's float8 order, as SQL's WHERE: NaN > 0 holds
                bad = ~np.asarray(compare(op, v, value), bool) & ~nulls
            if bad.any():
                failed.append(constraint_name(table, name, c))
    if failed:      # the first by name, as PostgreSQL checks them
        raise CheckViolationError(f'new row for relation "{table}" violates check constraint '
                                  f'"{min(failed)}"')


def constraint_name(table: str, field: str, condition: tuple) -> str:
    """The name of the CHECK constraint a field's check condition belongs to: the
    one it carries, else the field's own (PostgreSQL's name for a column's CHECK)."""
    return condition[2] if len(condition) >= 3 else object_name(table, field, "check")


def pkey_name(table: str, taken) -> str:
    """PostgreSQL's name for a table's primary key (ChooseRelationName): `{table}_pkey`,
    else `{table}_pkey1`, `{table}_pkey2`, ... the first not in `taken`."""
    n = 0
    while object_name(table, None, f"pkey{n or ''}") in taken:    # (cut to fit)
        n += 1
    return object_name(table, None, f"pkey{n or ''}")


def object_name(name1: str, name2: str | None, label: str) -> str:
    """PostgreSQL's makeObjectName: `name1_name2_label` (or `name1_label`), the
    longer of the two names cut a byte at a time (name2 where they are equal)
    until it fits an identifier's 63 bytes, never inside a character."""
    parts = [name1] if name2 is None else [name1, name2]
    raw = [p.encode() for p in parts]
    room, cut = 63 - len(label.encode()) - len(parts), [len(r) for r in raw]
    while sum(cut) > room:
        cut[0 if cut[0] > cut[-1] else -1] -= 1
    return "_".join([r[:k].decode(errors="ignore") for r, k in zip(raw, cut)] + [label])


def validate_name(name: str, what: str = "collection") -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(f"invalid {what} name {name!r}: letters, digits and _, "
                          "not starting with a digit")
    return name


# ---- coercion -------------------------------------------------------------

_LISTLIKE = (list, tuple, range, np.ndarray)


# what an id of the other kind is told: the schema that takes it
_TEXT_IDS_HINT = ('; a collection takes text ids when its schema says so, '
                  'create_collection(name, {"id": "text", ...}) (CREATE TABLE ... '
                  '(id text PRIMARY KEY, ...) in SQL; `varvedb import` of an id column '
                  'of strings makes one)')
_INT_IDS_HINT = '; its schema has "id": "text", so an id is a str (str(n) for a number)'


def coerce_ids(schema: Schema, ids: Any) -> np.ndarray | list:
    """Validate ids (a list, tuple or 1-d array): an int64 array for int ids,
    a list of str for text ids. A numpy integer array is checked vectorised;
    anything else one id at a time."""
    if not isinstance(ids, _LISTLIKE) or (isinstance(ids, np.ndarray) and ids.ndim != 1):
        raise FieldTypeError(f"ids is a list of ids, got {brief(ids)}")
    if schema.id_kind == "int":
        if isinstance(ids, np.ndarray) and ids.dtype != object:
            if not ids.size:
                return ids.astype(np.int64)
            if ids.dtype.kind not in "iu":
                raise FieldTypeError(f"ids of this collection are integers, got a "
                                     f"{ids.dtype} array" + _TEXT_IDS_HINT)
            # astype would wrap a uint64 id >= 2**63 onto a negative one
            if ids.dtype.kind == "u" and ids.max() >= ID_END:
                raise FieldTypeError(f"id {int(ids.max())} is outside the 64-bit range "
                                     "[-2**63, 2**63)")
            return ids.astype(np.int64, copy=False)
        vals = ids.tolist() if isinstance(ids, np.ndarray) else ids
        for v in vals:
            # one at a time: np.asarray([True, 5]) is an int array, [2**63] a uint64 one
            if not is_int(v):
                raise FieldTypeError(f"ids of this collection are integers, got {brief(v)}"
                                     + (_TEXT_IDS_HINT if isinstance(v, str) else ""))
            if not ID_MIN <= v < ID_END:
                raise FieldTypeError(f"id {brief(v)} is outside the 64-bit range [-2**63, 2**63)")
        return np.array(vals, dtype=np.int64)
    vals = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    bad = next((i for i, v in enumerate(vals) if not isinstance(v, str)), None)
    if bad is not None:
        raise FieldTypeError(f"ids of this collection are text, got {brief(vals[bad])}"
                             + (_INT_IDS_HINT if is_int(vals[bad]) else ""))
    vals = _exact_str(vals)
    _check_text("id", vals)
    return vals


def coerce_values(name: str, f: Field, values: list) -> tuple[Any, np.ndarray]:
    """Coerce one column given as a Python list (None = null)."""
    if len(values) == 1:
        one = _coerce_one(name, f, values[0])
        if one is not None:
            return one, _NOT_NULL
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    k = f.kind
    if k == "vector":
        return _coerce_vectors(name, f, values, nulls)
    if k == "text":
        bad = next((v for v in values if v is not None and not isinstance(v, str)), None)
        if bad is not None:
            raise FieldTypeError(f"field {name!r} is text, got {brief(bad)}")
        values = _exact_str(values)
        _check_text(name, [v for v in values if v is not None])
        if f.max_length is not None:
            long = next((v for v in values if v is not None and len(v) > f.max_length), None)
            if long is not None:
                raise ValueTooLongError(f"value too long for type character varying"
                                        f"({f.max_length}) in field {name!r}: {brief(long)}")
        return values, nulls
    if k == "json":
        nonfinite = f.array_of == "float"
        for v in values:
            _check_json(name, v, nonfinite)
            if f.array_of is not None and v is not None:
                _check_array(name, f.array_of, v)
        return list(values), nulls
    if k == SPARSE:
        return [None if v is None else _sparse_blob(name, f, v) for v in values], nulls
    if k == "bytes":
        return [None if v is None else _bytes_value(name, v) for v in values], nulls
    if k == "timestamp":
        try:
            out = np.fromiter((0 if v is None else to_micros(name, v) for v in values),
                              dtype=np.int64, count=len(values))
        except OverflowError:   # a datetime64 beyond int64 microseconds
            raise FieldTypeError(f"field {name!r}: a timestamp is out of range") from None
        return out, nulls     # to_micros refused every value outside years 1..9999
    # int / float / bool
    for v in values:
        if v is not None and not _scalar_ok(k, v):
            raise FieldTypeError(f"field {name!r} is {k}, got {brief(v)}")
    fill = {"int": 0, "float": 0.0, "bool": False}[k]
    dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_}[k]
    try:
        arr = np.array([fill if v is None else v for v in values], dtype=dtype)
    except OverflowError:
        raise FieldTypeError(f"field {name!r}: a value is outside the 64-bit {k} "
                             "range") from None
    return arr, nulls


_SCALAR_TYPES = {"int": (int, np.int64), "float": (float, np.float64), "bool": (bool, np.bool_)}
# the null mask of every one-row column without a null: one shared array, read-only
# (whoever keeps or changes a mask copies it: Growable.append, the merges)
_NOT_NULL = np.zeros(1, bool)
_NOT_NULL.flags.writeable = False


_TINY: dict[int, np.ndarray] = {}      # _coerce_one's finiteness test, one a width


def _coerce_one(name: str, f: Field, v: Any) -> np.ndarray | list | None:
    """The column of a one-row write in the common cases — a Python int, float or
    bool in its own kind, a float vector (array or list of numbers) of the
    field's dimension for an f32/f16 field, an ASCII str within the field's
    length, a json value (refused as the general path refuses it) — without a
    list's per-value machinery; None where the general path must decide (nulls,
    other types, anything else it may refuse)."""
    k = f.kind
    if k == "text":
        # ASCII: no surrogate to refuse, and its length is its size in bytes
        if type(v) is not str or not v.isascii() or len(v) > MAX_VALUE_BYTES \
                or f.max_length is not None and len(v) > f.max_length:
            return None
        return [v]
    if k == "json":
        if v is None:
            return None
        _check_json(name, v, f.array_of == "float")
        if f.array_of is not None:
            _check_array(name, f.array_of, v)
        return [v]
    if k == "vector":
        if f.dtype not in ("f32", "f16"):
            return None
        if type(v) is list and len(v) == f.dim:
            try:
                v = np.array(v)
            except (ValueError, TypeError, OverflowError):
                return None
        if type(v) is not np.ndarray or v.shape != (f.dim,) or v.dtype.kind not in "iuf":
            return None
        out = v.astype(VECTOR_DTYPES[f.dtype]).reshape(1, f.dim)   # a copy: the row's own
        if f.dtype == "f32":
            # a finite dot with 2**-100s: every value finite (one call, not two; an
            # inf or NaN keeps the sum inf or NaN, and no finite row overflows it,
            # where a sum of squares of values past 2**64 did, with a RuntimeWarning)
            # (the method: np.dot passes through numpy's Python-level dispatch)
            flat = out[0]
            tiny = _TINY.get(f.dim)
            if tiny is None:
                tiny = _TINY.setdefault(f.dim, np.full(f.dim, 2.0 ** -100, np.float32))
            return out if math.isfinite(flat.dot(tiny)) else None
        return out if np.logical_and.reduce(np.isfinite(out), axis=None) else None
    spec = _SCALAR_TYPES.get(k)
    if spec is None or type(v) is not spec[0] or (k == "int" and not ID_MIN <= v < ID_END):
        return None
    return np.array((v,), spec[1])


def coerce_array(name: str, f: Field, arr: Any, n: int) -> tuple[Any, np.ndarray]:
    """Coerce one column of `insert_arrays`: a numpy array (checked vectorised)
    or a list (checked one value at a time, as `insert` does)."""
    if not isinstance(arr, np.ndarray):
        vals = list(arr)
        if len(vals) != n:
            raise FieldTypeError(f"field {name!r}: {len(vals)} values for {n} ids")
        return coerce_values(name, f, vals)
    a = arr
    if f.kind == "vector":
        if a.ndim != 2 or a.shape[0] != n:
            raise DimensionError(f"field {name!r}: expected an ({n}, {f.dim}) array, "
                                 f"got shape {a.shape}")
        return _check_vector_block(name, f, a), np.zeros(n, dtype=bool)
    if a.ndim != 1 or a.shape[0] != n:
        raise FieldTypeError(f"field {name!r}: expected {n} values, got shape {a.shape}")
    if f.kind == "bytes" and a.dtype != object:     # numpy's S strips trailing zero bytes
        raise FieldTypeError(f"field {name!r} is bytes: give an object array of bytes "
                             f"(or a list), got a {a.dtype} array")
    if a.dtype == object or f.kind in (*OBJECT_KINDS, SPARSE):
        return coerce_values(name, f, a.tolist())    # tolist: numpy scalars to Python ones
    nulls = np.zeros(n, dtype=bool)
    if f.kind == "timestamp":
        if a.dtype.kind != "M":
            raise FieldTypeError(f"field {name!r} is timestamp, got a {a.dtype} array")
        return datetime64_micros(name, a), nulls
    ok = {"int": "iu", "float": "iuf", "bool": "b"}[f.kind]
    if a.dtype.kind not in ok:
        raise FieldTypeError(f"field {name!r} is {f.kind}, got a {a.dtype} array")
    dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_}[f.kind]
    if f.kind == "int" and a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        raise FieldTypeError(f"field {name!r}: integer out of the 64-bit range")
    with np.errstate(over="ignore"):     # a long double past float64 is inf, as in a list
        return a.astype(dtype, copy=False), nulls


def coerce_query_vector(f: Field, q: Any) -> np.ndarray:
    """A query vector for field f as float32 (dim,), checked like stored ones;
    for a bit field its bits (0/1 or bool, length dim) packed like its rows."""
    if f.dtype == "bit":
        return _query_bits(f, q)
    if type(q) is np.ndarray and q.dtype == np.float32 and q.ndim == 1 \
            and q.shape[0] == f.dim:
        # the common case, checked without the casts (and their errstate) below
        if not np.isfinite(q).all():
            raise NonFiniteVectorError("query vector holds NaN or inf")
        return q
    if type(q) is list:      # JSON's form: read as float64 (no overflow) and bounded
        return _query_list(f, q)
    try:
        with np.errstate(over="ignore"):     # past float32 is inf, refused below
            a = np.asarray(q, dtype=np.float32) if not isinstance(q, np.ndarray) else q
    except (ValueError, TypeError, OverflowError):
        # e.g. a list of strings, or an int past float: not VarveErrors
        raise FieldTypeError(f"query vector must be numeric, got {brief(q)}") from None
    if a.ndim != 1 or a.shape[0] != f.dim:
        raise DimensionError(f"query vector has shape {a.shape}; field expects ({f.dim},)")
    if a.dtype.kind not in "iuf":
        raise FieldTypeError(f"query vector must be numeric, got {a.dtype}")
    with np.errstate(over="ignore"):
        a = a.astype(np.float32, copy=False)
    if not np.isfinite(a).all():
        raise NonFiniteVectorError("query vector holds NaN or inf")
    return a


# float64 values at or past this round to float32's inf
_F32_ROUNDS_TO_INF = 2.0 ** 128 - 2.0 ** 103


def _query_list(f: Field, q: list) -> np.ndarray:
    """coerce_query_vector of a list: its float32 cast made only once every value
    is known to fit, so that no np.errstate (two context-variable swaps a call)
    is needed to keep numpy's overflow warning quiet; what overflowed to inf
    before is refused as it was."""
    try:
        a = np.array(q, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise FieldTypeError(f"query vector must be numeric, got {brief(q)}") from None
    if a.ndim != 1 or a.shape[0] != f.dim:
        raise DimensionError(f"query vector has shape {a.shape}; field expects ({f.dim},)")
    # NaN fails both comparisons; +-inf and what float32 cannot hold fail one
    if not (np.maximum.reduce(a) < _F32_ROUNDS_TO_INF
            and np.minimum.reduce(a) > -_F32_ROUNDS_TO_INF):
        raise NonFiniteVectorError("query vector holds NaN or inf")
    return a.astype(np.float32)


def _query_bits(f: Field, q: Any) -> np.ndarray:
    try:
        a = np.asarray(q)
    except (ValueError, TypeError, OverflowError):
        a = None
    if a is None or a.dtype == object or a.dtype.kind not in "biuf":
        raise FieldTypeError(f"query vector of a bit field holds 0/1 or bools, got {brief(q)}")
    if a.ndim != 1 or a.shape[0] != f.dim:
        raise DimensionError(f"query vector has shape {a.shape}; field expects ({f.dim},)")
    return _packed_bits("query vector:", f, a[None, :])[0]


def _sparse_blob(name: str, f: Field, v: Any) -> bytes:
    """A sparse vector's stored form (sparse.py), of the field's dimension."""
    from .sparse import SparseVector
    if isinstance(v, (bool, int, float)):
        raise FieldTypeError(f"field {name!r} is sparsevec, got {brief(v)}")
    try:    # (a value SparseVector refuses: its SqlError, with pgvector's SQLSTATE)
        sv = v if isinstance(v, SparseVector) else SparseVector(v)
    except (TypeError, ValueError):
        raise FieldTypeError(f"field {name!r} is sparsevec, got {brief(v)}") from None
    if f.dim and sv.dim != f.dim:       # pgvector's words
        raise DimensionError(f"expected {f.dim} dimensions, not {sv.dim}")
    return sv.to_blob()


def vector_values(f: Field, stored: np.ndarray) -> np.ndarray:
    """Stored rows (n, width) of field f in their read form: float32 (f32, f16),
    int8, or bool (n, dim) for bit (a fresh array, never a view of the arena)."""
    if f.dtype == "bit":
        return np.unpackbits(stored, axis=-1, count=f.dim).astype(bool)
    if f.dtype == "int8":
        return np.array(stored, np.int8)
    return stored.astype(np.float32)


def _coerce_vectors(name, f: Field, values, nulls) -> tuple[np.ndarray, np.ndarray]:
    n = len(values)
    out = np.zeros((n, f.width), dtype=VECTOR_DTYPES[f.dtype])
    idx = np.flatnonzero(~nulls)
    if idx.size:
        present = [values[i] for i in idx]
        try:
            block = np.asarray(present)
        except (ValueError, TypeError, OverflowError):   # ragged, or not numbers
            block = None
        if block is None or block.ndim != 2 or block.shape[1] != f.dim:
            bad = next((v for v in present if _shape(v) != (f.dim,)), present[0])
            _refuse_width(name, f, f"one of shape {_shape(bad)}", _shape(bad))
        out[idx] = _check_vector_block(name, f, block)
    return out, nulls


def _refuse_width(name, f: Field, got: str, shape) -> None:
    if f.dtype == "bit" and isinstance(shape, tuple) and len(shape) == 1:
        raise BitLengthError(f"bit string length {shape[0]} does not match type "
                             f"bit({f.dim}) (field {name!r})")
    raise DimensionError(f"field {name!r} expects vectors of dimension {f.dim}, got {got}")


# float16's largest value is 65504; a float32 from half its last step past it
# (65520) rounds to infinity, which pgvector's cast to halfvec refuses
HALF_OVERFLOW = 65520.0


def half_overflow(x: np.ndarray) -> np.ndarray | None:
    """Which rows of a float32 block of vectors overflow a cast to halfvec (None:
    none do, told by the block's max and min, with no temporary its size)."""
    if not x.size or (x.max() < HALF_OVERFLOW and x.min() > -HALF_OVERFLOW):
        return None
    bad = (np.abs(x) >= HALF_OVERFLOW).any(axis=-1)
    return bad if bad.any() else None      # (a NaN fails both tests above)


def _shape(v) -> tuple | str:
    try:
        return np.shape(v)
    except (ValueError, TypeError):
        return "ragged"


def _check_vector_block(name, f: Field, a: np.ndarray) -> np.ndarray:
    if a.shape[1] != f.dim:
        _refuse_width(name, f, str(a.shape[1]), a.shape[1:])
    if f.dtype == "bit":
        if a.dtype.kind not in "biuf":
            raise FieldTypeError(f"field {name!r}: bit vectors hold 0/1 or bools, got {a.dtype}")
        return _packed_bits(f"field {name!r}:", f, a)
    if a.dtype.kind not in "iuf":
        raise FieldTypeError(f"field {name!r}: vectors must be numeric, got {a.dtype}")
    if f.dtype == "int8":
        return _checked_int8(name, a)
    out = a.astype(VECTOR_DTYPES[f.dtype], copy=False)   # an overflow is reported below
    if not all_finite(out):
        bad = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        if np.isfinite(a[bad]).all():
            raise VectorRangeError(f"field {name!r}: vector at position {bad} overflows "
                                   f"{f.dtype}")
        raise NonFiniteVectorError(f"field {name!r}: vector at position {bad} holds NaN or inf")
    return np.ascontiguousarray(out)


def all_finite(vectors: np.ndarray, rows: int = 1 << 16) -> bool:
    """No NaN or infinity among the vectors, checked a block of rows at a time: no
    temporary the size of the block (np.isfinite of a whole 1M x 128 block made
    a 128 MB one and took 5x as long)."""
    for lo in range(0, len(vectors), rows):
        block = vectors[lo:lo + rows]
        if block.dtype == np.float16:   # exponent bits all set = inf or NaN; 6x faster
            if ((block.view(np.uint16) & 0x7C00) == 0x7C00).any():
                return False
        elif not np.isfinite(block).all():
            return False
    return True


def _checked_int8(name: str, a: np.ndarray) -> np.ndarray:
    """An int8 block: every value a whole number in -128..127 (never rounded)."""
    if a.dtype == np.int8:
        return np.ascontiguousarray(a)
    with np.errstate(invalid="ignore"):
        bad = (a < INT8_MIN) | (a > INT8_MAX)
        if a.dtype.kind == "f":
            bad |= ~np.isfinite(a) | (a != np.trunc(a))
    if bad.any():
        row, col = (int(x) for x in np.argwhere(bad)[0])
        raise FieldTypeError(f"field {name!r}: vector at position {row} holds {a[row, col]!r} "
                             f"at dimension {col}; an int8 vector holds whole numbers in "
                             f"{INT8_MIN}..{INT8_MAX}")
    return np.ascontiguousarray(a.astype(np.int8))


def _packed_bits(what: str, f: Field, a: np.ndarray) -> np.ndarray:
    """A bit block (n, dim) of 0/1 values or bools, packed to (n, ceil(dim / 8)) bytes."""
    if a.dtype != np.bool_:
        with np.errstate(invalid="ignore"):
            bad = (a != 0) & (a != 1)
        if bad.any():
            row, col = (int(x) for x in np.argwhere(bad)[0])
            raise FieldTypeError(f"{what} bit vector at position {row} holds {a[row, col]!r} "
                                 f"at bit {col}; a bit is 0 or 1 (or a bool)")
        a = a != 0
    return np.ascontiguousarray(np.packbits(a, axis=1))


def _scalar_ok(kind: str, v: Any) -> bool:
    if kind == "bool":
        return isinstance(v, (bool, np.bool_))
    if isinstance(v, (bool, np.bool_)):
        return False
    if kind == "int":
        return isinstance(v, (int, np.integer))
    return isinstance(v, (int, float, np.integer, np.floating))


def _bytes_value(name: str, v: Any) -> bytes:
    """A bytes field's value as the file keeps it: bytes (from bytes, bytearray or a
    memoryview), within MAX_VALUE_BYTES; FieldTypeError for anything else."""
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise FieldTypeError(f"field {name!r} is bytes, got {brief(v)}")
    b = bytes(v)
    if len(b) > MAX_VALUE_BYTES:
        raise _too_large(name, "bytes", len(b))
    return b


def _exact_str(values: list) -> list:
    # msgpack encodes only plain str: a subclass (numpy's str_ from an array)
    # made the encoder raise TypeError from inside the write.
    if all(type(v) is str or v is None for v in values):
        return values
    return [v if type(v) is str or v is None else str.__str__(v) for v in values]


def _check_text(name: str, strings: list) -> None:
    # A lone surrogate cannot be encoded into the file: without this check the
    # encoder raised UnicodeEncodeError (not a VarveError) from inside the write.
    try:
        total = len("".join(strings).encode("utf-8"))
    except UnicodeEncodeError:
        bad = next(s for s in strings if not _utf8_ok(s))
        raise FieldTypeError(f"field {name!r}: {brief(bad)} is not valid Unicode "
                             "(a lone surrogate cannot be stored)") from None
    if total > MAX_VALUE_BYTES:
        # a str of n characters encodes to at most 4n bytes
        big = (_utf8_len(name, s) for s in strings if 4 * len(s) > MAX_VALUE_BYTES)
        size = max(big, default=0)
        if size > MAX_VALUE_BYTES:
            raise _too_large(name, "text", size)


def _utf8_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _utf8_len(name: str, s: str) -> int:
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError:
        raise FieldTypeError(f"field {name!r}: {brief(s)} is not valid Unicode "
                             "(a lone surrogate cannot be stored)") from None


def _too_large(name: str, kind: str, size: int | None = None) -> ValueTooLargeError:
    what = f"of {size:,} bytes " if size else ""
    return ValueTooLargeError(f"field {name!r}: a {kind} value {what}is over the limit of "
                          f"{MAX_VALUE_BYTES >> 20} MiB encoded")


# msgpack stores integers in [-2**63, 2**64); a larger one made the encoder
# raise OverflowError (not a VarveError) from inside the write.
_JSON_INT_MIN, _JSON_INT_END = -(1 << 63), 1 << 64


def _check_json(name: str, v: Any, nonfinite: bool = False) -> None:
    """Refuse a json value that the file cannot store or a later open read back
    (`nonfinite`: a float array's, which takes NaN and infinity as float8 does).

    A walk with an explicit stack (deep values must not exhaust Python's stack
    here either) that stops at MAX_JSON_DEPTH. Scalar types are exact: msgpack
    encodes plain int/float/str, not numpy's float64 or other subclasses."""
    stack = [(v, 0)]
    size = 0          # a bound on the encoded size: 9 bytes a node, plus its text
    while stack:
        x, depth = stack.pop()
        size += 9
        t = type(x)
        if x is None or t is bool:
            pass
        elif t is int:
            if not _JSON_INT_MIN <= x < _JSON_INT_END:
                raise FieldTypeError(f"field {name!r}: JSON integer {brief(x)} is outside "
                                     "the 64-bit range")
        elif t is float:
            if not nonfinite and not math.isfinite(x):
                raise FieldTypeError(f"field {name!r}: JSON has no NaN or infinity")
        elif t is str:
            size += _utf8_len(name, x)
        elif isinstance(x, (list, tuple, dict)):
            if depth == MAX_JSON_DEPTH:
                raise FieldTypeError(f"field {name!r}: JSON nested deeper than "
                                     f"{MAX_JSON_DEPTH} levels")
            if isinstance(x, dict):
                for key, y in x.items():
                    if type(key) is not str:
                        raise FieldTypeError(f"field {name!r}: JSON object keys must be str, "
                                             f"got {brief(key)}")
                    size += 9 + _utf8_len(name, key)
                    stack.append((y, depth + 1))
            else:
                stack.extend([(y, depth + 1) for y in x])
        else:
            raise FieldTypeError(f"field {name!r} is json; {t.__name__} is not a JSON value")
        if size > 9 * MAX_VALUE_BYTES:     # each node encodes to at least 1/9 of its bound
            raise _too_large(name, "json")
    if size > MAX_VALUE_BYTES:
        size = len(msgspec.msgpack.encode(v))     # safe now: checked and not too deep
        if size > MAX_VALUE_BYTES:
            raise _too_large(name, "json", size)


def to_micros(name: str, v: Any) -> int:
    """A datetime (naive = UTC), ISO-8601 string or datetime64 as UTC microseconds.

    Refused outside years 1..9999 UTC: a read turns the value back into a
    datetime, so a value past its range made every later read overflow."""
    if isinstance(v, str):
        try:
            v = _dt.datetime.fromisoformat(v)
        except ValueError:
            raise FieldTypeError(f"field {name!r}: not an ISO-8601 timestamp: {brief(v)}") from None
    if isinstance(v, np.datetime64):
        return int(datetime64_micros(name, np.array([v]))[0])
    if not isinstance(v, _dt.datetime):
        raise FieldTypeError(f"field {name!r} is timestamp, got {brief(v)}")
    try:
        if v.utcoffset() is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        us = (v - _EPOCH) // _dt.timedelta(microseconds=1)
    except (TypeError, ValueError, OverflowError):   # a tzinfo that misbehaves
        raise FieldTypeError(f"field {name!r}: cannot place {brief(v)} in UTC") from None
    if not TS_MIN_US <= us <= TS_MAX_US:
        raise FieldTypeError(f"field {name!r}: {brief(v)} is outside years 1..9999 UTC")
    return us


# microseconds in one step of each datetime64 unit (Y and M vary: see _unit_bounds)
_UNIT_US = {"W": 604_800_000_000, "D": 86_400_000_000, "h": 3_600_000_000, "m": 60_000_000,
            "s": 1_000_000, "ms": 1000, "us": 1, "ns": Fraction(1, 10**3),
            "ps": Fraction(1, 10**6), "fs": Fraction(1, 10**9), "as": Fraction(1, 10**12)}
_I64 = np.iinfo(np.int64)


@lru_cache(maxsize=64)
def _unit_bounds(unit: str, count: int) -> tuple[int, int]:
    """[lo, hi] of datetime64[count unit] values that lie in years 1..9999 UTC."""
    if unit in ("Y", "M"):
        per_year = 1 if unit == "Y" else 12     # a value counts years (months) from 1970
        lo = math.ceil(Fraction((1 - 1970) * per_year, count))
        hi = math.floor(Fraction((10000 - 1970) * per_year - 1, count))
    elif unit in _UNIT_US:
        step = _UNIT_US[unit] * count
        # casting to us floors, so value x is in range iff MIN <= x*step < MAX + 1
        lo = math.ceil(Fraction(TS_MIN_US) / step)
        hi = math.ceil(Fraction(TS_MAX_US + 1) / step) - 1
    else:                                   # generic: only NaT
        lo, hi = 1, 0
    # numpy's cast multiplies by count first, in int64; and NaT is int64's min
    lim = int(_I64.max) // count
    return max(lo, -lim), min(hi, lim)


def datetime64_micros(name: str, a: np.ndarray) -> np.ndarray:
    """A datetime64 array of any unit as int64 UTC microseconds, vectorised.

    Every value must lie in years 1..9999 (NaT refused). The bounds are moved
    into the array's own unit first: casting a coarse unit to microseconds
    can overflow, and would wrap before it could be checked."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    unit, count = np.datetime_data(a.dtype)
    lo, hi = _unit_bounds(unit, count)
    raw = a.view(np.int64)
    bad = (raw < lo) | (raw > hi)
    if bad.any():
        x = a[int(np.flatnonzero(bad)[0])]
        what = "NaT (not a time)" if np.isnat(x) else f"{x} is outside years 1..9999 UTC"
        raise FieldTypeError(f"field {name!r}: timestamp {what}")
    return a.astype("datetime64[us]").view(np.int64)


def from_micros(us: int) -> _dt.datetime:
    return _EPOCH + _dt.timedelta(microseconds=int(us))


def timestamps_readable(us: np.ndarray) -> bool:
    """Can every one of these int64 microsecond values be read back as a datetime?
    (A stored NaT or year-10000 value could not: from_micros would overflow.)"""
    return not us.size or (int(us.min()) >= TS_MIN_US and int(us.max()) <= TS_MAX_US)


class _Brief(reprlib.Repr):
    """reprlib's bounds (depth, items, string lengths) for the kinds it leaves whole."""

    def repr_int(self, x, level):       # str() of a huge int is slow, then refused
        return super().repr_int(x, level) if x.bit_length() <= 256 else \
            f"<an int of {x.bit_length()} bits>"

    def repr_bytes(self, x, level):
        return repr(x[:self.maxstring]) + ("..." if len(x) > self.maxstring else "")

    repr_bytearray = repr_bytes


_BRIEF = _Brief()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 3, 60, 60, 60


def brief(x: Any) -> str:
    """A value's repr for one line of a message, in bounded time and memory whatever
    the value (nested, huge, or read from a crafted file): cut in depth, items and
    length while it is built, never built whole and then cut."""
    s = _BRIEF.repr(x)
    return s if len(s) <= 100 else s[:97] + "..."


def one_id(schema: Schema, id):
    """One document id, checked as coerce_ids checks a list of them (a plain
    int is checked without building an array)."""
    if type(id) is int and schema.id_kind == "int" and ID_MIN <= id < ID_END:
        return id
    return coerce_ids(schema, [id])[0]


def batch_length(ids, columns: dict) -> int:
    given = ({"id": ids} if ids is not None else {}) | columns
    for name, a in given.items():
        if (not isinstance(a, (list, tuple, range, np.ndarray))
                or isinstance(a, np.ndarray) and a.ndim == 0):
            raise FieldTypeError(f"insert_arrays takes each column as an array or a list; "
                                 f"{name!r} is {type(a).__name__}")
    if not given:
        raise FieldTypeError("insert_arrays needs at least one column")
    lengths = {len(a) for a in given.values()}
    if len(lengths) != 1:
        raise FieldTypeError(f"insert_arrays columns have different lengths: {sorted(lengths)}")
    return lengths.pop()


def as_of_micros(as_of) -> int:
    """An `as_of` that is not a version number: a timezone-aware datetime in years
    1..9999, as microseconds since the epoch (UTC). OptionError for anything
    else: a naive datetime (or a string, a datetime64) could be in any zone."""
    if not isinstance(as_of, _dt.datetime):
        raise OptionError(f"as_of is a version number or a timezone-aware datetime, "
                          f"got {brief(as_of)}")
    try:
        aware = as_of.utcoffset() is not None
    except (TypeError, ValueError):
        aware = False
    if not aware:
        raise OptionError("as_of needs a timezone-aware datetime (a naive one could "
                          f"be in any zone), got {as_of!r}")
    try:
        return to_micros("as_of", as_of)
    except FieldTypeError as e:
        raise OptionError(str(e)) from None
