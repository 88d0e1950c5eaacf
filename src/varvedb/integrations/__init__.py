"""Stores for retrieval frameworks over a varvedb collection.

    from varvedb.integrations.langchain import VarveVectorStore      # extra: langchain
    from varvedb.integrations.llama_index import VarveVectorStore    # extra: llamaindex

Nothing here is imported by `import varvedb`: each module imports its framework
when it is itself imported. What both share: the collection they keep
(`open_collection`), metadata filters as `where` strings whose values travel as
$n parameters (`MetaWhere`), and relevance scores per metric.

A metadata filter nests at most `MAX_FILTER_DEPTH` levels, the engine's bound
on a `where` (so a filter that compiles here, the engine's parser accepts),
counted on the where it compiles to (`Sql.depth`, never less than the
engine's count); deeper raises FilterError, checked before each descent, so
no filter, however deep, reaches Python's recursion limit.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import (DimensionError, FieldTypeError, FilterError, NotFoundError, OptionError,
                      SchemaError)
from ..query.filter import MAX_FILTER_DEPTH
from ..schema import brief

TEXT, METADATA, VECTOR = "text", "metadata", "embedding"


def quote_literal(s: str) -> str:
    """An SQL string literal: the one place a key becomes filter text (values
    never do; they go as parameters)."""
    if not isinstance(s, str):
        raise FilterError(f"a metadata key is a string, got {brief(s)}")
    if "\x00" in s:
        raise FilterError("a metadata key cannot contain NUL")
    return "'" + s.replace("'", "''") + "'"


class Sql(str):
    """A where fragment that knows how deep it nests, at least as deep as the
    engine's filter parser counts it: a comparison is 1; AND, OR and NOT one
    more than their deepest part (a one-part AND / OR too, though it adds no
    text: each level of a user's filter counts)."""

    def __new__(cls, text: str, depth: int = 1):
        s = super().__new__(cls, text)
        s.depth = depth
        return s


def depth(part: str) -> int:
    return getattr(part, "depth", 1)


def join(op: str, parts: list[str]) -> Sql:
    if not parts:
        return Sql("true" if op == "AND" else "false")
    text = parts[0] if len(parts) == 1 else "(" + f" {op} ".join(parts) + ")"
    return Sql(text, 1 + max(map(depth, parts)))


def negate(part: str) -> Sql:
    return Sql(f"NOT ({part})", 1 + depth(part))


def too_deep() -> FilterError:
    return FilterError(f"a metadata filter nests more than {MAX_FILTER_DEPTH} levels "
                       "(counting its and / or / not and the levels each comparison "
                       "compiles to; varvedb.integrations.MAX_FILTER_DEPTH, the bound "
                       "on a where filter)")


def check_descent(above: int) -> None:
    """Called before compiling a nested filter under `above` levels: one more
    cannot fit, so the walk stops here, long before Python's recursion limit."""
    if above >= MAX_FILTER_DEPTH:
        raise too_deep()


def within_bound(where: Sql) -> str:
    """A compiled filter, checked; as a plain str, which is what goes over the wire."""
    if depth(where) > MAX_FILTER_DEPTH:
        raise too_deep()
    return str(where)


class MetaWhere:
    """Builds one `where` string over a json metadata field; every value is a
    $n parameter (`params`), so no value can change the filter's meaning.

    Comparisons follow JSON types: a bool matches only a bool (`->>` text
    'true'/'false'), a number only a number (never a bool, which Python would
    equal to 1), a string only a string. A missing key, or a json null, is SQL's
    NULL: no comparison matches it (`!=` and `nin` included), as in pgvector stores."""

    def __init__(self, field: str = METADATA):
        self.field = field
        self.params: list = []

    def param(self, v) -> str:
        self.params.append(v)
        return f"${len(self.params)}"

    def path(self, key: str, as_text: bool = False) -> str:
        return f"{self.field}{'->>' if as_text else '->'}{quote_literal(key)}"

    def cmp(self, key: str, op: str, value) -> str:
        """`key op value` for op in = <> < <= > >=; bool and number values
        nest two or three levels deep (the JSON type test beside them)."""
        path, text = self.path(key), self.path(key, True)
        bools = f"{text} IN ('true', 'false')"
        if isinstance(value, bool):
            if op not in ("=", "<>"):
                raise FilterError(f"a boolean metadata value takes = or !=, not {op}")
            # Python's True == 1: the text form tells a json bool from a number
            if op == "=":
                return join("AND", [f"{path} = {self.param(value)}", bools])
            return join("OR", [f"{path} <> {self.param(value)}", negate(bools)])
        if isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise FilterError(f"a metadata filter value is finite, got {value!r}")
            if op == "<>":
                return join("OR", [f"{path} <> {self.param(value)}", bools])
            return join("AND", [f"{path} {op} {self.param(value)}", negate(bools)])
        if isinstance(value, str):
            return f"{path} {op} {self.param(value)}"
        if value is None and op in ("=", "<>"):
            return f"{path} IS {'NOT ' if op == '<>' else ''}NULL"
        raise FilterError(f"a metadata filter value is a str, int, float or bool "
                          f"(or None with = and !=), got {brief(value)}")

    def one_of(self, key: str, values, negated: bool = False) -> str:
        if not isinstance(values, (list, tuple, set, frozenset)):
            raise FilterError(f"in / nin take a list of values, got {brief(values)}")
        if not values:
            return "true" if negated else "false"
        ors = join("OR", [self.cmp(key, "=", v) for v in values])
        return join("AND", [negate(ors), f"{self.path(key)} IS NOT NULL"]) if negated else ors

    def exists(self, key: str, yes: bool = True) -> str:
        return f"{self.path(key)} IS {'NOT ' if yes else ''}NULL"

    def like(self, key: str, pattern, icase: bool = False) -> str:
        if not isinstance(pattern, str):
            raise FilterError(f"like takes a string pattern, got {brief(pattern)}")
        return f"{self.path(key, True)} {'ILIKE' if icase else 'LIKE'} {self.param(pattern)}"


def and_where(a: str | None, b: str | None) -> str | None:
    """Two filters, both required (either may be None)."""
    if a is None or b is None:
        return a if b is None else b
    return f"({a}) AND ({b})"


def renumber(where: str, shift: int) -> str:
    """A user's `where` with its $n parameters moved up by `shift` (so that its
    params can follow ones already taken). The $n are found by PostgreSQL's own
    lexer (pglast's scan, what the filter parser reads), so no string of any
    form ('', E'' with its backslashes, $$ $$, U&''), quoted identifier, comment
    or name holding a $ is rewritten."""
    if not shift:
        return where
    from pglast.parser import ParseError, scan
    try:
        tokens = scan(where)
    except ParseError as e:
        raise FilterError(f"malformed filter {where!r}: {e}") from None
    except UnicodeEncodeError:
        raise FilterError(f"filter {brief(where)} is not valid Unicode (a lone "
                          "surrogate)") from None
    out, at = [], 0
    for t in tokens:     # start, end: character offsets, end inclusive
        if t.name == "PARAM":
            out += [where[at:t.start], f"${int(where[t.start + 1:t.end + 1]) + shift}"]
            at = t.end + 1
    return "".join(out) + where[at:]


# ---- relevance: a distance as a score in [0, 1], higher is closer ---------------

def embed_texts(embedder, texts) -> list[list[float]]:
    """`texts` embedded by a varvedb embedder as the frameworks want them: lists
    of floats, one per text (none for none), in one length-sorted batched call,
    which checks them (a str is refused, never embedded character by character)."""
    from ..embed import embed_batched
    return embed_batched(embedder, texts, progress=False).tolist()


def relevance_fn(metric: str):
    """varvedb's distance for `metric` (pgvector's operators) -> [0, 1].

    cosine (1 - cos, in [0, 2]): 1 - d / 2. l2 and l1 (in [0, inf)): 1 / (1 + d).
    dot (the negative inner product): (1 + ip) / 2, clipped to [0, 1], which is
    exact for unit vectors (the case dot is chosen for) and keeps the order
    among them."""
    if metric == "cosine":
        return lambda d: min(1.0, max(0.0, 1.0 - d / 2.0))
    if metric in ("l2", "l1"):
        return lambda d: 1.0 / (1.0 + max(0.0, d))
    if metric == "dot":
        return lambda d: min(1.0, max(0.0, (1.0 - d) / 2.0))
    raise OptionError(f"no relevance score for metric {metric!r}")


# ---- the collection a store keeps -----------------------------------------------

def store_schema(dim: int, metric: str, fts: bool, index, text: str, metadata: str,
                 vector: str) -> dict:
    from ..schema import HNSW, Json, Text, Vector
    return {"id": "text", text: Text(fts=bool(fts)), metadata: Json(),
            vector: Vector(dim, metric=metric, index=HNSW() if index is True else index)}


def check_store_schema(schema, name: str, text: str, metadata: str, vector: str) -> None:
    """An existing collection serves as a store when its fields are of the kinds needed."""
    fields = schema.fields
    want = {text: "text", metadata: "json", vector: "vector"}
    for field, kind in want.items():
        f = fields.get(field)
        if f is None or f.kind != kind:
            raise SchemaError(f"collection {name!r} has no {kind} field {field!r} "
                              f"(fields: {sorted(fields)}); name its fields with "
                              f"text_field=, metadata_field=, vector_field=")
    if schema.id_kind != "text":
        raise SchemaError(f"collection {name!r} has int ids; a store keeps string ids "
                          "(create it with {'id': 'text', ...})")


# ---- LangChain's dict filters ------------------------------------------------------

_LC_OPS = {"$eq": "=", "$ne": "<>", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}


def dict_where(filter: dict, field: str = METADATA) -> tuple[str, list]:
    """A LangChain metadata filter as (where, params): {"k": v} (equality; several
    keys are all required), {"k": {"$eq" | "$ne" | "$lt" | "$lte" | "$gt" | "$gte":
    v, "$in" | "$nin": [...], "$exists": bool, "$like" | "$ilike": pattern,
    "$between": [lo, hi]}}, {"$and": [...]}, {"$or": [...]}, {"$not": {...}}.
    Each $and / $or / $not is a level (at most MAX_FILTER_DEPTH in all)."""
    w = MetaWhere(field)
    return within_bound(_dict_node(w, filter, 0)), w.params


def _dict_node(w: MetaWhere, f, above: int) -> str:
    check_descent(above)
    if not isinstance(f, dict):
        raise FilterError(f"a metadata filter is a dict, got {brief(f)}")
    parts = []
    for key, v in f.items():
        if key in ("$and", "$or"):
            if not isinstance(v, (list, tuple)):
                raise FilterError(f"{key} takes a list of filters, got {brief(v)}")
            parts.append(join(key[1:].upper(), [_dict_node(w, x, above + 1) for x in v]))
        elif key == "$not":
            parts.append(negate(_dict_node(w, v, above + 1)))
        elif isinstance(key, str) and key.startswith("$"):
            raise FilterError(f"unknown filter operator {brief(key)} at the top of a filter; "
                              "operators go under a key: {'key': {'$gt': 1}}")
        elif isinstance(v, dict):
            parts.append(_all_of([_dict_op(w, key, op, arg) for op, arg in v.items()]))
        else:
            parts.append(w.cmp(key, "=", v))
    return _all_of(parts)


def _all_of(parts: list[str]) -> str:
    # the keys (or operators) of one dict are an AND; one alone is no level of its own
    return parts[0] if len(parts) == 1 else join("AND", parts)


def _dict_op(w: MetaWhere, key: str, op: str, arg) -> str:
    if op in _LC_OPS:
        return w.cmp(key, _LC_OPS[op], arg)
    if op in ("$in", "$nin"):
        return w.one_of(key, arg, negated=op == "$nin")
    if op == "$exists":
        if not isinstance(arg, bool):
            raise FilterError(f"$exists takes true or false, got {brief(arg)}")
        return w.exists(key, arg)
    if op in ("$like", "$ilike"):
        return w.like(key, arg, icase=op == "$ilike")
    if op == "$between":
        if not isinstance(arg, (list, tuple)) or len(arg) != 2:
            raise FilterError(f"$between takes [low, high], got {brief(arg)}")
        return join("AND", [w.cmp(key, ">=", arg[0]), w.cmp(key, "<=", arg[1])])
    raise FilterError(f"unknown filter operator {brief(op)} for key {brief(key)}; known: "
                      f"{', '.join([*_LC_OPS, '$in', '$nin', '$exists', '$like', '$ilike', '$between'])}")


def open_collection(db, name: str, adopt):
    """A store's collection `name`, adopted (checked), or None while there is none."""
    try:
        return adopt(db.collection(name))
    except NotFoundError:
        return None


def create_with(db, name: str, schema: dict, write, rows, adopt):
    """A store's collection made by its first add, in that add's commit: an add
    refused leaves no collection behind, whose width would refuse the next,
    right, add. Embedded: `write(collection)` (the add's own path, the bulk one
    included) in the thread's transaction, joined if open; over vv.Client, whose
    open transaction is the server's, create_collection's data=`rows()`."""
    session = getattr(db, "thread_session", None)
    if session is None:
        return adopt(db.create_collection(name, schema, data=rows()))
    with session().writing():
        coll = db.create_collection(name, schema)
        write(coll)
    return adopt(coll)


def query_vector(vector):
    """A query's vector as float32; one numpy cannot read (strings, rows of several
    lengths) goes as given, and the search refuses it as it refuses any
    (FieldTypeError), not with numpy's ValueError."""
    try:
        return np.asarray(vector, np.float32)
    except (ValueError, TypeError):
        return vector


def vector_block(vectors, field: str = VECTOR) -> np.ndarray:
    """One add's vectors as a float32 array, refused as an insert refuses them:
    rows of different lengths DimensionError, values not numbers FieldTypeError
    (numpy raised ValueError / TypeError)."""
    try:
        return np.asarray(vectors, np.float32)
    except (ValueError, TypeError) as e:
        why = e
    widths = sorted({len(v) for v in vectors if hasattr(v, "__len__") and not isinstance(v, str)})
    if len(widths) > 1:
        raise DimensionError(f"field {field!r}: vectors of one add have different "
                             f"lengths ({', '.join(map(str, widths[:8]))})") from None
    raise FieldTypeError(f"field {field!r}: vectors must be numeric ({why})") from None
