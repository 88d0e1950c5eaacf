"""`Collection`: the document API of one collection (insert, search, time travel).

Every write validates its whole input first (schema.py), then calls one
engine verb inside its session's transaction — the open one, or one of its
own that commits when the call returns. A write that raises has written nothing.
Every read is a request (query/request.py: search, find and count build one;
`run` answers one), bound to the table and its session's snapshot
(query/bind.py), executed (query/execute.py), and its Hit objects built here
from the result columns.
Every argument is checked at the door (schema.py holds the limits): a wrong
one raises a VarveError subclass before anything is read or written.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import numpy as np

from .errors import FieldTypeError, OptionError, SchemaError
from .query.bind import bind, corpus_stats, select_fields, vector_field
from .query.execute import Result, execute
from .query.filter import Filter, check_params
from .query.plan import PlanNode
from .query.prepared import PreparedSearch, keep, request_shape, shape
from .query.request import REQUESTS, RRF_K, WEIGHTS, Count, Find, Search, check_select
from .results import Hits
from .sparse import SparseVector
from .tabular import frame_columns
from .schema import (HNSW, IVFPQ, Batch, Schema, batch_length, brief, coerce_array,
                     coerce_ids, coerce_values, complete_columns,
                     from_micros, one_id, parse_field, validate_name, vector_values)
from .engine.embedding import fill_embedded, unchanged_texts
from .engine.table import Table


_MANY = object()     # get() without an id: a list of documents


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

    # Each write is checked, coerced and its texts embedded before the writer
    # lock is taken, so the model never runs under it; under the lock, ids are
    # assigned and the engine writes. A schema changed meanwhile (by another
    # session) has the batch made again under the lock (the engine embeds then).

    def insert(self, rows: dict | Iterable[dict]) -> list:
        """Insert new documents; an id already taken raises DuplicateIdError. Returns the ids.

        `rows` is a dict, a list of dicts, or a table: a pandas DataFrame, a pyarrow
        Table or RecordBatch, a polars DataFrame, whose columns (an "id" column
        optional) are fields, written column-wise as `insert_arrays` writes them (a
        list or fixed-size-list column of numbers is a vector field's block)."""
        columns = None if type(rows) is dict else frame_columns(rows)
        if columns is not None:
            return _id_list(self.insert_arrays(**columns))
        batch = self.prepare_rows(rows)
        with self._sess.writing() as tx:
            return self.insert_prepared(tx, batch)

    def insert_arrays(self, id=None, **columns) -> np.ndarray | list:
        """Insert documents given column-wise as arrays: the bulk path.

        `id` is optional (assigned when omitted); each keyword is a field
        (vectors as an (n, dim) array). Returns the ids.
        """
        t = self.table
        schema = t.schema
        given, cols = self._arrays_batch(t, id, columns)
        with self._sess.writing() as tx:
            if self.table is not t or t.schema is not schema:
                t = self.table
                given, cols = self._arrays_batch(t, id, columns)
            n = batch_length(id, columns)
            ids = t.fresh_ids(n) if given is None else given
            self.engine.insert(tx, t, ids, cols)
            return ids

    def upsert(self, rows: dict | Iterable[dict], merge: bool = True) -> list:
        """Insert documents, or merge each into the live document with its id: a
        field the row names takes its value (None sets null), a field it does not
        name keeps its value — as SQL's INSERT ... ON CONFLICT (id) DO UPDATE SET
        naming the row's fields. An embedded vector the row does not give is made
        again from a new source text the row gives (kept when the text is the
        stored one, or not named). Rows
        of one call may name different fields. merge=False: `replace`. Returns the ids."""
        if merge is not True:
            if merge is False:
                return self.replace(rows)
            raise OptionError(f"merge is True or False, got {brief(merge)}")
        columns = frame_columns(rows)
        if columns is not None:
            return self._write_columns(columns, merge=True)
        batch = self.prepare_rows(rows, merge=True)
        with self._sess.writing() as tx:
            t, ids, batch = self.prepared_now(batch)
            self.engine.upsert(tx, t, ids, batch.columns, batch.named)
            return _id_list(ids)

    def replace(self, rows: dict | Iterable[dict]) -> list:
        """Insert documents, each replacing the whole live document with its id: a
        field the row does not name gets its default, or null (`upsert(rows,
        merge=False)`). Returns the ids."""
        columns = frame_columns(rows)
        if columns is not None:
            return self._write_columns(columns, merge=False)
        batch = self.prepare_rows(rows)
        with self._sess.writing() as tx:
            t, ids, batch = self.prepared_now(batch)
            self.engine.replace(tx, t, ids, batch.columns)
            return _id_list(ids)

    def update(self, set: dict, where: str | None = None, params: list | tuple = (),
               ids: list | None = None) -> int:
        """Set fields on the live documents matching `where` (or `ids`). Returns the count."""
        t = self.table
        schema = t.schema
        values = self._update_values(t, set, params)
        with self._sess.writing() as tx:
            if self.table is not t or t.schema is not schema:
                t = self.table
                values = self._update_values(t, set, params)
            rows = self._target_rows(t, tx, where, params, ids)
            self.engine.update(tx, t, rows, values)
            return len(rows)

    def prepare_rows(self, rows: dict | Iterable[dict], merge: bool = False) -> "PreparedRows":
        """Rows checked and coerced, their defaults and embedded vectors filled:
        what a write does before it takes the writer lock (SQL's INSERT too).
        merge=True (upsert's): no default filled where a row does not name a field
        and no not_null checked (a live document's values may fill them), and
        which rows name which field kept (`named`)."""
        t = self.table
        rows = _row_list(rows)
        b, named = self._batch_from_rows(t, rows, merge)
        return PreparedRows(t, t.schema, rows, b.ids, b.columns, named)

    def insert_prepared(self, tx, batch: "PreparedRows") -> list:
        """Under the writer lock (`tx`): insert prepared rows; returns their ids."""
        t, ids, batch = self.prepared_now(batch)
        self.engine.insert(tx, t, ids, batch.columns)
        return _id_list(ids)

    def prepared_now(self, batch: "PreparedRows") -> tuple:
        """Under the writer lock: (table, ids, batch) of prepared rows, the ids
        assigned now (the batch made again if the schema changed since)."""
        t = self.table
        if t is not batch.table or t.schema is not batch.schema:
            b, named = self._batch_from_rows(t, batch.rows, batch.named is not None)
            batch = PreparedRows(t, t.schema, batch.rows, b.ids, b.columns, named)
        return t, t.assign_ids(batch.ids), batch

    def _write_columns(self, columns: dict, merge: bool) -> list:
        """upsert / replace of a table's columns (tabular.frame_columns): checked and
        coerced column-wise as insert_arrays does, then one engine verb; every row
        names every column, so a merge keeps only the fields the table lacks."""
        id = columns.pop("id", None)
        t = self.table
        schema = t.schema
        given, cols = self._arrays_batch(t, id, columns, merge)
        with self._sess.writing() as tx:
            if self.table is not t or t.schema is not schema:
                t = self.table
                given, cols = self._arrays_batch(t, id, columns, merge)
            n = batch_length(id, columns)
            ids = t.fresh_ids(n) if given is None else given
            if merge:
                self.engine.upsert(tx, t, ids, cols, {})
            else:
                self.engine.replace(tx, t, ids, cols)
            return _id_list(ids)

    def _arrays_batch(self, t: Table, id, columns: dict, merge: bool = False) -> tuple:
        """(ids coerced or None, columns coerced and embedded) of insert_arrays."""
        t.schema.check_names(columns, "insert_arrays")
        n = batch_length(id, columns)
        ids = None if id is None else coerce_ids(t.schema, id)
        if ids is not None and len(ids) != n:
            raise FieldTypeError(f"{len(ids)} ids for {n} rows")
        cols = {name: coerce_array(name, t.schema.fields[name], arr, n)
                for name, arr in columns.items()}
        if merge:
            keys = [None] * n if ids is None else _id_list(ids)
            return ids, _embedded_merge(t, keys, cols, {}, n)
        return ids, _embedded(t.schema, cols, n)

    def _update_values(self, t: Table, set: dict, params) -> dict:
        """An update's values, one row each, with the vectors of the texts it sets
        embedded (a vector filled from a text it changes, and not set itself)."""
        check_params(params)
        if not isinstance(set, dict) or not set:
            raise FieldTypeError("update takes a non-empty dict of field -> value")
        if "id" in set:
            raise FieldTypeError("the id of a document cannot be updated")
        schema = t.schema
        schema.check_names(set, "update")
        values = {name: coerce_values(name, schema.fields[name], [v]) for name, v in set.items()}
        stale = [name for name in schema.embedded
                 if name not in values and schema.fields[name].source in values]
        return fill_embedded(schema, values, 1, stale) if stale else values

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
                     name: str | None = None, *, parts=None) -> None:
        """Build an index: vv.HNSW(...) (a graph) or vv.IVFPQ(...) (k-means lists,
        trained on the rows present) on a vector field, best after a bulk load;
        or "hash" (equality) or "sorted" (ranges too) on a scalar field, built
        over the documents so far. Kept current after. `name` names a scalar
        index (a vector index spec carries its own name=). `parts`: an IVF-PQ
        index built in this call, its rows encoded by `parts(index, vectors, norms,
        rows)` (integrations/ray.py's build_index: in Ray tasks)."""
        with self._sess.writing() as tx:
            t = self.table
            if isinstance(index, str):
                self.engine.create_scalar_index(tx, t, field, index, name)
                return
            if name is not None:
                raise SchemaError("a vector index takes its name in vv.HNSW(name=...) "
                                  "or vv.IVFPQ(name=...)")
            fname = vector_field(t, field)
            if not isinstance(index, (HNSW, IVFPQ)):
                raise SchemaError(f"create_index takes vv.HNSW(...), vv.IVFPQ(...), 'hash' "
                                  f"or 'sorted', got {brief(index)}")
            index.check()     # again: a frozen spec can still be altered by force
            if parts is not None and not (isinstance(index, IVFPQ) and callable(parts)):
                raise OptionError("parts= (an encoder of row parts) builds a vv.IVFPQ "
                                  f"index, got {brief(index)} and {brief(parts)}")
            self.engine.create_index(tx, t, fname, index, parts)

    def drop_index(self, field: str, index: str | None = None) -> None:
        """Drop the index of a field (a vector field's graph, or a scalar index);
        `index`: the one of that name among a vector field's indexes (dropping its
        own index, the next of its further ones takes its place)."""
        with self._sess.writing() as tx:
            self.engine.drop_index(tx, self.table, field, index)

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
            rows = rows[rows >= 0]
            # one row is its own sorted set: np.unique's hash table and sort cost a
            # one-row update or delete ~5 us warm, ~90 us in a cache cold from fsync
            return rows if len(rows) < 2 else np.unique(rows)
        snap = self.engine.snapshot(None, tx=tx)
        mask, _ = snap.visible(t)
        return np.flatnonzero(mask & Filter(where, t.schema, params).mask(t, snap.n(t)))

    def _batch_from_rows(self, t: Table, rows: list, merge: bool = False) -> tuple:
        """(Batch, named): the rows' ids as given (None: to assign) and their
        columns, coerced, completed and embedded; `named` (merge only, else None):
        field -> bool mask of the rows naming it, for the fields some rows leave out."""
        fields = t.schema.fields
        if len(rows) == 1:          # one row names every field it has: no default here
            row = rows[0]
            t.schema.check_names(row)
            ids = [row.get("id")]
            cols = {name: coerce_values(name, fields[name], [v])
                    for name, v in row.items() if name != "id"}
        else:
            names = set().union(*rows) if rows else set()
            t.schema.check_names(names)
            ids = [r.get("id") for r in rows]
            # a row that omits a field gets its default; None given is null
            cols = {name: coerce_values(name, fields[name], [r.get(name) for r in rows]
                                        if fields[name].default is None else
                                        [r[name] if name in r else fields[name].default_value()
                                         for r in rows])
                    for name in names if name != "id"}
        if not merge:
            return Batch(ids, _embedded(t.schema, cols, len(rows))), None
        named = {}
        if len(rows) > 1 and any(len(r) != len(names) for r in rows):
            named = {name: np.fromiter((name in r for r in rows), bool, len(rows))
                     for name in cols}
            named = {name: m for name, m in named.items() if not m.all()}
        return Batch(ids, _embedded_merge(t, ids, cols, named, len(rows))), named

    # ---- reads -----------------------------------------------------------------

    def get(self, id=_MANY, as_of=None, select: list | None = None, *, ids: list | None = None,
            where: str | None = None, params: list | tuple = (), limit: int | None = None,
            offset: int = 0, branch: str | None = None) -> dict | list[dict] | None:
        """get(id): the document with this id (as of a version or aware datetime),
        or None. Without the id: a list of documents — those of `ids` in that order
        (an id with no document skipped), or with no ids every one in insertion
        order — those matching `where` if given, `offset` skipped, then at most
        `limit` (None: all). Documents hold every field (vectors too) or `select`'s."""
        if id is _MANY:
            return self._get_many(ids, where, params, limit, offset, as_of, select, branch)
        if ids is not None or where is not None or params not in ((), []) or limit is not None \
                or offset != 0 or branch is not None:
            raise FieldTypeError("get(id) answers one document; get(ids=[...], where=..., "
                                 "limit=..., offset=...) a list")
        t = self.table
        names = select_fields(t, check_select(select), vectors=True)
        key = one_id(t.schema, id)
        snap = self._sess.snapshot(as_of)
        row = snap.row_of(t, key)
        if row < 0:
            return None
        doc = {"id": t.id_value(row)}
        columns, fields = t.columns, t.schema.fields
        for name in names:
            v, kind = columns[name].value(row), fields[name].kind
            if v is not None and kind in ("timestamp", "sparsevec"):
                v = from_micros(v) if kind == "timestamp" else SparseVector.from_blob(v)
            doc[name] = v
        return doc

    def _get_many(self, ids, where, params, limit, offset, as_of, select, branch) -> list[dict]:
        t = self.table
        if select is None:
            select = select_fields(t, None, vectors=True)
        request = Find.of(where, params, as_of, limit, select, branch, offset, ids)
        res = execute(bind(request, t, self._sess.snapshot(request.as_of, request.branch)))
        return self._docs(t, res.rows, res.fields)

    def count(self, where: str | None = None, params: list | tuple = (), as_of=None,
              branch: str | None = None) -> int:
        """How many documents are visible (as of a version), optionally filtered."""
        return self.run(Count.of(where, params, as_of, branch))

    def find(self, where: str | None = None, params: list | tuple = (), as_of=None,
             limit: int | None = None, select: list | None = None,
             branch: str | None = None, offset: int = 0) -> Hits:
        """Documents matching a filter, in insertion order (no scoring): `offset`
        skipped, then at most `limit` (None: all)."""
        return self.run(Find.of(where, params, as_of, limit, select, branch, offset))

    def corpus_stats(self, request: Search):
        """The BM25 statistics (query/request.py CorpusStats) the text leg of
        `request` is scored with here, at its snapshot (as_of, branch): what a
        shard of a sharded collection reports for the coordinator to sum."""
        return corpus_stats(request, self.table,
                            self._sess.snapshot(request.as_of, request.branch))

    def run(self, request: Search | Find | Count) -> Hits | int:
        """Answer a read request (query/request.py): what search(), find() and
        count() build, and what the server and SQL carry. A Count answers an int."""
        t = self.table
        if type(request) is Search and request.vectors is not None:
            return self._run_batch(t, request)
        key = request_shape(request) if type(request) is Search else None
        if key is not None:
            hits = self._kept(key, request.vector.vector)
            if hits is not None:
                return hits
        sess = self._sess
        tx = sess.tx
        snap = sess.snapshot(request.as_of, request.branch)
        query = bind(request, t, snap)
        if type(request) is Count:
            return execute(query).count
        if key is not None and tx is None and snap.final:
            keep(t.prepared, key, (snap.version, sess.branch_id), query)
        res = execute(query)
        return self._hits(t, res.rows, res.scores, res.fields, res.plan)

    def _run_batch(self, t: Table, request: Search) -> list[Hits]:
        """A batch search (request.vectors): every row's search at one snapshot,
        bound once where the plan allows (a vector top-k alone: query/prepared.py),
        else each row bound at that snapshot; rows run on parallel threads."""
        reqs = request.each()
        if not reqs:
            return []
        snap = self._sess.snapshot(request.as_of, request.branch)
        first = bind(reqs[0], t, snap)
        if PreparedSearch.fits(first):
            prep = PreparedSearch(None, first)

            def one(r):
                rows, scores, plan = prep.run(r.vector.vector)
                return self._hits(t, rows, scores, prep.fields, plan)
        else:
            def one(r):
                res = execute(first if r is reqs[0] else bind(r, t, snap))
                return self._hits(t, res.rows, res.scores, res.fields, res.plan)
        if len(reqs) == 1:
            return [one(reqs[0])]
        return parallel_map(one, reqs)

    def index_status(self, field: str | None = None) -> dict:
        """How far a field's deferred index (a vector field's graph or lists, a text
        field's full-text index; None: the vector field) has caught up with the
        committed rows: {"field", "linked", "unlinked"}, counted in row versions,
        with "rows_per_s" (rows the maintainer linked a second lately; None until it
        has linked some) and "eta_s" (seconds left at that rate; 0.0 when none is
        left, None when no rate is known).

        Commits return before their rows are indexed; a background maintainer
        indexes them soon after, and searches find the others by exact scan
        meanwhile. Raises IndexMaintenanceError if indexing failed (once)."""
        t = self.table
        if field is not None and field in t.text_indexes:
            return self._db.engine.index_status(t, field)
        fname = vector_field(t, field)
        if fname not in t.vector_indexes:
            raise SchemaError(f"{fname!r} has no vector index")
        return self._db.engine.index_status(t, fname)

    def wait_indexed(self, field: str | None = None, timeout: float | None = None,
                     progress: bool | None = None) -> bool:
        """Wait until a field's deferred index (as in :meth:`index_status`) covers
        every row committed before this call; True then, False if `timeout`
        seconds passed first (None: no limit). Woken by the maintainer as it links,
        never polling. `progress`: a bar of the rows indexed meanwhile (rows, rows/s,
        ETA; None: when 50 000 rows or more are left and stderr is a terminal) —
        after `create_index` over loaded rows, the way to watch the graph build.
        Raises IndexMaintenanceError if indexing failed."""
        t = self.table
        if field is None or field not in t.text_indexes:
            field = vector_field(t, field)
            if field not in t.vector_indexes:
                raise SchemaError(f"{field!r} has no vector index")
        return self._db.engine.wait_indexed(t, field, timeout, progress)

    def vector_memory(self, field: str | None = None) -> dict:
        """Memory of a vector field: {"field", "dtype", "dim", "vectors" (row
        versions), "bytes_per_vector" (one stored vector in the arena: 4 dim for
        f32, 2 dim for f16, dim for int8, ceil(dim / 8) for bit), "arena_bytes",
        "graph_bytes" (the index's arrays, spare capacity included: what it holds)
        and "graph_bytes_per_vector" (what its linked nodes use, over them: rows
        not linked yet count in neither; 0 without an index)}."""
        t = self.table
        fname = vector_field(t, field)
        f = t.schema.fields[fname]
        vi = t.vector_indexes.get(fname)
        graph = vi.nbytes() if vi is not None else 0
        nodes = vi.nodes() if vi is not None else 0
        used = vi.node_bytes() if nodes else 0
        return {"field": fname, "dtype": f.dtype, "dim": f.dim, "vectors": t.n,
                "bytes_per_vector": f.bytes_per_vector,
                "arena_bytes": t.n * f.bytes_per_vector, "graph_bytes": graph,
                "graph_bytes_per_vector": round(used / nodes, 1) if nodes else 0.0}

    def search(self, vector=None, where: str | None = None, params: list | tuple = (),
               limit: int = 10, select: list | None = None, as_of=None,
               field: str | None = None, ef: int | None = None, exact: bool = False,
               metric: str | None = None, *, probes: int | None = None,
               text: str | None = None, match: str = "all",
               text_field: str | None = None, vector_text: str | None = None,
               rerank=None, candidates: int | None = None, rrf_k: int = RRF_K,
               weights: tuple = WEIGHTS, branch: str | None = None,
               vectors=None) -> Hits | list[Hits]:
        """The `limit` best documents among those matching `where`: nearest to
        `vector`, best matching `text`, or both.

        `vectors=` (a 2-D array, one query vector a row) instead of `vector`: a
        batch, answered as a list of Hits in the rows' order, each as `vector=`
        that row would be; the rows are searched on parallel threads (the kernels
        release the GIL), all at one snapshot, the plan bound once.

        Vector search: scores are pgvector's distances for `metric` (lower is
        closer): "cosine" (`<=>`), "l2" (`<->`), "dot" (`<#>`, the negative inner
        product) or "l1" (`<+>`); on a bit field "hamming" (`<~>`, the differing
        bits; its query is dim bools or 0/1) and nothing else; default the field's. A metric other than the
        one the field's graph was built for is answered by exact scan.
        `ef` widens the graph walk (default: the index's ef_search; at most
        MAX_EF); `probes` is how many lists an IVFPQ index scans (default its
        nprobe; more lists, higher recall); `exact=True` scans every allowed row.
        A document whose vector field is NULL has no distance and is never a hit
        (a nearest-neighbour search; SQL's `ORDER BY v <-> q LIMIT k`, an ORDER BY,
        sorts its NULL distance last and returns it once the others run out).

        Text search (`text=`, on a vv.Text(fts=True) field, `text_field` if there
        are several): the query syntax is words, "a phrase", OR, -word, prefix*,
        parentheses; scores are BM25 (higher is better). Words side by side are
        all required with `match="all"` (the default); with `match="any"` a row
        holding any of them matches (a question in plain words: "how do I read a
        file line by line"), ranked by BM25, and -word still excludes.
        `vector_text=` is embedded by the vector field's embedder as `vector`.
        Both `text` and a vector: each finds `candidates` rows (default
        max(limit, 50)) and their rankings are fused by reciprocal rank
        (weight / (rrf_k + rank), `weights` = (text, vector)); the score is the
        fused one. `rerank=vector` with `text`: the text's `candidates` best rows
        ordered by exact distance to it (no graph).

        A limit above the allowed rows returns them all. `hits.plan` is the plan
        as it ran (fallbacks included)."""
        # A vector search whose shape was searched before at this state skips the
        # request, binding and planning (query/prepared.py): only exact-typed
        # arguments, and the text and fusion ones at their defaults, so that a value
        # the request would refuse never finds a kept plan.
        if vector is not None and text is None and vector_text is None and rerank is None \
                and as_of is None and branch is None and vectors is None \
                and type(limit) is int and (ef is None or type(ef) is int) \
                and (exact is False or exact is True) and (probes is None or type(probes) is int) \
                and text_field is None and candidates is None and rrf_k is RRF_K \
                and weights is WEIGHTS and type(match) is str and match == "all":
            hits = self._kept(shape(where, tuple(params) if type(params) is list else params,
                                    limit, tuple(select) if type(select) is list else select,
                                    field, ef, exact, metric, probes), vector)
            if hits is not None:
                return hits
        return self.run(Search.of(vector, where, params, limit, select, as_of, field, ef, exact,
                                  metric, probes=probes, text=text, text_field=text_field,
                                  vector_text=vector_text, rerank=rerank,
                                  candidates=candidates, rrf_k=rrf_k, weights=weights,
                                  branch=branch, match=match, vectors=vectors))

    def _kept(self, key, vector) -> Hits | None:
        """The search kept under `key` run with `vector`, if it was kept at this
        state (None: bind it)."""
        t = self.engine.table(self.name)
        try:
            kept = t.prepared.get(key)
        except TypeError:               # an unhashable argument: bound each time
            return None
        if kept is None or kept.state != (self._session
                                          or self._db.thread_session()).read_state():
            return None
        rows, scores, plan = kept.run(vector)
        names = kept.fields     # (_hits inlined: this is the hot path)
        return Hits.of_columns(t.id_values, rows, scores, names,
                               _field_columns(t, rows, names) if names else _NO_COLUMNS, plan,
                               t.schema.fields)

    def explain(self, verb: str = "search", /, **args) -> PlanNode:
        """The plan `search(**args)` (or `find`, `count`: explain("count", where=...))
        would run, built without running it: `str()` prints it as a tree, `.to_dict()`
        gives it as data. Planning a search counts the rows its filter allows (the
        strategy depends on it); the vector search itself is not run, so a walk that
        would fall back shows as planned — `hits.plan` shows what ran."""
        kind = REQUESTS.get(verb) if isinstance(verb, str) else None
        if kind is None:
            raise OptionError(f"explain takes 'search', 'find' or 'count', got {brief(verb)}")
        return self.plan(kind.of(**args))

    def plan(self, request: Search | Find | Count) -> PlanNode:
        """The plan a request (query/request.py) would run, without running it
        (explain's, for a request already made: the server's POST .../explain)."""
        if not isinstance(request, (Search, Find, Count)):
            raise OptionError(f"plan takes a Search, Find or Count, got {brief(request)}")
        return bind(request, self.table,
                    self._sess.snapshot(request.as_of, request.branch)).plan

    def history(self, id) -> list[dict]:
        """Every version of one document: [{version, deleted, doc}], oldest first."""
        t = self.table
        key = one_id(t.schema, id)
        snap = self._sess.snapshot()
        rows, born, died = t.row_history(key, snap.view, snap.n(t))
        docs = self._docs(t, rows, select_fields(t, None, vectors=True))
        return [{"version": b, "deleted": gone, "doc": d}
                for b, gone, d in zip(born, died, docs)]

    # ---- helpers -----------------------------------------------------------------

    def _docs(self, t: Table, rows: np.ndarray, names) -> list[dict]:
        """Materialise rows as dicts (columnar takes, then one zip)."""
        cols = self._columns(t, rows, names)
        keys = ["id", *names]
        return [dict(zip(keys, vals)) for vals in zip(*cols)]

    @staticmethod
    def _hits(t: Table, rows, scores, names: tuple, plan) -> Hits:
        """The API edge: Hits over the executor's columns (Hit objects made on use)."""
        return Hits.of_columns(t.id_values, rows, scores, names,
                               _field_columns(t, rows, names) if names else _NO_COLUMNS, plan,
                               t.schema.fields)

    @staticmethod
    def _columns(t: Table, rows: np.ndarray, names) -> list[list]:
        """The ids, then each named field, of `rows` as Python lists (columnar takes)."""
        rows = np.asarray(rows, np.int64)
        return [_ids_of(t, rows), *_field_columns(t, rows, names)]


