"""Search results: a list of `Hit`s with columnar exits, built at the API edge
from the executor's columns (query/execute.py)."""
from __future__ import annotations

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


class Hits(list):
    """The hits of a query, best first. `plan` is the plan as it ran (query.plan):
    `str(hits.plan)` prints it as a tree, `hits.plan.to_dict()` gives it as data."""

    def __init__(self, hits=(), plan: PlanNode | None = None):
        super().__init__(hits)
        self.plan = plan

    @property
    def ids(self) -> list:
        return [h.id for h in self]

    @property
    def scores(self) -> np.ndarray:
        return np.array([h.score for h in self], dtype=np.float64)

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Columns as arrays: id, score and every selected field."""
        out = {"id": np.array(self.ids), "score": self.scores}
        for name in (self[0].fields if self else {}):
            out[name] = np.array([h.fields[name] for h in self])
        return out

    def to_dicts(self) -> list[dict]:
        return [h.to_dict() for h in self]
