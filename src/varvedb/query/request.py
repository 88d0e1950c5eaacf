"""A read request, written once: what every front end asks of a collection.

`Collection.search/find/count`, SQL's SELECT (a vector or text ORDER BY), the
HTTP routes, the OpenAPI document and `vv.Client` all build or carry these
frozen objects; query/bind.py turns one into a plan against a table and a
snapshot. Nothing here knows a schema: the checks are of the values' own shape
(types and ranges), so a client checks them before sending and a server before
binding, with the same messages. What needs the schema (a field's existence, a
vector's dimension, a metric the field can answer) is bind's.

A search has up to two legs, a vector one and a text one; with both, they are
fused by reciprocal rank (`rrf_k`, `weights`), or, with `rerank`, the text
leg's `candidates` are ordered by exact distance to the vector leg's query.

The wire form (`to_wire` / `from_wire`) is the flat JSON object of
docs/server.md, the same keywords as `Collection.search`: a value left at its
default is left out. `ARGS` lists them with their JSON schema, which the
OpenAPI document uses, so no second list of search arguments exists.
"""
from __future__ import annotations

import datetime as _dt
import math
from typing import Any

import msgspec
import numpy as np

from ..errors import FieldTypeError, FilterError, OptionError, RequestError
from ..schema import IVF_LIMITS, MAX_EF, QUERY_METRICS, as_of_micros, brief, is_int
from ..wire import params_to_wire, parse_timestamp

RRF_K = 60          # reciprocal-rank fusion's k (Cormack et al.'s constant)
MATCHES = ("all", "any")    # a text query's words side by side: all required, or any
MAX_RRF_K = 10**6
WEIGHTS = (1.0, 1.0)

_NUMBERS = {"type": ["array", "null"], "items": {"type": "number"}}
_NULLABLE_INT = {"type": ["integer", "null"], "minimum": 1}
_WHERE = {"type": ["string", "null"], "description": "a filter (SQL expression); $n are params"}
_PARAMS = {"type": ["array", "null"], "description": "values of $1, $2, ... in where"}
_SELECT = {"type": ["array", "null"], "items": {"type": "string"},
           "description": "fields to return (null: all but vectors)"}
_AS_OF = {"type": ["integer", "string", "null"],
          "description": "a version number or an RFC 3339 timestamp"}

# every read's wire arguments: name -> JSON schema (the OpenAPI document's)
READ_ARGS = {"where": _WHERE, "params": _PARAMS, "as_of": _AS_OF,
             "branch": {"type": ["string", "null"],
                        "description": "read this branch (default: the session's)"}}
FIND_ARGS = READ_ARGS | {"limit": {"type": ["integer", "null"], "minimum": 0},
                         "select": _SELECT,
                         "offset": {"type": "integer", "minimum": 0, "default": 0,
                                    "description": "rows skipped before the limit"},
                         "ids": {"type": ["array", "null"],
                                 "items": {"type": ["integer", "string"]},
                                 "description": "only these documents, in this order "
                                                "(an id with no document skipped)"}}
COUNT_ARGS = dict(READ_ARGS)
SEARCH_ARGS = READ_ARGS | {
    "limit": {"type": "integer", "minimum": 0, "default": 10},
    "select": _SELECT,
    "vector": _NUMBERS,
    "vectors": {"type": ["array", "null"], "items": {"type": "array", "items": {"type": "number"}},
                "description": "a batch: one query vector a row (the answer: results, in order)"},
    "vector_text": {"type": ["string", "null"],
                    "description": "text the vector field's embedder turns into the query"},
    "field": {"type": ["string", "null"], "description": "the vector field"},
    "metric": {"type": ["string", "null"], "enum": [*QUERY_METRICS, None]},
    "ef": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_EF},
    "probes": {"type": ["integer", "null"], "minimum": 1, "maximum": IVF_LIMITS["lists"][1],
               "description": "lists an IVFPQ index scans (ignored by HNSW)"},
    "exact": {"type": "boolean", "default": False},
    "text": {"type": ["string", "null"], "description": "a full-text query"},
    "text_field": {"type": ["string", "null"]},
    "match": {"type": "string", "enum": list(MATCHES), "default": "all",
              "description": "the text query's words side by side: all required, or "
                             "any (ranked by BM25 over the rows holding any)"},
    "rerank": {**_NUMBERS, "description": "order the text matches by distance to this vector"},
    "candidates": _NULLABLE_INT,
    "rrf_k": {"type": "integer", "minimum": 1, "maximum": MAX_RRF_K, "default": RRF_K},
    "weights": {"type": "array", "items": {"type": "number", "minimum": 0},
                "minItems": 2, "maxItems": 2, "default": list(WEIGHTS)},
    "explain": {"type": "boolean", "default": False,
                "description": "answer the plan as it ran too"}}


