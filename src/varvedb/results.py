"""What reads answer: search results (`Hits`, a sequence of `Hit`s built lazily
from the executor's columns, query/execute.py: `hits.ids`, `hits.scores` and
`to_numpy()` read the columns themselves, and the Hit objects are made on first
use of one), a statement's `SqlResult`, a commit's `VersionInfo`.

Light on purpose: numpy and msgspec, nothing of the engine, so that vv.Client
builds the same objects from the wire without loading the engine or numba.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Iterator

import msgspec
import numpy as np

from . import tabular
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
    `str(hits.plan)` prints it as a tree, `hits.plan.to_dict()` gives it as data.
    `fields`: the collection's schema fields (name -> Field), which say the json
    ones that to_arrow / to_pandas / to_polars keep as they are."""
    __slots__ = ("plan", "_hits", "_ids", "_lazy", "_fields")

    def __init__(self, hits=(), plan: PlanNode | None = None, fields: dict | None = None):
        self._hits = list(hits)
        self.plan = plan
        self._ids = self._lazy = None
        self._fields = fields

    @classmethod
    def of_columns(cls, ids_of, rows, scores: np.ndarray | None, names: tuple, cols: list,
                   plan: PlanNode | None = None, fields: dict | None = None) -> "Hits":
        """Hits over columns: `rows` (their ids made on first use, `ids_of(rows)`:
        a search that reads only scores never makes them), `scores` (float64, or
        None: unscored), and one list of Python values per field in `names`."""
        # (every search's answer is built here: one tuple, no call it can spare)
        self = cls.__new__(cls)
        self._hits = self._ids = None
        self.plan = plan
        self._lazy = (ids_of, rows, scores, names, cols)
        self._fields = fields
        return self

    def _id_list(self) -> list:
        ids = self._ids
        if ids is None:
            ids_of, rows = self._lazy[:2]
            ids = self._ids = ids_of(rows)
        return ids

    def _built(self) -> list:
        hits = self._hits
        if hits is None:
            ids = self._id_list()
            _, _, scores, names, cols = self._lazy
            scores = [None] * len(ids) if scores is None else scores.tolist()
            if names:
                hits = [Hit(i, s, dict(zip(names, vals)))
                        for i, s, vals in zip(ids, scores, zip(*cols))]
            else:
                hits = [Hit(i, s, {}) for i, s in zip(ids, scores)]
            self._hits = hits
        return hits

    def __len__(self) -> int:
        return len(self._hits) if self._lazy is None else len(self._lazy[1])

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
        return list(self._id_list()) if self._lazy is not None else [h.id for h in self._hits]

    @property
    def scores(self) -> np.ndarray:
        if self._lazy is not None and self._lazy[2] is not None:
            return np.array(self._lazy[2], dtype=np.float64)
        return np.array([h.score for h in self._built()], dtype=np.float64)

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Columns as arrays: id, score and every selected field."""
        out = {"id": np.array(self.ids), "score": self.scores}
        if self._lazy is not None:
            _, rows, _, names, cols = self._lazy
            for name, col in zip(names if len(rows) else (), cols):
                out[name] = np.array(col)
            return out
        for name in (self._hits[0].fields if self._hits else {}):
            out[name] = np.array([h.fields[name] for h in self._hits])
        return out

    def to_dicts(self) -> list[dict]:
        return [h.to_dict() for h in self._built()]

    def _named_columns(self) -> tuple[list, list]:
        """(names, columns): id, score and each selected field, as Python values."""
        if self._lazy is not None:
            _, rows, _, names, cols = self._lazy
            names = list(names) if len(rows) else []
            return (["id", "score", *names],
                    [self._id_list(), self.scores, *(cols if names else ())])
        names = list(self._hits[0].fields) if self._hits else []
        return (["id", "score", *names],
                [self.ids, self.scores, *([h.fields[n] for h in self._hits] for n in names)])

    @property
    def json_fields(self) -> frozenset:
        """The names of the collection's json fields (kept as they are by to_arrow,
        to_pandas and to_polars)."""
        return frozenset(n for n, f in (self._fields or {}).items() if f.kind == "json")

    def to_arrow(self):
        """A pyarrow Table: id, score and each selected field (vectors as a
        fixed-size-list column, json fields Arrow's json type). Needs pyarrow."""
        return tabular.to_arrow(*self._named_columns(), json=self.json_fields)

    def to_pandas(self):
        """A pandas DataFrame: id, score and each selected field (a vector a
        numpy array per cell, a json value as it is). Needs pandas."""
        return tabular.to_pandas(*self._named_columns(), json=self.json_fields)

    def to_polars(self):
        """A polars DataFrame: id, score and each selected field (vectors as an
        Array column, json fields Arrow's json type). Needs polars and pyarrow."""
        return tabular.to_polars(*self._named_columns(), json=self.json_fields)


@dataclass
class VersionInfo:
    """One commit of the history (Database.history, Client.history)."""
    version: int
    timestamp: object          # datetime (UTC)
    chain: str                 # hex chain hash
    rows_changed: int
    branch: str = "main"       # the branch it was made on


class SqlResult:
    """The outcome of one statement.

    `columns` are the output names, `rows` a list of tuples (vectors as numpy
    arrays, timestamps as UTC datetimes, json as Python values), `status`
    PostgreSQL's command tag ("SELECT 3", "INSERT 0 2", "CREATE TABLE"), and
    `rowcount` the rows returned or changed. `plan` is the query plan as it
    ran, for a SELECT; `kinds` each column's kind where the statement knew it
    (int, float, bool, text, json, timestamp, vector; None where it did not), and
    `elements` an array column's element type where it is a column of arrays
    ("vector(3)", "float": schema.Field.array_of), a vector column's type
    ("vector", "halfvec", "bit"), None elsewhere.
    `copy_data` is what COPY ... TO STDOUT wrote (bytes; None for any other
    statement), and `copy_ends` where each of its rows ends in it (the wire sends
    each row as a CopyData message of its own, as PostgreSQL does). `notice` is
    PostgreSQL's WARNING for a statement that ran but changed nothing it was asked
    to — a BEGIN inside a block, a COMMIT outside one — and its NOTICEs (SQLSTATE
    00000: DROP CONSTRAINT IF EXISTS of none; 42622: an identifier cut to 63 bytes),
    a list of (SQLSTATE, message), in the order PostgreSQL sends them; None where
    it has none."""
    __slots__ = ("columns", "rows", "status", "rowcount", "plan", "kinds", "copy_data",
                 "elements", "copy_ends", "notice")

    def __init__(self, columns: list[str], rows: list[tuple], status: str,
                 rowcount: int | None = None, plan=None, kinds: list | None = None,
                 copy_data: bytes | None = None, elements: list | None = None,
                 copy_ends: list[int] | None = None):
        self.columns = columns
        self.rows = rows
        self.status = status
        self.rowcount = len(rows) if rowcount is None else rowcount
        self.plan = plan
        self.kinds = kinds if kinds is not None else [None] * len(columns)
        self.copy_data = copy_data
        self.elements = elements if elements is not None else [None] * len(columns)
        self.copy_ends = copy_ends
        self.notice = None

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def __repr__(self) -> str:
        return f"<SqlResult {self.status}: {len(self.columns)} columns>"

    def copy_text(self) -> str:
        """copy_data as text, for an answer that carries text (HTTP's JSON, `varvedb
        sql`): a COPY's text or CSV format; a binary COPY's bytes are 0A000 there
        (they are a driver's, over --pg, or db.sql()'s copy_data)."""
        try:
            return self.copy_data.decode()
        except UnicodeDecodeError:      # (UTF-8 never holds the binary signature's \xff)
            from .errors import NotSupportedError
            raise NotSupportedError("COPY TO STDOUT in the binary format answers bytes: read "
                                    "it over --pg or from db.sql()'s copy_data; here its "
                                    "text or CSV format") from None

    def scalar(self) -> Any:
        """The first column of the first row (None when there is no row)."""
        return self.rows[0][0] if self.rows and self.columns else None

    def dicts(self) -> list[dict]:
        names = self.columns
        return [dict(zip(names, r)) for r in self.rows]

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Each column as an array: numeric ones typed (NaN for a NULL float),
        vectors as an (n, dim) block, everything else as objects."""
        out = {}
        for i, name in enumerate(self.columns):
            values = [r[i] for r in self.rows]
            out[name] = _array(values)
        return out

    def _named_columns(self) -> tuple[list, list]:
        return list(self.columns), [[r[i] for r in self.rows] for i in range(len(self.columns))]

    def _json(self) -> frozenset:
        return frozenset(n for n, k in zip(self.columns, self.kinds) if k == "json")

    def to_arrow(self):
        """A pyarrow Table (json columns Arrow's json type; needs pyarrow)."""
        return tabular.to_arrow(*self._named_columns(), json=self._json())

    def to_pandas(self):
        """A pandas DataFrame (json values as they are; needs pandas)."""
        import pandas as pd
        df = pd.DataFrame(self.rows, columns=self.columns)
        for i, kind in enumerate(self.kinds):
            if kind == "json":      # not typed by pandas: a json 1 beside 2.5, a null
                df.isetitem(i, pd.Series(tabular.objects([r[i] for r in self.rows]),
                                         dtype=object))
        return df

    def to_polars(self):
        """A polars DataFrame (json columns Arrow's json type; needs polars and pyarrow)."""
        return tabular.to_polars(*self._named_columns(), json=self._json())



def _array(values: list) -> np.ndarray:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, np.ndarray) for v in present) \
            and len({v.shape for v in present}) == 1 and len(present) == len(values):
        return np.stack(values)
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(values):
        return np.array(values, bool)
    # an int past int64 (an exact sum, PostgreSQL's numeric) keeps the column as objects
    fits = not any(type(v) is int and not tabular.INT64_RANGE[0] <= v <= tabular.INT64_RANGE[1] for v in present)
    if fits and present and len(present) == len(values) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in present):
        return np.array(values, np.int64)
    if fits and present and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                for v in present):
        return np.array([np.nan if v is None else v for v in values], np.float64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
