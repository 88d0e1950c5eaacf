"""PostgreSQL's tsvector @@ tsquery, ts_rank and ts_rank_cd over many tsvectors.

The tsvectors come in one CSR block (query/tsearch.py's TsVectors): row r's
entries are ``row_off[r]:row_off[r+1]``, each a lexeme id (``lex``, ids in
the lexemes' sorted order, so a row's entries are sorted by lexeme and a
prefix's lexemes are one id range) and its positions ``pos[ent_off[e]:
ent_off[e+1]]`` (1-based, ascending). A query comes compiled:

* leaves: the distinct operands, leaf l the lexeme ids ``[leaf_lo[l],
  leaf_hi[l])`` (a word: one id or none; a prefix: a range);
* items: a group of leaves at fixed offsets (``mem_leaf``, ``mem_delta`` over
  ``item_off``), true in a row where some position X has each member leaf at
  X + its delta: a lone leaf is an item of one member (present anywhere), a
  phrase `a <2> b` the item {a: -2, b: 0};
* ``prog``: the boolean expression over items in postfix (k >= 0 pushes item
  k; NOT, AND, OR below).

Why kernels: a statement matches and ranks every candidate row of a table;
per row, the work is a few binary searches and small loops.
"""
import numpy as np

from .jit import njit
from .tokenize import lower_bound as _first_entry

_JIT = dict(cache=True, nogil=True)

NOT = -1
AND = -2
OR = -3
MAX_POS = 16383          # PostgreSQL's largest position (MAXENTRYPOS - 1)


@njit(**_JIT)
def _gather(r, row_off, lex, ent_off, pos, leaf_lo, leaf_hi, scratch, lp_start, lp_end):
    """Each leaf's positions in row r, sorted, into scratch[lp_start[l]:lp_end[l]]."""
    e0, e1 = row_off[r], row_off[r + 1]
    fill = 0
    for l in range(leaf_lo.shape[0]):
        lp_start[l] = fill
        e = _first_entry(lex, e0, e1, leaf_lo[l])
        entries = 0
        while e < e1 and lex[e] < leaf_hi[l]:
            for k in range(ent_off[e], ent_off[e + 1]):
                scratch[fill] = pos[k]
                fill += 1
            entries += 1
            e += 1
        lp_end[l] = fill
        if entries > 1:
            scratch[lp_start[l]:fill].sort()


@njit(**_JIT)
def _holds(scratch, a, b, x):
    """Whether the sorted scratch[a:b] holds x."""
    k = _first_entry(scratch, a, b, x)
    return k < b and scratch[k] == x


@njit(**_JIT)
def _item_true(it, item_off, mem_leaf, mem_delta, scratch, lp_start, lp_end):
    m0, m1 = item_off[it], item_off[it + 1]
    first = mem_leaf[m0]
    if m1 - m0 == 1:
        return lp_end[first] > lp_start[first]
    for k in range(lp_start[first], lp_end[first]):
        x = scratch[k] - mem_delta[m0]
        ok = True
        for m in range(m0 + 1, m1):
            leaf = mem_leaf[m]
            if not _holds(scratch, lp_start[leaf], lp_end[leaf], x + mem_delta[m]):
                ok = False
                break
        if ok:
            return True
    return False


@njit(**_JIT)
def _run(prog, vals, stack):
    top = 0
    for c in prog:
        if c >= 0:
            stack[top] = vals[c]
            top += 1
        elif c == NOT:
            stack[top - 1] = not stack[top - 1]
        elif c == AND:
            top -= 1
            stack[top - 1] = stack[top - 1] and stack[top]
        else:
            top -= 1
            stack[top - 1] = stack[top - 1] or stack[top]
    return stack[0]


@njit(**_JIT, readonly=("row_off", "lex", "ent_off", "pos", "leaf_lo", "leaf_hi",
                         "item_off", "mem_leaf", "mem_delta", "prog"))
