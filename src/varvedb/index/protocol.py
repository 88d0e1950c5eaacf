"""What every index of a field is to the table that holds it: one small protocol.

A table (engine/table.py) keeps its indexes in one map keyed (field, kind)
and drives them all the same way, whatever they index:

* ``in_step`` indexes (scalar: hash, sorted) are extended by the writer as
  rows land, inside the transaction, and truncated when it rolls back;
* deferred indexes (full-text, vector: HNSW, IVF-PQ) cover a prefix of the
  committed rows only; the maintainer (engine/maintainer.py) extends them
  after commit, a chunk at a time, and a read answers the rows above
  ``indexed`` by an exact scan, so indexing late changes no answer and a
  rollback never touches them.

``search`` is each kind's own question (a scalar comparison, a text query, a
nearest-neighbour query): the planner knows which kind it asks.
"""
from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

SCALAR_KINDS = ("hash", "sorted")
TEXT_KINDS = ("fts",)
VECTOR_KINDS = ("hnsw", "ivfpq")


@runtime_checkable
class Index(Protocol):
    PREFIX: ClassVar[str]   # its arrays' key prefix in a checkpoint ("ix", "tx", "vx")
    field: str
    kind: str               # one of SCALAR_KINDS, TEXT_KINDS, VECTOR_KINDS
    in_step: bool           # extended with each write (True) or by the maintainer

    @property
    def indexed(self) -> int:
        """Rows [0, indexed) are in the index (null ones included)."""

    def extend(self, column, upto: int) -> int:
        """Add rows [indexed, upto) of `column`, or the next chunk of them;
        returns how many rows `indexed` moved (0: none left)."""

    def truncate(self, n: int) -> None:
        """Forget rows >= n (a rolled-back transaction's)."""

    def search(self, *args, **kwargs):
        """The kind's own question (see the class)."""

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The arrays a checkpoint writes under PREFIX (`loaded` reads them back)."""

    def loaded(self, arrays: dict[str, np.ndarray], n: int) -> "Index":
        """An index of this one's spec over a checkpoint's arrays for a table of
        n rows; ValueError when they do not fit (the caller starts a fresh one)."""

    def fresh(self) -> "Index":
        """An empty index of the same field and spec."""

    def nbytes(self) -> int:
        """Bytes of the arrays it holds."""
