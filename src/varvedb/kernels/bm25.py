"""Kernels of the full-text index (:mod:`varvedb.index.fts`): encode, decode, phrases, top-k.

The compressed form of one segment (the layout and why are in fts.py's header):

* ``post``: per term, its postings in row order, each ``varint(row delta)``
  then ``varint(tf)``; the first delta is from ``lo - 1``, so every delta is
  >= 1 and the chain runs unbroken through a term's blocks.
* ``posb``: per posting, its ``tf`` positions, ``varint(first)`` then
  ``varint(gap)`` (gaps >= 1).
* per term: ``term_ids`` (global ids, ascending), ``term_df`` (postings),
  ``term_post`` / ``term_pos`` (where its bytes start in each stream) and
  ``term_blk`` (its first entry in the block arrays, or -1 for a list of one
  block: <= BLOCK postings, decoded whole, so it needs no skip data).
* per block of BLOCK postings of a longer list: ``blk_last`` (its last row: a
  cursor skips a block by it), ``blk_maxtf`` and ``blk_minlen`` (a BM25 upper
  bound for the block, whatever avgdl is: the score grows with tf and falls
  with length), ``blk_post`` / ``blk_pos`` (where it starts in each stream).

Every decoder checks what it reads (bytes in range, deltas >= 1, rows below
the segment's end, tf >= 1) and raises ValueError, so a damaged stream is an
error, never a read out of bounds.
"""
from __future__ import annotations

import numpy as np

from .jit import njit

BLOCK = 128

_JIT = dict(cache=True, nogil=True)
_INLINE = dict(_JIT, inline="always")


# --------------------------------------------------------------- varints


@njit(**_INLINE)
def _varint_size(v):
    s = 1
    while v >= 128:
        v >>= 7
        s += 1
    return s


@njit(**_INLINE)
def _put(buf, i, v):
    while v >= 128:
        buf[i] = np.uint8((v & 127) | 128)
        v >>= 7
        i += 1
    buf[i] = np.uint8(v)
    return i + 1


@njit(**_INLINE)
def _get(buf, i, end):
    """Read one varint at ``buf[i]`` (before ``end``): (value, next i)."""
    v = np.int64(0)
    shift = 0
    while True:
        if i >= end or shift > 35:
            raise ValueError("fts: postings stream damaged")
        c = np.int64(buf[i])
        i += 1
        v |= (c & 127) << shift
        if c < 128:
            return v, i
        shift += 7


# --------------------------------------------------------------- encoding


