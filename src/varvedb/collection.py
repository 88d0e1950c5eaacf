"""`Collection`: the document API of one collection (insert, search, time travel).

Every write validates its whole input first (schema.py), then writes frames
through the engine inside a transaction — the caller's, or one of its own
that commits when the call returns. A write that raises has written nothing.
Every read takes `as_of` and answers against the visibility of that version.
Every argument is checked at the door (schema.py holds the limits): a wrong
one raises a VarveError subclass before anything is read or written.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .errors import FieldTypeError, SchemaError, UnknownFieldError
from .query.filter import Filter, check_params
from .query.planner import vector_search
from .results import Hit, Hits
from .schema import (HNSW, MAX_EF, Batch, Schema, coerce_array, coerce_ids,
                     coerce_query_vector, coerce_values, from_micros, is_int)
from .engine.columns import VectorColumn
from .engine.table import ALIVE, Table


class Collection:
    def __init__(self, db, name: str, session=None):
        self._db = db
        self._engine = db._engine
        self.name = name
        self._session = session      # None: the calling thread's default session

    @property
    def _sess(self):
        return self._session or self._db._thread_session()

    @property
    def _tx(self):
        """The reader's open transaction (its session's), if any."""
        return self._sess.tx

    # ---- description ---------------------------------------------------------

    @property
    def _table(self) -> Table:
        return self._engine.table(self.name)

    @property
    def schema(self) -> Schema:
        return self._table.schema

    def __repr__(self) -> str:
        return f"<Collection {self.name!r}>"

    def __len__(self) -> int:
        return self.count()

    # ---- writes: arguments checked here, then one engine verb ---------------------

    def insert(self, rows: dict | Iterable[dict]) -> list:
        """Insert new documents; an id already taken raises DuplicateIdError. Returns the ids."""
        with self._sess._writing() as tx:
            t = self._table
            batch = self._batch_from_rows(t, rows)
            self._engine.insert(tx, t, batch.ids, batch.columns)
            return _id_list(batch.ids)

    def insert_arrays(self, id=None, **columns) -> np.ndarray | list:
        """Insert documents given column-wise as arrays: the bulk path.

        `id` is optional (assigned when omitted); each keyword is a field
        (vectors as an (n, dim) array). Returns the ids.
        """
        with self._sess._writing() as tx:
            t = self._table
            t.schema.check_names(columns, "insert_arrays")
            n = _batch_length(id, columns)
            ids = t.assign_ids([None] * n) if id is None else coerce_ids(t.schema, id)
            if len(ids) != n:
                raise FieldTypeError(f"{len(ids)} ids for {n} rows")
            cols = {name: coerce_array(name, t.schema.fields[name], arr, n)
                    for name, arr in columns.items()}
            self._engine.insert(tx, t, ids, cols)
            return ids

    def upsert(self, rows: dict | Iterable[dict]) -> list:
        """Insert documents, replacing any live document with the same id."""
        with self._sess._writing() as tx:
            t = self._table
            batch = self._batch_from_rows(t, rows)
            self._engine.upsert(tx, t, batch.ids, batch.columns)
            return _id_list(batch.ids)

    def update(self, set: dict, where: str | None = None, params: list | tuple = (),
               ids: list | None = None) -> int:
        """Set fields on the live documents matching `where` (or `ids`). Returns the count."""
        with self._sess._writing() as tx:
            t = self._table
            check_params(params)
            if not isinstance(set, dict) or not set:
                raise FieldTypeError("update takes a non-empty dict of field -> value")
            if "id" in set:
                raise FieldTypeError("the id of a document cannot be updated")
            t.schema.check_names(set, "update")
            values = {name: coerce_values(name, t.schema.fields[name], [v])
                      for name, v in set.items()}
            rows = self._target_rows(t, tx, where, params, ids)
            self._engine.update(tx, t, rows, values)
            return len(rows)

    def delete(self, ids: list | None = None, where: str | None = None,
               params: list | tuple = ()) -> int:
        """Delete live documents by id (a list) or by filter. Returns how many were deleted."""
        with self._sess._writing() as tx:
            t = self._table
            check_params(params)
            rows = self._target_rows(t, tx, where, params, ids)
            self._engine.delete(tx, t, rows)
            return len(rows)

    def create_index(self, field: str, index: HNSW) -> None:
        """Build a graph index on a vector field (best after a bulk load); kept current after."""
        with self._sess._writing() as tx:
            t = self._table
            fname = self._vector_field(t, field)
            if not isinstance(index, HNSW):
                raise SchemaError(f"create_index takes vv.HNSW(...), got {index!r}")
            index.check()     # again: a frozen HNSW can still be altered by force
            self._engine.create_index(tx, t, fname, index)

    def _target_rows(self, t: Table, tx, where, params, ids) -> np.ndarray:
        if (where is None) == (ids is None):
            raise FieldTypeError("give exactly one of ids= or where=")
        if ids is not None:
            keys = _id_list(coerce_ids(t.schema, ids))
            rows = t.live_rows(keys)
            return np.unique(rows[rows >= 0])
        v = self._engine.read_version(tx)
        n = t.n
        mask = t.visible(v, n) & Filter(where, t.schema, params).mask(t, n)
        return np.flatnonzero(mask)

    def _batch_from_rows(self, t: Table, rows) -> Batch:
        if isinstance(rows, dict):
            rows = [rows]
        if isinstance(rows, (str, bytes, bytearray)) or not hasattr(rows, "__iter__"):
            raise FieldTypeError(f"rows are a dict or a list of dicts, got {type(rows).__name__}")
        rows = list(rows)
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
        if bad is not None:
            raise FieldTypeError(f"rows are dicts of field -> value, got "
                                 f"{type(rows[bad]).__name__}")
        names = set().union(*rows) if rows else set()
        t.schema.check_names(names)
        ids = t.assign_ids([r.get("id") for r in rows])
        cols = {name: coerce_values(name, t.schema.fields[name], [r.get(name) for r in rows])
                for name in names if name != "id"}
        return Batch(ids, cols)

    # ---- reads -----------------------------------------------------------------

    def get(self, id, as_of=None, select: list | None = None) -> dict | None:
        """The document with this id (as of a version or aware datetime), or None."""
        t = self._table
        names = self._select(t, select, vectors=True)
        v = self._engine.resolve_as_of(as_of, self._tx)
        key = _id_list(coerce_ids(t.schema, [id]))[0]
        rows = t.rows_of_id(key, t.n)   # n after v: every row of version v is below it
        rows = rows[(t.born.data[rows] <= v) & (t.died.data[rows] > v)]
        if not len(rows):
            return None
        return self._docs(t, rows, names)[0]

    def count(self, where: str | None = None, params: list | tuple = (), as_of=None) -> int:
        """How many documents are visible (as of a version), optionally filtered."""
        t = self._table
        check_params(params)
        v = self._engine.resolve_as_of(as_of, self._tx)
        n = t.n   # taken once, after v, for every mask (the writer may append meanwhile)
        mask = self._visible(t, v, n)
        if where is not None:
            mask = mask & Filter(where, t.schema, params).mask(t, n)
        return int(np.count_nonzero(mask))

    def find(self, where: str | None = None, params: list | tuple = (), as_of=None,
             limit: int | None = None, select: list | None = None) -> Hits:
        """Documents matching a filter, in insertion order (no scoring); limit=None: all."""
        t = self._table
        check_params(params)
        if limit is not None:
            limit = _limit(limit)     # a negative one sliced [:-1], dropping a row
        names = self._select(t, select)
        v = self._engine.resolve_as_of(as_of, self._tx)
        n = t.n
        mask = self._visible(t, v, n)
        if where is not None:
            mask = mask & Filter(where, t.schema, params).mask(t, n)
        rows = np.flatnonzero(mask)[:limit]
        return self._hits(t, rows, names, None, "filter scan")

    def search(self, vector=None, where: str | None = None, params: list | tuple = (),
               limit: int = 10, select: list | None = None, as_of=None,
               field: str | None = None, ef: int | None = None, exact: bool = False) -> Hits:
        """The `limit` nearest documents to `vector` among those matching `where`.

        Scores are pgvector's distances for the field's metric (lower is closer).
        `ef` widens the graph walk (default: the index's ef_search; at most
        MAX_EF); `exact=True` scans every allowed row. A limit above the allowed
        rows returns them all. `hits.plan` says which path answered.
        """
        t = self._table
        if vector is None:
            raise FieldTypeError("search needs vector=")
        fname = self._vector_field(t, field)
        f = t.schema.fields[fname]
        q = coerce_query_vector(f, vector)
        limit = _limit(limit)
        if ef is not None and (not is_int(ef) or not 1 <= ef <= MAX_EF):
            raise FieldTypeError(f"ef must be an integer in 1..{MAX_EF}, got {ef!r:.80}")
        if not isinstance(exact, (bool, np.bool_)):
            raise FieldTypeError(f"exact is True or False, got {exact!r:.80}")
        check_params(params)
        names = self._select(t, select)
        v = self._engine.resolve_as_of(as_of, self._tx)
        n = t.n
        col: VectorColumn = t.columns[fname]
        mask, allowed = t.searchable(fname, v, n, final=self._final())
        if where is not None:
            mask = mask & Filter(where, t.schema, params).mask(t, n)
            allowed = int(np.count_nonzero(mask))
        rows, dists, plan = vector_search(col, f.metric, t.vector_indexes.get(fname), q,
                                          limit, mask, allowed, None if ef is None else int(ef),
                                          bool(exact))
        return self._hits(t, rows, names, dists, plan)

    def explain(self, **search_args) -> str:
        """How `search(**search_args)` would be answered (it runs the search)."""
        return self.search(**search_args).plan

    def history(self, id) -> list[dict]:
        """Every version of one document: [{version, deleted, doc}], oldest first."""
        t = self._table
        key = _id_list(coerce_ids(t.schema, [id]))[0]
        v = self._engine.read_version(self._tx)
        rows = t.rows_of_id(key, t.n)
        rows = rows[t.born.data[rows] <= v]
        docs = self._docs(t, rows, self._select(t, None, vectors=True))
        out = []
        for r, d in zip(rows.tolist(), docs):
            died = int(t.died.data[r])
            out.append({"version": int(t.born.data[r]),
                        "deleted": None if died == ALIVE or died > v else died, "doc": d})
        return out

    # ---- helpers -----------------------------------------------------------------

    def _visible(self, t: Table, v: int, n: int) -> np.ndarray:
        return t.visible(v, n, final=self._final())

    def _final(self) -> bool:
        # Outside a transaction the version read is committed, so its masks can be cached.
        return self._tx is None

    def _vector_field(self, t: Table, field: str | None) -> str:
        vecs = t.schema.vector_fields
        if field is None:
            if len(vecs) != 1:
                raise UnknownFieldError(f"{self.name!r} has vector fields {vecs}; "
                                        "say which with field=")
            return vecs[0]
        if field not in vecs:
            raise UnknownFieldError(f"{field!r} is not a vector field of {self.name!r}")
        return field

    def _select(self, t: Table, select, vectors: bool = False) -> list[str]:
        if select is None:
            return [n for n, f in t.schema.fields.items() if vectors or f.kind != "vector"]
        if not isinstance(select, (list, tuple)) or not all(isinstance(s, str) for s in select):
            raise FieldTypeError(f"select is a list of field names, got {select!r:.80}")
        t.schema.check_names(select, "select")
        return [s for s in select if s != "id"]

    def _docs(self, t: Table, rows: np.ndarray, names: list[str]) -> list[dict]:
        """Materialise rows as dicts (columnar takes, then one zip)."""
        cols = self._columns(t, rows, names)
        keys = ["id", *names]
        return [dict(zip(keys, vals)) for vals in zip(*cols)]

    def _hits(self, t: Table, rows: np.ndarray, names: list[str], scores, plan) -> Hits:
        ids, *cols = self._columns(t, rows, names)
        scores = [None] * len(ids) if scores is None else np.asarray(scores, np.float64).tolist()
        fields = ([dict(zip(names, vals)) for vals in zip(*cols)] if names
                  else [{} for _ in ids])
        return Hits([Hit(i, s, f) for i, s, f in zip(ids, scores, fields)], plan=plan)

    @staticmethod
    def _columns(t: Table, rows: np.ndarray, names: list[str]) -> list[list]:
        """The ids, then each named field, of `rows` as Python lists (columnar takes)."""
        rows = np.asarray(rows, np.int64)
        cols = [_ids_of(t, rows)]
        for name in names:
            cols.append(_pyvalues(t.schema.fields[name].kind, *t.columns[name].take(rows)))
        return cols


def _pyvalues(kind: str, vals, nulls) -> list:
    nulls = np.asarray(nulls).tolist()
    if kind == "vector":
        vs = list(vals.astype(np.float32))
    elif kind == "timestamp":
        vs = [from_micros(x) for x in vals.tolist()]
    elif isinstance(vals, list):
        vs = vals
    else:
        vs = vals.tolist()
    return [None if nl else x for x, nl in zip(vs, nulls)]


def _ids_of(t: Table, rows: np.ndarray) -> list:
    return t.id_values(rows)


def _id_list(ids) -> list:
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)


def _limit(limit) -> int:
    if not is_int(limit) or limit < 0:
        raise FieldTypeError(f"limit must be a non-negative integer, got {limit!r:.80}")
    return int(limit)


def _batch_length(ids, columns: dict) -> int:
    given = ({"id": ids} if ids is not None else {}) | columns
    for name, a in given.items():
        if (not isinstance(a, (list, tuple, range, np.ndarray))
                or isinstance(a, np.ndarray) and a.ndim == 0):
            raise FieldTypeError(f"insert_arrays takes each column as an array or a list; "
                                 f"{name!r} is {type(a).__name__}")
    if not given:
        raise FieldTypeError("insert_arrays needs at least one column")
    lengths = {len(a) for a in given.values()}
    if len(lengths) != 1:
        raise FieldTypeError(f"insert_arrays columns have different lengths: {sorted(lengths)}")
    return lengths.pop()
