"""Bind a read request to a table and a snapshot: where its arguments meet the schema.

`bind(request, table, snapshot, settings)` is the one place a `Search`, `Find`
or `Count` (query/request.py) becomes a planned `Query`: the field a leg names
(or the only one there is), the query vector coerced to the field's type (or
the field's embedder run on `vector_text`), the metric the field can answer,
the index's width (a graph's `ef`, an IVF index's `probes`; SQL's session
settings hnsw.ef_search / ivfflat.probes where the request gives none), the
filter bound to the schema and its parameters, and the fields returned.

`bind` wraps the answer in the API's `Project` (id, score, fields); SQL calls
`bind_legs`, which leaves the ranked legs bare for its own Limit/Output.
"""
from __future__ import annotations

from ..errors import FieldTypeError, SchemaError, UnknownFieldError
import numpy as np

from ..index.vector_index import HnswVectorIndex, IvfVectorIndex
from ..schema import check_query_metric, coerce_ids, coerce_query_vector
from .execute import text_corpus
from .filter import Filter
from .plan import Project
from .planner import Query, plan_count, plan_find, plan_hybrid, plan_rerank, plan_search, \
    plan_text
from .request import Count, Find, Search
from .text_query import text_query

CANDIDATES = 50     # each leg's rows before fusion or rerank, at least


def bind(request, table, snap, settings: dict | None = None) -> Query:
    """The planned read of `request` (a Search, Find or Count) against `table` as
    `snap` sees it. VarveErrors for what the schema refuses."""
    kind = type(request)
    if kind is Search:
        query = bind_legs(request, table, snap, settings)
        query.plan = Project(select_fields(table, request.select), query.plan)
        return query
    where = bind_where(table, request.where, request.params)
    if kind is Find:
        keys = None
        if request.ids is not None:
            keys = coerce_ids(table.schema, list(request.ids))
            keys = keys.tolist() if isinstance(keys, np.ndarray) else keys
        return plan_find(snap, table, where, request.limit,
                         select_fields(table, request.select), request.offset, keys)
    if kind is Count:
        return plan_count(snap, table, where)
    raise TypeError(f"bind takes a Search, Find or Count, got {type(request).__name__}")


def bind_legs(req: Search, table, snap, settings: dict | None = None) -> Query:
    """A search's ranked rows, unwrapped: VectorTopK, TextTopK, or Limit over a
    Fusion or a Rerank (rows and scores, no fields)."""
    v, tl = req.vector, req.text
    where = bind_where(table, req.where, req.params)
    if tl is None or tl.text is None:
        if v is None or v.vector is None and v.text is None:
            raise FieldTypeError("search needs vector= or text=")
        field, metric, q, width = vector_leg(table, v, settings)
        return plan_search(snap, table, field, metric, q, req.limit, where, width, v.exact)
    tfield = text_field(table, tl.field)
    text = (tfield, tl.text, text_query(tl.text, table.text_indexes[tfield].analyzer,
                                        tl.match), tl.match, tl.corpus)
    if v is None or v.vector is None and v.text is None:
        return plan_text(snap, table, *text, req.limit, where)
    candidates = leg_rows(req)
    field, metric, q, width = vector_leg(table, v, settings)
    if req.rerank:
        return plan_rerank(snap, table, text, field, metric, q, req.limit, candidates, where)
    return plan_hybrid(snap, table, text, (field, metric, q, width, v.exact), req.limit,
                       candidates, req.rrf_k, req.weights, where)


def leg_rows(req: Search) -> int:
    """The rows each leg of a hybrid or reranked search finds before fusion or rerank
    (`candidates`, default the limit and at least CANDIDATES)."""
    return max(req.limit, CANDIDATES) if req.candidates is None else req.candidates


