"""Sparse vectors (pgvector's sparsevec): the value, its text form, its stored
form, and a block of many for SQL's column-at-a-time evaluation.

A value is a dimension and its non-zero elements: indices (0-based, sorted,
no duplicates) and float32 values. Its text form is pgvector's, 1-based:
`{1:1.5,3:2}/5`. A field of kind "sparsevec" stores each row as one bytes
value (a json-like column: sparse rows have no fixed width for an arena):
little-endian int32 dim, int32 indices[nnz], float32 values[nnz] — exact,
4 + 8 * nnz bytes.

`SparseBlock` holds n values over shared index and value arrays, each row a
(start, count) into them, so taking rows, broadcasting one query value and
reading a column of stored bytes copy nothing per row; the distance kernels
(kernels/sparse.py) merge each pair of sorted index lists.
"""
from __future__ import annotations

import math
import re

import numpy as np

from .errors import SqlError

MAX_DIM = 1_000_000_000        # pgvector's SPARSEVEC_MAX_DIM
MAX_NNZ = 16_000               # pgvector's SPARSEVEC_MAX_NNZ
_F32_MAX = float(np.finfo(np.float32).max)


class SparseVector:
    """A sparse vector of `dim` dimensions: `indices` (int32, 0-based, ascending)
    and their non-zero `values` (float32).

    SparseVector({0: 1.5, 2: 2.0}, 5), SparseVector([1.5, 0, 2, 0, 0]) (a dense
    list or array), SparseVector("{1:1.5,3:2}/5") (pgvector's text form), or a
    pgvector-python SparseVector."""
    __slots__ = ("dim", "indices", "values")

    def __init__(self, value, dim: int | None = None):
        if isinstance(value, SparseVector):
            d, idx, vals = value.dim, value.indices, value.values
        elif isinstance(value, str):
            d, idx, vals = _parse(value)
        elif isinstance(value, dict):
            if dim is None:
                raise SqlError("22023", "a sparse vector from a dict needs its dimension")
            keys = sorted(value)
            d, idx = dim, np.array(keys, np.int64)
            vals = np.array([value[k] for k in keys], np.float32)
        elif callable(getattr(value, "dimensions", None)):     # pgvector-python's
            d, idx = value.dimensions(), np.asarray(value.indices(), np.int64)
            vals = np.asarray(value.values(), np.float32)
        else:
            dense = np.asarray(value, np.float32)
            if dense.ndim != 1:
                raise SqlError("22023", f"a sparse vector from a dense one takes one "
                                        f"dimension, got shape {dense.shape}")
            d, idx = len(dense), np.flatnonzero(dense)
            vals = dense[idx]
        if dim is not None and dim != d:
            raise SqlError("22000", f"expected {dim} dimensions, not {d}")
        self.dim, self.indices, self.values = _checked(d, idx, vals)

    @classmethod
    def checked(cls, dim: int, indices, values) -> "SparseVector":
        """A value from its parts (a binary parameter's), checked as pgvector checks them."""
        return cls._of(*_checked(dim, indices, values))

    @classmethod
    def _of(cls, dim: int, indices: np.ndarray, values: np.ndarray) -> "SparseVector":
        """A value from parts already checked (a stored row, a block's row)."""
        out = cls.__new__(cls)
        out.dim, out.indices, out.values = dim, indices, values
        return out

    def to_blob(self) -> bytes:
        """The stored form: <i4 dim, <i4 indices[nnz], <f4 values[nnz]."""
        return (np.int32(self.dim).astype("<i4").tobytes() + self.indices.astype("<i4").tobytes()
                + self.values.astype("<f4").tobytes())

    @classmethod
    def from_blob(cls, blob: bytes) -> "SparseVector":
        words = np.frombuffer(blob, "<i4")
        nnz = (len(words) - 1) // 2
        return cls._of(int(words[0]), words[1:1 + nnz].astype(np.int32),
                       words[1 + nnz:].view("<f4").astype(np.float32))

    def to_dense(self) -> np.ndarray:
        out = np.zeros(self.dim, np.float32)
        out[self.indices] = self.values
        return out

    def __eq__(self, other) -> bool:
        if not isinstance(other, SparseVector):
            return NotImplemented
        return self.dim == other.dim and np.array_equal(self.indices, other.indices) \
            and np.array_equal(self.values, other.values)

    __hash__ = None

    def __str__(self) -> str:
        return text(self)

    def __repr__(self) -> str:
        return f"SparseVector('{text(self)}')"


def _checked(dim, idx, vals) -> tuple[int, np.ndarray, np.ndarray]:
    """(dim, indices int32, values float32) of checked parts, zeros dropped (not
    stored, as pgvector's input drops them)."""
    idx, vals = np.asarray(idx, np.int64), np.asarray(vals, np.float32)
    _check(dim, idx, vals)
    keep = vals != 0
    return int(dim), idx[keep].astype(np.int32), vals[keep]