class VectorLeg(msgspec.Struct, frozen=True, eq=False, kw_only=True):
    """The nearest rows to a vector (`vector`, or `text` run through the field's
    embedder) by `metric` (None: the field's), walking with `ef` (a graph) or
    scanning `probes` lists (IVF), or every allowed row with `exact`."""
    vector: Any = None          # array-like as given; bind coerces it to the field's dtype
    text: str | None = None
    field: str | None = None
    metric: str | None = None
    ef: int | None = None
    probes: int | None = None
    exact: bool = False

    def __eq__(self, other) -> bool:        # a vector compares by value, list or array
        return (type(other) is VectorLeg
                and (self.text, self.field, self.metric, self.ef, self.probes, self.exact)
                == (other.text, other.field, other.metric, other.ef, other.probes, other.exact)
                and _same_vector(self.vector, other.vector))

    __hash__ = None


class TextLeg(msgspec.Struct, frozen=True, kw_only=True):
    """The best BM25 matches of a text query on a full-text field (None: the only one);
    `match`: words side by side are all required ("all") or any of them ("any":
    what a question in plain words wants; OR, phrases, prefixes and -word keep
    their meaning). `corpus`: the statistics to score with (None: the rows the
    read sees); in process only (a sharded collection's coordinator sets it),
    neither a keyword of Collection.search nor on the wire."""
    text: str | None = None
    field: str | None = None
    match: str = "all"
    corpus: Any = None          # a CorpusStats (text/corpus.py)


class Read(msgspec.Struct, frozen=True, kw_only=True):
    """What every read has: a filter and its parameters, and the version read
    (`as_of`: a version number or an aware datetime; `branch`: None is the session's).
    `where` is a filter string, or (in process, from SQL) a filter already bound."""
    where: Any = None
    params: tuple = ()
    as_of: Any = None
    branch: str | None = None

    def keywords(self) -> dict:
        """The keywords of the Collection verb (count, find) that builds this request."""
        return {name: getattr(self, name) for name in self.__struct_fields__}

    def to_wire(self) -> dict:
        """The flat JSON object of docs/server.md; defaults left out."""
        return _wire_values({k: v for k, v in self.keywords().items()
                             if not _is_default(k, v)})


class Count(Read, frozen=True, kw_only=True):
    """How many rows are visible and match."""

    @classmethod
    def of(cls, where=None, params=(), as_of=None, branch=None) -> "Count":
        return cls(where=_where(where), params=_params(params), as_of=check_as_of(as_of),
                   branch=_branch(branch))

    @classmethod
    def from_wire(cls, body: dict) -> "Count":
        return cls.of(**_wire_args(body, COUNT_ARGS, "count"))


class Find(Read, frozen=True, kw_only=True):
    """The matching rows in insertion order (no scoring), or with `ids` the
    matching rows of those documents in the order of `ids` (an id with no row
    skipped, one given twice answered once); `offset` rows skipped, then
    `limit` (None: all)."""
    limit: int | None = None
    select: tuple | None = None
    offset: int = 0
    ids: tuple | None = None

    @classmethod
    def of(cls, where=None, params=(), as_of=None, limit=None, select=None,
           branch=None, offset=0, ids=None) -> "Find":
        return cls(where=_where(where), params=_params(params), as_of=check_as_of(as_of),
                   branch=_branch(branch), limit=None if limit is None else _limit(limit),
                   select=check_select(select),
                   offset=offset if type(offset) is int and offset >= 0 else
                   _limit(offset, "offset"), ids=_ids(ids))

    @classmethod
    def from_wire(cls, body: dict) -> "Find":
        return cls.of(**_wire_args(body, FIND_ARGS, "find"))


