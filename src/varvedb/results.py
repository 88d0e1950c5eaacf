"""Search results: `Hits`, a sequence of `Hit`s built lazily from the executor's
columns (query/execute.py): `hits.ids`, `hits.scores` and `to_numpy()` read the
columns themselves, and the Hit objects are made on first use of one."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from .query.plan import PlanNode


class Hit(msgspec.Struct):
    """One result: `id`, `score` (pgvector's distance for vector search, BM25 for text,
    the fused score for hybrid) and fields.

    A msgspec Struct: built in C, which matters when a query returns many."""
    id: Any
    score: float | None
    fields: dict

    def __getitem__(self, name: str) -> Any:
        if name == "id":
            return self.id
        if name == "score":
            return self.score
        return self.fields[name]

    def get(self, name: str, default=None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def to_dict(self) -> dict:
        return {"id": self.id, "score": self.score, **self.fields}

    def __repr__(self) -> str:
        return f"Hit(id={self.id!r}, score={self.score!r}, {self.fields!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Hit) and self.to_dict() == other.to_dict()


class Hits(Sequence):
    """The hits of a query, best first: a read-only sequence of Hit (compares equal
    to a list of the same hits). `plan` is the plan as it ran (query.plan):
    `str(hits.plan)` prints it as a tree, `hits.plan.to_dict()` gives it as data."""
    __slots__ = ("plan", "_ids", "_n", "_scores", "_names", "_cols", "_hits")

    def __init__(self, hits=(), plan: PlanNode | None = None):
        self._hits = list(hits)
        self.plan = plan
        self._ids = self._scores = self._cols = None
        self._names = ()

    @classmethod
    def of_columns(cls, ids, scores: np.ndarray | None, names: tuple, cols: list,
                   plan: PlanNode | None = None, n: int = 0) -> "Hits":
        """Hits over columns: `ids` (a list, or a function that makes the `n` of
        them on first use), `scores` (float64, or None: unscored), and one list of Python values
        per field in `names`."""
        self = cls.__new__(cls)
        self._hits = None
        self.plan = plan
        self._ids, self._scores, self._names, self._cols = ids, scores, names, cols
        self._n = len(ids) if isinstance(ids, list) else n
        return self

    def _id_list(self) -> list:
        ids = self._ids
        if not isinstance(ids, list):
            ids = self._ids = ids()
        return ids

    def _built(self) -> list:
        hits = self._hits
        if hits is None:
            ids, names = self._id_list(), self._names
            scores = [None] * len(ids) if self._scores is None else self._scores.tolist()
            if names:
                hits = [Hit(i, s, dict(zip(names, vals)))
                        for i, s, vals in zip(ids, scores, zip(*self._cols))]
            else:
                hits = [Hit(i, s, {}) for i, s in zip(ids, scores)]
            self._hits = hits
        return hits

    def __len__(self) -> int:
        return self._n if self._hits is None else len(self._hits)

    def __getitem__(self, i):
        return self._built()[i]

    def __iter__(self):
        return iter(self._built())

    def __eq__(self, other) -> bool:
        if isinstance(other, (Hits, list, tuple)):
            return self._built() == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._built())

    @property
    def ids(self) -> list:
        return list(self._id_list()) if self._hits is None else [h.id for h in self._hits]

    @property
    def scores(self) -> np.ndarray:
        if self._hits is None and self._scores is not None:
            return np.array(self._scores, dtype=np.float64)
        return np.array([h.score for h in self._built()], dtype=np.float64)

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Columns as arrays: id, score and every selected field."""
        out = {"id": np.array(self.ids), "score": self.scores}
        if self._hits is None:
            for name, col in zip(self._names if self._n else (), self._cols):
                out[name] = np.array(col)
            return out
        for name in (self._hits[0].fields if self._hits else {}):
            out[name] = np.array([h.fields[name] for h in self._hits])
        return out

    def to_dicts(self) -> list[dict]:
        return [h.to_dict() for h in self._built()]