@njit(**_JIT)
def encode_segment(term, row, pos, n_terms, lengths, lo):
    """Compress tokens ``(term, row, pos)`` (rows ascending, positions ascending
    within a row) into one segment's arrays (see the module header).

    Tokens are first bucketed by term (a stable counting sort), so the order
    within a term stays that of the input: (row, pos).
    """
    p = term.shape[0]
    count = np.zeros(n_terms + 1, np.int64)
    for i in range(p):
        count[term[i] + 1] += 1
    for t in range(n_terms):
        count[t + 1] += count[t]
    order = np.empty(p, np.int64)
    fill = count[:n_terms].copy()
    for i in range(p):
        t = term[i]
        order[fill[t]] = i
        fill[t] += 1

    # pass 1: sizes
    n_t = 0
    n_post = 0
    n_blk = 0
    post_size = 0
    pos_size = 0
    j = 0
    while j < p:
        t = term[order[j]]
        n_t += 1
        prev = lo - 1
        df = 0
        while j < p and term[order[j]] == t:
            r = row[order[j]]
            tf = 0
            last_pos = -1
            while j < p and term[order[j]] == t and row[order[j]] == r:
                q = pos[order[j]]
                pos_size += _varint_size(q if last_pos < 0 else q - last_pos)
                last_pos = q
                tf += 1
                j += 1
            post_size += _varint_size(r - prev) + _varint_size(tf)
            prev = r
            df += 1
        n_post += df
        if df > BLOCK:
            n_blk += (df + BLOCK - 1) // BLOCK

    term_ids = np.empty(n_t, np.int32)
    term_df = np.empty(n_t, np.int32)
    term_post = np.empty(n_t, np.uint32)
    term_pos = np.empty(n_t, np.uint32)
    term_blk = np.empty(n_t, np.int32)
    blk_last = np.empty(n_blk, np.int32)
    blk_maxtf = np.empty(n_blk, np.int32)
    blk_minlen = np.empty(n_blk, np.int32)
    blk_post = np.empty(n_blk, np.uint32)
    blk_pos = np.empty(n_blk, np.uint32)
    post = np.empty(post_size, np.uint8)
    posb = np.empty(pos_size, np.uint8)

    # pass 2: write
    j = 0
    ti = -1
    bi = -1
    pp = 0
    qp = 0
    while j < p:
        t = term[order[j]]
        ti += 1
        # this term's df, to know whether it gets blocks
        df = 0
        k = j
        while k < p and term[order[k]] == t:
            r = row[order[k]]
            while k < p and term[order[k]] == t and row[order[k]] == r:
                k += 1
            df += 1
        term_ids[ti] = t
        term_df[ti] = df
        term_post[ti] = pp
        term_pos[ti] = qp
        blocks = df > BLOCK
        term_blk[ti] = bi + 1 if blocks else -1
        prev = lo - 1
        d = 0
        while j < p and term[order[j]] == t:
            r = row[order[j]]
            if blocks and d % BLOCK == 0:
                bi += 1
                blk_post[bi] = pp
                blk_pos[bi] = qp
                blk_maxtf[bi] = 0
                blk_minlen[bi] = 2147483647
            tf = 0
            last_pos = -1
            while j < p and term[order[j]] == t and row[order[j]] == r:
                q = pos[order[j]]
                qp = _put(posb, qp, q if last_pos < 0 else q - last_pos)
                last_pos = q
                tf += 1
                j += 1
            pp = _put(post, pp, r - prev)
            pp = _put(post, pp, tf)
            prev = r
            if blocks:
                blk_last[bi] = r
                if tf > blk_maxtf[bi]:
                    blk_maxtf[bi] = tf
                if lengths[r] < blk_minlen[bi]:
                    blk_minlen[bi] = lengths[r]
            d += 1
    return (term_ids, term_df, term_post, term_pos, term_blk,
            blk_last, blk_maxtf, blk_minlen, blk_post, blk_pos, post, posb)


# --------------------------------------------------------------- decoding


@njit(**_INLINE)
def _stream_end(starts, t, stream):
    if t + 1 < starts.shape[0]:
        return np.int64(starts[t + 1])
    return np.int64(stream.shape[0])


@njit(**_INLINE)
def _decode_list(post, i, end, df, lo, hi, rows, tfs, at):
    """Decode ``df`` postings from ``post[i:end]`` into rows/tfs at ``at``; returns i."""
    prev = np.int64(lo - 1)
    for d in range(df):
        delta, i = _get(post, i, end)
        tf, i = _get(post, i, end)
        prev += delta
        if delta < 1 or prev >= hi or tf < 1:
            raise ValueError("fts: postings stream damaged")
        rows[at + d] = prev
        tfs[at + d] = tf
    return i


@njit(**_JIT)
def decode_terms(post, term_post, term_df, which, lo, hi):
    """Decode whole posting lists: terms ``which`` (indexes into the segment's
    term arrays), concatenated in that order. Returns (rows int64, tfs int32)."""
    total = 0
    for w in range(which.shape[0]):
        total += term_df[which[w]]
    rows = np.empty(total, np.int64)
    tfs = np.empty(total, np.int32)
    at = 0
    for w in range(which.shape[0]):
        t = which[w]
        i = np.int64(term_post[t])
        _decode_list(post, i, _stream_end(term_post, t, post), term_df[t], lo, hi, rows, tfs, at)
        at += term_df[t]
    return rows, tfs


