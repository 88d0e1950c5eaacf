"""`RowMap`: how the log numbers a table's rows once a vacuum dropped some.

Frames name rows by number (an insert's first row, a delete's rows, an added
column's row count), and a vacuum keeps the frames of the versions it retains
byte for byte, so their chain hashes stay the same. Those frames number rows
as the original log did. A vacuumed table holds in memory only the rows its
base kept, renumbered 0..k; `kept` is their numbers in the log (increasing),
and every row after the base is numbered in the log from `log_base` on, as
it was before. Frames are written and read in the log's numbering, and
memory is addressed in its own: this map is the one place they meet.
A table no vacuum touched has no map (None): the two numberings are one.
"""
from __future__ import annotations

import numpy as np


class RowMap:
    __slots__ = ("kept", "log_base")

    def __init__(self, kept: np.ndarray, log_base: int):
        self.kept = kept             # <i8, increasing, each < log_base
        self.log_base = log_base     # the log's row count at the base

    @property
    def base_n(self) -> int:
        return len(self.kept)

    def log_n(self, n: int) -> int:
        """The log's number for memory row n (a row count past the base)."""
        return n - len(self.kept) + self.log_base

    def to_log(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        out = rows + (self.log_base - len(self.kept))
        old = rows < len(self.kept)
        out[old] = self.kept[rows[old]]
        return out

    def to_memory(self, log_rows: np.ndarray) -> np.ndarray | None:
        """Memory rows of log rows; None if one names a row the vacuum dropped."""
        log_rows = np.asarray(log_rows, np.int64)
        out = log_rows - (self.log_base - len(self.kept))
        old = log_rows < self.log_base
        if old.any():
            at = np.searchsorted(self.kept, log_rows[old])
            inside = at < len(self.kept)
            if not inside.all() or not (self.kept[at] == log_rows[old]).all():
                return None
            out[old] = at
        return out


def log_n(rowmap: RowMap | None, n: int) -> int:
    return n if rowmap is None else rowmap.log_n(n)
