"""DataFrames and Arrow tables, in and out: what `insert` / `upsert` take column-wise
and what `Hits` and `SqlResult` give back.

In: `frame_columns(data)` turns a pandas DataFrame, a pyarrow Table or RecordBatch,
or a polars DataFrame into {column: numpy array or list}, the form
`Collection.insert_arrays` checks and writes: a numeric, bool or timestamp column
without nulls is its own array (no copy where the library holds it as one), a
fixed-size-list or list column of numbers of one length, or an object column of
equal-length arrays, is one (n, dim) block (the vector field's; one copy at most),
and anything else (text, json, lists of several lengths, a column with nulls) a
list of Python values, checked as `insert` checks a row's. Nothing here knows the
schema: the collection's checks name the column whose type is wrong.

Out: `to_arrow` / `to_pandas` / `to_polars` over named columns of Python values
(vectors as numpy arrays), one piece for search hits, SQL rows and the export
alike. A json column (a json field's, or one holding a dict or a list) keeps its
values exactly: Arrow's json type, one JSON text a value (for polars too), and
the values themselves in pandas — never inferred, which would make dicts of
other keys one struct of all their keys ({"a": 1} and {"b": 2} coming back as
{a: 1, b: null} and {a: null, b: 2}) and a json 1 beside 2.5 the float 1.0.

None of pandas, pyarrow or polars is imported here until an argument's type says
it is one of theirs (`type(x).__module__`), so `import varvedb` loads none of them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import FieldTypeError
from .sparse import SparseVector

INT64_RANGE = (-(1 << 63), (1 << 63) - 1)


def frame_kind(data: Any) -> str | None:
    """"pandas", "arrow" or "polars" when `data` is such a table, else None
    (read from the type's module: nothing is imported to ask)."""
    t = type(data)
    module = t.__module__ or ""
    if module.startswith("pandas") and t.__name__ == "DataFrame":
        return "pandas"
    if module.startswith("pyarrow") and t.__name__ in ("Table", "RecordBatch"):
        return "arrow"
    if module.startswith("polars") and t.__name__ == "DataFrame":
        return "polars"
    return None


def frame_columns(data: Any) -> dict | None:
    """{column name: array or list} of a DataFrame or Arrow table (None: not one)."""
    kind = frame_kind(data)
    if kind is None:
        return None
    if kind == "polars":
        data = data.to_arrow()      # polars holds Arrow arrays: zero copy for numbers
        kind = "arrow"
    if kind == "arrow":
        unique_names(list(data.schema.names))     # a dict would keep one of two alike
        return {str(name): _arrow_column(str(name), data.column(i))
                for i, name in enumerate(data.schema.names)}
    unique_names([str(c) for c in data.columns])
    return {str(name): _pandas_column(str(name), data[name]) for name in data.columns}


def unique_names(names: list) -> None:
    """FieldTypeError when two columns share a name (one would silently be lost)."""
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise FieldTypeError(f"the table has columns named alike: {dup}")


def _arrow_column(name: str, col):
    import pyarrow as pa
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    t = col.type
    n = len(col)
    if getattr(t, "extension_name", None) == "arrow.json":     # JSON texts: the values
        return json_values(name, col.storage.to_pylist())
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = t.value_type
        if col.null_count == 0 and (pa.types.is_integer(vt) or pa.types.is_floating(vt)
                                    or pa.types.is_boolean(vt)):
            if pa.types.is_fixed_size_list(t):
                dim = t.list_size
            else:
                offsets = np.asarray(col.offsets)
                lengths = np.diff(offsets)
                if n and (lengths != lengths[0]).any():
                    # no block: the field decides (a json field takes them, a vector
                    # field names the first row of another width)
                    return col.to_pylist()
                dim = int(lengths[0]) if n else 0
            flat = col.flatten().to_numpy(zero_copy_only=False)
            return flat.reshape(n, dim)
        return col.to_pylist()
    if col.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t)
                                or pa.types.is_boolean(t)):
        return col.to_numpy(zero_copy_only=False)
    if col.null_count == 0 and pa.types.is_timestamp(t):
        if t.tz is not None:        # stored as UTC instants: the zone is only a label
            col = col.cast(pa.timestamp(t.unit))
        return col.to_numpy(zero_copy_only=False)
    return col.to_pylist()


def _pandas_column(name: str, s):
    dtype = s.dtype
    kind = getattr(dtype, "kind", "O")
    if isinstance(dtype, np.dtype) and kind in "iufb":
        return s.to_numpy()
    if kind == "M":
        if getattr(dtype, "tz", None) is not None:
            s = s.dt.tz_convert("UTC").dt.tz_localize(None)
        if not s.isna().any():
            return s.to_numpy()
        # with NaT: datetimes and None (pandas' Timestamp is no JSON a client can send)
        out = np.array(s.dt.to_pydatetime(), dtype=object)
        out[s.isna().to_numpy()] = None
        return out.tolist()
    if kind == "O" and len(s):
        vals = s.to_numpy()
        first = vals[0]
        if isinstance(first, (np.ndarray, list, tuple)) and not isinstance(first, str):
            if any(v is None for v in vals):
                return vals.tolist()
            try:
                return np.stack(vals)          # equal-length arrays: one (n, dim) block
            except ValueError:
                return vals.tolist()           # of several lengths: as an Arrow list column
    # nullable extension dtypes (Int64, string, ...), datetimes with NaT, objects
    out = s.astype(object).where(s.notna(), None).tolist()
    return out


