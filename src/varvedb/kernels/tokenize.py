"""The tokenizer's kernel: fold, split and number the terms of many texts in one pass.

Why a kernel: a bulk load tokenizes millions of words, and anything per word in
Python (a regex match object, a dict lookup, a string) costs more than the rest
of the index build. Here the caller hands over the texts as one array of UTF-8
bytes (each text's ``str.encode``, joined: for ASCII that is a copy, where a
joined str would widen every text to the widest's width) with each text's
start, plus the folding of the non-ASCII characters that occur
(text/analyzer.py builds it from unicodedata, once per distinct character),
and one loop does the rest:

* a text of only ASCII (most texts) is folded, split and hashed in one
  tight loop; another has each character decoded and folded (lowercased,
  Latin diacritics removed: one character may become several, ß -> ss)
  into a text-sized scratch first, then split;
* each folded character has a class: 0 separates, 1 is part of a word run,
  2 is CJK (a run of CJK characters gives its overlapping pairs, a lone CJK
  character itself);
* each token is looked up in an open-addressing hash table over its code
  points, so a term id is found without building a string. A slot holds the
  term id and high bits of its hash (one load rules most slots out), and the
  terms' code points are packed in one small pool that a match compares
  against (comparing against a first occurrence in the whole text missed the
  cache on every lookup).

A token's original range (``ostart``, ``oend``: code point offsets into its
text) is kept only when ``want_spans`` (for highlighting; a bulk load does not
need it).
"""
import numpy as np

from .jit import njit

_JIT = dict(cache=True, nogil=True)

WORD = 1
CJK = 2


_EMPTY = -1


@njit(**_JIT)
def lower_bound(a, lo, hi, x):
    """The first index of the sorted a[lo:hi] whose value is >= x (hi: none)."""
    while lo < hi:
        m = (lo + hi) >> 1
        if a[m] < x:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(**_JIT)
def _grow(a, n):
    b = np.empty(max(2 * a.shape[0], n), a.dtype)
    # a loop, not ``b[:len(a)] = a``: numba's slice assignment compiles its
    # shape-mismatch message (str formatting: ~2 s at a first use)
    for i in range(a.shape[0]):
        b[i] = a[i]
    return b


@njit(**_JIT, readonly=("data", "ascii_fold", "ascii_class", "keys", "fold_off",
                         "fold_cp", "fold_class"))
def _text_tokens(data, lo, hi, d, ascii_fold, ascii_class, keys, fold_off, fold_cp,
                 fold_class, f, fcls, forig, doc, pos, term, ostart, oend, ntok, slots,
                 pool, t_start, t_hash, nterms, want_spans):
    """Tokens of the UTF-8 text data[lo:hi] (text d) appended at ntok.

    `f`, `fcls`, `forig` are scratch for the text's folded characters, their
    classes and (for spans) the offsets of the characters they came from. Every
    array has room, and none is reassigned here (that, and the lookup written
    out in the loop rather than called, keeps reference counting out of the
    loops: a helper taking the arrays, inlined or called, made the whole 2x
    slower; so _ascii_tokens repeats the lookup). Returns
    (ntok, nterms), ntok -1 when the hash table got half full: the caller
    grows it and runs the text again (the terms it added are the text's, so
    they stay)."""
    # fold
    nf = 0
    o = lo
    at = 0                # code point offset in the text
    while o < hi:
        c = np.int64(data[o])
        if c < 0x80:
            f[nf] = ascii_fold[c]
            fcls[nf] = ascii_class[c]
            if want_spans:
                forig[nf] = at
            nf += 1
            o += 1
        else:
            # a UTF-8 sequence (Python wrote it: well formed)
            if c >= 0xF0:
                c = ((c & 0x07) << 18) | ((np.int64(data[o + 1]) & 0x3F) << 12) | \
                    ((np.int64(data[o + 2]) & 0x3F) << 6) | (np.int64(data[o + 3]) & 0x3F)
                o += 4
            elif c >= 0xE0:
                c = ((c & 0x0F) << 12) | ((np.int64(data[o + 1]) & 0x3F) << 6) | \
                    (np.int64(data[o + 2]) & 0x3F)
                o += 3
            else:
                c = ((c & 0x1F) << 6) | (np.int64(data[o + 1]) & 0x3F)
                o += 2
            # the first key >= c (np.searchsorted compiled numba's generic
            # comparisons, complex numbers' included, at a first use)
            k = lower_bound(keys, 0, keys.shape[0], c)
            for j in range(fold_off[k], fold_off[k + 1]):
                f[nf] = fold_cp[j]
                fcls[nf] = fold_class[j]
                if want_spans:
                    forig[nf] = at
                nf += 1
        at += 1
    # split: word runs whole, CJK runs as overlapping pairs (a lone one alone)
    mask = slots.shape[0] - 1
    p = 0
    i = 0
    pair = -1             # the next pair's start inside the CJK run ending at run_end
    run_end = 0
    while True:
        if pair >= 0:
            a = pair
            b = pair + 2
            pair = pair + 1 if b < run_end else -1
        else:
            while i < nf and fcls[i] == 0:
                i += 1
            if i == nf:
                break
            a = i
            cls = fcls[i]
            while i < nf and fcls[i] == cls:
                i += 1
            b = i
            if cls == CJK and i - a > 1:
                b = a + 2
                run_end = i
                pair = a + 1 if b < run_end else -1
        n = b - a
        h = np.uint64(14695981039346656037)
        for q in range(a, b):
            h = (h ^ np.uint64(f[q])) * np.uint64(1099511628211)
        # find the term: a slot holds its id and its hash's high bits
        tag = np.int64(h >> np.uint64(33)) << 32
        s = np.int64(h & np.uint64(mask))
        t = -1
        while True:
            e = slots[s]
            if e == _EMPTY:
                break
            if (e & np.int64(-4294967296)) == tag:
                t = e & np.int64(4294967295)
                ts = t_start[t]
                if t_start[t + 1] - ts == n:
                    q = 0
                    while q < n and pool[ts + q] == f[a + q]:
                        q += 1
                    if q == n:
                        break
                t = -1
            s = (s + 1) & mask
        if t < 0:
            ts = t_start[nterms]
            for q in range(n):
                pool[ts + q] = f[a + q]
            t_start[nterms + 1] = ts + n
            t_hash[nterms] = h
            slots[s] = tag | nterms
            t = nterms
            nterms += 1
            if 2 * nterms > slots.shape[0]:
                return -1, nterms
        doc[ntok] = d
        pos[ntok] = p
        term[ntok] = t
        if want_spans:
            ostart[ntok] = forig[a]
            oend[ntok] = forig[b - 1] + 1
        ntok += 1
        p += 1
    return ntok, nterms