class Search(Read, frozen=True, kw_only=True, eq=False):
    """The `limit` best rows by a vector leg, a text leg, or both (module docstring);
    with `vectors`, a batch of vector legs alike but for their vector (`each()`)."""
    vector: VectorLeg | None = None
    text: TextLeg | None = None
    rerank: bool = False
    candidates: int | None = None      # each leg's rows before fusion (None: max(limit, 50))
    rrf_k: int = RRF_K
    weights: tuple = WEIGHTS            # (text, vector)
    limit: int = 10
    select: tuple | None = None         # None: every field but vectors
    explain: bool = False
    vectors: Any = None                 # a batch: a 2-D array, one query vector a row

    @classmethod
    def of(cls, vector=None, where=None, params=(), limit=10, select=None, as_of=None,
           field=None, ef=None, exact=False, metric=None, *, probes=None, text=None,
           text_field=None, vector_text=None, rerank=None, candidates=None, rrf_k=RRF_K,
           weights=WEIGHTS, explain=False, branch=None, match="all",
           vectors=None) -> "Search":
        """From Collection.search's keywords, checked (the module docstring)."""
        if type(limit) is not int or limit < 0:
            limit = _limit(limit)
        if vectors is not None:
            if vector is not None or vector_text is not None or rerank is not None \
                    or text is not None:
                raise FieldTypeError("vectors= is a batch of vector queries: give it instead "
                                     "of vector= (and without text=, vector_text=, rerank=)")
            vectors = _query_block(vectors)
        if rerank is not None:
            if text is None:
                raise FieldTypeError("vector_text= and rerank= go with text= (a text query)")
            if vector is not None or vector_text is not None:
                raise FieldTypeError("rerank= orders the text matches by a vector: give it "
                                     "instead of vector=")
            vector = rerank
        elif vector_text is not None:
            if vector is not None:
                raise FieldTypeError("give vector= or vector_text=, not both")
            if not isinstance(vector_text, str):
                raise FieldTypeError(f"vector_text is a string, got {brief(vector_text)}")
        elif vector is None and text is None and vectors is None:
            raise FieldTypeError("search needs vector=, vectors= or text=")
        if exact is not False and exact is not True:
            if not isinstance(exact, np.bool_):
                raise FieldTypeError(f"exact is True or False, got {brief(exact)}")
            exact = bool(exact)
        vleg = None
        if vector is not None or vector_text is not None or field is not None \
                or vectors is not None or metric is not None or ef is not None or probes is not None or exact:
            vleg = VectorLeg(vector=vector, text=vector_text, field=field,
                             metric=_metric(metric), ef=_width("ef", ef, MAX_EF),
                             probes=_width("probes", probes, IVF_LIMITS["lists"][1]),
                             exact=exact)
        if not (type(match) is str and match == "all"):
            match = check_match(match)
            if match != "all" and text is None:
                raise FieldTypeError("match= goes with text= (a text query)")
        tleg = None
        if text is not None or text_field is not None:
            if text is not None and not isinstance(text, str):
                raise FieldTypeError(f"a text query is a string, got {brief(text)}")
            tleg = TextLeg(text=text, field=text_field, match=match)
        if candidates is not None:
            candidates = _limit(candidates, "candidates")
            if candidates < 1:
                raise FieldTypeError("candidates must be a positive integer")
        if not (type(rrf_k) is int and rrf_k == RRF_K):
            if not is_int(rrf_k) or not 1 <= rrf_k <= MAX_RRF_K:
                raise FieldTypeError(f"rrf_k must be an integer in 1..{MAX_RRF_K}, "
                                     f"got {brief(rrf_k)}")
            rrf_k = int(rrf_k)
        if weights is not WEIGHTS:
            if not isinstance(weights, (tuple, list)) or len(weights) != 2 or not all(
                    isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0
                    and math.isfinite(w) for w in weights):
                raise FieldTypeError(f"weights are two non-negative numbers (text, vector), "
                                     f"got {brief(weights)}")
            weights = (float(weights[0]), float(weights[1]))
        if explain is not False and explain is not True:
            raise FieldTypeError(f"explain is True or False, got {brief(explain)}")
        return cls(vector=vleg, text=tleg, rerank=rerank is not None, candidates=candidates,
                   rrf_k=rrf_k, weights=weights, limit=limit, select=check_select(select),
                   where=_where(where), params=_params(params), as_of=check_as_of(as_of),
                   branch=_branch(branch), explain=explain, vectors=vectors)

    def __eq__(self, other) -> bool:        # a batch's vectors compare by value
        if type(other) is not Search:
            return NotImplemented
        return all(_same_vector(a, b) if name == "vectors" else a == b
                   for name, a, b in zip(self.__struct_fields__,
                                         msgspec.structs.astuple(self),
                                         msgspec.structs.astuple(other)))

    __hash__ = None

    def each(self) -> list["Search"]:
        """A batch's searches, one a row of `vectors`, in order (itself alone when
        it is not a batch)."""
        if self.vectors is None:
            return [self]
        leg = self.vector
        return [msgspec.structs.replace(self, vectors=None,
                                        vector=msgspec.structs.replace(leg, vector=v))
                for v in self.vectors]

    @classmethod
    def from_wire(cls, body: dict) -> "Search":
        """From the flat JSON object of docs/server.md (RequestError on an unknown key)."""
        args = _wire_args(body, SEARCH_ARGS, "search")
        if isinstance(args.get("weights"), list):
            args["weights"] = tuple(args["weights"])
        return cls.of(**args)

    def keywords(self) -> dict:
        """Collection.search's keywords for this request (defaults included)."""
        v, t = self.vector or _NO_VECTOR, self.text or _NO_TEXT
        vector = None if self.rerank else v.vector
        return {"vector": vector, "vector_text": v.text, "field": v.field,
                "metric": v.metric, "ef": v.ef, "probes": v.probes, "exact": v.exact,
                "text": t.text, "text_field": t.field, "match": t.match,
                "rerank": v.vector if self.rerank else None, "candidates": self.candidates,
                "rrf_k": self.rrf_k, "weights": self.weights, "limit": self.limit,
                "select": None if self.select is None else list(self.select),
                "where": self.where, "params": self.params, "as_of": self.as_of,
                "branch": self.branch, "explain": self.explain, "vectors": self.vectors}

    def to_wire(self) -> dict:
        """The flat JSON object of docs/server.md; defaults left out."""
        if self.text is not None and self.text.corpus is not None:
            raise OptionError("a text leg's corpus statistics are in process only")
        return _wire_values({k: v for k, v in self.keywords().items()
                             if not _is_default(k, v)})


