"""A full-text query as the query layer takes it: parsed once, bound to a field.

The same text means the same thing in `search(text=...)`, in a `where=` or SQL
`body @@ '...'`, and in SQL's bm25(), snippet() and highlight(): each comes
here, so the syntax and its errors are one.
"""
from __future__ import annotations

import functools

from ..errors import FieldTypeError
from ..schema import brief


def text_query(text, analyzer, match: str = "all"):
    """`text` parsed (QuerySyntaxError naming the position) and bound to a field's
    analyzer: its words analyzed as the field's are; None when no word is left.
    `match` ("all" or "any", checked by the request): whether words side by side
    are all required or any of them (text/query.py's parse)."""
    if not isinstance(text, str):
        raise FieldTypeError(f"a text query is a string, got {brief(text)}")
    if len(text) > _CACHED_CHARS:    # a long query is rare: 512 of them would pin GBs
        return _bind(text, analyzer, match)
    return _bound(text, analyzer, match)


_CACHED_CHARS = 4096


def _bind(text: str, analyzer, match: str = "all"):
    from ..text.query import bind, parse
    return bind(parse(text, match), analyzer)


_bound = functools.lru_cache(maxsize=512)(_bind)
