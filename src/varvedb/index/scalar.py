"""Scalar indexes: a sorted run of (value, row) plus an unsorted delta tail.

Why this layout: rows only ever append, so the index keeps the rows it has
sorted (`keys`, `rows`, by value then row) and leaves rows appended since in
a delta that is scanned directly. When the delta passes a quarter of the
sorted run it is merged in (one argsort), so the cost of writes stays
amortised O(log n) per row and a lookup is two binary searches plus a scan
of a small tail. "hash" and "sorted" share this structure; a hash index
answers equality and IN, a sorted one also ranges.

The index holds every row version; visibility is applied by the caller.
Text fields are indexed by dictionary code (equality only).
"""
from __future__ import annotations

import numpy as np

from ..float_order import WORDS, compare


class SortedIndex:
    """A hash or sorted index (index/protocol.py: kept in step with the writes)."""

    PREFIX = "ix"
    in_step = True

    def __init__(self, field: str, value_kind: str, ranges: bool):
        self.field = field
        self.value_kind = value_kind      # the field's kind: "int", "float", "text", ...
        self.ranges = ranges
        self.kind = "sorted" if ranges else "hash"
        # (keys, rows, sorted_upto): rows [0, sorted_upto) are in keys/rows. One
        # tuple, replaced whole, so a reader beside the writer never pairs the
        # keys of one merge with the rows or bound of another.
        self._run = (np.empty(0, np.int64 if value_kind != "float" else np.float64),
                     np.empty(0, np.int64), 0)
        self.n = 0

    @property
    def indexed(self) -> int:
        return self.n

    def fresh(self) -> "SortedIndex":
        return SortedIndex(self.field, self.value_kind, self.ranges)

    @property
    def keys(self) -> np.ndarray:
        return self._run[0]

    def nbytes(self) -> int:
        keys, rows, _ = self._run
        return keys.nbytes + rows.nbytes

    @property
    def rows(self) -> np.ndarray:
        return self._run[1]

    @property
    def sorted_upto(self) -> int:
        return self._run[2]

    def extend(self, column, upto: int) -> int:
        """Rows [n, upto) join the delta (merged once it passes a quarter of the run)."""
        moved, self.n = upto - self.n, upto
        if upto - self.sorted_upto > max(1024, self.sorted_upto // 4):
            self.merge(column)
        return moved

    def merge(self, column) -> None:
        lo = self.sorted_upto
        values, nulls = column.keys(lo, self.n)
        new = np.flatnonzero(~nulls)
        keys = np.concatenate([self.keys, values[new].astype(self.keys.dtype)])
        new += lo
        rows = np.concatenate([self.rows, new])
        order = np.lexsort((rows, keys))
        self._run = (keys[order], rows[order], self.n)

    def truncate(self, n: int) -> None:
        if n < self.sorted_upto:
            keep = self.rows < n
            self._run = (self.keys[keep], self.rows[keep], n)
        self.n = n

    def serves(self, op: str) -> bool:
        return op == "eq" or (self.ranges and op in ("lt", "le", "gt", "ge"))

    def search(self, column, op: str, value, n: int) -> np.ndarray:
        """Rows in [0, n) whose value satisfies `op value` (nulls never match)."""
        keys, run_rows, tail_lo = self._run
        lo, hi = 0, len(keys)
        if op == "eq":
            lo, hi = np.searchsorted(keys, value, "left"), np.searchsorted(keys, value, "right")
        elif op in ("gt", "ge"):
            lo = np.searchsorted(keys, value, "right" if op == "gt" else "left")
        else:
            hi = np.searchsorted(keys, value, "left" if op == "lt" else "right")
        hits = run_rows[lo:hi]
        hits = hits[hits < n]
        if n > tail_lo:
            v, nulls = column.keys(tail_lo, n)
            t = compare(WORDS[op], v, value) & ~nulls
            hits = np.concatenate([hits, tail_lo + np.flatnonzero(t)])
        return hits

    def to_arrays(self) -> dict:
        return {"keys": self.keys, "rows": self.rows,
                "upto": np.array([self.sorted_upto, self.n], np.int64)}

    def loaded(self, arrays: dict, n: int) -> "SortedIndex":
        """This index's spec over a checkpoint's arrays (engine/checkpoint.py checks them)."""
        ix = self.fresh()
        upto, ix.n = (int(x) for x in arrays["upto"])
        ix._run = (arrays["keys"], arrays["rows"], upto)
        return ix


def make_scalar_index(field: str, f) -> SortedIndex:
    """The empty index `f.index` ("hash" or "sorted") names."""
    return SortedIndex(field, f.kind, ranges=(f.index == "sorted"))
