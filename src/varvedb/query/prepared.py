"""A vector search bound once and kept, as a prepared statement is.

The first search of a shape (everything but the vector: filter, parameters,
limit, fields, width, metric) is bound and planned as any read is; the plan,
the filter's and visibility's mask and the strategy are kept with the state
they were taken at (the version read and the branch). The next search of that
shape at the same state goes straight to the top-k with its new vector:
nothing is bound, no mask is evaluated, no plan is built. Any commit, another
branch, an open transaction or a new table object (DDL, vacuum) is a new state:
the caller binds again. The API's searches are kept as `PreparedSearch`: its
top-k bound once more, to everything but the vector (`execute.topk_searcher`: the
scan's or the walk's arguments, the arena views, the mask), so that a search
is one kernel call; SQL's vector ORDER BY as `KeptPlan`, its
tree with the new vector swapped into the VectorTopK.

The cache lives on the table (`Table.prepared`), so it is shared by every
collection object and session reading that table, and dies with it.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..schema import coerce_query_vector
from .execute import topk_searcher, vector_topk
from .plan import Project, VectorTopK
from .planner import Query

MAX_PREPARED = 64       # shapes kept per table; the cache starts over past it
MAX_PREPARED_BYTES = 64 << 20   # and the bytes they hold (masks, scan copies: nbytes)


class PreparedSearch:
    """A planned Project(VectorTopK(...)) and the state it was planned at, with
    its top-k bound to everything but the query vector (execute.topk_searcher)."""
    __slots__ = ("state", "query", "node", "mask", "allowed", "n", "fields", "field",
                 "top_k", "query_shape", "nbytes")

    def __init__(self, state, query: Query):
        self.state = state
        self.query = query
        self.node = node = query.plan.input
        self.mask, self.allowed = query.masks[id(node.input)]
        self.n = query.snapshot.n(query.table)
        self.fields = query.plan.fields
        self.field = query.table.schema.fields[node.field]
        self.top_k = BoundTopK(node, query.table, self.n, self.mask, self.allowed)
        # the query a kernel takes as it is (query_vector's test, its field's part once)
        self.query_shape = (self.field.dim if self.field.dtype != "bit" else -1,)
        self.nbytes = self.mask.nbytes + self.top_k.nbytes

    @staticmethod
    def fits(query: Query) -> bool:
        """Can this planned search be kept (a vector top-k alone, under Project)?"""
        plan = query.plan
        return (type(plan) is Project and type(plan.input) is VectorTopK
                and id(plan.input.input) in query.masks)

    def run(self, vector) -> tuple:
        """The top-k of `vector` (any query vector the field takes): (rows, float64
        scores, the plan as it ran); the fields returned are `fields`."""
        # (query_vector and BoundTopK.search inlined: this is the hot path; a query
        # the kernels take as it is, C order, aligned and writable (carray), goes to
        # the searcher's unchecked entry)
        top_k = self.top_k
        if type(vector) is np.ndarray and vector.dtype is _F32 \
                and vector.shape == self.query_shape and vector.flags.carray:
            fn = top_k.checked
            q = vector
        else:
            fn = top_k.fn
            q = query_vector(self.field, vector)
        got = None if fn is None else fn(q)
        if got is not None:
            return got[0], got[1], self.query.plan
        if fn is not None:
            top_k.rebind()
        query = self.query
        rows, dists, ran = vector_topk(self.node, query.table, self.n, self.mask,
                                       self.allowed, q)
        return rows, dists, query.plan if ran is self.node else Project(self.fields, ran)


def query_vector(f, vector) -> np.ndarray:
    """A kept search's query vector for field `f`, C-contiguous as the kernels take
    it: a float32 vector of its dimension as it is (the kernels refuse NaN and inf
    themselves), else coerced."""
    # (`is`: float32 is one dtype object; any other spelling takes the coercion)
    if type(vector) is np.ndarray and vector.dtype is _F32 and vector.ndim == 1 \
            and vector.shape[0] == f.dim and vector.flags.c_contiguous \
            and f.dtype != "bit":   # (a bit query is packed)
        return vector
    return np.ascontiguousarray(coerce_query_vector(f, vector))


_F32 = np.dtype(np.float32)


class BoundTopK:
    """A planned VectorTopK bound to everything but the query vector
    (`execute.topk_searcher`), bound again whenever its pass falls short (the
    index moved on, a walk short of k), so that the next search finds it fresh."""
    __slots__ = ("node", "table", "n", "mask", "allowed", "fn", "checked", "nbytes")

    def __init__(self, node: VectorTopK, table, n: int, mask, allowed: int):
        self.node, self.table, self.n, self.mask, self.allowed = node, table, n, mask, allowed
        self.rebind()
        # the most its searcher holds besides the arena and the mask (the exact
        # scan's scratch and float16 copy: index/flat.py), for keep's byte cap
        self.nbytes = getattr(self.fn, "nbytes", 0)

    def search(self, q) -> tuple | None:
        """(rows, scores) of `q` in one pass, or None: run the node in full."""
        fn = self.fn
        if fn is None:
            return None
        got = fn(q)
        if got is None:
            self.rebind()
        return got

    def rebind(self) -> None:
        """Bound again after a pass fell short, so that the next search finds it fresh.
        `checked`: the searcher for a float32 query of the field's dimension, C
        order, aligned and writable (index/flat.py's unchecked entry, or `fn`)."""
        self.fn = fn = topk_searcher(self.node, self.table, self.n, self.mask, self.allowed)
        self.checked = getattr(fn, "checked", fn)


def shape(where, params, limit, select, field, ef, exact, metric, probes) -> tuple:
    """A vector search's shape: everything but the vector (the cache's key), the
    parameters with their types."""
    params = _NO_PARAMS if type(params) is tuple and not params else typed_key(params)
    return (where, params, limit, select, field, ef, exact, metric, probes)


def typed_key(value):
    """`value` as a cache key that tells types apart (1, 1.0 and True hash alike),
    inside tuples too; unhashable values stay so (the caller binds each time)."""
    if type(value) is tuple:
        return (tuple, tuple([typed_key(v) for v in value])) if value else _NO_PARAMS
    return (type(value), value)


_NO_PARAMS = (tuple, ())


def request_shape(req) -> tuple | None:
    """The shape of a Search request, or None if it cannot be kept (a text leg,
    an embedded query, a rerank, as_of or another branch)."""
    v = req.vector
    if v is None or req.text is not None or v.text is not None or v.vector is None \
            or req.rerank or req.as_of is not None or req.branch is not None:
        return None
    return shape(req.where, req.params, req.limit, req.select, v.field, v.ef, v.exact,
                 v.metric, v.probes)


class KeptPlan:
    """A planned SQL vector search (Output over its legs) and the state it was
    planned at: the next run asks its VectorTopK's bound top-k for the new
    vector and hands the rows to the kept tree (`with_vector`)."""
    __slots__ = ("state", "query", "mask", "node", "top_k", "nbytes")

    def __init__(self, state, query: Query):
        self.state = state
        self.query = query
        self.mask = max((m for m, _ in query.masks.values()), key=len, default=_NO_MASK)
        node = query.plan
        while type(node) is not VectorTopK:
            node = node.input
        self.node = node
        got = query.masks.get(id(node.input))     # (none: no one-pass top-k)
        self.top_k = None if got is None else BoundTopK(
            node, query.table, query.snapshot.n(query.table), *got)
        self.nbytes = self.mask.nbytes + (0 if self.top_k is None else self.top_k.nbytes)

    def with_vector(self, q, env) -> Query:
        """The kept plan asking for `q` (coerced), with this run's parameters `env`."""
        kept = self.query
        got = None if self.top_k is None else self.top_k.search(q)
        if got is not None:
            query = Query(kept.plan, kept.snapshot, kept.table, kept.masks, env)
            query.given = {id(self.node): got}
            return query
        return Query(_with_vector(kept.plan, q), kept.snapshot, kept.table, kept.masks, env)


def _with_vector(node, q):
    if type(node) is VectorTopK:
        return replace(node, query=q)
    return replace(node, input=_with_vector(node.input, q))


_NO_MASK = np.zeros(0, bool)


def keep(cache: dict, key, state, query: Query) -> None:
    """Keep a planned search under `key` in a table's cache, if it can be kept:
    a Project(VectorTopK) (the API's), or a SQL plan whose one VectorTopK lies
    under Output and Limit. Searches in other threads keep plans in the same
    cache meanwhile: its values are read as one list (a single call under the
    GIL), never iterated while another thread may add or clear."""
    if PreparedSearch.fits(query):
        kept = PreparedSearch(state, query)
    elif _sql_fits(query.plan):
        kept = KeptPlan(state, query)
    else:
        return
    # (nbytes: the most a kept search holds, its mask, its searcher's scratch and
    # float16 copy; Table.memory_bytes counts the same)
    if len(cache) >= MAX_PREPARED or kept.nbytes + sum(
            p.nbytes for p in list(cache.values())) > MAX_PREPARED_BYTES:
        cache.clear()
    if kept.nbytes <= MAX_PREPARED_BYTES:
        cache[key] = kept


def _sql_fits(node) -> bool:
    while node.NODE in ("Output", "Limit"):
        node = node.input
    return type(node) is VectorTopK
