"""A vector search bound once and kept, as a prepared statement is.

The first search of a shape (everything but the vector: filter, parameters,
limit, fields, width, metric) is bound and planned as any read is; the plan,
the filter's and visibility's mask and the strategy are kept with the state
they were taken at (the version read and the branch). The next search of that
shape at the same state goes straight to the top-k with its new vector:
nothing is bound, no mask is evaluated, no plan is built. Any commit, another
branch, an open transaction or a new table object (DDL, vacuum) is a new state:
the caller binds again.

The cache lives on the table (`Table.prepared`), so it is shared by every
collection object and session reading that table, and dies with it.
"""
from __future__ import annotations

from .execute import Result, vector_topk
from .plan import Project, VectorTopK
from .planner import Query

MAX_PREPARED = 64       # shapes kept per table; the cache starts over past it


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


def keep(cache: dict, key, state, query: Query) -> None:
    """Keep a planned search under `key` in a table's cache, if it can be kept."""
    if PreparedSearch.fits(query):
        if len(cache) >= MAX_PREPARED:
            cache.clear()
        cache[key] = PreparedSearch(state, query)
