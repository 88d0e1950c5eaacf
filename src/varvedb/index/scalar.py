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


class SortedIndex:
    def __init__(self, field: str, kind: str, ranges: bool):
        self.field = field
        self.kind = kind
        self.ranges = ranges
        # (keys, rows, sorted_upto): rows [0, sorted_upto) are in keys/rows. One
        # tuple, replaced whole, so a reader beside the writer never pairs the
        # keys of one merge with the rows or bound of another.
        self._run = (np.empty(0, np.int64 if kind != "float" else np.float64),
                     np.empty(0, np.int64), 0)
        self.n = 0

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

    def extend(self, table, lo: int, hi: int) -> None:
        self.n = hi
        if hi - self.sorted_upto > max(1024, self.sorted_upto // 4):
            self.merge(table)

    def merge(self, table) -> None:
        lo = self.sorted_upto
        values, nulls = table.columns[self.field].keys(lo, self.n)
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

    def lookup(self, table, op: str, value, n: int) -> np.ndarray:
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
            v, nulls = table.columns[self.field].keys(tail_lo, n)
            t = _OPS[op](v, value) & ~nulls
            hits = np.concatenate([hits, tail_lo + np.flatnonzero(t)])
        return hits

    def to_arrays(self) -> dict:
        return {"keys": self.keys, "rows": self.rows,
                "upto": np.array([self.sorted_upto, self.n], np.int64)}

    def load(self, arrays: dict) -> None:
        upto, self.n = (int(x) for x in arrays["upto"])
        self._run = (arrays["keys"], arrays["rows"], upto)


_OPS = {"eq": np.equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


def make_scalar_index(field: str, f) -> SortedIndex:
    return SortedIndex(field, f.kind, ranges=(f.index == "sorted"))
