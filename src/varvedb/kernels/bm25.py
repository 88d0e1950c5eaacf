"""Kernels of the full-text index (:mod:`varvedb.index.fts`): encode, decode, phrases, top-k.

The compressed form of one segment (the layout and why are in fts.py's header):

* ``post``: per term, its postings in row order, each ``varint(2 * row
  delta + 1)`` when tf is 1 (most postings: one byte) else ``varint(2 * row
  delta)`` then ``varint(tf)``; the first delta is from ``lo - 1``, so every
  delta is >= 1 and the chain runs unbroken through a term's blocks.
* ``posb``: per posting, its ``tf`` positions, ``varint(first)`` then
  ``varint(gap)`` (gaps >= 1).
* per term: ``term_ids`` (global ids, ascending), ``term_df`` (postings),
  ``term_post`` / ``term_pos`` (where its bytes start in each stream); a list
  of one block (<= BLOCK postings, most terms) is decoded whole and has no
  skip data, the blocks of longer lists follow in term order.
* per block of BLOCK postings of a longer list: ``blk_last`` (its last row: a
  cursor skips a block by it), ``blk_maxtf`` and ``blk_minlen`` (a BM25 upper
  bound for the block, whatever avgdl is: the score grows with tf and falls
  with length), ``blk_post`` (where it starts in ``post``). Phrases decode a
  term's positions whole, so blocks need no position offsets.

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
# every kernel names the arrays it only reads (``readonly=``): a checkpoint's
# mapped arrays and in-memory ones then share one compiled specialisation


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


@njit(readonly=('doc', 'pos'), **_JIT)
def in_order(doc, pos):
    """Whether tokens ascend by (doc, pos), as an analyzer emits them."""
    for i in range(1, doc.shape[0]):
        if doc[i] < doc[i - 1] or (doc[i] == doc[i - 1] and pos[i] <= pos[i - 1]):
            return False
    return True


@njit(readonly=('text_start', 'term', 'pos', 'ids', 'text_of_row'), **_JIT)
def row_tokens(text_start, term, pos, ids, text_of_row, first_row, n_terms, by_term):
    """The tokens of rows ``first_row + i`` (i where text_of_row[i] >= 0), each
    row's text being tokens [text_start[u], text_start[u + 1]) of a batch, as
    (global term, row, pos): in row order, or term-major when ``by_term`` (a
    stable counting sort over the vocabulary: worth it for a large batch)."""
    total = 0
    for i in range(text_of_row.shape[0]):
        u = text_of_row[i]
        if u >= 0:
            total += text_start[u + 1] - text_start[u]
    st = np.empty(total, np.int32)
    sr = np.empty(total, np.int32)
    sp = np.empty(total, np.int32)
    if by_term:
        fill = np.zeros(n_terms + 1, np.int64)
        for i in range(text_of_row.shape[0]):
            u = text_of_row[i]
            if u >= 0:
                for x in range(text_start[u], text_start[u + 1]):
                    fill[ids[term[x]] + 1] += 1
        for t in range(n_terms):
            fill[t + 1] += fill[t]
    at = 0
    for i in range(text_of_row.shape[0]):
        u = text_of_row[i]
        if u < 0:
            continue
        for x in range(text_start[u], text_start[u + 1]):
            t = ids[term[x]]
            if by_term:
                at = fill[t]
                fill[t] = at + 1
            st[at] = t
            sr[at] = first_row + i
            sp[at] = pos[x]
            at += 1
    return st, sr, sp


@njit(readonly=('term', 'row', 'pos'), **_JIT)
def sort_by_term(term, row, pos, n_terms):
    """Tokens in row order -> term-major (a stable counting sort)."""
    p = term.shape[0]
    fill = np.zeros(n_terms + 1, np.int64)
    for i in range(p):
        fill[term[i] + 1] += 1
    for t in range(n_terms):
        fill[t + 1] += fill[t]
    st = np.empty(p, np.int32)
    sr = np.empty(p, np.int32)
    sp = np.empty(p, np.int32)
    for i in range(p):
        t = term[i]
        d = fill[t]
        st[d] = t
        sr[d] = row[i]
        sp[d] = pos[i]
        fill[t] = d + 1
    return st, sr, sp


@njit(**_INLINE)
def _posting_size(delta, tf):
    if tf == 1:
        return _varint_size(2 * delta + 1)
    return _varint_size(2 * delta) + _varint_size(tf)


@njit(**_INLINE)
def _put_posting(buf, i, delta, tf):
    # tf 1 (most postings) rides in the delta's low bit: one varint, not two
    if tf == 1:
        return _put(buf, i, 2 * delta + 1)
    i = _put(buf, i, 2 * delta)
    return _put(buf, i, tf)


@njit(**_INLINE)
def _get_posting(buf, i, end):
    """(row delta, tf, next i) of the posting at ``buf[i]``."""
    v, i = _get(buf, i, end)
    if v & 1:
        tf = np.int64(1)
    else:
        tf, i = _get(buf, i, end)
        if tf < 2:
            raise ValueError("fts: postings stream damaged")
    delta = v >> 1
    if delta < 1:
        raise ValueError("fts: postings stream damaged")
    return delta, tf, i


@njit(readonly=('st', 'sr', 'sp', 'lengths'), **_JIT)
def encode_segment(st, sr, sp, lengths, lo):
    """Compress tokens sorted by (term, row, pos) into one segment's arrays."""
    p = st.shape[0]
    # pass 1: sizes
    n_t = 0
    n_blk = 0
    post_size = 0
    pos_size = 0
    j = 0
    while j < p:
        t = st[j]
        n_t += 1
        prev = lo - 1
        df = 0
        while j < p and st[j] == t:
            r = sr[j]
            pos_size += _varint_size(sp[j])
            k = j + 1
            while k < p and st[k] == t and sr[k] == r:
                pos_size += _varint_size(sp[k] - sp[k - 1])
                k += 1
            post_size += _posting_size(r - prev, k - j)
            prev = r
            df += 1
            j = k
        if df > BLOCK:
            n_blk += (df + BLOCK - 1) // BLOCK
    term_ids = np.empty(n_t, np.int32)
    term_df = np.zeros(n_t, np.int32)
    term_post = np.empty(n_t, np.uint32)
    term_pos = np.empty(n_t, np.uint32)
    blk_last = np.empty(n_blk, np.int32)
    blk_maxtf = np.empty(n_blk, np.int32)
    blk_minlen = np.empty(n_blk, np.int32)
    blk_post = np.empty(n_blk, np.uint32)
    post = np.empty(post_size, np.uint8)
    posb = np.empty(pos_size, np.uint8)
    # the dfs first, to know which lists get blocks
    j = 0
    ti = -1
    while j < p:
        if j == 0 or st[j] != st[j - 1]:
            ti += 1
            term_ids[ti] = st[j]
        if j == 0 or st[j] != st[j - 1] or sr[j] != sr[j - 1]:
            term_df[ti] += 1
        j += 1
    # pass 2: write
    j = 0
    bi = -1
    pp = 0
    qp = 0
    for ti in range(n_t):
        t = term_ids[ti]
        term_post[ti] = pp
        term_pos[ti] = qp
        blocks = term_df[ti] > BLOCK
        prev = lo - 1
        d = 0
        while j < p and st[j] == t:
            r = sr[j]
            if blocks and d % BLOCK == 0:
                bi += 1
                blk_post[bi] = pp
                blk_maxtf[bi] = 0
                blk_minlen[bi] = 2147483647
            qp = _put(posb, qp, sp[j])
            k = j + 1
            while k < p and st[k] == t and sr[k] == r:
                qp = _put(posb, qp, sp[k] - sp[k - 1])
                k += 1
            tf = k - j
            pp = _put_posting(post, pp, r - prev, tf)
            prev = r
            if blocks:
                blk_last[bi] = r
                if tf > blk_maxtf[bi]:
                    blk_maxtf[bi] = tf
                if lengths[r] < blk_minlen[bi]:
                    blk_minlen[bi] = lengths[r]
            d += 1
            j = k
    return (term_ids, term_df, term_post, term_pos,
            blk_last, blk_maxtf, blk_minlen, blk_post, post, posb)


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
        delta, tf, i = _get_posting(post, i, end)
        prev += delta
        if prev >= hi:
            raise ValueError("fts: postings stream damaged")
        rows[at + d] = prev
        tfs[at + d] = tf
    return i


