"""The text input form of each kind: what a quoted literal, a COPY field or a
string parameter means once the type it meets is known (PostgreSQL's input
functions, for the kinds varvedb stores); and its output twin, `value_text`:
a value as PostgreSQL prints it (psql's cells, CSV, COPY TO STDOUT)."""
from __future__ import annotations

import datetime as _dt
import json
import math
import re
from decimal import Decimal

import numpy as np

from ..errors import SqlError, VarveError
from ..schema import to_micros, vector_input
from ..bytea import bytea_text, parse_bytea
from ..sparse import SparseVector, text as sparse_text
from ..kernels import floatfmt
from . import arrays

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}
_BITS = re.compile(r"^\s*[01]+\s*$")


def parse_input(kind: str, text: str):
    """The value a string stands for in a column of `kind` (PostgreSQL's input
    functions); SqlError 22P02 (or 22007/22008 for times) when it is not one."""
    if not isinstance(text, str):
        return text
    s = text.strip()
    try:
        if kind == "int":
            value = int(s)
            if not -(1 << 63) <= value < (1 << 63):
                raise SqlError("22003", f'value "{s}" is out of range for type bigint')
            return value
        if kind == "float":
            low = s.lower()
            if low in ("nan", "infinity", "-infinity", "inf", "-inf"):
                return float(low.replace("infinity", "inf"))
            return float(s)
        if kind == "bool":
            low = s.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError
        if kind == "text":
            return text
        if kind == "json":      # (NaN and Infinity are not json: PostgreSQL refuses them)
            return json.loads(text, parse_constant=_not_json)
        if kind == "vector":
            return parse_vector(text)
        if kind == "sparsevec":
            return SparseVector(text)
        if kind == "timestamp":
            return parse_timestamp(s)
        if kind == "bytes":
            return parse_bytea(text)
    except SqlError:
        raise
    except (ValueError, OverflowError):
        pass
    raise SqlError("22P02", f'invalid input syntax for type {_PG_NAMES[kind]}: "{text}"')


def _not_json(token: str):
    raise ValueError(token)


_PG_NAMES = {"int": "bigint", "float": "double precision", "bool": "boolean", "text": "text",
             "json": "json", "vector": "vector", "timestamp": "timestamp",
             "sparsevec": "sparsevec", "bytes": "bytea"}


def parse_vector(text: str) -> np.ndarray:
    """pgvector's text form '[1,2,3]' as a float32 array (checked as pgvector's
    input checks it: schema.vector_input); a bit string's form '0101' (PostgreSQL's
    bit(n)) as its bits (bool)."""
    if _BITS.match(text):
        return np.frombuffer(text.strip().encode(), np.uint8) == ord("1")
    try:
        return vector_input(text)
    except VarveError as e:
        raise SqlError(e.sqlstate, str(e)) from None


def parse_timestamp(s: str) -> int:
    """'2026-11-30 12:00:00+00' (ISO 8601; no zone: UTC) as microseconds."""
    t = s.replace(" ", "T", 1) if re.match(r"^\d{4}-\d\d-\d\d \d", s) else s
    if re.search(r"[+-]\d\d$", t):
        t += ":00"
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise SqlError("22007", f'invalid input syntax for type timestamp: "{s}"') from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return to_micros("timestamp", d)


# ---- the output twin: each value in PostgreSQL's (and pgvector's) text form ----------