def match(row_off, lex, ent_off, pos, leaf_lo, leaf_hi, item_off, mem_leaf, mem_delta,
          prog, most):
    """tsvector @@ tsquery for each row; `most`: the most positions a row holds."""
    n = row_off.shape[0] - 1
    out = np.zeros(n, np.bool_)
    scratch = np.empty(most + 1, np.int32)
    lp_start = np.empty(leaf_lo.shape[0], np.int64)
    lp_end = np.empty(leaf_lo.shape[0], np.int64)
    n_items = item_off.shape[0] - 1
    vals = np.zeros(n_items, np.bool_)
    stack = np.zeros(prog.shape[0] + 1, np.bool_)
    for r in range(n):
        _gather(r, row_off, lex, ent_off, pos, leaf_lo, leaf_hi, scratch, lp_start, lp_end)
        for it in range(n_items):
            vals[it] = _item_true(it, item_off, mem_leaf, mem_delta, scratch, lp_start,
                                  lp_end)
        out[r] = _run(prog, vals, stack)
    return out


@njit(**_JIT)
def _word_distance(d):
    if d > 100:
        return np.float32(1e-30)
    return np.float32(1.0 / (1.005 + 0.05 * np.exp(np.float32(d) / 1.5 - 2)))


@njit(**_JIT, readonly=("row_off", "lex", "ent_off", "pos", "leaf_lo", "leaf_hi"))
def rank(row_off, lex, ent_off, pos, leaf_lo, leaf_hi, as_and, w):
    """PostgreSQL's ts_rank before normalization, in its float4 steps: `leaf_lo`,
    `leaf_hi` the query's distinct operands in their sorted order, `as_and`
    whether the query's top is & or <-> (then pairs of operands near each other
    score), `w` the weight of every position (D's)."""
    n = row_off.shape[0] - 1
    L = leaf_lo.shape[0]
    out = np.zeros(n, np.float32)
    at_start = np.full(L, -1, np.int64)     # the positions of leaf l's entry seen last
    at_end = np.full(L, -1, np.int64)
    for r in range(n):
        e0, e1 = row_off[r], row_off[r + 1]
        if e1 == e0:
            continue
        if as_and and L >= 2:
            res = np.float32(-1.0)
            for l in range(L):
                at_start[l] = -1
            for i in range(L):
                e = _first_entry(lex, e0, e1, leaf_lo[i])
                while e < e1 and lex[e] < leaf_hi[i]:
                    at_start[i], at_end[i] = ent_off[e], ent_off[e + 1]
                    for k in range(i):
                        if at_start[k] < 0:
                            continue
                        for a in range(at_start[i], at_end[i]):
                            for b in range(at_start[k], at_end[k]):
                                d = abs(pos[a] - pos[b])
                                if d == 0:
                                    continue
                                curw = np.float32(np.sqrt(np.float32(
                                    np.float32(w * w) * _word_distance(d))))
                                if res < 0:
                                    res = curw
                                else:
                                    res = np.float32(1.0 - (1.0 - res) * (1.0 - curw))
                    e += 1
            out[r] = res if res >= 0 else np.float32(1e-20)
        else:
            res = np.float32(0.0)
            for i in range(L):
                e = _first_entry(lex, e0, e1, leaf_lo[i])
                while e < e1 and lex[e] < leaf_hi[i]:
                    resj = np.float32(0.0)
                    for j in range(ent_off[e + 1] - ent_off[e]):
                        resj = np.float32(resj + w / np.float32((j + 1) * (j + 1)))
                    res = np.float32(res + (w + resj - w) / 1.64493406685)
                    e += 1
            out[r] = np.float32(res / L) if L > 0 else res
    return out