def _check(dim: int, idx: np.ndarray, vals: np.ndarray) -> None:
    """pgvector's checks of a sparsevec's parts (SqlError with its SQLSTATEs)."""
    if dim < 1:
        raise SqlError("22000", "sparsevec must have at least 1 dimension")
    if dim > MAX_DIM:
        raise SqlError("54000", f"sparsevec cannot have more than {MAX_DIM} dimensions")
    if len(idx) != len(vals):
        raise SqlError("22000", "sparsevec has as many indices as values")
    if len(idx) > MAX_NNZ:
        raise SqlError("54000", f"sparsevec cannot have more than {MAX_NNZ} non-zero elements")
    if len(idx) and (idx.min() < 0 or idx.max() >= dim):
        raise SqlError("22000", "sparsevec index out of bounds")
    steps = np.diff(idx)
    if (steps == 0).any():
        raise SqlError("22000", "sparsevec indices must not contain duplicates")
    if (steps < 0).any():
        raise SqlError("22000", "sparsevec indices must be in ascending order")
    if np.isnan(vals).any():
        raise SqlError("22000", "NaN not allowed in sparsevec")
    if np.isinf(vals).any():
        raise SqlError("22000", "infinite value not allowed in sparsevec")


# ---- the text form ----------------------------------------------------------------

_ELEMENT = re.compile(r"\s*([+-]?\d+)\s*:\s*([^,}\s]+)\s*")
_DIM = re.compile(r"\s*/\s*([+-]?\d+)\s*")


def _parse(s: str) -> tuple[int, np.ndarray, np.ndarray]:
    """pgvector's sparsevec input: `{i:v,...}/dim`, 1-based indices in any order
    (sorted here), zeros dropped; its errors and SQLSTATEs."""
    def bad():
        return SqlError("22P02", f'invalid input syntax for type sparsevec: "{s}"')
    body = s.lstrip()
    if not body.startswith("{"):
        raise bad()
    close = body.find("}")
    if close < 0:
        raise bad()
    inner, tail = body[1:close], body[close + 1:]
    idx, vals = [], []
    if inner.strip():
        for part in inner.split(","):
            m = _ELEMENT.fullmatch(part)
            if m is None:
                raise bad()
            idx.append(int(m.group(1)))
            vals.append(_element(m.group(2), bad))
    if not tail.strip():
        raise bad()
    m = _DIM.fullmatch(tail)
    if m is None:
        raise bad()
    dim = int(m.group(1))
    if dim < 1:
        raise SqlError("22000", "sparsevec must have at least 1 dimension")
    if dim > MAX_DIM:
        raise SqlError("54000", f"sparsevec cannot have more than {MAX_DIM} dimensions")
    ix = np.array(idx, np.int64) - 1
    if len(ix) and (ix.min() < 0 or ix.max() >= dim):
        raise SqlError("22000", "sparsevec index out of bounds")
    order = np.argsort(ix, kind="stable")
    return dim, ix[order], np.array(vals, np.float32)[order]


def _element(token: str, bad) -> float:
    try:
        x = float(token)
    except ValueError:
        raise bad() from None
    if math.isfinite(x) and abs(x) > _F32_MAX:
        raise SqlError("22003", f'"{token}" is out of range for type sparsevec')
    if math.isnan(x):
        raise SqlError("22000", "NaN not allowed in sparsevec")
    if math.isinf(x):
        raise SqlError("22000", "infinite value not allowed in sparsevec")
    return x


def text(v: SparseVector) -> str:
    """pgvector's output: {1:1.5,3:2}/5 (1-based; values as float4 prints them)."""
    parts = [f"{i + 1}:{_float4_text(x)}" for i, x in zip(v.indices.tolist(), v.values)]
    return "{" + ",".join(parts) + f"}}/{v.dim}"


def _float4_text(x: np.float32) -> str:
    """PostgreSQL's float4 output of a finite value: its shortest round-trip digits,
    in exponent form where the exponent is below -4 or at least 6 (1e-05,
    1.2345679e+08, 0.0001). (query/literals.float_text writes the same; the
    values layer cannot import it.)"""
    sci = np.format_float_scientific(x, unique=True, trim="-", exp_digits=2)
    exp = int(sci[sci.index("e") + 1:])
    return np.format_float_positional(x, unique=True, trim="-") if -4 <= exp < 6 else sci


# ---- a block of many --------------------------------------------------------------

