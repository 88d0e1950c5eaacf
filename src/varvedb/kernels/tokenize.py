"""The tokenizer's kernel: fold, split and number the terms of many texts in one pass.

Why a kernel: a bulk load tokenizes millions of words, and anything per word in
Python (a regex match object, a dict lookup, a string) costs more than the rest
of the index build. Here the caller hands over the texts as one array of code
points (``str.encode`` of their concatenation) with each text's start, plus the
folding of the characters that occur (text/analyzer.py builds it from
unicodedata, once per distinct character), and one loop does the rest:

* each character of a text is folded (lowercased, Latin diacritics removed:
  one character may become several, ß -> ss) into a text-sized scratch ``f``
  (so the folding and the splitting are two simple loops, ASCII's the fastest);
* each folded character has a class: 0 separates, 1 is part of a word run,
  2 is CJK (a run of CJK characters gives its overlapping pairs, a lone CJK
  character itself);
* each token is looked up in an open-addressing hash table over its code
  points, so a term id is found without building a string. A slot holds the
  term id and high bits of its hash (one load rules most slots out), and the
  terms' code points are packed in one small pool that a match compares
  against (comparing against a first occurrence in the whole text missed the
  cache on every lookup).

A token's original range (``ostart``, ``oend``: code point offsets into the
concatenation) is kept only when ``want_spans`` (for highlighting; a bulk load
does not need it).
"""
import numpy as np

from .jit import njit

_JIT = dict(cache=True, nogil=True)

WORD = 1
CJK = 2


_INLINE = dict(_JIT, inline="always")
_EMPTY = -1


