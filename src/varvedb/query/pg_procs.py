r"""pgvector's functions and operators that varvedb's SQL runs, as PostgreSQL's
pg_proc and pg_operator list them (psql's \df and \do): name, argument types,
result type (and a function's kind) of each overload, at stable OIDs above 16384,
as an extension's are. The functions themselves are query/expr.py's;
tests/test_pgwire.py calls every row here with arguments of its types, and
compares psql's \df and \do with PostgreSQL + pgvector's."""
from __future__ import annotations

from dataclasses import dataclass

from .pg_types import OIDS, PUBLIC


@dataclass(frozen=True)
class PgProc:
    oid: int
    name: str
    args: tuple[str, ...]       # typnames
    result: str                 # typname
    kind: str = "f"             # prokind: 'f' function, 'a' aggregate
    namespace: int = PUBLIC

    @property
    def arg_oids(self) -> list[int]:
        return [OIDS[a] for a in self.args]

    @property
    def result_oid(self) -> int:
        return OIDS[self.result]


_VH = ("vector", "halfvec")
# (name, vector arguments, argument types after the vector ones, result (None:
# the vector's own type), vector types it takes, prokind): each pgvector
# overload varvedb runs
_SIGNATURES = [
    *((name, 2, (), "float8", _VH, "f") for name in
      ("cosine_distance", "inner_product", "l1_distance", "l2_distance")),
    ("hamming_distance", 2, (), "float8", ("bit",), "f"),
    ("l2_normalize", 1, (), None, _VH, "f"),
    ("subvector", 1, ("int4", "int4"), None, _VH, "f"),
    ("vector_dims", 1, (), "int4", _VH, "f"),
    ("vector_norm", 1, (), "float8", ("vector",), "f"),
    ("avg", 1, (), None, _VH, "a"),
    ("sum", 1, (), None, _VH, "a"),
    ("binary_quantize", 1, (), "bit", _VH, "f"),
    ("jaccard_distance", 2, (), "float8", ("bit",), "f"),
    # (later ones after: each overload keeps its OID)
    *((name, 2, (), "float8", ("sparsevec",), "f") for name in
      ("cosine_distance", "inner_product", "l1_distance", "l2_distance")),
    ("l2_norm", 1, (), "float8", ("halfvec", "sparsevec"), "f"),
    ("l2_normalize", 1, (), None, ("sparsevec",), "f"),
]
FIRST_OID = 16600       # past the types' and access methods' OIDs (query/pg_types.py)


def _table() -> dict[int, PgProc]:
    out = {}
    for name, n, rest, result, types, kind in _SIGNATURES:
        for t in types:
            oid = FIRST_OID + len(out)
            out[oid] = PgProc(oid, name, (t,) * n + rest, result or t, kind)
    return out


PROCS: dict[int, PgProc] = _table()


@dataclass(frozen=True)
class PgOperator:
    oid: int
    name: str
    left: str                   # typnames
    right: str
    result: str
    namespace: int = PUBLIC


# (operator, result (None: the operands' own type), types it takes): each pgvector
# operator varvedb runs (new ones last: an operator's oid is its place here)
_OPERATORS = [
    *((op, "float8", _VH) for op in ("<#>", "<+>", "<->", "<=>")),
    *((op, None, _VH) for op in ("*", "+", "-", "||")),
    *((op, "bool", _VH) for op in ("=", "<>")),
    ("<%>", "float8", ("bit",)),
    ("<~>", "float8", ("bit",)),
    *((op, "float8", ("sparsevec",)) for op in ("<#>", "<+>", "<->", "<=>")),
    *((op, "bool", ("sparsevec",)) for op in ("=", "<>")),
    *((op, "bool", _VH + ("sparsevec",)) for op in ("<", "<=", ">", ">=")),
]
FIRST_OPERATOR_OID = FIRST_OID + 200     # past every function's


def _operators() -> dict[int, PgOperator]:
    out = {}
    for name, result, types in _OPERATORS:
        for t in types:
            oid = FIRST_OPERATOR_OID + len(out)
            out[oid] = PgOperator(oid, name, t, t, result or t)
    return out


OPERATORS: dict[int, PgOperator] = _operators()
