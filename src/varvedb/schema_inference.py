"""A schema from data: the field types that rows, a DataFrame or an Arrow table hold,
for a collection created from its first data (`create_collection(name, data=...)`,
`varvedb import`).

Each column's values decide its type, nulls aside: ints → "int", numbers → "float",
bools → "bool", strings → "text", bytes → "bytes", datetimes → "timestamp",
equal-length lists or arrays of numbers (a 2-D block of a table) → "vector(dim)",
anything else (dicts, mixed types, lists of other things or of different lengths) →
"json"; a column of nulls only is "text". An "id" column of strings makes text ids;
of ints, the default int ids. `vector=` names a column that must be a vector and
`dim=` its width (an import's `--vector COL --dim N`).

Rows are read as they are given; a table through tabular.frame_columns (its
columns as insert takes them), so a table and its rows infer alike. The first
SAMPLE rows decide, so inferring costs the same for any size of data.
"""
from __future__ import annotations

import datetime as _dt
import itertools
from typing import Any

import numpy as np

from .errors import FieldTypeError, OptionError
from .tabular import frame_columns, frame_kind

SAMPLE = 1000           # rows whose values decide the types


def infer_schema(data: Any, vector: str | None = None, dim: int | None = None) -> dict:
    """{field: type} (and "id": "text" for string ids) of `data`: a list of row
    dicts, one row dict, a pandas / polars DataFrame, a pyarrow Table or
    RecordBatch. The first SAMPLE rows decide (a later row of another type is
    refused by the insert that follows, as any row of the wrong type is)."""
    kind = frame_kind(data)
    if kind is None:
        columns = _columns_of(data)
    else:        # the sample's rows only: a big table's text is not all turned to str
        columns = frame_columns(data.iloc[:SAMPLE] if kind == "pandas" else
                                data.slice(0, SAMPLE) if kind == "arrow" else
                                data.head(SAMPLE))
    if vector is not None and vector not in columns:
        raise FieldTypeError(f"vector column {vector!r} is not in the data "
                             f"(it has {sorted(columns)})")
    out = {}
    for name, values in columns.items():
        kind = _kind(values)
        if name == vector and (dim is not None or not kind.startswith("vector(")):
            width = dim if dim is not None else _width(values, name)
            kind = f"vector({width})"
        if name == "id":
            if kind == "text":
                out["id"] = "text"
            elif kind not in ("int", "text"):
                raise FieldTypeError(f"the data's ids are {kind} values: ids are ints "
                                     "or strings")
            continue
        out[name] = kind
    if not out and "id" not in columns:
        raise FieldTypeError("no field to infer a schema from: the data has no columns")
    return out


def creation_data(schema, data):
    """create_collection's data, readable twice (an iterator read into a list: once
    to infer, once to insert); OptionError when there is neither schema nor data."""
    if schema is None and data is None:
        raise OptionError("create_collection needs a schema, or data to infer one from")
    if data is not None and frame_kind(data) is None \
            and not isinstance(data, (list, tuple, dict)):
        data = list(data)
    return data


def _columns_of(data: Any) -> dict:
    """{column: values} of the first SAMPLE rows (a dict is one row)."""
    if isinstance(data, dict):
        data = [data]
    if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__"):
        raise OptionError(f"data to infer a schema from is rows or a table, got "
                          f"{type(data).__name__}")
    rows = list(itertools.islice(data, SAMPLE)) if not isinstance(data, (list, tuple)) \
        else data[:SAMPLE]
    if not rows:
        raise FieldTypeError("no rows to infer a schema from (give a schema, or data)")
    for r in rows:
        if not isinstance(r, dict):
            raise FieldTypeError(f"a row is a dict of field -> value, got "
                                 f"{type(r).__name__}")
    names = list(dict.fromkeys(k for r in rows for k in r))
    return {n: [r.get(n) for r in rows] for n in names}


def _kind(values) -> str:
    if isinstance(values, np.ndarray):
        if values.ndim == 2:
            return f"vector({values.shape[1]})"
        k = values.dtype.kind
        if k == "b":
            return "bool"
        if k in "iu":
            return "int"
        if k == "f":
            return "float"
        if k == "M":
            return "timestamp"
        values = values.tolist()
    present = [v for v in values if v is not None]
    if not present:
        return "text"
    types = {_scalar_kind(v) for v in present}
    if len(types) == 1:
        kind, = types
        if kind == "list":
            return _list_kind(present)
        return kind
    if types == {"int", "float"}:
        return "float"
    return "json"


def _scalar_kind(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    if isinstance(v, str):
        return "text"
    if isinstance(v, (bytes, bytearray)):
        return "bytes"
    if isinstance(v, (_dt.datetime, np.datetime64)):
        return "timestamp"
    if isinstance(v, (list, tuple, np.ndarray)):
        return "list"
    return "json"


def _list_kind(values: list) -> str:
    """vector(dim) when every value is an equal-length list of numbers, else json."""
    try:
        block = np.asarray(values)
    except ValueError:                        # ragged
        return "json"
    if block.ndim == 2 and block.shape[1] and block.dtype.kind in "iuf":
        return f"vector({block.shape[1]})"
    return "json"


def _width(values, name: str) -> int:
    for v in values:
        if isinstance(v, (list, tuple, np.ndarray)):
            return len(v)
    raise FieldTypeError(f"vector column {name!r}: no row holds a list of numbers")