@njit(**_JIT)
def _grow(a, n):
    b = np.empty(max(2 * a.shape[0], n), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(**_INLINE)
def _fnv(h, c):
    return (h ^ np.uint64(c)) * np.uint64(1099511628211)


@njit(**_INLINE)
def _lookup(f, a, b, h, slots, pool, t_start, t_hash, nterms):
    """The term of f[a:b] (hash h): (id, nterms), added if new (the caller made room).

    Term t's code points are pool[t_start[t]:t_start[t + 1]]."""
    mask = slots.shape[0] - 1
    tag = np.int64(h >> np.uint64(33)) << 32
    s = np.int64(h & np.uint64(mask))
    n = b - a
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
                    return t, nterms
        s = (s + 1) & mask
    ts = t_start[nterms]
    for q in range(n):
        pool[ts + q] = f[a + q]
    t_start[nterms + 1] = ts + n
    t_hash[nterms] = h
    slots[s] = tag | nterms
    return nterms, nterms + 1


@njit(**_JIT, readonly=("cps", "ascii_fold", "ascii_class", "keys", "fold_off",
                         "fold_cp", "fold_class"))
def _doc_tokens(cps, lo, hi, d, ascii_fold, ascii_class, keys, fold_off, fold_cp,
                fold_class, f, fcls, forig, doc, pos, term, ostart, oend, ntok, slots,
                pool, t_start, t_hash, nterms, want_spans):
    """Tokens of cps[lo:hi] (text d) appended; every array has room (no array is
    reassigned here: that keeps reference counting out of the per-character loop).
    `f`, `fcls`, `forig` are scratch for the text's folded characters, their
    classes and original offsets. Returns (ntok, nterms)."""
    nf = 0
    for o in range(lo, hi):
        c = cps[o]
        if c < 128:
            f[nf] = ascii_fold[c]
            fcls[nf] = ascii_class[c]
            forig[nf] = o
            nf += 1
        else:
            k = np.searchsorted(keys, c)
            for j in range(fold_off[k], fold_off[k + 1]):
                f[nf] = fold_cp[j]
                fcls[nf] = fold_class[j]
                forig[nf] = o
                nf += 1
    p = 0
    i = 0
    while i < nf:
        cls = fcls[i]
        if cls == 0:
            i += 1
            continue
        j = i
        if cls == WORD:
            h = np.uint64(14695981039346656037)
            while j < nf and fcls[j] == WORD:
                h = _fnv(h, f[j])
                j += 1
            t, nterms = _lookup(f, i, j, h, slots, pool, t_start, t_hash, nterms)
            doc[ntok] = d
            pos[ntok] = p
            term[ntok] = t
            if want_spans:
                ostart[ntok] = forig[i]
                oend[ntok] = forig[j - 1] + 1
            ntok += 1
            p += 1
        else:
            while j < nf and fcls[j] == CJK:
                j += 1
            # overlapping pairs; a lone character is its own token
            for q in range(i, max(i + 1, j - 1)):
                e = min(q + 2, j)
                h = np.uint64(14695981039346656037)
                for r in range(q, e):
                    h = _fnv(h, f[r])
                t, nterms = _lookup(f, q, e, h, slots, pool, t_start, t_hash, nterms)
                doc[ntok] = d
                pos[ntok] = p
                term[ntok] = t
                if want_spans:
                    ostart[ntok] = forig[q]
                    oend[ntok] = forig[e - 1] + 1
                ntok += 1
                p += 1
        i = j
    return ntok, nterms


@njit(**_JIT, readonly=("cps", "starts", "ascii_fold", "ascii_class", "keys", "fold_off",
                         "fold_cp", "fold_class"))
def tokenize(cps, starts, ascii_fold, ascii_class, keys, fold_off, fold_cp, fold_class,
             want_spans):
    """Tokens of the texts ``cps[starts[d]:starts[d + 1]]``.

    ASCII code points fold through ``ascii_fold``/``ascii_class``; any other code
    point must be one of the sorted ``keys``, folding to
    ``fold_cp[fold_off[k]:fold_off[k + 1]]`` (classes in ``fold_class``).
    Returns (doc, pos, term, lengths, ostart, oend, pool, term_start): per
    token its text, position and term id (ids in order of first occurrence);
    term t's code points are ``pool[term_start[t]:term_start[t + 1]]``."""
    ndocs = starts.shape[0] - 1
    # the most characters one code point folds to bounds each text's folded length
    widest = 1
    for k in range(keys.shape[0]):
        widest = max(widest, fold_off[k + 1] - fold_off[k])
    longest = 0
    for d in range(ndocs):
        longest = max(longest, starts[d + 1] - starts[d])
    f = np.empty(widest * longest, np.uint32)
    fcls = np.empty(widest * longest, np.uint8)
    forig = np.empty(widest * longest, np.int64)
    cap = max(16, cps.shape[0] // 4)
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
        # room for the most this text can add: a token and a term per folded
        # character, a term's code points twice over (CJK pairs)
        most = widest * (starts[d + 1] - starts[d])
        if ntok + most > doc.shape[0]:
            doc = _grow(doc, ntok + most)
            pos = _grow(pos, ntok + most)
            term = _grow(term, ntok + most)
            if want_spans:
                ostart = _grow(ostart, ntok + most)
                oend = _grow(oend, ntok + most)
        if t_start[nterms] + 2 * most > pool.shape[0]:
            pool = _grow(pool, t_start[nterms] + 2 * most)
        if nterms + most + 1 > t_start.shape[0]:
            t_start = _grow(t_start, nterms + most + 1)
            t_hash = _grow(t_hash, nterms + most + 1)
        if 2 * (nterms + most) > slots.shape[0]:
            size = slots.shape[0]
            while 2 * (nterms + most) > size:
                size *= 4
            slots = np.full(size, np.int64(_EMPTY))
            mask = size - 1
            for u in range(nterms):
                s = np.int64(t_hash[u] & np.uint64(mask))
                while slots[s] != _EMPTY:
                    s = (s + 1) & mask
                slots[s] = (np.int64(t_hash[u] >> np.uint64(33)) << 32) | u
        before = ntok
        ntok, nterms = _doc_tokens(
            cps, starts[d], starts[d + 1], d, ascii_fold, ascii_class, keys, fold_off,
            fold_cp, fold_class, f, fcls, forig, doc, pos, term, ostart, oend, ntok,
            slots, pool, t_start, t_hash, nterms, want_spans)
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
