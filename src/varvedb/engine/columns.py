"""Columns: append-only numpy arrays, one per field, addressed by row number.

Why this layout: a filter over a column is one vectorised numpy expression,
and a vector search is one BLAS call over a contiguous arena. Every column
only grows at its end (old row versions are never rewritten), which is what
lets readers run without locks: a reader takes `view()` — an array and a
length — and later appends either write past that length or move to a new,
larger array that the reader never sees. A large column is allocated at the
start of a much larger reserved (not yet backed) mapping and grows within it
without moving, so a bulk load neither copies its data on growth nor holds
two copies at once.

Arrays loaded from a checkpoint are read-only views over the mapped file;
the first append copies them (copy-on-write), so open costs no copy.

Representations: int/timestamp int64, float float64, bool bool; text as int32
codes into a per-column dictionary (-1 = null); json (and bytes) as a list of Python
values, plus a dictionary-coded column per json path a filter has read;
sparsevec as a json column of bytes (sparse.py's stored form) plus one buffer
of every read row's words; vectors as an (n, dim) f32/f16 arena with an f32
norm per row.
"""
from __future__ import annotations

import math
import mmap
import sys
import threading

import numpy as np

from ..errors import VectorRangeError
from ..float_order import compare
from ..schema import VECTOR_DTYPES, Field, half_overflow, vector_values
from ..sparse import SparseBlock, pack
from ..storage.memory import line_aligned

NULL_CODE = -1
RESERVE_FROM = 16 << 20   # bytes: a column this large grows inside reserved address space
RESERVE_FACTOR = 16       # ... reserved this many times its size at a time,
RESERVE_ROOM = 8 << 30    # ... and at least this much (address space is cheap, moving is not)
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)