def corpus_stats(req: Search, table, snap):
    """The CorpusStats that `req`'s text leg is scored with on `table` as `snap`
    sees it (its visible rows): what a shard of a sharded collection reports."""
    tl = req.text
    if tl is None or tl.text is None:
        raise FieldTypeError("corpus statistics are a text query's: give text=")
    field = text_field(table, tl.field)
    bound = text_query(tl.text, table.text_indexes[field].analyzer, tl.match)
    return text_corpus(table, snap, field, bound)


def vector_leg(table, v, settings: dict | None = None) -> tuple:
    """(field, metric, query vector, width) of a VectorLeg on `table`."""
    field = vector_field(table, v.field)
    f = table.schema.fields[field]
    vector = v.vector if v.text is None else embed_query(f, field, v.text)
    q = coerce_query_vector(f, vector)
    metric = f.metric if v.metric is None else v.metric
    if v.metric is not None:
        check_query_metric(f, metric)     # hamming for bit fields, and only for them
    return field, metric, q, search_widths(v.ef, v.probes, settings)


def search_widths(ef: int | None, probes: int | None, settings: dict | None = None) -> dict:
    """The width a search asks of each kind of vector index, by its knob: a
    graph's `ef`, the lists an IVF index `probes`; None: the session's setting of
    that kind (SQL's hnsw.ef_search, ivfflat.probes), else the index's own. The
    index the search ranks through takes its own kind's (planner._vector_leg), as
    pgvector's hnsw.ef_search does not reach an ivfflat index."""
    widths = {}
    for kind, asked in ((HnswVectorIndex, ef), (IvfVectorIndex, probes)):
        widths[kind.knob] = asked if asked is not None or not settings \
            else settings.get(kind.setting)
    return widths


def bind_where(table, where, params):
    """A filter bound to the schema and `params` (None: none). A filter bound
    already (SQL's WHERE, which has its own parameters) is used as it is."""
    if where is None or hasattr(where, "mask"):
        return where
    return Filter(where, table.schema, params)


def vector_field(table, field: str | None) -> str:
    vecs = table.schema.vector_fields
    if field is None:
        if len(vecs) != 1:
            raise UnknownFieldError(f"{table.name!r} has vector fields {vecs}; "
                                    "say which with field=")
        return vecs[0]
    if field not in vecs:
        raise UnknownFieldError(f"{field!r} is not a vector field of {table.name!r}")
    return field


def text_field(table, field: str | None) -> str:
    texts = list(table.text_indexes)
    if field is None:
        if len(texts) != 1:
            raise UnknownFieldError(
                f"{table.name!r} has full-text fields {texts}; say which with text_field="
                if texts else f"{table.name!r} has no full-text field (vv.Text(fts=True))")
        return texts[0]
    if field not in texts:
        raise UnknownFieldError(f"{field!r} is not a full-text field of {table.name!r} "
                                f"(vv.Text(fts=True)); full-text fields are {texts}")
    return field


_ALL_FIELDS: dict = {}      # id(schema) -> (schema, non-vector fields, all fields)


def select_fields(table, select, vectors: bool = False) -> tuple:
    """The fields a read returns besides the id: `select` (checked against the
    schema), or None: every field (vectors only when asked)."""
    schema = table.schema
    if select is None:
        cached = _ALL_FIELDS.get(id(schema))
        if cached is None or cached[0] is not schema:
            fs = schema.fields
            if len(_ALL_FIELDS) > 256:
                _ALL_FIELDS.clear()
            cached = _ALL_FIELDS[id(schema)] = (
                schema, tuple(n for n, f in fs.items() if f.kind != "vector"), tuple(fs))
        return cached[2] if vectors else cached[1]
    if not select:
        return ()
    schema.check_names(select, "select")
    return tuple(s for s in select if s != "id")


def embed_query(f, name: str, text: str):
    """vector_text= as the vector field's embedder makes it."""
    if f.embed is None:
        raise SchemaError(f"vector field {name!r} names no embedder "
                          "(vv.Vector(..., embed=..., source=...)): give vector=")
    from ..embed import embed_batched, resolve
    return embed_batched(resolve(f.embed), [text], progress=False)[0]   # checked, normalized