class PreparedRows(NamedTuple):
    """Rows ready to write but for their ids (Collection.prepare_rows); a tuple,
    made at every one-row insert (a frozen dataclass costs a setattr a field)."""
    table: Table
    schema: Schema
    rows: list
    ids: list            # as given: None where one is assigned under the lock
    columns: dict
    named: dict | None = None     # an upsert's merge: field -> rows naming it (engine.upsert)


_POOL = None          # the threads of batch searches (made on first use)


def parallel_map(fn, items: list) -> list:
    """fn over items on a shared thread pool, in order, each in a copy of the
    caller's context (its cancel token: cancel.py); the first error raises."""
    global _POOL
    if _POOL is None:
        import concurrent.futures
        import os
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=min(32, os.cpu_count() or 1),
                                                      thread_name_prefix="varvedb-batch")
    import contextvars
    futures = [_POOL.submit(contextvars.copy_context().run, fn, x) for x in items]
    return [f.result() for f in futures]


def _row_list(rows) -> list:
    if isinstance(rows, dict):
        return [rows]
    if isinstance(rows, (str, bytes, bytearray)) or not hasattr(rows, "__iter__"):
        raise FieldTypeError(f"rows are a dict or a list of dicts, got {type(rows).__name__}")
    rows = list(rows)
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise FieldTypeError(f"rows are dicts of field -> value, got {type(rows[bad]).__name__}")
    return rows