@njit(readonly=('post', 'term_post', 'term_df', 'which'), **_JIT)
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


@njit(readonly=('term_ids', 'term_df', 'term_post', 'term_pos', 'post', 'posb'), **_JIT)
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


@njit(readonly=('term_df',), **_JIT)
def term_blocks(term_df):
    """Each term's first entry in the block arrays, -1 for a list of one block
    (derived, not stored: lists of more than BLOCK postings take them in order)."""
    out = np.empty(term_df.shape[0], np.int32)
    at = 0
    for t in range(term_df.shape[0]):
        if term_df[t] > BLOCK:
            out[t] = at
            at += (term_df[t] + BLOCK - 1) // BLOCK
        else:
            out[t] = -1
    return out


@njit(readonly=(
    'term_ids', 'term_df', 'term_post', 'term_pos', 'blk_last', 'blk_maxtf', 'blk_minlen',
    'blk_post', 'post', 'posb', 'lengths',
), **_JIT)
def check_segment(term_ids, term_df, term_post, term_pos, blk_last, blk_maxtf,
                  blk_minlen, blk_post, post, posb, lo, hi, n_terms, lengths):
    """Decode a whole segment and check it against its own skip data and the
    lengths (what a checkpoint load trusts); raises ValueError on any mismatch."""
    n_t = term_ids.shape[0]
    n_blk = blk_last.shape[0]
    prev_t = -1
    b = -1
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
        prev = np.int64(lo - 1)
        maxtf = 0
        minlen = 2147483647
        for d in range(df):
            if df > BLOCK and d % BLOCK == 0:
                b += 1
                if b >= n_blk or blk_post[b] != i:
                    raise ValueError("fts: segment blocks damaged")
                maxtf = 0
                minlen = 2147483647
            delta, tf, i = _get_posting(post, i, end)
            prev += delta
            if prev >= hi or lengths[prev] < tf:
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
    if b + 1 != n_blk:
        raise ValueError("fts: segment blocks damaged")