@njit(**_JIT, readonly=("data", "ascii_fold", "ascii_class"))
def _ascii_tokens(data, lo, hi, d, ascii_fold, ascii_class, f, doc, pos, term, ostart,
                  oend, ntok, slots, pool, t_start, t_hash, nterms, want_spans):
    """Tokens of the ASCII text data[lo:hi] (most texts), as _text_tokens, in
    one pass over its bytes: folded, split and hashed as they are read (1.3x
    faster than _text_tokens's fold-then-split; the lookup is the same)."""
    mask = slots.shape[0] - 1
    n = 0
    p = 0
    h = np.uint64(14695981039346656037)
    first = 0
    for o in range(lo, hi + 1):
        c = data[o] if o < hi else 32
        if ascii_class[c]:
            if n == 0:
                first = o - lo
            f[n] = ascii_fold[c]
            h = (h ^ np.uint64(f[n])) * np.uint64(1099511628211)
            n += 1
            continue
        if n == 0:
            continue
        # find the term (as in _text_tokens)
        tag = np.int64(h >> np.uint64(33)) << 32
        s = np.int64(h & np.uint64(mask))
        t = -1
        while True:
            e = slots[s]
            if e == _EMPTY:
                break
            if (e & np.int64(-4294967296)) == tag:
                t = e & np.int64(4294967295)
                ts = t_start[t]
                if t_start[t + 1] - ts == n:
                    q = 0
                    while q < n and pool[ts + q] == f[q]:
                        q += 1
                    if q == n:
                        break
                t = -1
            s = (s + 1) & mask
        if t < 0:
            ts = t_start[nterms]
            for q in range(n):
                pool[ts + q] = f[q]
            t_start[nterms + 1] = ts + n
            t_hash[nterms] = h
            slots[s] = tag | nterms
            t = nterms
            nterms += 1
            if 2 * nterms > slots.shape[0]:
                return -1, nterms
        doc[ntok] = d
        pos[ntok] = p
        term[ntok] = t
        if want_spans:
            ostart[ntok] = first
            oend[ntok] = o - lo
        ntok += 1
        p += 1
        n = 0
        h = np.uint64(14695981039346656037)
    return ntok, nterms


@njit(**_JIT, readonly=("data", "starts", "ascii_fold", "ascii_class", "keys",
                         "fold_off", "fold_cp", "fold_class"))