def _embedded(schema: Schema, cols: dict, n: int) -> dict:
    """New rows' columns with their defaults and embedded vectors filled (the
    engine fills again what is still missing: nothing, unless the schema changed)."""
    if not n or not schema.embedded:
        return cols
    return fill_embedded(schema, complete_columns(schema, cols, n), n)


def _embedded_merge(t: Table, ids: list, cols: dict, named: dict, n: int) -> dict:
    """An upsert's columns with the vectors of the new source texts its rows name
    (other than their live document's, as the table is now) embedded where the
    row gives no vector; those rows then name the vector (`named` updated), so
    the engine keeps it, not the live document's. Should a live text change
    before the writer lock is taken, the engine embeds under it."""
    schema = t.schema
    if not n or not schema.embedded:
        return cols
    old = t.live_rows([k if type(k) in (int, str) else None for k in ids])
    allow = {}
    for name in schema.embedded:
        source = schema.fields[name].source
        if source not in cols:
            continue
        by_text = named.get(source)
        by_text = np.ones(n, bool) if by_text is None else by_text
        by_text = by_text & ~unchanged_texts(t, source, old, by_text, cols[source])
        allow[name] = by_text
        vmask = named.get(name) if name in cols else np.zeros(n, bool)
        if vmask is None:                        # every row names the vector
            continue
        vmask = vmask | by_text
        if vmask.all():
            named.pop(name, None)
        else:
            named[name] = vmask
    return fill_embedded(schema, cols, n, allow=allow) if allow else cols


_NO_COLUMNS = ()     # a search that returns no fields (shared: Hits never writes it)


def _field_columns(t: Table, rows, names: tuple) -> list[list]:
    """The named fields of `rows`, a list of Python values each (columnar takes)."""
    return [_pyvalues(t.schema.fields[name], *t.columns[name].take(rows)) for name in names]


def _pyvalues(f, vals, nulls) -> list:
    nulls = np.asarray(nulls).tolist()
    kind = f.kind
    if kind == "vector":
        vs = list(vector_values(f, vals))   # float32, int8, or bool (bit)
    elif kind == "timestamp":
        vs = [from_micros(x) for x in vals.tolist()]
    elif kind == "sparsevec":
        vs = [None if b is None else SparseVector.from_blob(b) for b in vals]
    elif isinstance(vals, list):
        vs = vals
    else:
        vs = vals.tolist()
    return [None if nl else x for x, nl in zip(vs, nulls)]


def _ids_of(t: Table, rows: np.ndarray) -> list:
    return t.id_values(rows)


def _id_list(ids) -> list:
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