@njit(**_JIT)
def _seen_item(it, item_off, mem_leaf, mem_delta, have, Ps, Ms, lo, hi):
    """Whether item `it` holds among the positions Ps[lo:hi] seen so far (Ms: the
    leaves at each): a lone leaf, seen; a phrase, its leaves at their offsets."""
    m0, m1 = item_off[it], item_off[it + 1]
    first = mem_leaf[m0]
    if m1 - m0 == 1:
        return (have >> first) & 1 == 1
    for k in range(lo, hi):
        if (Ms[k] >> first) & 1 == 0:
            continue
        x = Ps[k] - mem_delta[m0]
        ok = True
        for m in range(m0 + 1, m1):
            want = x + mem_delta[m]
            j = _first_entry(Ps, lo, hi, want)
            if j >= hi or Ps[j] != want or (Ms[j] >> mem_leaf[m]) & 1 == 0:
                ok = False
                break
        if ok:
            return True
    return False


@njit(**_JIT, readonly=("row_off", "lex", "ent_off", "pos", "leaf_lo", "leaf_hi",
                         "item_off", "mem_leaf", "mem_delta", "prog"))
def cover_density(row_off, lex, ent_off, pos, leaf_lo, leaf_hi, item_off, mem_leaf,
                  mem_delta, prog, most, invw):
    """PostgreSQL's ts_rank_cd before normalization: per row (the sum over its
    covers, the covers, the sum of 1 / the distance between neighbouring covers'
    centres). A cover is the shortest run of the row's query positions that makes
    the query true, found left to right (a phrase: its words at their offsets among
    the positions seen); `invw` 1 / D's weight."""
    n = row_off.shape[0] - 1
    L = leaf_lo.shape[0]
    wdoc = np.zeros(n, np.float64)
    extents = np.zeros(n, np.int64)
    sumdist = np.zeros(n, np.float64)
    P = np.empty(most + 1, np.int32)
    M = np.empty(most + 1, np.int64)        # the leaves present at each position, as bits
    n_items = item_off.shape[0] - 1
    vals = np.zeros(n_items, np.bool_)
    stack = np.zeros(prog.shape[0] + 1, np.bool_)
    for r in range(n):
        e0, e1 = row_off[r], row_off[r + 1]
        # the doc representation: each position of a query leaf's entry, with its leaves
        cnt = 0
        for e in range(e0, e1):
            bits = 0
            for l in range(L):
                if leaf_lo[l] <= lex[e] < leaf_hi[l]:
                    bits |= 1 << l
            if bits:
                for k in range(ent_off[e], ent_off[e + 1]):
                    P[cnt] = pos[k]
                    M[cnt] = bits
                    cnt += 1
        if cnt == 0:
            continue
        order = np.argsort(P[:cnt], kind="mergesort")
        Ps = P[:cnt][order]
        Ms = M[:cnt][order]
        start = 0
        prev_centre = 0.0
        while start < cnt:
            have = 0
            found = False
            q = 0
            last = start
            i = start
            while i < cnt:
                have |= Ms[i]
                for it in range(n_items):
                    vals[it] = _seen_item(it, item_off, mem_leaf, mem_delta, have, Ps, Ms,
                                          start, i + 1)
                if _run(prog, vals, stack):
                    if Ps[i] > q:
                        q = Ps[i]
                        last = i
                        found = True
                    break
                i += 1
            if not found:
                break
            have = 0
            p = 1 << 30
            begin = -1
            i = last
            while i >= start:
                have |= Ms[i]
                for it in range(n_items):
                    vals[it] = _seen_item(it, item_off, mem_leaf, mem_delta, have, Ps, Ms,
                                          i, last + 1)
                if _run(prog, vals, stack):
                    if Ps[i] < p:
                        begin = i
                        p = Ps[i]
                    break
                i -= 1
            if p > q:
                start += 1
                continue
            start = i + 1
            inside = last - begin + 1
            cpos = inside / (inside * invw)
            noise = (q - p) - (last - begin)
            if noise < 0:
                noise = (last - begin) // 2
            wdoc[r] += cpos / (1.0 + noise)
            centre = (q + p) / 2.0
            if extents[r] > 0 and centre > prev_centre:
                sumdist[r] += 1.0 / (centre - prev_centre)
            prev_centre = centre
            extents[r] += 1
    return wdoc, extents, sumdist