# --------------------------------------------------------------- phrases


@njit(readonly=('post', 'posb', 'term_post', 'term_pos', 'term_df', 'which'), **_JIT)
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


@njit(readonly=('visible', 'lengths'), **_JIT)
def mask_stats(visible, lengths):
    """(visible rows with a text, their tokens, visible rows) in one pass."""
    n_text = 0
    tokens = 0
    n_vis = 0
    for r in range(visible.shape[0]):
        if visible[r]:
            n_vis += 1
            if lengths[r] >= 0:
                n_text += 1
                tokens += lengths[r]
    return n_text, tokens, n_vis


@njit(readonly=('rows', 'visible'), **_JIT)
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


@njit(readonly=('rows', 'leaf_rows', 'leaf_tfs', 'lengths'), **_JIT)
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
            scores[i] += _bm25(idf, leaf_tfs[j], lengths[r], k1, b, avgdl)


@njit(**_INLINE)
def _bm25(idf, tf, length, k1, b, avgdl):
    return idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * length / avgdl))


# --------------------------------------------------------------- pruned top-k
#
# One call ranks one segment's rows and carries the k best so far (a max-heap
# of (-score, row) from heaps.py) into the next segment's call; segments are
# visited in row order, so a later row never displaces an equal score and the
# ties go to the lower row. The leaves of the query are cursors over blocks:
# a compressed term (kind 0), a list decoded by the caller (kind 1: a prefix's
# or a phrase's postings) or nothing in this segment (kind 2). Every block has
# a last row and a score upper bound, so a cursor can be bounded and skipped
# without decoding it.

_INF = np.int64(1) << np.int64(62)
_SLACK = 1.0 + 1e-9      # bounds are summed in another order than scores


@njit(**_INLINE)
def _worse(ka, ia, kb, ib):
    return ka > kb or (ka == kb and ia > ib)


