"""SQL's full-text functions over rows: `@@`, bm25(), snippet(), highlight().

They read a table's full-text index (index/fts.py) and its analyzer, so they
take row numbers, not values; the expression evaluator (expr.py) wraps them.
BM25's statistics are the snapshot's visible rows, as for a text top-k: the
same row scores the same in a select list and in ORDER BY bm25(...) DESC.
Snippets and highlights are built for the rows a statement returns (a
handful), one text at a time from the analyzer's character spans.
"""
from __future__ import annotations

import numpy as np

from .text_query import text_query

SNIPPET_TOKENS = 12


def index_of(table, field: str):
    """The field's full-text index over every row the table holds now, or None."""
    if field not in getattr(table, "text_indexes", {}):
        return None
    return table.text_index(field, table.n)


def match_rows(index, query: str, rows: np.ndarray) -> np.ndarray:
    """Which of `rows` the query matches."""
    bound = text_query(query, index.analyzer)
    if bound is None or not len(rows):
        return np.zeros(len(rows), bool)
    m = index.n
    hit = index.match(bound, np.ones(m, bool))
    inside = rows < m
    out = np.zeros(len(rows), bool)
    out[inside] = hit[rows[inside]]
    return out


def bm25_scores(index, query: str, rows: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """BM25 of each row (0 where the query does not match it)."""
    bound = text_query(query, index.analyzer)
    if bound is None or not len(rows):
        return np.zeros(len(rows), np.float64)
    m = index.n
    vis = np.zeros(m, bool)
    vis[:min(m, len(visible))] = visible[:m]
    inside = rows < m
    out = np.zeros(len(rows), np.float64)
    out[inside] = index.score_rows(bound, rows[inside].astype(np.int64), vis)
    return out


def query_terms(index, query: str) -> tuple[set, tuple]:
    """(terms, prefixes) the query looks for, outside negations: what is marked."""
    bound = text_query(query, index.analyzer)
    terms: set = set()
    prefixes: list = []

    def visit(node):
        kind = type(node).__name__
        if kind == "Term":
            terms.add(node.text)
        elif kind == "Prefix":
            prefixes.append(node.text)
        elif kind == "Phrase":
            terms.update(node.terms)
        elif kind in ("And", "Or"):
            for c in node.children:
                visit(c)
    if bound is not None:
        visit(bound)
    return terms, tuple(prefixes)


def _marked(index, text: str, terms: set, prefixes: tuple) -> list[tuple[int, int, bool]]:
    """(start, end, marked) of each token of `text`."""
    return [(a, b, t in terms or any(t.startswith(p) for p in prefixes))
            for a, b, t in index.analyzer.spans(text)]


def highlight(index, text: str | None, terms: set, prefixes: tuple, start: str, stop: str
              ) -> str | None:
    """The whole text with each matching token wrapped in start ... stop."""
    if text is None:
        return None
    out, at = [], 0
    for a, b, marked in _marked(index, text, terms, prefixes):
        if marked:
            out += [text[at:a], start, text[a:b], stop]
            at = b
    out.append(text[at:])
    return "".join(out)


def snippet(index, text: str | None, terms: set, prefixes: tuple, start: str, stop: str,
            ellipsis: str, tokens: int = SNIPPET_TOKENS) -> str | None:
    """The window of `tokens` tokens with the most matching ones (the earliest
    among equals), matches wrapped, an ellipsis where text was cut."""
    if text is None:
        return None
    spans = _marked(index, text, terms, prefixes)
    if not spans:
        return text
    hits = np.array([m for _, _, m in spans], np.int64)
    width = min(max(1, tokens), len(spans))
    sums = np.convolve(hits, np.ones(width, np.int64), "valid")
    first = int(np.argmax(sums))
    window = spans[first:first + width]
    lo, hi = window[0][0], window[-1][1]
    if first == 0:
        lo = 0
    if first + width == len(spans):
        hi = len(text)
    out, at = [], lo
    for a, b, marked in window:
        if marked:
            out += [text[at:a], start, text[a:b], stop]
            at = b
    out.append(text[at:hi])
    body = "".join(out)
    return (ellipsis if lo > 0 else "") + body + (ellipsis if hi < len(text) else "")