def tokenize(data, starts, ascii_fold, ascii_class, keys, fold_off, fold_cp, fold_class,
             want_spans):
    """Tokens of the UTF-8 texts ``data[starts[d]:starts[d + 1]]``.

    ASCII folds through ``ascii_fold``/``ascii_class``; any other code point
    must be one of the sorted ``keys``, folding to
    ``fold_cp[fold_off[k]:fold_off[k + 1]]`` (classes in ``fold_class``).
    Returns (doc, pos, term, lengths, ostart, oend, pool, term_start): per
    token its text, position and term id (ids in order of first occurrence);
    term t's code points are ``pool[term_start[t]:term_start[t + 1]]``."""
    ndocs = starts.shape[0] - 1
    # the most characters one code point folds to bounds a text's folded length
    widest = 1
    for k in range(keys.shape[0]):
        widest = max(widest, fold_off[k + 1] - fold_off[k])
    longest = 0
    for d in range(ndocs):
        longest = max(longest, starts[d + 1] - starts[d])
    f = np.empty(widest * longest, np.uint32)
    fcls = np.empty(widest * longest, np.uint8)
    forig = np.empty(widest * longest if want_spans else 0, np.int64)
    cap = max(16, data.shape[0] // 4)
    doc = np.empty(cap, np.int32)
    pos = np.empty(cap, np.int32)
    term = np.empty(cap, np.int32)
    ostart = np.empty(cap if want_spans else 0, np.int64)
    oend = np.empty(cap if want_spans else 0, np.int64)
    ntok = 0
    lengths = np.zeros(ndocs, np.int32)
    slots = np.full(1 << 12, np.int64(_EMPTY))
    pool = np.empty(1 << 14, np.uint32)
    t_start = np.zeros(1025, np.int64)
    t_hash = np.empty(1024, np.uint64)
    nterms = 0
    for d in range(ndocs):
        lo = starts[d]
        hi = starts[d + 1]
        ascii = True
        for o in range(lo, hi):
            if data[o] >= 0x80:
                ascii = False
                break
        # room for the most this text can add: tokens and new terms, and their
        # code points (a CJK character is in two pairs)
        if ascii:
            most = (hi - lo + 1) // 2
            chars = hi - lo
        else:
            most = widest * (hi - lo)
            chars = 2 * most
        if ntok + most > doc.shape[0]:
            doc = _grow(doc, ntok + most)
            pos = _grow(pos, ntok + most)
            term = _grow(term, ntok + most)
            if want_spans:
                ostart = _grow(ostart, ntok + most)
                oend = _grow(oend, ntok + most)
        if t_start[nterms] + chars > pool.shape[0]:
            pool = _grow(pool, t_start[nterms] + chars)
        # each array checked against its own size (t_hash is one shorter than
        # t_start, and growing both from one check let t_hash fall behind)
        if nterms + most + 1 > t_start.shape[0]:
            t_start = _grow(t_start, nterms + most + 1)
        if nterms + most > t_hash.shape[0]:
            t_hash = _grow(t_hash, nterms + most)
        before = ntok
        while True:
            if ascii:
                ntok, nterms = _ascii_tokens(
                    data, lo, hi, d, ascii_fold, ascii_class, f, doc, pos, term, ostart,
                    oend, before, slots, pool, t_start, t_hash, nterms, want_spans)
            else:
                ntok, nterms = _text_tokens(
                    data, lo, hi, d, ascii_fold, ascii_class, keys, fold_off, fold_cp,
                    fold_class, f, fcls, forig, doc, pos, term, ostart, oend, before,
                    slots, pool, t_start, t_hash, nterms, want_spans)
            if ntok >= 0:
                break
            # half full: a table 4x the size (probes stay short, and the table
            # as small as that allows stays in cache)
            slots = np.full(4 * slots.shape[0], np.int64(_EMPTY))
            mask = slots.shape[0] - 1
            for u in range(nterms):
                s = np.int64(t_hash[u] & np.uint64(mask))
                while slots[s] != _EMPTY:
                    s = (s + 1) & mask
                slots[s] = (np.int64(t_hash[u] >> np.uint64(33)) << 32) | u
        lengths[d] = ntok - before
    return (doc[:ntok], pos[:ntok], term[:ntok], lengths, ostart[:ntok], oend[:ntok],
            pool, t_start[:nterms + 1])


@njit(**_JIT, readonly=("pool", "term_start"))
def term_code_points(pool, term_start):
    """Every term's code points, each followed by a 0 (one buffer to decode at once)."""
    nterms = term_start.shape[0] - 1
    out = np.empty(term_start[nterms] + nterms, np.uint32)
    k = 0
    for t in range(nterms):
        for q in range(term_start[t], term_start[t + 1]):
            out[k] = pool[q]
            k += 1
        out[k] = 0
        k += 1
    return out