@njit(**_INLINE)
def _offer(keys, ids, n, k, key, row):
    """Offer (key, row) to a max-heap of the k best (smaller key, then lower row,
    is better; heaps.py orders by key alone, and ties here must go to the lower
    row whatever the heap's shape); returns its size."""
    if n < k:
        j = n
        n += 1
        while j > 0:
            parent = (j - 1) >> 1
            if not _worse(key, row, keys[parent], ids[parent]):
                break
            keys[j] = keys[parent]
            ids[j] = ids[parent]
            j = parent
        keys[j] = key
        ids[j] = row
        return n
    if not _worse(keys[0], ids[0], key, row):
        return n
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and _worse(keys[c + 1], ids[c + 1], keys[c], ids[c]):
            c += 1
        if not _worse(keys[c], ids[c], key, row):
            break
        keys[j] = keys[c]
        ids[j] = ids[c]
        j = c
    keys[j] = key
    ids[j] = row
    return n


@njit(**_JIT)     # not inlined: six copies of the decode loop were most of a compile
def _decode_block(l, j, kind, start, df, blk, doff, post, blk_post, lasts, u0, lo,
                  d_rows, d_tfs, br, bt, bn):
    first = j * BLOCK
    if kind[l] == 0:
        cnt = min(BLOCK, df[l] - first)
        if blk[l] >= 0:
            i = np.int64(blk_post[blk[l] + j])
            prev = lasts[u0[l] + j - 1] if j > 0 else np.int64(lo - 1)
        else:
            i = start[l]
            prev = np.int64(lo - 1)
        end = post.shape[0]
        for d in range(cnt):
            delta, tf, i = _get_posting(post, i, end)
            prev += delta
            br[l, d] = prev
            bt[l, d] = tf
    else:
        cnt = min(BLOCK, df[l] - first)
        for d in range(cnt):
            br[l, d] = d_rows[doff[l] + first + d]
            bt[l, d] = d_tfs[doff[l] + first + d]
    bn[l] = cnt


@njit(**_INLINE)
def _seek(l, target, kind, start, df, blk, doff, post, blk_post, lasts, u0, lo,
          d_rows, d_tfs, br, bt, bn, cur, bpos, row_at, nblk):
    """Move leaf l's cursor to its first row >= target; returns that row or _INF."""
    if row_at[l] >= target:
        return row_at[l]
    j = cur[l]
    if j < 0 or lasts[u0[l] + j] < target:
        j = max(j + 1, 0)
        while j < nblk[l] and lasts[u0[l] + j] < target:
            j += 1
        if j == nblk[l]:
            cur[l] = j
            row_at[l] = _INF
            return _INF
        _decode_block(l, j, kind, start, df, blk, doff, post, blk_post, lasts, u0, lo,
                      d_rows, d_tfs, br, bt, bn)
        cur[l] = j
        bpos[l] = 0
    p = bpos[l]
    while br[l, p] < target:
        p += 1
    bpos[l] = p
    row_at[l] = br[l, p]
    return row_at[l]


@njit(**_INLINE)
def _shallow_ub(l, target, lasts, ubs, u0, nblk, sblk):
    """The bound of leaf l's block that would hold `target` (0 past its end)."""
    j = sblk[l]
    while j < nblk[l] and lasts[u0[l] + j] < target:
        j += 1
    sblk[l] = j
    return ubs[u0[l] + j] if j < nblk[l] else 0.0


@njit(**_INLINE)
def _matches(ops, args, present, stack):
    top = 0
    for o in range(ops.shape[0]):
        op = ops[o]
        if op == 0:
            stack[top] = present[args[o]]
            top += 1
        elif op == 3:
            stack[top - 1] = not stack[top - 1]
        else:
            a = args[o]
            v = stack[top - a]
            for q in range(top - a + 1, top):
                v = (v and stack[q]) if op == 1 else (v or stack[q])
            top -= a - 1
            stack[top - 1] = v
    return stack[0]