@njit(**_INLINE)
def _decode_positions(posb, i, end, tfs, a, b, out, at):
    """Positions of postings a..b-1 (their tfs) from ``posb[i:end]`` into out at ``at``."""
    for d in range(a, b):
        prev = np.int64(-1)
        for _ in range(tfs[d]):
            v, i = _get(posb, i, end)
            if prev < 0:
                prev = v
            else:
                if v < 1:
                    raise ValueError("fts: positions stream damaged")
                prev += v
            out[at] = prev
            at += 1
    return i


@njit(**_JIT)
def segment_tokens(term_ids, term_df, term_post, term_pos, post, posb, lo, hi, keep_below):
    """Every token of a segment as (term, row, pos), term-major, rows < ``keep_below``."""
    n_t = term_ids.shape[0]
    all_t = np.arange(n_t)
    rows, tfs = decode_terms(post, term_post, term_df, all_t, lo, hi)
    total = 0
    for d in range(rows.shape[0]):
        if rows[d] < keep_below:
            total += tfs[d]
    out_t = np.empty(total, np.int32)
    out_r = np.empty(total, np.int32)
    out_p = np.empty(total, np.int32)
    at = 0
    base = 0
    scratch = np.empty(0, np.int64)
    for t in range(n_t):
        df = term_df[t]
        ntok = 0
        for d in range(base, base + df):
            ntok += tfs[d]
        if scratch.shape[0] < ntok:
            scratch = np.empty(ntok, np.int64)
        i = np.int64(term_pos[t])
        end = _stream_end(term_pos, t, posb)
        _decode_positions(posb, i, end, tfs, base, base + df, scratch, 0)
        s = 0
        for d in range(base, base + df):
            for _ in range(tfs[d]):
                if rows[d] < keep_below:
                    out_t[at] = term_ids[t]
                    out_r[at] = rows[d]
                    out_p[at] = scratch[s]
                    at += 1
                s += 1
        base += df
    return out_t, out_r, out_p


@njit(**_JIT)
def check_segment(term_ids, term_df, term_post, term_pos, term_blk, blk_last, blk_maxtf,
                  blk_minlen, blk_post, blk_pos, post, posb, lo, hi, n_terms, lengths):
    """Decode a whole segment and check it against its own skip data and the
    lengths (what a checkpoint load trusts); raises ValueError on any mismatch."""
    n_t = term_ids.shape[0]
    n_blk = blk_last.shape[0]
    prev_t = -1
    expect_blk = 0
    for t in range(n_t):
        if term_ids[t] <= prev_t or term_ids[t] >= n_terms or term_df[t] < 1:
            raise ValueError("fts: segment terms damaged")
        prev_t = term_ids[t]
        df = term_df[t]
        i = np.int64(term_post[t])
        end = _stream_end(term_post, t, post)
        q = np.int64(term_pos[t])
        qend = _stream_end(term_pos, t, posb)
        if i > end or q > qend:
            raise ValueError("fts: segment offsets damaged")
        if df > BLOCK:
            if term_blk[t] != expect_blk:
                raise ValueError("fts: segment blocks damaged")
            expect_blk += (df + BLOCK - 1) // BLOCK
            if expect_blk > n_blk:
                raise ValueError("fts: segment blocks damaged")
        elif term_blk[t] != -1:
            raise ValueError("fts: segment blocks damaged")
        prev = np.int64(lo - 1)
        b = term_blk[t] - 1
        maxtf = 0
        minlen = 2147483647
        for d in range(df):
            if df > BLOCK and d % BLOCK == 0:
                b += 1
                if blk_post[b] != i or blk_pos[b] != q:
                    raise ValueError("fts: segment blocks damaged")
                maxtf = 0
                minlen = 2147483647
            delta, i = _get(post, i, end)
            tf, i = _get(post, i, end)
            prev += delta
            if delta < 1 or prev >= hi or tf < 1 or lengths[prev] < tf:
                raise ValueError("fts: postings stream damaged")
            last = np.int64(-1)
            for _ in range(tf):
                v, q = _get(posb, q, qend)
                if last >= 0 and v < 1:
                    raise ValueError("fts: positions stream damaged")
                last = v if last < 0 else last + v
            if df > BLOCK:
                maxtf = max(maxtf, tf)
                minlen = min(minlen, lengths[prev])
                if d % BLOCK == BLOCK - 1 or d == df - 1:
                    if blk_last[b] != prev or blk_maxtf[b] != maxtf or blk_minlen[b] != minlen:
                        raise ValueError("fts: segment blocks damaged")
        if i != end or q != qend:
            raise ValueError("fts: segment offsets damaged")
    if expect_blk != n_blk:
        raise ValueError("fts: segment blocks damaged")