_NO_VECTOR = VectorLeg()
_NO_TEXT = TextLeg()
_SEARCH_DEFAULTS = {"vector": None, "vector_text": None, "field": None, "metric": None,
                    "ef": None, "probes": None, "exact": False, "text": None,
                    "text_field": None, "match": "all", "rerank": None,
                    "candidates": None, "rrf_k": RRF_K,
                    "weights": WEIGHTS, "limit": None, "select": None, "where": None,
                    "params": (), "as_of": None, "branch": None, "explain": False,
                    "offset": 0, "ids": None, "vectors": None}


def _is_default(name: str, v) -> bool:
    if name == "limit" and v is not None:
        return False            # always sent: a server's default need not be ours
    d = _SEARCH_DEFAULTS[name]
    if d is None:
        return v is None
    if name == "params":
        return len(v) == 0
    return type(v) is type(d) and v == d


def _same_vector(a, b) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):
        return False


# ---- the checks of values' own shape (the schema's are bind's) --------------------------

def check_match(match) -> str:
    """match= is "all" or "any" (OptionError otherwise)."""
    if not isinstance(match, str) or match not in MATCHES:
        raise OptionError(f"match is one of {', '.join(MATCHES)}, got {brief(match)}")
    return MATCHES[MATCHES.index(match)]     # a plain str (np.str_ too)


def _limit(limit, name: str = "limit") -> int:
    if not is_int(limit) or limit < 0:
        raise FieldTypeError(f"{name} must be a non-negative integer, got {brief(limit)}")
    return int(limit)


def _width(name: str, value, high: int) -> int | None:
    """ef (a graph's beam) or probes (IVF lists), in 1..high."""
    if value is None:
        return None
    if not is_int(value) or not 1 <= value <= high:
        raise FieldTypeError(f"{name} must be an integer in 1..{high}, got {brief(value)}")
    return int(value)


def _metric(metric) -> str | None:
    if metric is None:
        return None
    if not isinstance(metric, str) or metric not in QUERY_METRICS:
        raise OptionError(f"metric is one of {', '.join(QUERY_METRICS)}, got {brief(metric)}")
    return QUERY_METRICS[QUERY_METRICS.index(metric)]     # a plain str (np.str_ too)


def _params(params) -> tuple:
    """params= is a list or tuple ($1 is params[0]); a str was split into characters."""
    if type(params) is tuple:
        return params
    if not isinstance(params, (list, tuple)):
        raise FilterError(f"params is a list or tuple of values, got {brief(params)}")
    return tuple(params)


