"""`Collection`: the document API of one collection (insert, search, time travel).

Every write validates its whole input first (schema.py), then writes frames
through the engine inside a transaction — the caller's, or one of its own
that commits when the call returns. A write that raises has written nothing.
Every read takes `as_of` and answers against the visibility of that version.
Every argument is checked at the door (schema.py holds the limits): a wrong
one raises a VarveError subclass before anything is read or written.
"""
from __future__ import annotations

import uuid
from typing import Any, Iterable

import numpy as np

from .errors import DuplicateIdError, FieldTypeError, SchemaError, UnknownFieldError
from .query.filter import Filter, check_params
from .query.planner import vector_search
from .results import Hit, Hits
from .schema import (HNSW, MAX_EF, Batch, Schema, coerce_array, coerce_ids,
                     coerce_query_vector, coerce_values, from_micros, is_int)
from .storage.format import Kind
from .engine.columns import VectorColumn
from .engine.table import ALIVE, Table


class Collection:
    def __init__(self, db, name: str):
        self._db = db
        self.name = name

    # ---- description ---------------------------------------------------------

    @property
    def _table(self) -> Table:
        return self._db._engine.table(self.name)

    @property
    def schema(self) -> Schema:
        return self._table.schema

    def __repr__(self) -> str:
        return f"<Collection {self.name!r}>"

    def __len__(self) -> int:
        return self.count()

    # ---- writes ----------------------------------------------------------------

    def insert(self, rows: dict | Iterable[dict]) -> list:
        """Insert new documents; an id already taken raises DuplicateIdError. Returns the ids."""
        with self._db._writing():
            t = self._table
            batch = self._batch_from_rows(t, rows)
            self._check_new_ids(t, batch.ids)
            self._write_insert(t, batch)
            return _id_list(batch.ids)

    def insert_arrays(self, id=None, **columns) -> np.ndarray | list:
        """Insert documents given column-wise as arrays: the bulk path.

        `id` is optional (assigned when omitted); each keyword is a field
        (vectors as an (n, dim) array). Returns the ids.
        """
        with self._db._writing():
            t = self._table
            t.schema.check_names(columns, "insert_arrays")
            n = _batch_length(id, columns)
            ids = self._assign_ids(t, [None] * n) if id is None else coerce_ids(t.schema, id)
            if len(ids) != n:
                raise FieldTypeError(f"{len(ids)} ids for {n} rows")
            cols = {name: coerce_array(name, t.schema.fields[name], arr, n)
                    for name, arr in columns.items()}
            batch = Batch(ids, cols)
            self._check_new_ids(t, batch.ids)
            self._write_insert(t, batch)
            return batch.ids

    def upsert(self, rows: dict | Iterable[dict]) -> list:
        """Insert documents, replacing any live document with the same id."""
        with self._db._writing():
            t = self._table
            batch = self._batch_from_rows(t, rows)
            keys = _id_list(batch.ids)
            _check_unique(keys)
            old = t.live_rows(keys)
            self._write_delete(t, old[old >= 0])
            self._write_insert(t, batch)
            return keys

    def update(self, set: dict, where: str | None = None, params: list | tuple = (),
               ids: list | None = None) -> int:
        """Set fields on the live documents matching `where` (or `ids`). Returns the count."""
        with self._db._writing():
            t = self._table
            check_params(params)
            if not isinstance(set, dict) or not set:
                raise FieldTypeError("update takes a non-empty dict of field -> value")
            if "id" in set:
                raise FieldTypeError("the id of a document cannot be updated")
            t.schema.check_names(set, "update")
            new_vals = {name: coerce_values(name, t.schema.fields[name], [v])
                        for name, v in set.items()}
            rows = self._target_rows(t, where, params, ids)
            if not len(rows):
                return 0
            cols = {}
            for name, col in t.columns.items():
                if name in new_vals:
                    vals, nulls = new_vals[name]
                    cols[name] = (_repeat(vals, len(rows)), np.repeat(nulls, len(rows)))
                else:
                    cols[name] = col.take(rows)
            batch = Batch(_ids_of(t, rows), cols)
            self._write_delete(t, rows)
            self._write_insert(t, batch)
            return len(rows)

    def delete(self, ids: list | None = None, where: str | None = None,
               params: list | tuple = ()) -> int:
        """Delete live documents by id (a list) or by filter. Returns how many were deleted."""
        with self._db._writing():
            t = self._table
            check_params(params)
            rows = self._target_rows(t, where, params, ids)
            self._write_delete(t, rows)
            return len(rows)

    def _target_rows(self, t: Table, where, params, ids) -> np.ndarray:
        if (where is None) == (ids is None):
            raise FieldTypeError("give exactly one of ids= or where=")
        if ids is not None:
            keys = _id_list(coerce_ids(t.schema, ids))
            rows = t.live_rows(keys)
            return np.unique(rows[rows >= 0])
        v = self._db._engine.read_version()
        n = t.n
        mask = self._visible(t, v, n) & Filter(where, t.schema, params).mask(t, n)
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
        raw_ids = [r.get("id") for r in rows]
        ids = self._assign_ids(t, raw_ids)
        cols = {name: coerce_values(name, t.schema.fields[name], [r.get(name) for r in rows])
                for name in names if name != "id"}
        return Batch(ids, cols)

    def _assign_ids(self, t: Table, raw: list):
        missing = [i for i, v in enumerate(raw) if v is None]
        if not missing:
            return coerce_ids(t.schema, raw)
        given = [v for v in raw if v is not None]
        if t.schema.id_kind == "text":
            fresh = [uuid.uuid4().hex for _ in missing]
        else:
            given_ids = coerce_ids(t.schema, given)
            start = max(t.next_int_id, int(given_ids.max()) + 1 if len(given_ids) else 0)
            fresh = list(range(start, start + len(missing)))
        out = list(raw)
        for i, v in zip(missing, fresh):
            out[i] = v
        return coerce_ids(t.schema, out)

    def _check_new_ids(self, t: Table, ids) -> None:
        keys = _id_list(ids)
        _check_unique(keys)
        taken = t.live_rows(keys)
        if (taken >= 0).any():
            dup = keys[int(np.flatnonzero(taken >= 0)[0])]
            raise DuplicateIdError(f"id {dup!r} already exists in {self.name!r}")

    def _write_insert(self, t: Table, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        meta: dict[str, Any] = {"c": t.cid, "first": t.n, "n": n, "fields": sorted(batch.columns),
                                "lists": {}}
        arrays: dict[str, np.ndarray] = {}
        if t.schema.id_kind == "text":
            meta["ids"] = list(batch.ids)
        else:
            arrays["ids"] = np.asarray(batch.ids, np.int64)
        for name, (vals, nulls) in batch.columns.items():
            if isinstance(vals, list):
                meta["lists"][name] = vals
            else:
                arrays[f"v:{name}"] = vals
                arrays[f"n:{name}"] = nulls
        self._db._engine.write(Kind.INSERT, meta, arrays, rows_changed=n)

    def _write_delete(self, t: Table, rows: np.ndarray) -> None:
        if len(rows):
            self._db._engine.write(Kind.DELETE, {"c": t.cid},
                                   {"rows": np.asarray(rows, np.int64)}, rows_changed=len(rows))

    # ---- reads -----------------------------------------------------------------

    def get(self, id, as_of=None, select: list | None = None) -> dict | None:
        """The document with this id (as of a version or aware datetime), or None."""
        t = self._table
        names = self._select(t, select, vectors=True)
        v = self._db._engine.resolve_as_of(as_of)
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
        v = self._db._engine.resolve_as_of(as_of)
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
        v = self._db._engine.resolve_as_of(as_of)
        n = t.n
        mask = self._visible(t, v, n)
        if where is not None:
            mask = mask & Filter(where, t.schema, params).mask(t, n)
        rows = np.flatnonzero(mask)[:limit]
        return self._hits(t, rows, names, None, "filter scan")

    def create_index(self, field: str, index: HNSW) -> None:
        """Build a graph index on a vector field (best after a bulk load); kept current after."""
        with self._db._writing():
            t = self._table
            fname = self._vector_field(t, field)
            if not isinstance(index, HNSW):
                raise SchemaError(f"create_index takes vv.HNSW(...), got {index!r}")
            if fname in t.vector_indexes:
                raise SchemaError(f"{fname!r} already has a vector index")
            index.check()     # again: a frozen HNSW can still be altered by force
            self._db._engine.write(Kind.CREATE_INDEX, {"c": t.cid, "field": fname,
                                                        "spec": index.to_dict()})

    def index_status(self, field: str | None = None) -> dict:
        """How far a vector field's graph has caught up with the committed rows:
        {"field", "linked", "unlinked"}, counted in row versions.

        Commits return before their rows are linked; a background maintainer
        links them soon after, and searches find unlinked rows by exact scan
        meanwhile. Raises IndexMaintenanceError if linking failed (once)."""
        t = self._table
        fname = self._vector_field(t, field)
        if fname not in t.vector_indexes:
            raise SchemaError(f"{fname!r} has no vector index")
        return self._db._engine.index_status(t, fname)

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
        v = self._db._engine.resolve_as_of(as_of)
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
        v = self._db._engine.read_version()
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
        return self._db._engine.in_transaction() is None

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


def _check_unique(keys: list) -> None:
    if len(set(keys)) != len(keys):
        seen = set()
        dup = next(k for k in keys if k in seen or seen.add(k))
        raise DuplicateIdError(f"id {dup!r} appears twice in one batch")


def _repeat(vals, n: int):
    if isinstance(vals, list):
        return vals * n
    return np.repeat(vals, n, axis=0)


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
