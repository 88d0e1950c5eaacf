"""Expression and partial HNSW indexes as SQL writes them (pgvector's README):

    CREATE INDEX ON items USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops);
    CREATE INDEX ON items USING hnsw ((binary_quantize(embedding)::bit(3)) bit_hamming_ops);
    CREATE INDEX ON items USING hnsw ((subvector(embedding, 1, 3)::vector(3)) vector_cosine_ops);
    CREATE INDEX ON items USING hnsw (embedding vector_l2_ops) WHERE (category_id = 123);

`index_expr` reads an index element or an ORDER BY operand (query/expr.py's
tree) as a field and schema.HNSW's `expr` tuple, the same function for both,
so a query uses the index exactly when its expression is the index's.
`predicate` reads a WHERE as HNSW's `where` conditions (an AND of
`column op constant`), and `implies` says whether a query's WHERE keeps only
rows a partial index holds: each of the index's conditions is one of the
WHERE's top-level AND-ed ones (the same predicate, or an equality on the same
column and value among others).
"""
from __future__ import annotations

from ..errors import NotSupportedError, SqlError
from ..query import expr as E
from ..schema import ID_MIN, ID_END, Vector, index_shape

# a vector type's name -> the dtype its values have
_DTYPES = {"vector": "f32", "halfvec": "f16", "bit": "bit"}
_SQL_TYPES = {"f32": "vector", "f16": "halfvec", "bit": "bit"}
FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def index_expr(e, fields: dict):
    """(field, expr) of an expression over one vector field an index can hold
    (expr: schema.HNSW's tuple, None: the field's own vectors, cast to their own
    type), or None when `e` is no such expression. SqlError where it is one but
    its dimension is not the field's (22000, as pgvector's cast refuses it)."""
    cast_dim = None
    vtype = None
    if isinstance(e, E.Cast) and e.kind == "vector" and e.vtype in _DTYPES:
        cast_dim, vtype, e = e.dim, e.vtype, e.arg
    if isinstance(e, E.Col):
        how, args = "cast", ()
    elif isinstance(e, E.Func) and e.name in ("binary_quantize", "subvector") and e.args \
            and isinstance(e.args[0], E.Col):
        how, args = e.name, e.args[1:]
        e = e.args[0]
    else:
        return None
    f = fields.get(e.name)
    if f is None or f.kind != "vector" or f.dtype not in ("f32", "f16"):
        return None
    start = count = 0
    if how == "subvector":
        if len(args) != 2 or not all(isinstance(a, E.Const) and type(a.value) is int
                                     for a in args):
            return None
        start, count = args[0].value, args[1].value
        if not (1 <= start and count >= 1 and start + count - 1 <= f.dim):
            raise NotSupportedError(f"an index on subvector({e.name}, {start}, {count}) "
                                    f"reaches past the field's {f.dim} dimensions")
    if how == "binary_quantize":
        dtype = "bit"
        if vtype not in (None, "bit"):
            return None
    elif vtype is None:
        if how == "cast":
            return None         # a bare column: not an expression
        dtype = f.dtype
    else:
        dtype = _DTYPES[vtype]
        if dtype == "bit":
            return None         # (no cast from a float vector to bit)
    expr = (how, start, count, dtype)
    if how == "cast" and dtype == f.dtype:
        expr = None             # the field's own vectors
    dim = index_shape(_Spec(expr), f.dtype, f.dim)[1]
    if cast_dim is not None and cast_dim != dim:
        raise SqlError("22000", f"expected {cast_dim} dimensions, not {dim}")
    return e.name, expr


class _Spec:
    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr


def expr_text(field: str, expr: tuple, dim: int) -> str:
    """An index expression as SQL writes it (EXPLAIN's, pg_get_indexdef's)."""
    how, start, count, dtype = expr
    d = index_shape(_Spec(expr), "f32", dim)[1]
    typ = f"{_SQL_TYPES[dtype]}({d})"
    if how == "binary_quantize":
        return f"binary_quantize({field})::{typ}"
    if how == "subvector":
        return f"subvector({field}, {start}, {count})::{typ}"
    return f"{field}::{typ}"


def derived_field(f, expr: tuple):
    """A vector field like the index expression's values (what a query vector is
    coerced to)."""
    dtype, dim = index_shape(_Spec(expr), f.dtype, f.dim)
    return Vector(dim, dtype=dtype) if dtype == "bit" else Vector(dim, metric="l2", dtype=dtype)


def predicate(e, fields: dict, env=None, dims: bool = False) -> tuple | None:
    """A WHERE as HNSW's `where` conditions ((field, op, value), AND-ed), None when
    it is not only such conditions; with `env`, parameters ($n) read as their
    values (a query's), else only constants (an index's); with `dims` (a CHECK's)
    `vector_dims(field) op n` too, of a vector or halfvec field (schema.DIMS_OPS), and
    each op as it was written (schema.WRITTEN_OPS: `0 < price`, pg_get_constraintdef's)."""
    out = []
    for c in _conjuncts(e):
        got = _condition(c, fields, env, written=dims)
        if got is None and dims:
            got = _dims_condition(c, fields)
        if got is None:
            return None
        out.append(got)
    return tuple(out)


