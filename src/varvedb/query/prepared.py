"""A vector search bound once and kept, as a prepared statement is.

The first search of a shape (everything but the vector: filter, parameters,
limit, fields, width, metric) is bound and planned as any read is; the plan,
the filter's and visibility's mask and the strategy are kept with the state
they were taken at (the version read and the branch). The next search of that
shape at the same state goes straight to the top-k with its new vector:
nothing is bound, no mask is evaluated, no plan is built. Any commit, another
branch, an open transaction or a new table object (DDL, vacuum) is a new state:
the caller binds again. The API's searches are kept as `PreparedSearch` (run
through `execute.vector_topk` alone); SQL's vector ORDER BY as `KeptPlan`, its
tree with the new vector swapped into the VectorTopK.

The cache lives on the table (`Table.prepared`), so it is shared by every
collection object and session reading that table, and dies with it.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .execute import Result, vector_topk
from .plan import Project, VectorTopK
from .planner import Query

MAX_PREPARED = 64       # shapes kept per table; the cache starts over past it
MAX_PREPARED_BYTES = 64 << 20   # and the masks they hold (a filter's: a byte a row)


class PreparedSearch:
    """A planned Project(VectorTopK(...)) and the state it was planned at."""
    __slots__ = ("state", "query", "node", "mask", "allowed", "n", "fields")

    def __init__(self, state, query: Query):
        self.state = state
        self.query = query
        self.node = query.plan.input
        self.mask, self.allowed = query.masks[id(self.node.input)]
        self.n = query.snapshot.n(query.table)
        self.fields = query.plan.fields

    @staticmethod
    def fits(query: Query) -> bool:
        """Can this planned search be kept (a vector top-k alone, under Project)?"""
        plan = query.plan
        return (type(plan) is Project and type(plan.input) is VectorTopK
                and id(plan.input.input) in query.masks)

    def run(self, q) -> Result:
        """The top-k of `q` (already coerced to the field's type)."""
        query = self.query
        rows, dists, ran = vector_topk(self.node, query.table, self.n, self.mask,
                                       self.allowed, q)
        plan = query.plan if ran is self.node else Project(self.fields, ran)
        return Result(rows, dists, len(rows), self.fields, plan)


def shape(where, params, limit, select, field, ef, exact, metric, probes) -> tuple:
    """A vector search's shape: everything but the vector (the cache's key)."""
    return (where, params, limit, select, field, ef, exact, metric, probes)


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
    planned at: the next run swaps its query vector in (`with_vector`)."""
    __slots__ = ("state", "query", "mask")

    def __init__(self, state, query: Query):
        self.state = state
        self.query = query
        self.mask = max((m for m, _ in query.masks.values()), key=len, default=_NO_MASK)

    def with_vector(self, q, env) -> Query:
        """The kept plan asking for `q`, with this run's parameters `env`."""
        kept = self.query
        return Query(_with_vector(kept.plan, q), kept.snapshot, kept.table, kept.masks, env)


def _with_vector(node, q):
    if type(node) is VectorTopK:
        return replace(node, query=q)
    return replace(node, input=_with_vector(node.input, q))


_NO_MASK = np.zeros(0, bool)


def keep(cache: dict, key, state, query: Query) -> None:
    """Keep a planned search under `key` in a table's cache, if it can be kept:
    a Project(VectorTopK) (the API's), or a SQL plan whose one VectorTopK lies
    under Output and Limit."""
    if PreparedSearch.fits(query):
        kept = PreparedSearch(state, query)
    elif _sql_fits(query.plan):
        kept = KeptPlan(state, query)
    else:
        return
    if len(cache) >= MAX_PREPARED or kept.mask.nbytes + sum(
            p.mask.nbytes for p in cache.values()) > MAX_PREPARED_BYTES:
        cache.clear()
    if kept.mask.nbytes <= MAX_PREPARED_BYTES:
        cache[key] = kept


def _sql_fits(node) -> bool:
    while node.NODE in ("Output", "Limit"):
        node = node.input
    return type(node) is VectorTopK
