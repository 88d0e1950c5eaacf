"""`Collection`: the document API of one collection (insert, search, time travel).

Every write validates its whole input first (schema.py), then calls one
engine verb inside its session's transaction — the open one, or one of its
own that commits when the call returns. A write that raises has written nothing.
Every read takes `as_of`, gets one Snapshot (`_snapshot`), plans (query/planner.py),
executes (query/execute.py) and builds Hit objects from the result columns here.
Every argument is checked at the door (schema.py holds the limits): a wrong
one raises a VarveError subclass before anything is read or written.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .errors import FieldTypeError, OptionError, SchemaError, UnknownFieldError
from .query.execute import Result, execute
from .query.filter import Filter, check_params
from .query.plan import PlanNode
from .query.planner import (RRF_K, Query, plan_count, plan_find, plan_hybrid, plan_rerank,
                            plan_search, plan_text)
from .query.text_query import text_query
from .results import Hit, Hits
from .schema import (HNSW, IVF_LIMITS, IVFPQ, MAX_EF, QUERY_METRICS, Batch,
                     batch_length, one_id,
                     Schema, coerce_array, check_query_metric, coerce_ids, coerce_query_vector, coerce_values,
                     brief, from_micros, is_int, parse_field, validate_name, vector_values)
from .engine.snapshot import Snapshot
from .engine.table import Table


class Collection:
    def __init__(self, db, name: str, session=None):
        self._db = db
        self.engine = db.engine
        self.name = name
        self._session = session      # None: the calling thread's default session
        self._all_fields = None    # (schema, its non-vector fields, all its fields)

    @property
    def database(self):
        """The Database this collection is in."""
        return self._db

    @property
    def _sess(self):
        return self._session or self._db.thread_session()

    @property
    def _tx(self):
        """The reader's open transaction (its session's), if any."""
        return self._sess.tx

    # ---- description ---------------------------------------------------------

    @property
    def table(self) -> Table:
        return self.engine.table(self.name)

    @property
    def schema(self) -> Schema:
        return self.table.schema

    def __repr__(self) -> str:
        return f"<Collection {self.name!r}>"

    def __len__(self) -> int:
        return self.count()

    # ---- writes: arguments checked here, then one engine verb ---------------------

    def insert(self, rows: dict | Iterable[dict]) -> list:
        """Insert new documents; an id already taken raises DuplicateIdError. Returns the ids."""
        with self._sess.writing() as tx:
            t = self.table
            batch = self._batch_from_rows(t, rows)
            self.engine.insert(tx, t, batch.ids, batch.columns)
            return _id_list(batch.ids)

    def insert_arrays(self, id=None, **columns) -> np.ndarray | list:
        """Insert documents given column-wise as arrays: the bulk path.

        `id` is optional (assigned when omitted); each keyword is a field
        (vectors as an (n, dim) array). Returns the ids.
        """
        with self._sess.writing() as tx:
            t = self.table
            t.schema.check_names(columns, "insert_arrays")
            n = batch_length(id, columns)
            ids = t.assign_ids([None] * n) if id is None else coerce_ids(t.schema, id)
            if len(ids) != n:
                raise FieldTypeError(f"{len(ids)} ids for {n} rows")
            cols = {name: coerce_array(name, t.schema.fields[name], arr, n)
                    for name, arr in columns.items()}
            self.engine.insert(tx, t, ids, cols)
            return ids

    def upsert(self, rows: dict | Iterable[dict]) -> list:
        """Insert documents, replacing any live document with the same id."""
        with self._sess.writing() as tx:
            t = self.table
            batch = self._batch_from_rows(t, rows)
            self.engine.upsert(tx, t, batch.ids, batch.columns)
            return _id_list(batch.ids)

    def update(self, set: dict, where: str | None = None, params: list | tuple = (),
               ids: list | None = None) -> int:
        """Set fields on the live documents matching `where` (or `ids`). Returns the count."""
        with self._sess.writing() as tx:
            t = self.table
            check_params(params)
            if not isinstance(set, dict) or not set:
                raise FieldTypeError("update takes a non-empty dict of field -> value")
            if "id" in set:
                raise FieldTypeError("the id of a document cannot be updated")
            t.schema.check_names(set, "update")
            values = {name: coerce_values(name, t.schema.fields[name], [v])
                      for name, v in set.items()}
            rows = self._target_rows(t, tx, where, params, ids)
            self.engine.update(tx, t, rows, values)
            return len(rows)

    def delete(self, ids: list | None = None, where: str | None = None,
               params: list | tuple = ()) -> int:
        """Delete live documents by id (a list) or by filter. Returns how many were deleted."""
        with self._sess.writing() as tx:
            t = self.table
            check_params(params)
            rows = self._target_rows(t, tx, where, params, ids)
            self.engine.delete(tx, t, rows)
            return len(rows)

    def create_index(self, field: str, index: HNSW | IVFPQ | str,
                     name: str | None = None) -> None:
        """Build an index: vv.HNSW(...) (a graph) or vv.IVFPQ(...) (k-means lists,
        trained on the rows present) on a vector field, best after a bulk load;
        or "hash" (equality) or "sorted" (ranges too) on a scalar field, built
        over the documents so far. Kept current after. `name` names a scalar
        index (a vector index spec carries its own name=)."""
        with self._sess.writing() as tx:
            t = self.table
            if isinstance(index, str):
                self.engine.create_scalar_index(tx, t, field, index, name)
                return
            if name is not None:
                raise SchemaError("a vector index takes its name in vv.HNSW(name=...) "
                                  "or vv.IVFPQ(name=...)")
            fname = self._vector_field(t, field)
            if not isinstance(index, (HNSW, IVFPQ)):
                raise SchemaError(f"create_index takes vv.HNSW(...), vv.IVFPQ(...), 'hash' "
                                  f"or 'sorted', got {brief(index)}")
            index.check()     # again: a frozen spec can still be altered by force
            self.engine.create_index(tx, t, fname, index)

    def drop_index(self, field: str) -> None:
        """Drop the index of a field (a vector field's graph, or a scalar index)."""
        with self._sess.writing() as tx:
            self.engine.drop_index(tx, self.table, field)

    # ---- schema changes: no document is rewritten ------------------------------
    # The schema is the current one for every read, as_of included: a renamed
    # field reads under its new name at every version, a dropped one is gone
    # from every version, an added one reads its default (or None) in the
    # documents written before it.

    def add_field(self, name: str, spec) -> None:
        """Add a field ("int", "vector(8)", vv.Int(default=0), ...); the documents
        so far read as its default, or None. A not_null field without a default
        on a collection that has documents raises NotNullViolationError."""
        with self._sess.writing() as tx:
            t = self.table
            validate_name(name, "field")
            self.engine.add_column(tx, t, name, parse_field(name, spec))

    def drop_field(self, name: str) -> None:
        """Drop a field, its values (at every version) and its indexes."""
        with self._sess.writing() as tx:
            self.engine.drop_column(tx, self.table, name)

    def rename_field(self, old: str, new: str) -> None:
        """Rename a field (its values and indexes go with it, at every version)."""
        with self._sess.writing() as tx:
            self.engine.rename_column(tx, self.table, old, new)

    def _target_rows(self, t: Table, tx, where, params, ids) -> np.ndarray:
        if (where is None) == (ids is None):
            raise FieldTypeError("give exactly one of ids= or where=")
        if ids is not None:
            keys = _id_list(coerce_ids(t.schema, ids))
            rows = t.live_rows(keys)
            return np.unique(rows[rows >= 0])
        snap = self.engine.snapshot(None, tx=tx)
        mask, _ = snap.visible(t)
        return np.flatnonzero(mask & Filter(where, t.schema, params).mask(t, snap.n(t)))

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
        fields = t.schema.fields
        # a row that omits a field gets its default; None given is null
        cols = {name: coerce_values(name, fields[name], [r.get(name) for r in rows]
                                    if fields[name].default is None else
                                    [r[name] if name in r else fields[name].default_value()
                                     for r in rows])
                for name in names if name != "id"}
        return Batch(ids, cols)

    # ---- reads -----------------------------------------------------------------

    def _snapshot(self, as_of, branch: str | None = None) -> Snapshot:
        return self._sess.snapshot(as_of, branch)

    def get(self, id, as_of=None, select: list | None = None) -> dict | None:
        """The document with this id (as of a version or aware datetime), or None."""
        t = self.table
        names = self._select(t, select, vectors=True)
        key = one_id(t.schema, id)
        snap = self._snapshot(as_of)
        row = snap.row_of(t, key)
        if row < 0:
            return None
        doc = {"id": t.id_value(row)}
        columns, fields = t.columns, t.schema.fields
        for name in names:
            v = columns[name].value(row)
            doc[name] = from_micros(v) if v is not None and \
                fields[name].kind == "timestamp" else v
        return doc

    def count(self, where: str | None = None, params: list | tuple = (), as_of=None) -> int:
        """How many documents are visible (as of a version), optionally filtered."""
        return execute(self._plan_count(where, params, as_of)).count

    def find(self, where: str | None = None, params: list | tuple = (), as_of=None,
             limit: int | None = None, select: list | None = None) -> Hits:
        """Documents matching a filter, in insertion order (no scoring); limit=None: all."""
        query = self._plan_find(where, params, as_of, limit, select)
        return self._hits(query.table, execute(query))

    def index_status(self, field: str | None = None) -> dict:
        """How far a vector field's graph has caught up with the committed rows:
        {"field", "linked", "unlinked"}, counted in row versions.

        Commits return before their rows are linked; a background maintainer
        links them soon after, and searches find unlinked rows by exact scan
        meanwhile. Raises IndexMaintenanceError if linking failed (once)."""
        t = self.table
        fname = self._vector_field(t, field)
        if fname not in t.vector_indexes:
            raise SchemaError(f"{fname!r} has no vector index")
        return self._db.engine.index_status(t, fname)

    def vector_memory(self, field: str | None = None) -> dict:
        """Memory of a vector field: {"field", "dtype", "dim", "vectors" (row
        versions), "bytes_per_vector" (one stored vector in the arena: 4 dim for
        f32, 2 dim for f16, dim for int8, ceil(dim / 8) for bit), "arena_bytes",
        "graph_bytes" and "graph_bytes_per_vector" (the HNSW graph's arrays, spare
        capacity included, over its nodes; 0 without a graph)}."""
        t = self.table
        fname = self._vector_field(t, field)
        f = t.schema.fields[fname]
        vi = t.vector_indexes.get(fname)
        graph = vi.memory_bytes() if vi is not None else 0
        nodes = len(vi.graph) if vi is not None else 0
        return {"field": fname, "dtype": f.dtype, "dim": f.dim, "vectors": t.n,
                "bytes_per_vector": f.bytes_per_vector,
                "arena_bytes": t.n * f.bytes_per_vector, "graph_bytes": graph,
                "graph_bytes_per_vector": round(graph / nodes, 1) if nodes else 0.0}

    def search(self, vector=None, where: str | None = None, params: list | tuple = (),
               limit: int = 10, select: list | None = None, as_of=None,
               field: str | None = None, ef: int | None = None, exact: bool = False,
               metric: str | None = None, *, probes: int | None = None,
               text: str | None = None,
               text_field: str | None = None, vector_text: str | None = None,
               rerank=None, candidates: int | None = None, rrf_k: int = RRF_K,
               weights: tuple = (1.0, 1.0)) -> Hits:
        """The `limit` best documents among those matching `where`: nearest to
        `vector`, best matching `text`, or both.

        Vector search: scores are pgvector's distances for `metric` (lower is
        closer): "cosine" (`<=>`), "l2" (`<->`), "dot" (`<#>`, the negative inner
        product) or "l1" (`<+>`); on a bit field "hamming" (`<~>`, the differing
        bits; its query is dim bools or 0/1) and nothing else; default the field's. A metric other than the
        one the field's graph was built for is answered by exact scan.
        `ef` widens the graph walk (default: the index's ef_search; at most
        MAX_EF); `probes` is how many lists an IVFPQ index scans (default its
        nprobe; more lists, higher recall); `exact=True` scans every allowed row.

        Text search (`text=`, on a vv.Text(fts=True) field, `text_field` if there
        are several): the query syntax is words (all required), "a phrase",
        OR, -word, prefix*, parentheses; scores are BM25 (higher is better).
        `vector_text=` is embedded by the vector field's embedder as `vector`.
        Both `text` and a vector: each finds `candidates` rows (default
        max(limit, 50)) and their rankings are fused by reciprocal rank
        (weight / (rrf_k + rank), `weights` = (text, vector)); the score is the
        fused one. `rerank=vector` with `text`: the text's `candidates` best rows
        ordered by exact distance to it (no graph).

        A limit above the allowed rows returns them all. `hits.plan` is the plan
        as it ran (fallbacks included)."""
        query = self._plan_search(vector, where, params, limit, select, as_of, field, ef, exact,
                                  metric, probes=probes, text=text, text_field=text_field,
                                  vector_text=vector_text, rerank=rerank,
                                  candidates=candidates, rrf_k=rrf_k, weights=weights)
        return self._hits(query.table, execute(query))

    def explain(self, verb: str = "search", /, **args) -> PlanNode:
        """The plan `search(**args)` (or `find`, `count`: explain("count", where=...))
        would run, built without running it: `str()` prints it as a tree, `.to_dict()`
        gives it as data. Planning a search counts the rows its filter allows (the
        strategy depends on it); the vector search itself is not run, so a walk that
        would fall back shows as planned — `hits.plan` shows what ran."""
        planners = {"search": self._plan_search, "find": self._plan_find,
                    "count": self._plan_count}
        plan = planners.get(verb) if isinstance(verb, str) else None
        if plan is None:
            raise OptionError(f"explain takes 'search', 'find' or 'count', got {brief(verb)}")
        return plan(**args).plan

    def history(self, id) -> list[dict]:
        """Every version of one document: [{version, deleted, doc}], oldest first."""
        t = self.table
        key = one_id(t.schema, id)
        snap = self._snapshot(None)
        rows, born, died = t.row_history(key, snap.view, snap.n(t))
        docs = self._docs(t, rows, self._select(t, None, vectors=True))
        return [{"version": b, "deleted": gone, "doc": d}
                for b, gone, d in zip(born, died, docs)]

    # ---- planning (explain shows these plans; the reads run them) ------------------

    def _plan_search(self, vector=None, where: str | None = None, params: list | tuple = (),
                     limit: int = 10, select: list | None = None, as_of=None,
                     field: str | None = None, ef: int | None = None,
                     exact: bool = False, metric: str | None = None, *,
                     probes: int | None = None,
                     text: str | None = None, text_field: str | None = None,
                     vector_text: str | None = None, rerank=None,
                     candidates: int | None = None, rrf_k: int = RRF_K,
                     weights: tuple = (1.0, 1.0)) -> Query:
        t = self.table
        if text is None and rerank is None and vector_text is not None and vector is None:
            fname = self._vector_field(t, field)          # a vector search by text alone
            vector = _embed_query(t.schema.fields[fname], fname, vector_text)
            vector_text = None
        if text is not None or vector_text is not None or rerank is not None:
            if vector is not None or vector_text is not None:
                ef = self._width(t, field, ef, probes)
            return self._plan_text_search(t, vector, where, params, limit, select, as_of,
                                          field, ef, exact, metric, text, text_field,
                                          vector_text, rerank, candidates, rrf_k, weights)
        if vector is None:
            raise FieldTypeError("search needs vector= or text=")
        fname = self._vector_field(t, field)
        f = t.schema.fields[fname]
        q = coerce_query_vector(f, vector)
        if type(limit) is not int or limit < 0:
            limit = _limit(limit)
        ef = self._width(t, fname, ef, probes)
        metric = self._query_metric(f, metric)
        if exact is not False and exact is not True:
            if not isinstance(exact, np.bool_):
                raise FieldTypeError(f"exact is True or False, got {brief(exact)}")
            exact = bool(exact)
        if type(params) is not tuple:
            check_params(params)
        names = self._select(t, select)
        bound = None if where is None else Filter(where, t.schema, params)
        return plan_search(self._snapshot(as_of), t, fname, metric, q, limit, bound, ef,
                           exact, names)

    def _width(self, t: Table, field: str | None, ef, probes) -> int | None:
        """The search width the field's index takes: `ef` for a graph, `probes`
        for IVF lists (both checked; the other one does not apply, as pgvector's
        hnsw.ef_search does not to an ivfflat index)."""
        for name, value, high in (("ef", ef, MAX_EF), ("probes", probes, IVF_LIMITS["lists"][1])):
            if value is not None and (not is_int(value) or not 1 <= value <= high):
                raise FieldTypeError(f"{name} must be an integer in 1..{high}, "
                                     f"got {brief(value)}")
        vi = t.vector_indexes.get(self._vector_field(t, field))
        width = probes if vi is not None and vi.is_ivf else ef
        return None if width is None else int(width)

    def _plan_text_search(self, t, vector, where, params, limit, select, as_of, field, ef,
                          exact, metric, text, text_field, vector_text, rerank, candidates,
                          rrf_k, weights) -> Query:
        """search() with text=: a text top-k, fused with a vector one, or reranked."""
        if text is None:
            raise FieldTypeError("vector_text= and rerank= go with text= (a text query)")
        if vector is not None and vector_text is not None:
            raise FieldTypeError("give vector= or vector_text=, not both")
        if rerank is not None and (vector is not None or vector_text is not None):
            raise FieldTypeError("rerank= orders the text matches by a vector: give it "
                                 "instead of vector=")
        limit = _limit(limit)
        tfield = self._text_field(t, text_field)
        bound = text_query(text, t.text_indexes[tfield].analyzer)
        snap = self._snapshot(as_of)
        check_params(params)
        names = self._select(t, select)
        fbound = None if where is None else Filter(where, t.schema, params)
        if vector is None and vector_text is None and rerank is None:
            return plan_text(snap, t, tfield, text, bound, limit, fbound, names)
        candidates = max(limit, 50) if candidates is None else _limit(candidates)
        if candidates < 1:
            raise FieldTypeError("candidates must be a positive integer")
        vfield = self._vector_field(t, field)
        f = t.schema.fields[vfield]
        if vector_text is not None:
            vector = _embed_query(f, vfield, vector_text)
        q = coerce_query_vector(f, rerank if rerank is not None else vector)
        metric = self._query_metric(f, metric)
        if rerank is not None:
            return plan_rerank(snap, t, (tfield, text, bound), vfield, metric, q, limit,
                               candidates, fbound, names)
        if not is_int(rrf_k) or not 1 <= rrf_k <= 10**6:
            raise FieldTypeError(f"rrf_k must be an integer in 1..1000000, got {brief(rrf_k)}")
        if not isinstance(weights, (tuple, list)) or len(weights) != 2 or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0
                and math.isfinite(w) for w in weights):
            raise FieldTypeError(f"weights are two non-negative numbers (text, vector), "
                                 f"got {brief(weights)}")
        return plan_hybrid(snap, t, (tfield, text, bound),
                           (vfield, metric, q, None if ef is None else int(ef), bool(exact)),
                           limit, candidates, int(rrf_k), tuple(float(w) for w in weights),
                           fbound, names)

    def _plan_find(self, where: str | None = None, params: list | tuple = (), as_of=None,
                   limit: int | None = None, select: list | None = None) -> Query:
        t = self.table
        check_params(params)
        if limit is not None:
            limit = _limit(limit)     # a negative one sliced [:-1], dropping a row
        names = self._select(t, select)
        bound = None if where is None else Filter(where, t.schema, params)
        return plan_find(self._snapshot(as_of), t, bound, limit, names)

    def _plan_count(self, where: str | None = None, params: list | tuple = (),
                    as_of=None) -> Query:
        t = self.table
        check_params(params)
        bound = None if where is None else Filter(where, t.schema, params)
        return plan_count(self._snapshot(as_of), t, bound)

    # ---- helpers -----------------------------------------------------------------

    def _text_field(self, t: Table, field: str | None) -> str:
        texts = list(t.text_indexes)
        if field is None:
            if len(texts) != 1:
                raise UnknownFieldError(
                    f"{self.name!r} has full-text fields {texts}; say which with text_field="
                    if texts else f"{self.name!r} has no full-text field (vv.Text(fts=True))")
            return texts[0]
        if field not in texts:
            raise UnknownFieldError(f"{field!r} is not a full-text field of {self.name!r} "
                                    f"(vv.Text(fts=True)); full-text fields are {texts}")
        return field

    @staticmethod
    def _query_metric(f, metric: str | None) -> str:
        if metric is None:
            return f.metric
        if not isinstance(metric, str) or metric not in QUERY_METRICS:
            raise OptionError(f"metric is one of {', '.join(QUERY_METRICS)}, got {brief(metric)}")
        metric = QUERY_METRICS[QUERY_METRICS.index(metric)]   # a plain str (np.str_ too)
        check_query_metric(f, metric)     # hamming for bit fields, and only for them
        return metric

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

    def _select(self, t: Table, select, vectors: bool = False) -> tuple:
        if select is None:
            cached = self._all_fields
            if cached is None or cached[0] is not t.schema:
                fs = t.schema.fields
                cached = self._all_fields = (
                    t.schema, tuple(n for n, f in fs.items() if f.kind != "vector"), tuple(fs))
            return cached[2] if vectors else cached[1]
        if type(select) is list and not select:
            return ()
        if not isinstance(select, (list, tuple)) or not all(isinstance(s, str) for s in select):
            raise FieldTypeError(f"select is a list of field names, got {brief(select)}")
        t.schema.check_names(select, "select")
        return tuple(s for s in select if s != "id")

    def _docs(self, t: Table, rows: np.ndarray, names) -> list[dict]:
        """Materialise rows as dicts (columnar takes, then one zip)."""
        cols = self._columns(t, rows, names)
        keys = ["id", *names]
        return [dict(zip(keys, vals)) for vals in zip(*cols)]

    def _hits(self, t: Table, res: Result) -> Hits:
        """The API edge: Hit objects from the executor's columns."""
        rows, names = res.rows, res.fields
        ids = t.id_values(rows)
        scores = [None] * len(ids) if res.scores is None else res.scores.tolist()
        if not names:
            return Hits([Hit(i, s, {}) for i, s in zip(ids, scores)], plan=res.plan)
        cols = [_pyvalues(t.schema.fields[name], *t.columns[name].take(rows))
                for name in names]
        return Hits([Hit(i, s, dict(zip(names, vals)))
                     for i, s, vals in zip(ids, scores, zip(*cols))], plan=res.plan)

    @staticmethod
    def _columns(t: Table, rows: np.ndarray, names) -> list[list]:
        """The ids, then each named field, of `rows` as Python lists (columnar takes)."""
        rows = np.asarray(rows, np.int64)
        cols = [_ids_of(t, rows)]
        for name in names:
            cols.append(_pyvalues(t.schema.fields[name], *t.columns[name].take(rows)))
        return cols


def _embed_query(f, name: str, text) -> np.ndarray:
    """vector_text= as the vector field's embedder makes it."""
    if f.embed is None:
        raise SchemaError(f"vector field {name!r} names no embedder "
                          "(vv.Vector(..., embed=..., source=...)): give vector=")
    if not isinstance(text, str):
        raise FieldTypeError(f"vector_text is a string, got {brief(text)}")
    from .embed import embed_batched, resolve
    return embed_batched(resolve(f.embed), [text], progress=False)[0]   # checked, normalized


def _pyvalues(f, vals, nulls) -> list:
    nulls = np.asarray(nulls).tolist()
    kind = f.kind
    if kind == "vector":
        vs = list(vector_values(f, vals))   # float32, int8, or bool (bit)
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
        raise FieldTypeError(f"limit must be a non-negative integer, got {brief(limit)}")
    return int(limit)