def implies(where_e, conditions: tuple, fields: dict, env) -> bool:
    """Does a query's WHERE keep only rows meeting every one of `conditions`?"""
    if where_e is None:
        return False
    have = set()
    for c in _conjuncts(where_e):
        got = _condition(c, fields, env)
        if got is not None:
            have.add(_key(got))
    return all(_key(c) in have for c in conditions)


def _key(c):
    return (c[0], c[1], type(c[2]) is bool, c[2])


def _conjuncts(e) -> list:
    if isinstance(e, E.Op) and e.op == "and":
        return [x for a in e.args for x in _conjuncts(a)]
    return [e]


def _condition(c, fields: dict, env, written: bool = False):
    """(field, op, value) of a comparison of a scalar field with a constant (with
    `written`, a CHECK's, as schema.WRITTEN_OPS keep it: an op written constant first
    is "op reversed", an int field's with an integer wider than 64 bits "op numeric")."""
    if isinstance(c, E.IsNull) and isinstance(c.arg, E.Col) and _scalar(fields, c.arg.name):
        return (c.arg.name, "is not null" if c.negated else "is null", None)
    if not (isinstance(c, E.Op) and c.op in FLIPPED and len(c.args) == 2):
        return None
    (a, b), op, end = c.args, c.op, ""
    if not isinstance(a, E.Col):
        a, b, op, end = b, a, FLIPPED[op], " reversed" if written else ""
    if not isinstance(a, E.Col) or not _scalar(fields, a.name):
        return None
    if isinstance(b, E.Const):
        v = b.value
    elif isinstance(b, E.Param) and env is not None and 1 <= b.index <= len(env.params):
        v = env.params[b.index - 1]
    else:
        return None
    kind = fields[a.name].kind
    ok = {"int": (int,), "float": (int, float), "bool": (bool,), "text": (str,)}[kind]
    if type(v) not in ok or (kind in ("int", "float") and type(v) is bool):
        return None
    if written and type(v) is int and not ID_MIN <= v < ID_END:
        return (a.name, f"{op} numeric{end}", str(v))
    return (a.name, op + end, float(v) if kind == "float" else v)


def _dims_condition(c, fields: dict):
    """`vector_dims(field) op n` (the field or it cast to vector / halfvec without a
    dimension, pgvector's `vector_dims(embedding::vector) = 3`) as (field,
    'vector_dims op', n), None when it is not that."""
    if not (isinstance(c, E.Op) and c.op in FLIPPED and len(c.args) == 2):
        return None
    (a, b), op, end = c.args, c.op, ""
    if not isinstance(a, E.Func):
        a, b, op, end = b, a, FLIPPED[op], " reversed"
    if not (isinstance(a, E.Func) and a.name == "vector_dims" and len(a.args) == 1
            and isinstance(b, E.Const) and type(b.value) is int):
        return None
    arg, cast = a.args[0], " "
    if isinstance(arg, E.Cast) and arg.kind == "vector" and arg.vtype in ("vector", "halfvec") \
            and arg.dim is None:
        arg, cast = arg.arg, f"::{arg.vtype} "
    f = fields.get(arg.name) if isinstance(arg, E.Col) else None
    if f is not None and f.kind == "vector" and f.dtype == "bit" and arg is a.args[0]:
        raise SqlError("42883", "function vector_dims(bit) does not exist")   # (PostgreSQL's)
    if f is None or f.kind != "vector" or f.dtype == "bit":
        return None
    return (arg.name, f"vector_dims{cast}{op}{end}", b.value)


def _scalar(fields: dict, name: str) -> bool:
    f = fields.get(name)
    return f is not None and f.kind in ("int", "float", "bool", "text")


def index_texts(field: str, f, spec) -> tuple[str, str]:
    """(expression, predicate) of field f's vector index `spec` as SQL writes them
    ("": none), for pg_get_indexdef and psql's \\d."""
    expr, where = getattr(spec, "expr", None), getattr(spec, "where", None)
    return (expr_text(field, expr, f.dim) if expr is not None else "",
            " AND ".join(condition_text(c) for c in where) if where else "")


def condition_text(c) -> str:
    """A (field, op, value) condition of a partial index as SQL writes it."""
    name, op, value = c
    if value is None:
        return f"{name} {op.upper()}"
    if isinstance(value, str):
        return f"{name} {op} '" + value.replace("'", "''") + "'"
    return f"{name} {op} {str(value).lower() if isinstance(value, bool) else value}"