@njit(readonly=(
    'post', 'blk_last', 'blk_maxtf', 'blk_minlen', 'blk_post', 'plan', 'idf', 'd_rows',
    'd_tfs', 'lengths',
), **_JIT)
def top_k_segment(post, blk_last, blk_maxtf, blk_minlen, blk_post, plan, idf, d_rows, d_tfs,
                  lengths, allow, keys, ids):
    """Offer one segment's matching allowed rows to the k-best heap (keys, ids, n);
    returns the heap's new size, and with ``last`` leaves ids[:n] sorted best
    first (ties by row) and keys[:n] their scores (no longer negated).

    ``plan`` is, for the L = len(idf) - 3 leaves, L kinds (0 a term of this
    segment, 1 decoded rows, 2 none here), L starts, dfs, blks, doffs, scored
    flags and required flags (every match holds the leaf), then the tree in
    postfix (P ops, P args), then lo (the segment's first row), lead, n, k and
    last; ``idf`` is the leaves' idf, then k1, b and avgdl. (Few arguments: a
    call's dispatch costs per argument.)

    Pruned: with ``lead`` >= 0 (a scored leaf every match holds) its postings
    drive and the others are probed best bound first; otherwise MaxScore over
    the scored leaves. Either way a candidate is dropped as soon as its score so
    far plus its other leaves' block bounds cannot beat the k-th best, and the
    lead skips whole blocks by their bounds."""
    L = idf.shape[0] - 3
    P = (plan.shape[0] - 7 * L - 5) // 2
    e = 7 * L + 2 * P
    lo, lead, n, k, last = plan[e], plan[e + 1], plan[e + 2], plan[e + 3], plan[e + 4]
    n = _top_k_segment(post, blk_last, blk_maxtf, blk_minlen, blk_post, lo,
                       plan[:L], plan[L:2 * L], plan[2 * L:3 * L], plan[3 * L:4 * L],
                       plan[4 * L:5 * L], idf[:L], plan[5 * L:6 * L], plan[6 * L:7 * L],
                       d_rows, d_tfs, plan[7 * L:7 * L + P], plan[7 * L + P:e], lead, lengths,
                       allow,
                       idf[L], idf[L + 1], idf[L + 2], keys, ids, n, k)
    if last:
        _heap_sort(keys, ids, n)
        for i in range(n):
            keys[i] = -keys[i]
    return n


@njit(**_INLINE)
def _heap_sort(keys, ids, n):
    """The max-heap keys/ids[:n] sorted ascending (best first), in place."""
    for end in range(n - 1, 0, -1):
        key, row = keys[end], ids[end]
        keys[end], ids[end] = keys[0], ids[0]
        j = 0
        while True:
            c = 2 * j + 1
            if c >= end:
                break
            if c + 1 < end and _worse(keys[c + 1], ids[c + 1], keys[c], ids[c]):
                c += 1
            if not _worse(keys[c], ids[c], key, row):
                break
            keys[j] = keys[c]
            ids[j] = ids[c]
            j = c
        keys[j] = key
        ids[j] = row