class SparseBlock:
    """n sparse vectors: row r is dims[r] dimensions, its indices
    idx[istart[r]:istart[r] + count[r]] and values vals[vstart[r]:... + count[r]]."""
    __slots__ = ("dims", "istart", "vstart", "count", "idx", "vals")

    def __init__(self, dims, istart, vstart, count, idx, vals):
        self.dims, self.istart, self.vstart, self.count = dims, istart, vstart, count
        self.idx, self.vals = idx, vals

    def __len__(self) -> int:
        return len(self.dims)

    def __getitem__(self, rows) -> "SparseBlock":
        return SparseBlock(self.dims[rows], self.istart[rows], self.vstart[rows],
                           self.count[rows], self.idx, self.vals)

    @staticmethod
    def of_values(values: list) -> "SparseBlock":
        """A block of SparseVectors (None: a NULL row, of no dimension)."""
        blobs = [_NULL_BLOB if v is None else v.to_blob() for v in values]
        return SparseBlock.of_blobs(blobs)

    @staticmethod
    def of_blobs(blobs: list) -> "SparseBlock":
        """A block over stored rows (bytes; None: a NULL row), one buffer for all."""
        words, sizes = pack(blobs)
        return SparseBlock.over(words, np.cumsum(sizes) - sizes, sizes)

    @staticmethod
    def over(words: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> "SparseBlock":
        """The rows whose stored forms start at `starts` in `words` and take `sizes`
        words each (a NULL row: dim 0, no element)."""
        count = ((sizes - 1) // 2).astype(np.int32)
        dims = words[starts] if len(starts) else np.zeros(0, np.int32)
        return SparseBlock(dims, starts + 1, starts + 1 + count, count, words,
                           words.view(np.float32))

    @staticmethod
    def broadcast(v: SparseVector, n: int) -> "SparseBlock":
        zero = np.zeros(n, np.int64)
        return SparseBlock(np.full(n, v.dim, np.int32), zero, zero,
                           np.full(n, len(v.indices), np.int32), v.indices, v.values)

    @staticmethod
    def concat(blocks: list) -> "SparseBlock":
        """The rows of `blocks` one after another. A block whose arrays hold more than
        its rows' elements (a few rows taken from a stored column) gives only those;
        another (one value broadcast to many rows) keeps its arrays as they are."""
        parts = []
        for b in blocks:
            count = b.count.astype(np.int64)
            if 2 * int(count.sum()) < len(b.idx) + len(b.vals):
                b = b.compact()
            parts.append(b)
        ioff = np.cumsum([0] + [len(b.idx) for b in parts])
        voff = np.cumsum([0] + [len(b.vals) for b in parts])

        def joined(arrays: list, dtype) -> np.ndarray:
            return np.concatenate(arrays).astype(dtype, copy=False) if arrays \
                else np.zeros(0, dtype)
        return SparseBlock(joined([b.dims for b in parts], np.int32),
                           joined([b.istart + o for b, o in zip(parts, ioff)], np.int64),
                           joined([b.vstart + o for b, o in zip(parts, voff)], np.int64),
                           joined([b.count for b in parts], np.int32),
                           joined([b.idx for b in parts], np.int32),
                           joined([b.vals for b in parts], np.float32))

    def compact(self) -> "SparseBlock":
        """The same rows over arrays holding only their own elements, in row order."""
        count = self.count.astype(np.int64)
        starts = np.cumsum(count) - count
        within = np.arange(int(count.sum())) - np.repeat(starts, count)
        row = np.repeat(np.arange(len(self)), count)
        return SparseBlock(self.dims, starts, starts, self.count,
                           self.idx[self.istart[row] + within],
                           self.vals[self.vstart[row] + within])

    def row(self, r: int) -> SparseVector:
        c, i, j = int(self.count[r]), int(self.istart[r]), int(self.vstart[r])
        return SparseVector._of(int(self.dims[r]), self.idx[i:i + c].copy(),
                                self.vals[j:j + c].copy())

    def values(self, nulls: np.ndarray) -> list:
        """Each row as a SparseVector, None where `nulls` says."""
        return [None if nl else self.row(r) for r, nl in enumerate(nulls.tolist())]

    def parts(self) -> tuple:
        """The arrays the kernels take, in their order."""
        return self.dims, self.istart, self.vstart, self.count, self.idx, self.vals


_NULL_BLOB = np.int32(0).astype("<i4").tobytes()        # dim 0, no element


def pack(blobs: list) -> tuple[np.ndarray, np.ndarray]:
    """(words, sizes): stored rows (None: NULL) one after another as int32 words,
    and each row's count of words."""
    blobs = [_NULL_BLOB if b is None else b for b in blobs]
    words = np.frombuffer(b"".join(blobs), "<i4").astype(np.int32, copy=False)
    return words, np.fromiter(map(len, blobs), np.int64, len(blobs)) // 4


def stored_ok(blobs: list, dim: int) -> bool:
    """Are `blobs` (read from a file) stored sparse vectors of `dim` dimensions
    (0: any), each None or bytes in the stored form, its indices ascending and
    in range and its values finite? Checked over all rows at once."""
    if not all(b is None or (type(b) is bytes and len(b) % 8 == 4) for b in blobs):
        return False
    block = SparseBlock.of_blobs(blobs)
    live = np.fromiter((b is not None for b in blobs), bool, len(blobs))
    dims = block.dims[live]
    if ((dims < 1) | (dims > MAX_DIM) | ((dims != dim) if dim else False)).any() \
            or (block.count > MAX_NNZ).any():
        return False
    count = block.count.astype(np.int64)
    row = np.repeat(np.arange(len(blobs)), count)
    flat = block.compact()
    idx, vals = flat.idx, flat.vals
    first = np.zeros(len(idx), bool)        # each row's first element
    first[flat.istart[count > 0]] = True
    rising = first | (idx > np.roll(idx, 1))
    return bool(((idx >= 0) & (idx < block.dims[row]) & rising & np.isfinite(vals)).all())