# --------------------------------------------------------------- phrases


@njit(**_JIT)
def phrase_rows(post, posb, term_post, term_pos, term_df, which, lo, hi):
    """Rows of one segment holding the phrase whose i-th word is segment term
    ``which[i]``, and the phrase's occurrences in each: (rows int64, tfs int32).
    An occurrence is a start position p with word i at p + i for every i."""
    m = which.shape[0]
    offs = np.zeros(m + 1, np.int64)
    for w in range(m):
        offs[w + 1] = offs[w] + term_df[which[w]]
    rows, tfs = decode_terms(post, term_post, term_df, which, lo, hi)
    # positions of each posting: poff[d] .. poff[d+1]
    poff = np.zeros(rows.shape[0] + 1, np.int64)
    for d in range(rows.shape[0]):
        poff[d + 1] = poff[d] + tfs[d]
    positions = np.empty(poff[-1], np.int64)
    for w in range(m):
        t = which[w]
        _decode_positions(posb, np.int64(term_pos[t]), _stream_end(term_pos, t, posb),
                          tfs, offs[w], offs[w + 1], positions, poff[offs[w]])
    n0 = offs[1] - offs[0]
    out_r = np.empty(n0, np.int64)
    out_tf = np.empty(n0, np.int32)
    n_out = 0
    ptr = offs[:m].copy()
    pp = np.empty(m, np.int64)
    for d in range(offs[0], offs[1]):
        r = rows[d]
        every = True
        for w in range(1, m):
            while ptr[w] < offs[w + 1] and rows[ptr[w]] < r:
                ptr[w] += 1
            if ptr[w] == offs[w + 1] or rows[ptr[w]] != r:
                every = False
                break
        if not every:
            continue
        for w in range(1, m):
            pp[w] = poff[ptr[w]]
        c = 0
        for s in range(poff[d], poff[d + 1]):
            start = positions[s]
            hit = True
            for w in range(1, m):
                e = poff[ptr[w] + 1]
                while pp[w] < e and positions[pp[w]] < start + w:
                    pp[w] += 1
                if pp[w] == e or positions[pp[w]] != start + w:
                    hit = False
                    break
            if hit:
                c += 1
        if c > 0:
            out_r[n_out] = r
            out_tf[n_out] = c
            n_out += 1
    return out_r[:n_out], out_tf[:n_out]


# --------------------------------------------------------------- scoring


@njit(**_JIT)
def count_visible(rows, visible):
    """How many of ``rows`` (ascending) are set in ``visible`` (shorter = False)."""
    m = visible.shape[0]
    c = 0
    for r in rows:
        if r >= m:
            break
        if visible[r]:
            c += 1
    return c


@njit(**_JIT)
def add_scores(scores, rows, leaf_rows, leaf_tfs, lengths, idf, k1, b, avgdl):
    """``scores[i] += BM25(leaf at rows[i])`` for rows (ascending) holding the leaf."""
    j = 0
    n = leaf_rows.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i]
        while j < n and leaf_rows[j] < r:
            j += 1
        if j == n:
            break
        if leaf_rows[j] == r:
            tf = leaf_tfs[j]
            norm = k1 * (1.0 - b + b * lengths[r] / avgdl)
            scores[i] += idf * tf * (k1 + 1.0) / (tf + norm)
