r"""PostgreSQL's catalog functions, as psql's \d, \d+, \di+, \l and \df call them, on
one value each (query/expr.py applies them row by row: catalog rows are few).

varvedb keeps no comments, partitions, publications or extended statistics,
and its tables share one file: the functions that describe those answer as
PostgreSQL does for an object without them (NULL, or the relation itself)."""
from __future__ import annotations

import functools
import re

from .pg_procs import PROCS
from .pg_types import TYPES

# types whose typmod is shown in parentheses: as given, or less the 4 bytes of
# varchar's header (PostgreSQL stores varchar(n)'s typmod as n + 4)
_MOD_AS_IS = ("vector", "halfvec", "sparsevec", "bit", "varbit")
_MOD_LESS_4 = ("varchar", "bpchar")


def format_type(oid: int | None, typmod: int | None = None) -> str | None:
    """format_type(type OID, typmod): the type's SQL name, `vector(3)` (not strict:
    a NULL typmod is none)."""
    if oid is None:
        return None
    t = TYPES.get(oid)
    if t is None:
        return "???"
    if typmod is None or typmod < 0:
        return t.regtype
    if t.element and TYPES[t.element].name in _MOD_AS_IS:     # vector(3)[]
        return f"{TYPES[t.element].regtype}({typmod})[]"
    if t.name in _MOD_AS_IS:
        return f"{t.regtype}({typmod})"
    if t.name in _MOD_LESS_4:
        return f"{t.regtype}({typmod - 4})"
    return t.regtype


# pg_size_pretty's units: name, the size under which it is used, half-rounded, bits
_UNITS = [("bytes", 10 * 1024, False, 0), ("kB", 20 * 1024 - 1, True, 10),
          ("MB", 20 * 1024 - 1, True, 20), ("GB", 20 * 1024 - 1, True, 30),
          ("TB", 20 * 1024 - 1, True, 40), ("PB", 20 * 1024 - 1, True, 50)]


def _c_div(a: int, b: int) -> int:
    """C's integer division (towards zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def size_pretty(size: int) -> str:
    """pg_size_pretty(bigint): `8192 bytes`, `16 kB`, each unit until its value
    would reach its limit, rounded half away from zero as PostgreSQL does."""
    for i, (name, limit, rounded, bits) in enumerate(_UNITS):
        last = i == len(_UNITS) - 1
        if last or abs(size) < limit:
            if rounded:
                size = _c_div(size + (-1 if size < 0 else 1), 2)
            return f"{size} {name}"
        nxt = _UNITS[i + 1]
        shift = nxt[3] - bits - nxt[2] + rounded
        size = _c_div(size, 1 << shift)
    raise AssertionError("unreachable")


def function_result(oid: int) -> str | None:
    """pg_get_function_result(function): its result type's name."""
    p = PROCS.get(oid)
    return None if p is None else format_type(p.result_oid)


def function_arguments(oid: int) -> str | None:
    """pg_get_function_arguments(function): its argument types' names, comma-separated."""
    p = PROCS.get(oid)
    return None if p is None else ", ".join(format_type(t) for t in p.arg_oids)


# pg_encoding_to_char's names of the encodings a database can have here (its
# text is UTF-8) and of 0; PostgreSQL's answer for an unknown number is ''
_ENCODINGS = {0: "SQL_ASCII", 6: "UTF8"}


def encoding_name(number: int) -> str:
    """pg_encoding_to_char(encoding number)."""
    return _ENCODINGS.get(number, "")


_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")


@functools.cache
def _keywords() -> frozenset:
    """Identifiers quote_ident must quote though their characters need not: keywords
    other than the unreserved ones. pglast is imported here, at the first call:
    the engine's import reached it only for this (~36 ms of CPU of a first
    vv.connect that runs no SQL and no filter)."""
    from pglast import keywords
    return frozenset(keywords.RESERVED_KEYWORDS | keywords.COL_NAME_KEYWORDS
                     | keywords.TYPE_FUNC_NAME_KEYWORDS)


def quote_ident(name: str) -> str:
    """quote_ident(text): the name as SQL must write it, double-quoted where it
    has characters a bare name cannot or is a keyword."""
    if _PLAIN.fullmatch(name) and name not in _keywords():
        return name
    return '"' + name.replace('"', '""') + '"'


def tablespace_location(oid: int) -> str:
    """pg_tablespace_location(tablespace): '' for the default one (PostgreSQL's
    answer for a tablespace in the data folder): the only one here."""
    return ""


def no_value(*args) -> None:
    """col_description, obj_description, shobj_description, pg_database_size
    (the tables share a file the database may not have: an in-memory one),
    pg_get_statisticsobjdef_columns: nothing to show."""
    return None


def expression_text(expr: str, relation=None, pretty=None) -> str:
    """pg_get_expr(adbin, relation [, pretty]): the catalog keeps an expression
    as its text (sql/pg_catalog.py's pg_attrdef)."""
    return expr


def partition_ancestors(relation: int) -> int:
    """pg_partition_ancestors(relation): no table is partitioned, so each is its
    own only ancestor (PostgreSQL's answer for an unpartitioned table)."""
    return relation


def not_published(relation) -> bool:
    """pg_relation_is_publishable(relation): varvedb publishes nothing."""
    return False


def visible(oid: int) -> bool:
    """pg_collation_is_visible(oid) and its kin: pg_catalog and public, the only
    schemas, are both on the search path."""
    return True


# name -> (function, result kind); each is strict (NULL in, NULL out) but these
NOT_STRICT = frozenset({"format_type"})
FUNCTIONS = {
    "format_type": (format_type, "text"),
    "pg_size_pretty": (size_pretty, "text"),
    "pg_get_expr": (expression_text, "text"),
    "pg_get_function_result": (function_result, "text"),
    "pg_get_function_arguments": (function_arguments, "text"),
    "pg_encoding_to_char": (encoding_name, "text"),
    "quote_ident": (quote_ident, "text"),
    "pg_tablespace_location": (tablespace_location, "text"),
    "col_description": (no_value, "text"),
    "obj_description": (no_value, "text"),
    "shobj_description": (no_value, "text"),
    "pg_database_size": (no_value, "int"),
    "pg_get_statisticsobjdef_columns": (no_value, "text"),
    "pg_partition_ancestors": (partition_ancestors, "int"),
    "pg_relation_is_publishable": (not_published, "bool"),
    "pg_collation_is_visible": (visible, "bool"),
}