# a real call from top_k_segment, not inlined: numba's IR inlining of this body
# (its own inlined helpers, _seek's four copies, re-typed) was a third of a cold
# text search's first compile; one call a segment costs nothing measurable
@njit(**_JIT)
def _top_k_segment(post, blk_last, blk_maxtf, blk_minlen, blk_post, lo,
                   kind, start, df, blk, doff, idf, scored, req, d_rows, d_tfs,
                   ops, args, lead, lengths, allow, k1, b, avgdl, keys, ids, n, k):
    L = kind.shape[0]
    m = allow.shape[0]
    # the per-leaf scratch, carved from one array per type (an allocation apiece
    # is a good part of a small query's time)
    iw = np.zeros(7 * L + 1, np.int64)
    nblk, bn, cur, bpos, row_at, sblk = (iw[:L], iw[L:2 * L], iw[2 * L:3 * L],
                                         iw[3 * L:4 * L], iw[4 * L:5 * L], iw[5 * L:6 * L])
    u0 = iw[6 * L:]
    cur[:] = -1
    row_at[:] = -1
    fw = np.zeros(3 * L + 1, np.float64)
    leaf_ub, contrib, cum = fw[:L], fw[L:2 * L], fw[2 * L:]
    for l in range(L):
        if kind[l] != 2:
            nblk[l] = (df[l] + BLOCK - 1) // BLOCK
        u0[l + 1] = u0[l] + nblk[l]
    lasts = np.empty(u0[L], np.int64)
    ubs = np.zeros(u0[L], np.float64)
    br = np.empty((L, BLOCK), np.int64)
    bt = np.empty((L, BLOCK), np.int32)
    for l in range(L):
        if nblk[l] == 0:
            row_at[l] = _INF
            continue
        if kind[l] == 0 and blk[l] >= 0:
            for j in range(nblk[l]):
                lasts[u0[l] + j] = blk_last[blk[l] + j]
                if scored[l]:
                    ubs[u0[l] + j] = _bm25(idf[l], blk_maxtf[blk[l] + j],
                                           blk_minlen[blk[l] + j], k1, b, avgdl)
        elif kind[l] == 0:
            _decode_block(l, 0, kind, start, df, blk, doff, post, blk_post, lasts, u0, lo,
                          d_rows, d_tfs, br, bt, bn)
            cur[l] = 0
            lasts[u0[l]] = br[l, bn[l] - 1]
            if scored[l]:
                for d in range(bn[l]):
                    ubs[u0[l]] = max(ubs[u0[l]], _bm25(idf[l], bt[l, d], lengths[br[l, d]],
                                                       k1, b, avgdl))
        else:
            for j in range(nblk[l]):
                a = doff[l] + j * BLOCK
                e = doff[l] + min(df[l], (j + 1) * BLOCK)
                lasts[u0[l] + j] = d_rows[e - 1]
                if scored[l]:
                    u = 0.0
                    for d in range(a, e):
                        u = max(u, _bm25(idf[l], d_tfs[d], lengths[d_rows[d]], k1, b, avgdl))
                    ubs[u0[l] + j] = u
        for j in range(nblk[l]):
            leaf_ub[l] = max(leaf_ub[l], ubs[u0[l] + j])

    # scored leaves by bound, ascending (MaxScore's order)
    n_sc = 0
    for l in range(L):
        if scored[l]:
            n_sc += 1
    order = np.empty(n_sc, np.int64)
    _order_by_bound(leaf_ub, scored, order)
    # cum[j]: bounds of order[:j]
    for j in range(n_sc):
        cum[j + 1] = cum[j] + leaf_ub[order[j]]
    bw = np.zeros(L + ops.shape[0] + 1, np.bool_)
    present, stack = bw[:L], bw[L:]

    theta = -np.inf
    if n == k:
        theta = -np.float64(keys[0])
    # MaxScore: order[:n_ness] are non-essential (their bounds sum to <= theta)
    n_ness = 0
    if lead < 0:
        while n_ness < n_sc and cum[n_ness + 1] * _SLACK <= theta:
            n_ness += 1
    rest = 0.0                 # with a lead: the other scored leaves' bounds
    if lead >= 0:
        for j in range(n_sc):
            if order[j] != lead:
                rest += leaf_ub[order[j]]
    next_block = 0
    in_block = False
    lp = 0
    skip = np.int64(-1)        # with a lead: no match below this row (a required leaf's next)
    while True:
        # ---- the next candidate row d
        if lead >= 0:
            if in_block and (n < k or (ubs[u0[lead] + cur[lead]] + rest) * _SLACK > theta) \
                    and lp + 1 < bn[lead]:
                lp += 1
            else:
                j = next_block
                while j < nblk[lead] and (lasts[u0[lead] + j] < skip or (
                        n == k and (ubs[u0[lead] + j] + rest) * _SLACK <= theta)):
                    j += 1
                if j >= nblk[lead]:
                    break
                if cur[lead] != j:
                    _decode_block(lead, j, kind, start, df, blk, doff, post, blk_post, lasts,
                                  u0, lo, d_rows, d_tfs, br, bt, bn)
                    cur[lead] = j
                next_block = j + 1
                in_block = True
                lp = 0
            bpos[lead] = lp
            d = br[lead, lp]
            row_at[lead] = d
        else:
            if n_ness == n_sc:
                break
            d = _INF
            for j in range(n_ness, n_sc):
                l = order[j]
                r = _seek(l, 0, kind, start, df, blk, doff, post, blk_post, lasts, u0, lo,
                          d_rows, d_tfs, br, bt, bn, cur, bpos, row_at, nblk)
                if r < d:
                    d = r
            if d == _INF:
                break
        if d >= m:
            break
        if d < skip:
            continue
        # ---- score it, dropping it as soon as it cannot enter
        ok = allow[d]
        if ok:
            s = 0.0
            if lead >= 0:
                s = _bm25(idf[lead], bt[lead, lp], lengths[d], k1, b, avgdl)
                contrib[lead] = s
                top = n_sc
            else:
                for j in range(n_ness, n_sc):
                    l = order[j]
                    if row_at[l] == d:
                        contrib[l] = _bm25(idf[l], bt[l, bpos[l]], lengths[d], k1, b, avgdl)
                        s += contrib[l]
                    else:
                        contrib[l] = 0.0
                top = n_ness
            # the leaves still to probe are order[:top], best bound first
            j = top
            while ok and j > 0:
                if n == k and (s + _rest_bound(order, j, lead, d, lasts, ubs, u0, nblk, sblk)) \
                        * _SLACK <= theta:
                    ok = False
                    break
                j -= 1
                l = order[j]
                if l == lead:
                    continue
                r = _seek(l, d, kind, start, df, blk, doff, post, blk_post, lasts, u0, lo,
                          d_rows, d_tfs, br, bt, bn, cur, bpos, row_at, nblk)
                contrib[l] = 0.0
                if r == d:
                    contrib[l] = _bm25(idf[l], bt[l, bpos[l]], lengths[d], k1, b, avgdl)
                    s += contrib[l]
                elif req[l]:
                    ok = False
                    skip = r
                    break
        if ok:
            # the score as the exhaustive path sums it: leaves in query order
            total = 0.0
            for l in range(L):
                if scored[l]:
                    present[l] = row_at[l] == d
                    if present[l]:
                        total += contrib[l]
            score = np.float32(total)
            if n < k or -score < keys[0]:
                for l in range(L):
                    if not scored[l]:
                        r = _seek(l, d, kind, start, df, blk, doff, post, blk_post, lasts, u0,
                                  lo, d_rows, d_tfs, br, bt, bn, cur, bpos, row_at, nblk)
                        present[l] = r == d
                if _matches(ops, args, present, stack):
                    n = _offer(keys, ids, n, k, -score, d)
                    if n == k:
                        theta = -np.float64(keys[0])
                        if lead < 0:
                            while n_ness < n_sc and cum[n_ness + 1] * _SLACK <= theta:
                                n_ness += 1
        # ---- move past d
        if lead < 0:
            for j in range(n_ness, n_sc):
                l = order[j]
                if row_at[l] == d:
                    _seek(l, d + 1, kind, start, df, blk, doff, post, blk_post, lasts, u0,
                          lo, d_rows, d_tfs, br, bt, bn, cur, bpos, row_at, nblk)
    return n


@njit(**_INLINE)
def _order_by_bound(leaf_ub, scored, order):
    """The scored leaves into ``order``, ascending by bound, ties in leaf order (an
    insertion sort: a query has few leaves, and np.argsort compiled numba's whole
    quicksort into the kernel)."""
    q = 0
    for l in range(leaf_ub.shape[0]):
        if scored[l]:
            j = q
            while j > 0 and leaf_ub[order[j - 1]] > leaf_ub[l]:
                order[j] = order[j - 1]
                j -= 1
            order[j] = l
            q += 1


@njit(**_INLINE)
def _rest_bound(order, j, lead, d, lasts, ubs, u0, nblk, sblk):
    """Block bounds at row d of order[:j] (the leaves still to probe), less the lead."""
    u = 0.0
    for q in range(j):
        l = order[q]
        if l != lead:
            u += _shallow_ub(l, d, lasts, ubs, u0, nblk, sblk)
    return u
