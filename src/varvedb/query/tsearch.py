"""PostgreSQL's full-text functions over to_tsvector's values: `@@`, ts_rank,
ts_rank_cd, and the full-text index's candidates for a `to_tsvector(...) @@`.

A tsquery (text/tsquery.py's TsQuery) is compiled against a block of
tsvectors' vocabulary (text/tsvector.py's TsVectors) into what
kernels/tsearch.py runs: its distinct operands as lexeme id ranges, phrases
as groups of operands at fixed offsets, and the boolean expression over them
in postfix. The scores are PostgreSQL's (tsrank.c's formulas, its float4
steps, every position of weight D as to_tsvector makes them), then its
normalization flags: 1 log length, 2 length, 4 extents (ts_rank_cd), 8
distinct words, 16 log distinct words, 32 rank / (rank + 1).

`candidates` is how a WHERE `to_tsvector('english', body) @@ q` avoids
analyzing every row: where the column has a full-text index analyzed by the
same configuration (the index's terms are then to_tsvector's lexemes), the
rows holding what the query cannot match without are read from the index,
and only they are analyzed and matched exactly.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..errors import NotSupportedError, SqlError
from ..kernels import tsearch as K
from ..text.query import And, Not, Or, Prefix, Term
from ..text.tsquery import TsOp, TsQuery, Word
from ..text.tsvector import TsVectors

DEFAULT_WEIGHTS = (0.1, 0.2, 0.4, 1.0)     # D, C, B, A
_LOG2 = np.log(2.0)


@dataclass
class Compiled:
    leaves: list            # the distinct operands (Word), sorted as PostgreSQL sorts them
    leaf_lo: np.ndarray
    leaf_hi: np.ndarray
    item_off: np.ndarray
    mem_leaf: np.ndarray
    mem_delta: np.ndarray
    prog: np.ndarray


def _leaves(tree) -> list:
    out: dict = {}

    def visit(n):
        if isinstance(n, Word):
            out[(n.text, n.prefix)] = n
        elif isinstance(n, Not):
            visit(n.child)
        else:
            visit(n.left)
            visit(n.right)
    visit(tree)
    return [out[k] for k in sorted(out)]


def compile_query(q: TsQuery, vocab: list) -> Compiled:
    leaves = _leaves(q.tree)
    index = {(w.text, w.prefix): i for i, w in enumerate(leaves)}
    lo = np.zeros(len(leaves), np.int32)
    hi = np.zeros(len(leaves), np.int32)
    for i, w in enumerate(leaves):
        a = bisect.bisect_left(vocab, w.text)
        if w.prefix:
            b = bisect.bisect_left(vocab, w.text + "\U0010ffff", a)
        else:
            b = a + 1 if a < len(vocab) and vocab[a] == w.text else a
        lo[i], hi[i] = a, b
    items: list = []
    prog: list = []

    def group(n):
        """(members (leaf, offset from the group's last position), width)."""
        if isinstance(n, Word):
            return [(index[(n.text, n.prefix)], 0)], 0
        if isinstance(n, TsOp) and n.op == "<->":
            left, wl = group(n.left)
            right, wr = group(n.right)
            shift = n.distance + wr
            return right + [(leaf, off - shift) for leaf, off in left], n.distance + wl + wr
        raise NotSupportedError("a phrase (<->) of anything but words and phrases is not "
                                "supported")

    def emit(n):
        if isinstance(n, Not):
            emit(n.child)
            prog.append(K.NOT)
        elif isinstance(n, TsOp) and n.op in ("&", "|"):
            emit(n.left)
            emit(n.right)
            prog.append(K.AND if n.op == "&" else K.OR)
        else:
            prog.append(len(items))
            items.append(group(n)[0])
    emit(q.tree)
    item_off = np.zeros(len(items) + 1, np.int32)
    np.cumsum([len(m) for m in items], out=item_off[1:])
    mem = [x for m in items for x in m]
    return Compiled(leaves, lo, hi, item_off, np.array([m[0] for m in mem], np.int32),
                    np.array([m[1] for m in mem], np.int32), np.array(prog, np.int32))


def match(tsv: TsVectors, q: TsQuery) -> np.ndarray:
    """tsvector @@ tsquery per row (the empty query matches nothing)."""
    if q.tree is None or not len(tsv):
        return np.zeros(len(tsv), bool)
    c = compile_query(q, tsv.vocab)
    return K.match(tsv.row_off, tsv.lex, tsv.ent_off, tsv.pos, c.leaf_lo, c.leaf_hi,
                   c.item_off, c.mem_leaf, c.mem_delta, c.prog, tsv.most_positions())


def weight_of_d(weights) -> float:
    """The weight of to_tsvector's positions (D's) from ts_rank's weights array."""
    if weights is None:
        return DEFAULT_WEIGHTS[0]
    if len(weights) < 4:
        raise SqlError("2202E", "array of weight is too short")
    if any(w is None for w in weights):
        raise SqlError("22004", "array of weight must not contain nulls")
    if any(float(w) > 1.0 for w in weights):
        raise SqlError("22023", "weight out of range")
    return float(weights[0]) if float(weights[0]) >= 0 else DEFAULT_WEIGHTS[0]


def _normalized(res: np.ndarray, tsv: TsVectors, method: int, log_base2: bool,
                extents=None, sumdist=None) -> np.ndarray:
    res = res.astype(np.float64)
    length = tsv.positions().astype(np.float64)
    size = tsv.entries().astype(np.float64)
    has = size > 0
    if method & 1:
        div = np.log(length + 1) / (_LOG2 if log_base2 else 1.0)
        res = np.where(has & (div != 0), res / np.where(div == 0, 1, div), res)
    if method & 2:
        res = np.where(length > 0, res / np.maximum(length, 1), res)
    if method & 4 and extents is not None:
        ok = (extents > 0) & (sumdist > 0)
        res = np.where(ok, res / np.where(ok, extents / np.where(ok, sumdist, 1), 1), res)
    if method & 8:
        res = np.where(has, res / np.maximum(size, 1), res)
    if method & 16:
        res = np.where(has, res / (np.log(size + 1) / _LOG2), res)
    if method & 32:
        res = res / (res + 1)
    return res.astype(np.float32).astype(np.float64)


def rank(tsv: TsVectors, q: TsQuery, method: int = 0, weights=None) -> np.ndarray:
    """ts_rank([weights,] tsvector, tsquery [, normalization]) per row."""
    w = weight_of_d(weights)
    if q.tree is None or not len(tsv):
        return np.zeros(len(tsv), np.float64)
    c = compile_query(q, tsv.vocab)
    top_and = isinstance(q.tree, TsOp) and q.tree.op in ("&", "<->")
    # PostgreSQL counts an operand once by its text (`cat:*` and `cat` are one)
    texts = [leaf.text for leaf in c.leaves]
    once = np.array([i == 0 or texts[i] != texts[i - 1] for i in range(len(texts))], bool)
    res = K.rank(tsv.row_off, tsv.lex, tsv.ent_off, tsv.pos, c.leaf_lo[once],
                 c.leaf_hi[once], top_and, np.float32(w))
    return _normalized(res, tsv, method, True)


def rank_cd(tsv: TsVectors, q: TsQuery, method: int = 0, weights=None) -> np.ndarray:
    """ts_rank_cd([weights,] tsvector, tsquery [, normalization]) per row."""
    w = weight_of_d(weights)
    if q.tree is None or not len(tsv):
        return np.zeros(len(tsv), np.float64)
    c = compile_query(q, tsv.vocab)
    if len(c.leaves) > 62:
        raise NotSupportedError("ts_rank_cd of a query of more than 62 distinct words is "
                                "not supported")
    if w == 0:
        raise SqlError("22012", "division by zero")
    wdoc, extents, sumdist = K.cover_density(tsv.row_off, tsv.lex, tsv.ent_off, tsv.pos,
                                             c.leaf_lo, c.leaf_hi, c.item_off, c.mem_leaf,
                                             c.mem_delta, c.prog, tsv.most_positions(),
                                             1.0 / np.float32(w))
    return _normalized(wdoc, tsv, method, False, extents.astype(np.float64), sumdist)


# ---- the full-text index's candidates ------------------------------------------------

def necessary(tree):
    """A varvedb query tree of lexemes that every row matching `tree` matches (None:
    no such condition, every row is a candidate)."""
    if isinstance(tree, Word):
        return Prefix(tree.text) if tree.prefix else Term(tree.text)
    if isinstance(tree, Not):
        return None
    left, right = necessary(tree.left), necessary(tree.right)
    if tree.op == "|":
        return None if left is None or right is None else Or((left, right))
    kept = tuple(x for x in (left, right) if x is not None)
    return None if not kept else kept[0] if len(kept) == 1 else And(kept)


def candidates(index, q: TsQuery, rows: np.ndarray) -> np.ndarray | None:
    """Which of `rows` the full-text index says may match (None: it cannot say)."""
    if q.tree is None:
        return np.zeros(len(rows), bool)
    need = necessary(q.tree)
    if need is None:
        return None
    m = index.n
    hit = index.match(need, np.ones(m, bool))
    out = np.zeros(len(rows), bool)
    inside = rows < m
    out[inside] = hit[rows[inside]]
    return out