def float_text(x: float, digits: int = 15) -> str:
    """PostgreSQL's shortest exact output of a float8 (digits=15) or float4
    (digits=6): the shortest digits that read back the same value, in
    exponent form when the decimal exponent is below -4 or at least `digits`
    (1e+15, 1e-05, 2.5, 1)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    shortest = repr(float(x)) if digits == 15 else str(np.float32(x))
    sign, ds, exp = Decimal(shortest).as_tuple()
    minus = "-" if sign else ""
    e10 = len(ds) + exp - 1                # the exponent of the leading digit
    ds = "".join(map(str, ds)).rstrip("0")
    if not ds:
        return minus + "0"
    if e10 < -4 or e10 >= digits:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{minus}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    if e10 < 0:
        return f"{minus}0.{'0' * (-e10 - 1)}{ds}"
    whole, frac = ds[:e10 + 1], ds[e10 + 1:]
    return f"{minus}{whole.ljust(e10 + 1, '0')}{'.' + frac if frac else ''}"


def vector_text(v: np.ndarray) -> str:
    """pgvector's text form: [1,2.5,3]; halfvec elements print as float4, like pgvector.
    The kernel writes the elements in fixed notation; the rest (exponent form,
    non-finite) come from float_text."""
    a = np.ascontiguousarray(v, np.float32)
    out = np.empty(floatfmt.MAX_CHARS * len(a) + 2, np.uint8)
    left = np.empty(len(a), np.int64)
    n, n_left = floatfmt.vector_text(a, out, left)
    text = out[:n].tobytes().decode("ascii")
    if not n_left:
        return text
    parts = text.split("\0")
    rest = [float_text(float(x), 6) for x in a[left[:n_left]].tolist()] + [""]
    return "".join(p + r for p, r in zip(parts, rest))


def bit_text(v: np.ndarray) -> str:
    """A bit string as PostgreSQL prints it: 0101."""
    return (v.astype(np.uint8) + ord("0")).tobytes().decode("ascii")


def timestamp_text(d: _dt.datetime) -> str:
    """timestamptz as PostgreSQL prints it with TimeZone UTC: 2026-12-01 12:00:00.25+00."""
    if d.tzinfo is not None:
        d = d.astimezone(_dt.timezone.utc)
    s = (f"{d.year:04d}-{d.month:02d}-{d.day:02d} "
         f"{d.hour:02d}:{d.minute:02d}:{d.second:02d}")
    if d.microsecond:
        s += f".{d.microsecond:06d}".rstrip("0")
    return s + "+00"


def timestamp_json(d: _dt.datetime) -> str:
    """timestamptz as PostgreSQL's to_json writes it (ISO 8601, TimeZone UTC):
    2026-12-01T12:00:00.25+00:00."""
    return timestamp_text(d).replace(" ", "T", 1) + ":00"


def json_text(v) -> str:
    """A JSON value as jsonb's text: a float's number written out as numeric's, never in
    exponent form (0.0000001, 100000000000000000000, as PostgreSQL's jsonb keeps a
    number), NaN and Infinity as json.dumps writes them."""
    if not _has_float(v):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, float):
        return format(Decimal(repr(v)), "f") if math.isfinite(v) else json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {json_text(x)}"
                               for k, x in v.items()) + "}"
    return "[" + ", ".join(json_text(x) for x in v) + "]"


def _has_float(v) -> bool:
    if isinstance(v, float):
        return True
    if isinstance(v, dict):
        return any(_has_float(x) for x in v.values())
    return isinstance(v, list) and any(_has_float(x) for x in v)


def value_text(v, kind: str | None = None) -> str | None:
    """A value as psql shows it; None for NULL. `kind` is the column's kind when
    known: a json column's string prints as JSON ("s"), a text one's as is."""
    if v is None:
        return None
    if kind == "json":
        return json_text(v)
    if kind == "array":
        return arrays.text(v, value_text)
    if isinstance(v, (bool, np.bool_)):
        return "t" if v else "f"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, np.floating):
        return float_text(float(v), 6 if v.dtype.itemsize <= 4 else 15)
    if isinstance(v, float):
        return float_text(v)
    if isinstance(v, str):
        return v
    if isinstance(v, np.ndarray):
        return bit_text(v) if v.dtype == np.bool_ else vector_text(v)
    if isinstance(v, _dt.datetime):
        return timestamp_text(v)
    if isinstance(v, (dict, list)):
        return json_text(v)
    if isinstance(v, SparseVector):
        return sparse_text(v)
    if isinstance(v, bytes):
        return bytea_text(v)
    return str(v)