# ---- out: named columns of Python values -----------------------------------------

def _vector_block(values: list):
    """An (n, dim) array when every value is an equal-shaped 1-D array, else None."""
    if values and all(isinstance(v, np.ndarray) and v.ndim == 1 for v in values) \
            and len({v.shape for v in values}) == 1:
        return np.stack(values)
    return None


def to_arrow(names: list, columns: list, json: frozenset = frozenset()):
    """A pyarrow Table of named columns (lists of Python values; vectors as numpy
    arrays: a fixed-size-list column; an int past int64 a decimal, as
    PostgreSQL's numeric; a sparse vector pgvector's text). The columns named in
    `json` (json fields), and any holding a dict or a list, are Arrow's json type,
    one JSON text a value.
    Two columns of one name stay two (SELECT j, j)."""
    import pyarrow as pa
    return pa.Table.from_arrays([_arrow_array(pa, values, name in json)
                                 for name, values in zip(names, columns)], names=list(names))


def _arrow_array(pa, values, json: bool):
    if json or _holds_json(values):
        return _json_array(pa, values)
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return pa.array(values)
    values = list(values)
    block = _vector_block(values)
    if block is not None:
        return pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), block.shape[1])
    if values and any(isinstance(v, np.ndarray) for v in values):
        values = [None if v is None else v.tolist() for v in values]
    if any(isinstance(v, SparseVector) for v in values):   # no Arrow type: pgvector's text
        values = [None if v is None else str(v) for v in values]
    if any(type(v) is int and not INT64_RANGE[0] <= v <= INT64_RANGE[1] for v in values):
        from decimal import Decimal
        return pa.array([None if v is None else Decimal(v) for v in values],
                        pa.decimal128(38, 0))
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # values of mixed types in a column of no known kind (a 1 beside an "a")
        return _json_array(pa, values)


def _holds_json(values) -> bool:
    """Does a column of unknown kind hold JSON documents (a dict or a list: vectors
    are numpy arrays)?"""
    return not isinstance(values, np.ndarray) and any(type(v) in (dict, list)
                                                      for v in values)


def _json_array(pa, values):
    """Arrow's json type, one JSON text a value (frame_columns reads it back as values)."""
    json_type = pa.json_() if hasattr(pa, "json_") else pa.string()  # pyarrow < 19
    return pa.array([None if v is None else _json_text(v) for v in values], json_type)


def json_values(name: str, texts: list) -> list:
    """Column `name`'s JSON texts as values (None stays None); a text that is not
    JSON is a FieldTypeError naming the column."""
    import msgspec
    try:
        return [None if t is None else msgspec.json.decode(t) for t in texts]
    except msgspec.DecodeError as e:
        raise FieldTypeError(f"column {name!r} holds JSON texts: {e}") from None
    except RecursionError:
        raise FieldTypeError(f"column {name!r}: a JSON text nested too deeply") from None


def _json_text(v) -> str:
    import msgspec
    return msgspec.json.encode(v).decode()


def to_pandas(names: list, columns: list, json: frozenset = frozenset()):
    """A pandas DataFrame of named columns (vectors stay numpy arrays, one a cell;
    the columns named in `json` hold their values as they are, never typed)."""
    import pandas as pd
    data = {}
    for name, values in zip(names, columns):
        if isinstance(values, np.ndarray) and values.ndim == 1 and name not in json:
            data[name] = values
        else:
            col = objects(values)
            # (a json column a Series of objects: pandas would make [None, ''] strings,
            # the None a NaN)
            data[name] = pd.Series(col, dtype=object) if name in json else _typed(col)
    return pd.DataFrame(data, columns=list(names))


def objects(values) -> np.ndarray:
    """A 1-D object array of the values as they are (a list stays one cell, where
    numpy would make equal-length lists a second dimension)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _typed(col: np.ndarray) -> np.ndarray:
    """An object column as numbers or bools where every value is one."""
    vals = col.tolist()
    if vals and all(type(v) is bool for v in vals):
        return np.array(vals, bool)
    if vals and all(type(v) is int and INT64_RANGE[0] <= v <= INT64_RANGE[1] for v in vals):
        return np.array(vals, np.int64)
    if vals and all(type(v) in (int, float) for v in vals):
        return np.array(vals, np.float64)
    return col


def to_polars(names: list, columns: list, json: frozenset = frozenset()):
    """A polars DataFrame of named columns (through Arrow: vectors an Array column,
    json columns Arrow's json type over their texts)."""
    import polars as pl
    return pl.from_arrow(to_arrow(names, columns, json))