class Growable:
    """An append-only array with spare capacity at its end."""

    def __init__(self, dtype, tail: tuple = (), data: np.ndarray | None = None):
        self.dtype = np.dtype(dtype)
        self.tail = tail
        self._set_data(np.empty((0,) + tail, dtype=self.dtype) if data is None else data)
        self.n = 0 if data is None else len(data)
        self._frozen = (None, None)   # (data, a read-only view of it)
        self._room = None             # the reserved mapping `data` starts, if any

    def _set_data(self, data: np.ndarray) -> None:
        # the rows `data` holds without a copy: 0 while it is read-only (mapped from
        # a checkpoint), so an append copies it first (kept, not asked of the flags
        # at every one-row append)
        self.data = data
        self._fits = len(data) if data.flags.writeable else 0

    def view(self) -> np.ndarray:
        return self.data[:self.n]

    def head(self, n: int) -> np.ndarray:
        """Rows [0, n) as a view (a reader's n: never past what was appended)."""
        return self.data[:n]

    def frozen(self, n: int) -> np.ndarray:
        """A read-only view of rows [0, n). Arrays mapped from the file are read-only
        and fresh ones are not; numba compiles a kernel once per flavour, so the
        kernels are handed one flavour (the view is kept: making one costs a microsecond)."""
        data, ro = self._frozen
        if data is not self.data:
            data = self.data
            ro = data.view()
            ro.flags.writeable = False
            self._frozen = (data, ro)
        return ro[:n]

    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        if need <= len(self.data) and self.data.flags.writeable:
            return
        cap = max(need, 2 * len(self.data), 64)
        room = self._room
        if room is not None and self.data.flags.writeable \
                and cap * self._row_bytes() <= len(room):
            # a longer view of the same reserved pages: nothing moves or is copied
            self._set_data(self._view(room, cap))
            return
        new, self._room = self._allocate(cap)
        new[:self.n] = self.data[:self.n]
        self._set_data(new)  # readers keep the old array; it stays valid for them

    def _row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.tail, dtype=np.int64))

    def _view(self, room: mmap.mmap, cap: int) -> np.ndarray:
        return np.frombuffer(room, self.dtype, cap * (self._row_bytes() // self.dtype.itemsize)
                             ).reshape((cap,) + self.tail)

    def _allocate(self, cap: int) -> tuple[np.ndarray, mmap.mmap | None]:
        """cap rows; a large column gets them at the start of a reserved mapping
        RESERVE_FACTOR times larger (RESERVE_ROOM at least), so it then grows in
        place instead of by doubling copies (which also held old and new arrays
        at once). The reservation is address space only: pages are backed when
        first written."""
        nbytes = cap * self._row_bytes()
        if nbytes < RESERVE_FROM:
            return line_aligned((cap,) + self.tail, self.dtype), None   # rows on lines
        try:
            room = mmap.mmap(-1, max(nbytes * RESERVE_FACTOR, RESERVE_ROOM),
                             flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
        except OSError:   # strict overcommit refuses the reservation: plain memory then
            return np.empty((cap,) + self.tail, dtype=self.dtype), None
        if hasattr(mmap, "MADV_HUGEPAGE"):
            room.madvise(mmap.MADV_HUGEPAGE)   # as numpy asks for its large arrays
        return self._view(room, cap), room

    def append(self, block) -> None:
        if type(block) is not np.ndarray or (block.dtype is not self.dtype
                                             and block.dtype != self.dtype):
            block = np.asarray(block, dtype=self.dtype)
        n, k = self.n, len(block)
        if n + k > self._fits:
            self._reserve(k)
        if k == 1:             # a one-row commit's: an item set costs half a slice's
            self.data[n] = block[0]
        else:
            self.data[n:n + k] = block
        self.n = n + k

    def fill(self, value, count: int) -> None:
        """Append `count` rows holding `value` (no block is made for them)."""
        n = self.n
        if n + count > self._fits:
            self._reserve(count)
        if count == 1:
            self.data[n] = value
        else:
            self.data[n:n + count] = value
        self.n = n + count

    def set(self, idx: np.ndarray, values) -> None:
        """Overwrite existing rows (used only for `died`)."""
        self._reserve(0)
        self.data[idx] = values

    def truncate(self, n: int) -> None:
        assert n <= self.n
        self.n = n


class ScalarColumn:
    """int, float, bool or timestamp values with a null mask."""

    def __init__(self, field: Field):
        self.field = field
        dtype = {"int": np.int64, "timestamp": np.int64, "float": np.float64,
                 "bool": np.bool_}[field.kind]
        self.values = Growable(dtype)
        self.nulls = Growable(np.bool_)

    def append(self, values, nulls) -> None:
        self.values.append(values)
        self.nulls.append(nulls)

    def append_nulls(self, n: int) -> None:
        self.values.fill(0, n)
        self.nulls.fill(True, n)

    def take(self, rows: np.ndarray):
        return self.values.data[rows], self.nulls.data[rows]

    def value(self, row: int):
        """One row's value as a Python scalar (timestamps as int microseconds), or None."""
        return None if self.nulls.data.item(row) else self.values.data.item(row)

    def head(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, nulls) of rows [0, n), as views: a filter compares them directly."""
        return self.values.data[:n], self.nulls.data[:n]

    def keys(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(sort keys, nulls) of rows [lo, hi), for a scalar index."""
        return self.values.data[lo:hi], self.nulls.data[lo:hi]

    def null_mask(self, n: int) -> np.ndarray:
        """A fresh mask of the null rows among [0, n)."""
        return self.nulls.data[:n].copy()

    def truncate(self, n: int) -> None:
        self.values.truncate(n)
        self.nulls.truncate(n)

    def to_arrays(self) -> dict:
        return {"values": self.values.view(), "nulls": self.nulls.view()}

    def load(self, arrays: dict, meta) -> None:
        self.values = Growable(self.values.dtype, data=arrays["values"])
        self.nulls = Growable(np.bool_, data=arrays["nulls"])


class TextColumn:
    """Strings as int32 codes into a dictionary; equality filters compare codes."""

    def __init__(self, field: Field | None = None):
        self.field = field
        self.codes = Growable(np.int32)
        self.words: list[str] = []
        self.lookup: dict[str, int] = {}

    def encode(self, values: list) -> np.ndarray:
        lookup, words = self.lookup, self.words
        out = np.empty(len(values), dtype=np.int32)
        for i, v in enumerate(values):
            if v is None:
                out[i] = NULL_CODE
                continue
            c = lookup.get(v)
            if c is None:
                c = lookup[v] = len(words)
                words.append(v)
            out[i] = c
        return out

    def append(self, values: list, nulls=None) -> None:
        self.codes.append(self.encode(values))

    def append_nulls(self, n: int) -> None:
        self.codes.fill(NULL_CODE, n)

    def code_of(self, value: str) -> int:
        return self.lookup.get(value, -2)  # -2 matches no row

    def take(self, rows: np.ndarray) -> tuple[list, np.ndarray]:
        codes = self.codes.data[rows]
        words = self.words
        return [None if c < 0 else words[c] for c in codes.tolist()], codes < 0

    def value(self, row: int) -> str | None:
        c = self.codes.data.item(row)
        return None if c < 0 else self.words[c]

    def head(self, n: int) -> np.ndarray:
        """The codes of rows [0, n), as a view (NULL_CODE for null)."""
        return self.codes.data[:n]

    def coded(self, n: int) -> tuple[np.ndarray, list]:
        """(a copy of the codes of rows [0, n), the words): codes first, words after,
        so every code has its word even if the writer rolls back and reuses rows
        past this n meanwhile."""
        codes = self.codes.data[:n].copy()
        return codes, list(self.words)

    def rows_equal(self, value: str, n: int) -> np.ndarray:
        """Rows among [0, n) holding exactly `value`."""
        return np.flatnonzero(self.codes.data[:n] == self.code_of(value))

    def keys(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(codes, nulls) of rows [lo, hi): a text index sorts by dictionary code."""
        codes = self.codes.data[lo:hi]
        return codes, codes < 0

    def null_mask(self, n: int) -> np.ndarray:
        return self.codes.data[:n] < 0

    def truncate(self, n: int) -> None:
        self.codes.truncate(n)

    def to_arrays(self) -> dict:
        return {"codes": self.codes.view()}

    def meta(self) -> list:
        return self.words

    def load(self, arrays: dict, meta) -> None:
        self.codes = Growable(np.int32, data=arrays["codes"])
        self.words = list(meta)
        self.lookup = {w: i for i, w in enumerate(self.words)}


class JsonColumn:
    """Arbitrary JSON-like values, kept as Python objects (None = null).

    Like a Growable, the list never shrinks: a rollback only lowers `n`, and
    later appends overwrite the slots past it. A reader that took a larger
    table length before the rollback can still slice `items[:its n]`."""

    def __init__(self, field: Field):
        self.field = field
        self.items: list = []
        self.n = 0
        self._paths: dict = {}           # path key -> _PathCodes
        self._paths_lock = threading.Lock()

    def path_codes(self, key, n: int, extract) -> tuple[np.ndarray, list]:
        """(codes for rows [0, n), distinct values): the value `extract(item)` of
        each row as an int32 code into the values (-1 = None).

        A json path filter evaluates its predicate once per distinct value and
        maps it over the codes, like a text column. Each row is extracted once
        and kept (a row's item never changes) — but only rows below `self.n`:
        rows past it may yet be rolled back and written anew."""
        with self._paths_lock:
            pc = self._paths.get(key)
            if pc is None:
                pc = self._paths[key] = _PathCodes()
            upto = min(n, self.n)
            if pc.codes.n < upto:
                pc.codes.append(pc.encode([extract(v) for v in self.items[pc.codes.n:upto]]))
            codes = pc.codes.data[:upto].copy()
            if upto < n:       # uncommitted rows a reader sees but may not keep
                codes = np.concatenate([codes, pc.encode([extract(v)
                                                          for v in self.items[upto:n]])])
            return codes, list(pc.values)

    def append(self, values: list, nulls=None) -> None:
        self.items[self.n:self.n + len(values)] = values
        self.n += len(values)

    def append_nulls(self, n: int) -> None:
        self.append([None] * n)

    def take(self, rows: np.ndarray) -> tuple[list, np.ndarray]:
        items = self.items
        vals = [items[r] for r in rows.tolist()]
        return vals, np.fromiter((v is None for v in vals), bool, len(vals))

    def value(self, row: int):
        return self.items[row]

    def null_mask(self, n: int) -> np.ndarray:
        return np.fromiter((v is None for v in self.items[:n]), bool, n)

    def truncate(self, n: int) -> None:
        with self._paths_lock:
            self.n = n
            for pc in self._paths.values():
                pc.codes.truncate(min(pc.codes.n, n))

    def to_arrays(self) -> dict:
        return {}

    def meta(self) -> list:
        return self.items[:self.n]

    def load(self, arrays: dict, meta) -> None:
        self.items = list(meta)
        self.n = len(self.items)
        self._paths = {}


class SparseColumn(JsonColumn):
    """sparsevec rows: their stored bytes kept as a json column keeps its values
    (what writes, checkpoints and merges read), and for SQL's kernels every
    row's words in one growing buffer, each row a start and a size into it: a
    scan takes its rows' starts (sparse.SparseBlock), not a Python object a row.
    Rows enter the buffer once, when first read; a rollback cuts them off with
    the rest of the column."""

    def __init__(self, field: Field):
        super().__init__(field)
        self._start_buffer()

    def _start_buffer(self) -> None:
        self._words = Growable(np.int32)
        self._starts = Growable(np.int64)
        self._sizes = Growable(np.int64)
        self._buffer_lock = threading.Lock()

    def block(self, rows: np.ndarray) -> SparseBlock:
        """`rows` as a SparseBlock (a NULL row has dim 0)."""
        with self._buffer_lock:
            upto, done = self.n, self._starts.n
            if done < upto:
                words, sizes = pack(self.items[done:upto])
                self._starts.append(self._words.n + np.cumsum(sizes) - sizes)
                self._sizes.append(sizes)
                self._words.append(words)
            words = self._words.frozen(self._words.n)
            starts, sizes = self._starts.head(upto), self._sizes.head(upto)
        if len(rows) and int(rows.max()) >= upto:   # a reader's rows a rollback cut off
            return SparseBlock.of_blobs([self.items[r] for r in rows.tolist()])
        return SparseBlock.over(words, starts[rows], sizes[rows])

    def truncate(self, n: int) -> None:
        super().truncate(n)
        with self._buffer_lock:
            if self._starts.n > n:
                self._words.truncate(int(self._starts.data[n]))
                self._starts.truncate(n)
                self._sizes.truncate(n)

    def load(self, arrays: dict, meta) -> None:
        super().load(arrays, meta)
        self._start_buffer()


class _PathCodes:
    """The values found at one json path, dictionary-coded: codes and distinct values."""

    def __init__(self):
        self.codes = Growable(np.int32)
        self.values: list = []
        self.lookup: dict = {}

    def encode(self, values: list) -> np.ndarray:
        out = np.empty(len(values), np.int32)
        for i, v in enumerate(values):
            if v is None:
                out[i] = NULL_CODE
                continue
            # keyed by type too: 1, 1.0 and True are equal in Python, not in JSON
            key = (type(v), v if isinstance(v, (str, int, float, bool)) else repr(v))
            c = self.lookup.get(key)
            if c is None:
                c = self.lookup[key] = len(self.values)
                self.values.append(v)
            out[i] = c
        return out


class VectorColumn:
    """The vector arena of one field: contiguous (n, width) rows and their norms.

    Rows are in the stored form of the field's dtype (bit: packed bytes, so
    width = ceil(dim / 8); the norms of a bit arena are never read).

    `extents` records where runs of arena rows already lie in the file
    ([first_row, n_rows, file_offset]); a checkpoint refers to them instead of
    writing the vectors a second time.
    """

    def __init__(self, field: Field):
        self.field = field
        self.arena = Growable(VECTOR_DTYPES[field.dtype], (field.width,))
        self._f32 = self.arena.dtype == np.float32
        self.norms = Growable(np.float32)
        self.nulls = Growable(np.bool_)
        self.extents: list[list[int]] = []

    def append(self, vectors: np.ndarray, nulls: np.ndarray, file_offset: int | None = None):
        first = self.arena.n
        self.arena.append(vectors)
        if self._f32 and len(vectors) == 1 and max(vectors.max(), -vectors.min()) < _NARROW:
            # a one-row commit's norm without a ufunc's set-up: the same f32 dot
            # as norms_of's vecdot, and a square root correctly rounded to f32
            # either way, so the stored norm is the same bits
            row = vectors[0]
            self.norms.fill(math.sqrt(row.dot(row)), 1)
        else:
            self.norms.append(norms_of(vectors))
        self.nulls.append(nulls)
        if file_offset is not None and len(vectors):
            self.extents.append([first, len(vectors), file_offset])

    def append_nulls(self, n: int) -> None:
        self.append(np.zeros((n, self.field.width), self.arena.dtype), np.ones(n, bool))

    def take(self, rows: np.ndarray):
        return self.arena.data[rows], self.nulls.data[rows]

    def value(self, row: int) -> np.ndarray | None:
        """One row's vector in its read form (vector_values: float32, int8 or bool), or None."""
        if self.nulls.data.item(row):
            return None
        return vector_values(self.field, self.arena.data[row:row + 1])[0]

    def frozen(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(arena, norms) of rows [0, n), read-only: what the search kernels take."""
        return self.arena.frozen(n), self.norms.frozen(n)

    def null_mask(self, n: int) -> np.ndarray:
        return self.nulls.data[:n].copy()

    def nulls_head(self, n: int) -> np.ndarray:
        """The null mask of rows [0, n), as a view."""
        return self.nulls.data[:n]

    def truncate(self, n: int) -> None:
        self.arena.truncate(n)
        self.norms.truncate(n)
        self.nulls.truncate(n)
        self.extents = [e for e in self.extents if e[0] + e[1] <= n]

    def covered_by_extents(self) -> bool:
        """Do the recorded file extents hold every arena row, in order?"""
        row = 0
        for first, count, _ in self.extents:
            if first != row:
                return False
            row += count
        return row == self.arena.n

    def to_arrays(self) -> dict:
        return {"norms": self.norms.view(), "nulls": self.nulls.view()}

    def load(self, arrays: dict, meta) -> None:
        self.norms = Growable(np.float32, data=arrays["norms"])
        self.nulls = Growable(np.bool_, data=arrays["nulls"])


# A row whose |elements| are all under this has a float32 |x|^2 under float32's
# largest (dim <= schema.MAX_DIM < 2**16: 2**16 * 2**112 = 2**128): its norm is
# summed in float32; a larger one's in float64 (_wide_norms).
_NARROW = 2.0 ** 56
_F32_MAX = float(np.finfo(np.float32).max)


def norms_of(vectors: np.ndarray) -> np.ndarray:
    """L2 norm of each row, computed in f32 whatever the storage dtype (a row with
    an element past 2**56, in float64: its float32 |x|^2 may overflow, and a norm
    that fits float32 is stored as it is; one past float32's largest is inf)."""
    if not len(vectors):
        return np.zeros(0, np.float32)
    # vecdot: one ufunc call (half einsum's cost for a one-row commit); f32 in, f32 out
    v = vectors if vectors.dtype == np.float32 else vectors.astype(np.float32)
    if max(v.max(), -v.min()) >= _NARROW:
        return _wide_norms(v)
    return np.sqrt(np.vecdot(v, v))


def _wide_norms(v: np.ndarray) -> np.ndarray:
    """norms_of for rows some of which hold an element past _NARROW: those in float64
    (no overflow, no RuntimeWarning), the others as norms_of sums them."""
    wide = np.abs(v).max(axis=1) >= _NARROW
    out = np.empty(len(v), np.float32)
    rest = v[~wide]
    out[~wide] = np.sqrt(np.vecdot(rest, rest))
    w = v[wide].astype(np.float64)
    n = np.sqrt(np.vecdot(w, w))
    out[wide] = np.where(n <= _F32_MAX, n, np.inf)     # (past it: no float32 norm)
    return out


def make_column(field: Field):
    if field.kind == "vector":
        return VectorColumn(field)
    if field.kind == "text":
        return TextColumn(field)
    if field.kind in ("json", "bytes"):
        return JsonColumn(field)
    if field.kind == "sparsevec":
        return SparseColumn(field)
    return ScalarColumn(field)


class DerivedColumn:
    """The vectors an expression or partial HNSW index (schema.HNSW's expr, where)
    holds, made from a field's column when needed, never stored: each row's
    value cast (to halfvec, vector), binary-quantized or cut (subvector), and
    null where the field is or where the row does not meet the partial index's
    predicate (so the graph never links it). A value the index cannot hold (a
    cast to halfvec past its range: `unindexable`) is refused by the write and by
    CREATE INDEX; one in a version dead before the index was made, or in a file
    written before such writes were refused, is null too.

    Rows are derived in memory a batch at a time as the index links or a search
    reads them (one numpy pass: a 128-d halfvec of 100k rows in milliseconds),
    so the file holds what it held before (the field's vectors and the graph's
    lists) and every path that rebuilds an index — open, replay, vacuum — makes
    them again from the rows. The writer's transaction's own rows are derived
    for its reads and kept too: its rollback truncates them (a later
    transaction reuses their row numbers), its commit makes them committed.

    Reads it as a VectorColumn: arena / norms / nulls (Growables) and frozen(n)."""

    def __init__(self, source: VectorColumn, spec, predicate, committed):
        self.source = source
        self.expr = spec.expr
        self.where = bool(spec.where)
        self._predicate = predicate      # () -> (the table's columns, the predicate) now
        self._committed = committed      # () -> the table's committed rows
        dtype = VECTOR_DTYPES[self.expr[3]] if self.expr is not None else source.arena.dtype
        self.width = source.field.width if self.expr is None else \
            _width(self.expr, source.field.dim)
        self.arena = Growable(dtype, (self.width,))
        self.norms = Growable(np.float32)
        self.nulls = Growable(np.bool_)
        self._lock = threading.Lock()

    def fill(self, n: int) -> "DerivedColumn":
        """Derive the committed rows below n not derived yet; returns itself."""
        n = min(n, self._committed())
        if self.arena.n < n:
            self._extend(n)
        return self

    def _extend(self, n: int) -> None:
        with self._lock:
            lo = self.arena.n
            if lo < n:
                vals, norms, nulls = self.derive(lo, n)
                # the arena last: its count is what readers beside this go by
                self.nulls.append(nulls)
                self.norms.append(norms)
                self.arena.append(vals)

    def truncate(self, n: int) -> None:
        """Rows from n on are gone (a rollback's: its transaction's rows)."""
        with self._lock:
            if self.arena.n > n:
                self.arena.truncate(n)
                self.norms.truncate(n)
                self.nulls.truncate(n)

    def derive(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(vectors, norms, nulls) of rows [lo, hi), made from the field's rows."""
        src = self.source
        vals = src.arena.head(hi)[lo:]
        nulls = src.nulls.head(hi)[lo:].copy()
        if self.where:
            nulls |= ~predicate_mask(*self._predicate(), lo, hi)
        if self.expr is None:
            return vals, src.norms.head(hi)[lo:], nulls
        dtype = self.expr[3]
        x = _cut(self.expr, vals.astype(np.float32, copy=False))
        if dtype == "bit":
            out = np.packbits(x > 0, axis=1)
            return out, np.zeros(len(out), np.float32), nulls
        bad = half_overflow(x) if dtype == "f16" else None
        if bad is not None:     # a row the index leaves out (or a file's from before such
            x = np.where(bad[:, None], np.float32(0), x)   # writes were refused): no vector
            nulls |= bad
        out = np.ascontiguousarray(x, dtype=VECTOR_DTYPES[dtype])
        return out, norms_of(out), nulls

    def frozen(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(arena, norms) of rows [0, n), read-only. Rows past the committed ones
        (the writer's own transaction's) are derived once and kept like the others,
        until the transaction's rollback truncates them (Table.rollback): a search
        inside a transaction derives only the rows written since its last one."""
        if self.arena.n < n:
            self._extend(n)
        return self.arena.frozen(n), self.norms.frozen(n)

    def nulls_head(self, n: int) -> np.ndarray:
        if self.arena.n < n:
            self._extend(n)
        return self.nulls.head(n)


_BLOCK_ROWS = 1 << 16


def unindexable(spec, vectors: np.ndarray, nulls: np.ndarray, meets) -> np.ndarray:
    """Positions in a block of a vector field's stored rows (vectors, nulls) whose
    value the index `spec` (schema.HNSW) cannot hold: an expression that casts
    to halfvec an element past its range, on a row the index holds (not null;
    `meets()`: the rows meeting a partial index's predicate, asked only when
    one overflows). What PostgreSQL refuses to write or to index (22003)."""
    expr = getattr(spec, "expr", None)
    if expr is None or expr[3] != "f16" or vectors.dtype != np.float32:
        return np.empty(0, np.int64)
    found = []
    for lo in range(0, len(vectors), _BLOCK_ROWS):
        bad = half_overflow(_cut(expr, vectors[lo:lo + _BLOCK_ROWS]))
        if bad is not None:
            found.append(np.flatnonzero(bad) + lo)
    if not found:
        return np.empty(0, np.int64)
    rows = np.concatenate(found)
    rows = rows[~nulls[rows]]
    if len(rows) and getattr(spec, "where", None):
        rows = rows[meets()[rows]]
    return rows


def range_error(field: str, spec, vector: np.ndarray, where: str) -> VectorRangeError:
    """The error of a vector an expression index cannot hold (unindexable)."""
    x = _cut(spec.expr, vector)
    big = float(x[np.argmax(np.abs(x))])
    return VectorRangeError(f'"{big:g}" is out of range for type halfvec: field {field!r}, '
                            f"{where}, is cast to halfvec by its index")


def _cut(expr: tuple, x: np.ndarray) -> np.ndarray:
    """What of vectors x (elements on the last axis) an index expression reads: a
    subvector's elements, else all of them."""
    if expr[0] != "subvector":
        return x
    return x[..., expr[1] - 1:expr[1] - 1 + expr[2]]


def _width(expr: tuple, dim: int) -> int:
    d = expr[2] if expr[0] == "subvector" else dim
    return (d + 7) // 8 if expr[3] == "bit" else d


def predicate_mask(columns: dict, where: tuple, lo: int, hi: int) -> np.ndarray:
    """Rows [lo, hi) meeting every (field, op, value) of a partial index's
    predicate (schema.PREDICATE_OPS), as SQL's WHERE keeps them: a null meets
    only IS NULL."""
    ok = np.ones(hi - lo, bool)
    for name, op, value in where:
        col = columns[name]
        if isinstance(col, TextColumn):
            codes = col.head(hi)[lo:]
            nulls = codes < 0
            if op in ("=", "<>"):
                hit = codes == col.code_of(value)
                vals = None
            else:
                words = col.take(np.arange(lo, hi))[0]
                vals = np.array([value if w is None else w for w in words], object)
        else:
            vals, nulls = col.head(hi)
            vals, nulls = vals[lo:], nulls[lo:]
        if op == "is null":
            ok &= nulls
            continue
        if op == "is not null":
            ok &= ~nulls
            continue
        if vals is not None:        # in PostgreSQL's order: NaN > 0 holds
            hit = np.asarray(compare(op, vals, value), bool)
        elif op == "<>":
            hit = ~hit
        ok &= hit & ~nulls
    return ok