def _ids(ids) -> tuple | None:
    """ids= is a list (or tuple, or 1-d array) of ids, each an int or a str (the
    collection's id type is bind's to check)."""
    if ids is None:
        return None
    if isinstance(ids, np.ndarray) and ids.ndim == 1:
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise FieldTypeError(f"ids is a list of ids, got {brief(ids)}")
    bad = next((v for v in ids if not (is_int(v) or isinstance(v, str))), None)
    if bad is not None:
        raise FieldTypeError(f"an id is an int or a str, got {brief(bad)}")
    return tuple(v if type(v) in (int, str) else (int(v) if is_int(v) else str(v))
                 for v in ids)


def _where(where):
    if where is None or type(where) is str or hasattr(where, "mask"):
        return where        # a string, or a filter SQL already bound (bind checks it)
    raise FilterError(f"a filter is an SQL expression string, got {brief(where)}")


def check_select(select) -> tuple | None:
    if select is None:
        return None
    if type(select) is list and not select:
        return ()
    if not isinstance(select, (list, tuple)) or not all(isinstance(s, str) for s in select):
        raise FieldTypeError(f"select is a list of field names, got {brief(select)}")
    return tuple(select)


def check_as_of(as_of):
    """as_of as engine/snapshot.py's resolve takes it, with its errors: None, a
    version number, or a timezone-aware datetime in years 1..9999 UTC."""
    if as_of is None or is_int(as_of):
        return as_of
    as_of_micros(as_of)
    return as_of


def _branch(branch) -> str | None:
    if branch is not None and not isinstance(branch, str):
        raise OptionError(f"branch is a branch's name, got {brief(branch)}")
    return branch


# ---- the wire form -------------------------------------------------------------------

def _wire_args(body, known: dict, what: str) -> dict:
    if not isinstance(body, dict):
        raise RequestError(f"a {what} is a JSON object, got {type(body).__name__}")
    if not body.keys() <= known.keys():
        unknown = sorted(set(body) - set(known))
        raise RequestError(f"{what} takes {', '.join(sorted(known))}; "
                           f"unknown: {', '.join(map(str, unknown))}")
    args = dict(body)
    if args.get("params") is None:
        args.pop("params", None)
    elif not isinstance(args["params"], list):
        raise RequestError(f"params is a JSON array, got {type(args['params']).__name__}")
    if "as_of" in args:
        args["as_of"] = as_of_from_wire(args["as_of"])
    return args


def as_of_from_wire(value):
    """as_of from JSON: a version number, or an RFC 3339 timestamp string (UTC
    where it names no zone)."""
    if value is None or is_int(value):
        return value
    if isinstance(value, str):
        try:
            return parse_timestamp(value)
        except ValueError:
            pass
    raise OptionError(f"as_of is a version number or an RFC 3339 timestamp, got {brief(value)}")


def as_of_to_wire(v):
    """as_of on the wire: a version number, or a datetime as RFC 3339 in UTC
    (isoformat: years before 1000 keep their four digits, which strftime's %Y drops)."""
    if isinstance(check_as_of(v), _dt.datetime):
        return v.astimezone(_dt.timezone.utc).isoformat()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _query_block(vectors) -> np.ndarray:
    """A batch's query vectors as a 2-D array (each row checked as a query when run)."""
    if isinstance(vectors, (str, bytes, dict)) or not hasattr(vectors, "__len__"):
        raise FieldTypeError(f"vectors is a 2-D array, one query a row, got {brief(vectors)}")
    try:
        block = np.asarray(vectors)
    except (ValueError, TypeError):
        block = None
    if block is None or block.ndim != 2 and not (block.ndim == 1 and block.size == 0) \
            or block.dtype.kind not in "biuf":
        raise FieldTypeError(f"vectors is a 2-D array of numbers, one query a row, "
                             f"got {brief(vectors)}")
    return block.reshape(0, 0) if block.ndim == 1 else block


def _wire_values(out: dict) -> dict:
    """JSON-ready values: arrays as lists, tuples as lists, as_of as a number or
    text, bytes parameters as bytea's text (wire.params_to_wire)."""
    for k, v in out.items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, tuple):
            out[k] = [x.tolist() if isinstance(x, np.ndarray) else x for x in v]
        elif isinstance(v, np.generic):
            out[k] = v.item()
    if "as_of" in out:
        out["as_of"] = as_of_to_wire(out["as_of"])
    if "params" in out:
        out["params"] = params_to_wire(out["params"])
    return out


# the read verbs by name (explain("count", ...), POST .../explain's "verb")
REQUESTS = {"search": Search, "find": Find, "count": Count}
