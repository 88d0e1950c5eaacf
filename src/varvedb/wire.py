"""The server's JSON form of values, results and errors, shared by the server
(varvedb.server) and its clients (varvedb.client), so both read and write one form.

Vectors travel as arrays of numbers, sparse vectors as pgvector's text
('{1:1.5}/5', which a write takes back), bytes as base64 strings (msgspec's JSON
form of bytes, which a bytes field's write takes back), timestamps as RFC 3339
strings, errors as {"error": {"type", "message", "sqlstate", "position"}}; a client
turns them back into numpy arrays, bytes, aware datetimes and the same VarveError
subclass. A float
that is NaN or infinite travels as the bare token NaN, Infinity or -Infinity
(as Python's json module writes and reads them; strict JSON has no form for
it, and msgspec alone writes null, which would store or serve NULL instead).
"""
from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from . import errors as E
from .bytea import bytea_text
from .sparse import SparseVector


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Sequence):       # results.Hits: a sequence of Hit, built on use
        return list(obj)
    if isinstance(obj, SparseVector):
        return str(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


# the same values as msgpack (a batch's answer a client asks for in binary)
encode_msgpack = msgspec.msgpack.Encoder(enc_hook=_enc_hook).encode


class _NonFinite(float):
    """A NaN or infinity marked for the JSON encoder: msgspec writes an exact
    float itself (a non-finite one as null), a subclass it hands to the hook."""
    __slots__ = ()


def _json_hook(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):          # the common case first: a vector
        return obj.tolist()
    if isinstance(obj, (float, np.floating)) and not math.isfinite(obj):
        return msgspec.Raw(b"NaN" if obj != obj else b"Infinity" if obj > 0 else b"-Infinity")
    return _enc_hook(obj)


_json_encode = msgspec.json.Encoder(enc_hook=_json_hook).encode


def encode(obj: Any) -> bytes:
    """obj -> JSON bytes (numpy, datetimes, Structs, dataclasses), a non-finite
    float as NaN, Infinity or -Infinity. msgspec writes a plain float that is
    one as null, so an answer holding a null is checked for them (in C and
    numpy), and only where one may be, walked and marked."""
    out = _json_encode(obj)
    if b"null" not in out:
        return out
    found = _scan(obj)
    if found is False or found is None and not _holds_nonfinite(obj):
        return out
    return _json_encode(_marked(obj))


def _scan(obj: Any) -> bool | None:
    """Does `obj` hold a non-finite float: True (in an array), False, or None (a
    plain float may)? Its arrays are checked as one block; its other floats in
    its msgpack form, where msgspec writes each as 0xcb and 8 big-endian bytes:
    one whose exponent is all ones is NaN or infinite. In UTF-8 text 0xcb is
    never followed by 0x7f or 0xff, so a match elsewhere is only an integer's
    or a float's bytes (rare: then _holds_nonfinite looks for sure)."""
    blocks = []

    def hook(o):
        if isinstance(o, np.ndarray):
            if o.dtype.kind == "f":
                blocks.append(o.ravel())
            return 0
        return _enc_hook(o)
    packed = msgspec.msgpack.encode(obj, enc_hook=hook)
    if blocks and not np.isfinite(np.concatenate(blocks)).all():
        return True
    for lead in (b"\xcb\x7f", b"\xcb\xff"):     # found in C; a match is rare
        at = packed.find(lead)
        while at >= 0:
            if at + 2 < len(packed) and packed[at + 2] >= 0xf0:
                return None
            at = packed.find(lead, at + 1)
    return False


_LEAVES = frozenset({str, int, bool, type(None), bytes, np.ndarray})


def _holds_nonfinite(obj: Any) -> bool:
    """Does `obj` hold a non-finite plain float (its arrays _scan checked)?"""
    todo = [obj]
    while todo:
        v = todo.pop()
        t = type(v)
        if t is float:
            if v - v != 0:                    # NaN - NaN and inf - inf are NaN
                return True
        elif t in _LEAVES:
            continue
        elif t is dict:
            todo.extend(v.values())
        elif t is list or t is tuple:
            todo.extend(v)
        elif isinstance(v, msgspec.Struct):
            todo.extend(msgspec.structs.astuple(v))
        elif isinstance(v, Sequence) and not isinstance(v, (str, bytes, bytearray)):
            todo.extend(v)                    # results.Hits
    return False


def _marked(v: Any) -> Any:
    """v as msgspec encodes it, each non-finite float a _NonFinite."""
    if type(v) is float:
        return v if math.isfinite(v) else _NonFinite(v)
    if isinstance(v, dict):
        return {k: _marked(x) for k, x in v.items()}
    if isinstance(v, msgspec.Struct):
        return _marked(msgspec.structs.asdict(v))
    if isinstance(v, np.ndarray):
        return _marked(v.tolist())
    if isinstance(v, Sequence) and not isinstance(v, (str, bytes, bytearray)):
        return [_marked(x) for x in v]      # lists, tuples, results.Hits
    return v


_NONFINITE_TOKEN = re.compile(rb"NaN|Infinity")
_PLAIN = msgspec.json.Decoder()


def _finite(text: str) -> float:
    v = float(text)
    if math.isinf(v):     # 1e400: out of range, as msgspec reads it
        raise ValueError(f"number out of range: {text}")
    return v


def loads(body: bytes, decoder: msgspec.json.Decoder | None = None) -> Any:
    """JSON bytes -> Python values (as `decoder`'s type, if given), NaN, Infinity
    and -Infinity read as floats; msgspec.DecodeError if malformed."""
    try:
        return (decoder or _PLAIN).decode(body)
    except msgspec.DecodeError as e:
        if not _NONFINITE_TOKEN.search(body):
            raise
        error = e
    try:        # only a body holding such a token comes here: msgspec reads none
        value = json.loads(body, parse_float=_finite)
    except ValueError:
        raise error from None
    return value if decoder is None else msgspec.convert(value, decoder.type)


def decode(body: bytes) -> Any:
    """JSON bytes -> Python values; a malformed body is a RequestError."""
    try:
        return loads(body)
    except msgspec.DecodeError as e:
        raise E.RequestError(f"the body is not valid JSON: {e}") from None


# ---- errors --------------------------------------------------------------------

def error_to_wire(exc: E.VarveError) -> dict:
    """The error body; `type` is the nearest class of varvedb.errors (the one a
    client can raise again), `item` the id a 404 for one document names."""
    cls = next(c for c in type(exc).__mro__ if c.__module__ == E.__name__)
    err = {"type": cls.__name__, "message": str(exc),
           "sqlstate": getattr(exc, "sqlstate", "XX000"),
           "position": getattr(exc, "position", None)}
    if hasattr(exc, "item"):
        err["item"] = exc.item
    return {"error": err}


def _error_classes() -> dict[str, type]:
    return {name: cls for name, cls in vars(E).items()
            if isinstance(cls, type) and issubclass(cls, E.VarveError)}


_CLASSES = _error_classes()


def error_from_wire(body: Any, status: int) -> E.VarveError:
    """The typed error an error body names (ServerError for anything unreadable)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return E.ServerError(f"HTTP {status}: {str(body)[:200]}")
    cls = _CLASSES.get(err.get("type"), E.ServerError)
    message = str(err.get("message", ""))
    exc = cls.__new__(cls)
    # constructors differ (SqlError takes a sqlstate, StorageError an OSError):
    # build the plain exception, then set what the server sent
    if issubclass(cls, OSError):
        OSError.__init__(exc, None, message)
        exc.os_error = None
    else:
        Exception.__init__(exc, message)
    sqlstate = err.get("sqlstate")
    if isinstance(sqlstate, str) and sqlstate != cls.sqlstate:
        exc.sqlstate = sqlstate
    if issubclass(cls, (E.SqlError, E.QuerySyntaxError)) or err.get("position") is not None:
        exc.position = err.get("position")
    return exc


# ---- values: the client's way back to the embedded API's types --------------------

def parse_timestamp(v: str) -> _dt.datetime:
    d = _dt.datetime.fromisoformat(v)
    return d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)


# what a vector of each dtype reads back as (f32 and f16: float32)
_VECTOR_READ_TYPES = {"int8": np.int8, "bit": np.bool_}


def vector_read_type(dtype: str | None) -> type:
    """The numpy type the embedded API reads a vector of `dtype` back as."""
    return _VECTOR_READ_TYPES.get(dtype, np.float32)


def value_from_wire(kind: str | None, v: Any, dtype: str | None = None) -> Any:
    """A value as the embedded API returns it, from its JSON form, by its kind (a
    field's, or an SQL column's) and a vector field's dtype: vectors as float32
    (f16 fields too), int8 (a list of ints), or bool (bit: a list of 0/1 or
    booleans), timestamps as aware datetimes, the rest as JSON gives them."""
    if v is None:
        return None
    if kind == "vector":
        return np.asarray(v, vector_read_type(dtype))
    if kind == "timestamp" and isinstance(v, str):
        return parse_timestamp(v)
    if kind == "bytes" and isinstance(v, str):
        return base64.b64decode(v)
    return v


def params_to_wire(params):
    """A request's $n parameters (a filter's, an SQL statement's) for JSON: a bytes
    one as bytea's text ('\\x00ff'), which a filter or a statement reads as bytes
    where it meets a bytes field or a bytea, as PostgreSQL reads an untyped
    parameter (JSON's base64 form of bytes would be read as text). Anything but a
    list, tuple or dict (psycopg's %(name)s) is left to the request's checks."""
    def one(v):
        return bytea_text(bytes(v)) if isinstance(v, (bytes, bytearray, memoryview)) else v
    if isinstance(params, dict):
        return {k: one(v) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return [one(v) for v in params]
    return params


def bytes_from_wire(schema, docs: list) -> None:
    """The bytes fields of JSON documents (dicts) as bytes, in place: their base64
    strings decoded (FieldTypeError for one that is not base64; any other value is
    left to the schema's checks)."""
    names = [n for n, f in schema.fields.items() if f.kind == "bytes"]
    for d in docs if names else ():
        for n in names if type(d) is dict else ():
            v = d.get(n)
            if isinstance(v, str):
                try:
                    d[n] = base64.b64decode(v, validate=True)
                except binascii.Error:
                    raise E.FieldTypeError(f"field {n!r} is bytes: over HTTP a base64 "
                                           f"string, got {v[:40]!r}") from None
