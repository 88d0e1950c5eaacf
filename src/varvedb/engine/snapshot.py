"""`Snapshot`: what one read sees — a version, and each table's row count taken after it.

Every read (get, count, find, search, history; later SQL and text) runs
against one snapshot, so "read `n` after `v`" is enforced here and nowhere
else: the version is fixed when the snapshot is taken, and a table's row
count is read the first time the snapshot touches that table, always after
the version. Every row of version v is then below n (rows are appended
before their version is published), and the writer may append past n
meanwhile without changing the answer: rows past n are never read.

`final` says the version is committed, so the visibility masks computed
for it never change and the table may cache them for the next reader;
the version of the reader's own open transaction is not final.
"""
from __future__ import annotations


import numpy as np

from ..errors import VersionNotFoundError
from ..schema import as_of_micros, brief, from_micros
from .branches import MAIN, View, main_view


class Snapshot:
    __slots__ = ("version", "newest", "final", "view", "_n")

    def __init__(self, version: int, newest: int, final: bool, view: View | None = None):
        self.version = version      # the commits seen: up to this one, on the view's line
        self.newest = newest        # the newest version the reader could have asked for
        self.final = final          # committed: masks may be cached
        self.view = main_view(version) if view is None else view   # (branches.py)
        self._n: dict = {}          # table -> its row count, taken once, after `version`

    @property
    def current(self) -> bool:
        """Is this the newest state the reader can see (not an `as_of` into the past)?"""
        return self.version == self.newest

    def n(self, table) -> int:
        """The table's row count as of this snapshot (read once, after the version)."""
        n = self._n.get(table)
        if n is None:
            n = self._n[table] = table.n
        return n

    def visible(self, table, nonnull: str | None = None) -> tuple[np.ndarray, int]:
        """(read-only mask, count) over the table's rows [0, n): visible at this
        version (and with a non-null `nonnull` field, for a vector search)."""
        return table.visible(self.view, self.n(table), self.final, nonnull)

    def row_of(self, table, key) -> int:
        """The row of document `key` visible in this snapshot, or -1."""
        return table.visible_row(key, self.view, self.n(table))

    def __repr__(self) -> str:
        return f"<Snapshot v{self.version}{'' if self.final else ' (open transaction)'}>"


def take(engine, as_of=None, tx=None, branch: int = MAIN) -> Snapshot:
    """The snapshot a reader of `branch` gets: as of `as_of` (None: the newest it
    can see).

    `tx` is the reader's own open transaction (or None): inside it the reader
    sees its own writes, at the transaction's pending version."""
    newest = tx.version if tx is not None else engine.visible
    version = newest if as_of is None else resolve(engine, as_of, newest)
    view = engine.catalog.view(branch, version) if engine.catalog.any else None
    return Snapshot(version, newest, tx is None or version < tx.version, view)


def resolve(engine, as_of, newest: int) -> int:
    """A version number, or a timezone-aware datetime → the last version
    committed at or before it (never past `newest`). Anything else is an
    OptionError: a naive datetime (or a string, a datetime64) could be in any zone."""
    if isinstance(as_of, bool) or not isinstance(as_of, (int, np.integer)):
        us = as_of_micros(as_of)
        history = engine.history
        stamps = np.fromiter((c.timestamp_us for c in history), np.int64, len(history))
        i = int(np.searchsorted(stamps, us, side="right"))
        if not i and engine.oldest_version() > 1:
            raise VersionNotFoundError(f"{as_of} is before the history kept: a vacuum dropped "
                                       f"it; the oldest version is {engine.oldest_version()}, "
                                       f"committed at {from_micros(history[0].timestamp_us)}")
        v = history[i - 1].version if i else 0
        return min(v, newest)
    v = int(as_of)
    if v < 0 or v > newest:
        raise VersionNotFoundError(f"version {brief(v)} does not exist; the newest is {newest}")
    # version 0 is the empty database, unless a vacuum dropped the versions after it
    oldest = engine.oldest_version()
    if v < oldest and (v > 0 or oldest > 1):
        raise VersionNotFoundError(f"version {v} is older than the history kept: a vacuum "
                                   f"dropped it; the oldest version is {oldest}")
    return v
