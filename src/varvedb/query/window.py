"""Ranking window functions: row_number(), rank(), dense_rank() OVER
(PARTITION BY ... ORDER BY ...), each a numpy pass over all the rows.

The rows are ordered once by one np.lexsort (partition codes first, then the
ORDER BY keys with PostgreSQL's NULL placement, then the row's position, so
row_number follows the input order among peers); a partition starts where
its code changes and a peer group where any key changes; the ranks are
cumulative maxima / sums over those starts, scattered back to input order.
"""
from __future__ import annotations

import numpy as np

from ..errors import NotSupportedError
from .aggregate import groups, sort_ranks
from .expr import Env, Rel, Val, Window, evaluate

FUNCTIONS = ("row_number", "rank", "dense_rank")


def window_values(w: Window, rel: Rel, env: Env) -> Val:
    """The window function `w` of each row of `rel`, in its order (int, no NULLs)."""
    if w.fn not in FUNCTIONS:
        raise NotSupportedError(f"window function {w.fn}() is not supported "
                                f"(only {', '.join(FUNCTIONS)})")
    n = rel.n
    keys = []                                 # np.lexsort: last key is primary
    peers = []                                # arrays equal between peers
    for e, desc, nulls_first in reversed(w.order):
        v = evaluate(e, rel, env)
        ranks = sort_ranks(v)
        if desc:
            ranks = -ranks
        ranks = np.where(v.nulls, 0, ranks)
        if nulls_first is None:
            nulls_first = desc             # PostgreSQL: NULLS LAST ascending, FIRST descending
        keys.append(ranks)
        keys.append(~v.nulls if nulls_first else v.nulls)
        peers.extend((ranks, v.nulls))
    part = groups([evaluate(p, rel, env) for p in w.partition], n)[0] if w.partition \
        else np.zeros(n, np.int64)
    order = np.lexsort([np.arange(n)] + keys + [part])
    pos = np.arange(n, dtype=np.int64)
    new_part = np.ones(n, bool)
    if n:
        new_part[1:] = part[order][1:] != part[order][:-1]
    new_peer = new_part.copy()
    for a in peers:
        s = a[order]
        new_peer[1:] |= s[1:] != s[:-1]
    part_start = np.maximum.accumulate(np.where(new_part, pos, 0))
    if w.fn == "row_number":
        ranked = pos - part_start + 1
    elif w.fn == "rank":
        ranked = np.maximum.accumulate(np.where(new_peer, pos, 0)) - part_start + 1
    else:
        dense = np.cumsum(new_peer)
        ranked = dense - dense[part_start] + 1
    out = np.empty(n, np.int64)
    out[order] = ranked
    return Val("int", out, np.zeros(n, bool))
