"""Full-text index of one text field: BM25 over row versions, in compressed segments.

Why this layout:

* Rows only append and a row's text never changes (an update is a new row),
  so the index is a list of immutable **segments**, each covering a row range
  [lo, hi), newest last. A new batch of rows becomes a new small segment and
  segments merge tier-wise as in an LSM tree (a segment is merged into the one
  before it while that one holds at most twice its postings; segments of a
  few rows first wait in a run of up to 8), so a corpus of P postings has
  O(log P) segments and each posting is rewritten O(log P) times. A rollback
  (``truncate``) drops the segments above the cut and re-encodes the one it
  cuts. Visibility is not in the index: the caller's
  masks decide it, so versions and ``as_of`` cost the index nothing.
* Per segment and term, the postings are one byte stream of varints (row
  delta, with a tf of 1 in its low bit, else the tf after it): deltas of
  sorted rows are small, and a byte code decodes with no tables and no bit
  shuffling per value in a numba loop. Lists longer than one
  block of 128 postings carry, per block, its last row (a cursor skips a block
  without decoding it), its largest tf and its shortest document (an upper
  bound of any BM25 contribution in the block whatever avgdl and idf are,
  which is what dynamic pruning needs); shorter lists, most terms, carry
  nothing and are decoded whole. Positions are a separate stream, read only
  by phrases, so ranking a word query never touches them.
* One global vocabulary (term -> id, plus the terms sorted for prefixes,
  built on demand) is shared by the segments, so a merge renumbers nothing.
* ``to_arrays`` concatenates each segment array into one flat array with a
  per-segment offset array: a checkpoint writes them as they are and
  ``from_arrays`` maps them back as views, checked once (every stream decoded
  against its skip data) and never written into.

Statistics (N, avgdl, df: a CorpusStats, text/corpus.py) are those of the
rows a ``visible`` mask holds, so they are exact for every snapshot; a
read-only mask (a committed version's) gets its counts cached. A query may
bring its own instead (``corpus``: a sharded collection's, summed over its
shards), and is then scored with them.

A query node is dispatched on its class name (Term, Prefix, Phrase, And, Or,
Not), so any classes with those fields serve. A leaf (Term, Prefix, Phrase) is
scored when it is not under a Not: its tf in a row is its occurrences there
(a prefix: all its terms'; a phrase: its start positions) and its df the
visible rows holding it.

A query's work is linear in its leaves (a query of N words compiles in O(N))
and checks for cancellation (varvedb.cancel) every few thousand leaves and
between its kernel calls, so a read the server gave up on stops there.
"""
from __future__ import annotations

import bisect
import copy
import threading

import numpy as np

from ..cancel import check as check_canceled
from ..errors import OptionError
from ..kernels import bm25
from ..text.corpus import CorpusStats, mean_length

SEGMENT_FIELDS = {
    "term_ids": np.int32, "term_df": np.int32, "term_post": np.uint32,
    "term_pos": np.uint32,
    "blk_last": np.int32, "blk_maxtf": np.int32, "blk_minlen": np.int32,
    "blk_post": np.uint32,
    "post": np.uint8, "posb": np.uint8,
}
_TERM_FIELDS = ("term_ids", "term_df", "term_post", "term_pos")
_BLOCK_FIELDS = ("blk_last", "blk_maxtf", "blk_minlen", "blk_post")
# a segment's streams are addressed by uint32 offsets: merging stops below this
_MAX_STREAM = 1 << 31
# segments under this many postings wait for up to SMALL_RUN of them to merge
SMALL_POSTINGS = 4096
SMALL_RUN = 8
# rows the maintainer indexes per hold of an index's extend lock
EXTEND_CHUNK = 16384
# terms whose segment lookups FtsIndex keeps (cleared when full)
_AT_CACHE = 4096
_NO_ROWS = np.empty(0, np.int64)
_NO_TFS = np.empty(0, np.int32)


def compile_query_kernels() -> None:
    """Run a search's kernels once on nothing (an empty segment, a query of no
    leaf), so that numba compiles them for the types a search passes them: what
    a compiler ahead (warm.py) does first, since in a real first use they come
    last, after the index kernels."""
    seg = {name: np.empty(0, dtype) for name, dtype in SEGMENT_FIELDS.items()}
    plan = np.array([0, -1, 0, 1, 1], np.int64)     # no leaf: lo, lead, n, k, last
    bm25.top_k_segment(seg["post"], seg["blk_last"], seg["blk_maxtf"], seg["blk_minlen"],
                       seg["blk_post"], plan, np.array([1.2, 0.75, 1.0]), _NO_ROWS, _NO_TFS,
                       np.empty(0, np.int32), np.empty(0, np.bool_), np.empty(1, np.float64),
                       np.empty(1, np.int64))
    bm25.decode_terms(seg["post"], seg["term_post"], seg["term_df"], _NO_ROWS, 0, 0)


class _TermsAbove:
    """A covering copy's term ids: the index's own below `limit` (those it had when
    copied; the index may add more meanwhile, which the copy must not see), then
    the copy's own."""

    __slots__ = ("base", "limit", "own")

    def __init__(self, base: dict, limit: int):
        self.base = base
        self.limit = limit
        self.own: dict[str, int] = {}

    def get(self, term: str, default=None):
        got = self.own.get(term)
        if got is None:
            got = self.base.get(term)
            if got is None or got >= self.limit:
                return default
        return got

    def __getitem__(self, term: str) -> int:
        got = self.get(term)
        if got is None:
            raise KeyError(term)
        return got

    def update(self, pairs) -> None:
        self.own.update(pairs)


class Segment:
    """Rows [lo, hi) compressed (the arrays of :mod:`varvedb.kernels.bm25`)."""

    __slots__ = ("lo", "hi", "npost", "term_blk", *SEGMENT_FIELDS)

    def __init__(self, lo: int, hi: int, arrays):
        self.lo = lo
        self.hi = hi
        for name, a in zip(SEGMENT_FIELDS, arrays):
            setattr(self, name, a)
        self.npost = int(self.term_df.sum(dtype=np.int64))
        self.term_blk = bm25.term_blocks(self.term_df)   # derived, so not stored

    def arrays(self):
        return tuple(getattr(self, name) for name in SEGMENT_FIELDS)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays()) + self.term_blk.nbytes

    def find(self, ids: np.ndarray) -> np.ndarray:
        """Indexes into this segment's term arrays of the global ``ids`` it holds."""
        at = np.searchsorted(self.term_ids, ids)
        inside = at < len(self.term_ids)
        at = at[inside]
        return at[self.term_ids[at] == ids[inside]]


class FtsIndex:
    """The full-text index of one field (index/protocol.py)."""

    PREFIX = "tx"
    kind = "fts"
    in_step = False       # extended by the maintainer; reads cover the rest (covering)

    def __init__(self, field: str, analyzer, k1: float = 1.2, b: float = 0.75):
        self.field = field
        self.analyzer = analyzer
        self.k1 = float(k1)
        self.b = float(b)
        self.n = 0
        self._lengths = np.empty(0, np.int32)   # tokens per row, -1 = null; capacity >= n
        self._own_lengths = True                # False: a mapped array, copied on extend
        self._segments: tuple[Segment, ...] = ()
        self._terms: list[str] = []
        self._ids: dict[str, int] | None = {}
        self._sorted: tuple[list[str], list[int]] | None = None
        self._vocab_bytes = 0
        self._gen = 0                           # bumped by every change (stat cache key)
        self._stat_cache = None
        self._at_cache = ((), {})               # _term_at's, for one segment tuple
        self._extending = threading.Lock()      # one extend at a time; covering reads whole
        self._cover = None                      # (n indexed, n covered, the index covering)

    # ------------------------------------------------------------ vocabulary

    def _id_map(self) -> dict[str, int]:
        ids = self._ids
        if ids is None:
            ids = self._ids = {t: i for i, t in enumerate(self._terms)}
        return ids

    def _term_ids(self, vocab: list[str]) -> np.ndarray:
        ids = self._id_map()
        got = [ids.get(t, -1) for t in vocab]
        new = [t for t, g in zip(vocab, got) if g < 0]
        if new:
            joined = "\x00".join(new)
            if "" in new or joined.count("\x00") != len(new) - 1 or len(set(new)) != len(new):
                raise ValueError("fts: the analyzer's vocabulary holds an empty, repeated "
                                 "or NUL-holding term")
            first = len(self._terms)
            ids.update(zip(new, range(first, first + len(new))))
            self._terms.extend(new)
            self._vocab_bytes += len(joined.encode()) + 1
            self._sorted = None
            got = [ids[t] if g < 0 else g for t, g in zip(vocab, got)]
        return np.array(got, np.int32)

    def _prefix_ids(self, prefix: str) -> np.ndarray:
        s = self._sorted
        if s is None or len(s[0]) != len(self._terms):
            order = sorted(range(len(self._terms)), key=self._terms.__getitem__)
            s = self._sorted = ([self._terms[i] for i in order], order)
        words, order = s
        lo = bisect.bisect_left(words, prefix)
        if prefix and ord(prefix[-1]) < 0x10FFFF:
            hi = bisect.bisect_left(words, prefix[:-1] + chr(ord(prefix[-1]) + 1), lo)
        else:
            hi = len(words) if not prefix else lo + sum(
                1 for w in words[lo:] if w.startswith(prefix))
        return np.sort(np.array(order[lo:hi], np.int32))

    # ------------------------------------------------------------ writing

    @property
    def indexed(self) -> int:
        return self.n

    def fresh(self) -> "FtsIndex":
        return FtsIndex(self.field, self.analyzer, self.k1, self.b)

    def doc_lengths(self) -> np.ndarray:
        return np.maximum(self._lengths[:self.n], 0).astype(np.int32)

    def extend(self, column, upto: int) -> int:
        """Index the next chunk of rows [n, upto) of a text column; returns how many
        rows were added (0: none left)."""
        with self._extending:
            lo = self.n
            if lo >= upto:
                return 0
            hi = min(upto, lo + EXTEND_CHUNK)
            self.add(lo, hi, column.codes.data[lo:hi], column.words)
            return hi - lo

    def covering(self, column, n: int, keep: bool = False) -> "FtsIndex":
        """This index if it holds rows [0, n), else the exact answer for the rows
        it does not hold yet: a copy that adds them, read from `column`'s text,
        as one more segment (this index is untouched, and the copy's statistics
        are every row's, as an index built in one go would have them). `keep`:
        rows [0, n) never change (committed), so the copy serves the next read of
        the same n until the maintainer catches up."""
        if self.n >= n:
            return self
        got = self._cover
        if got is not None and got[0] == self.n and got[1] == n:
            return got[2]
        with self._extending:      # the state read whole, not halfway through a chunk
            lo = self.n
            if lo >= n:
                return self
            view = copy.copy(self)
            view._lengths = np.empty(n, np.int32)     # room for the rows it adds
            view._lengths[:lo] = self._lengths[:lo]
            view._terms = self._terms[:]
            view._ids = _TermsAbove(self._id_map(), len(self._terms))
        view._extending = threading.Lock()
        view._cover = None
        view._stat_cache = None
        view._at_cache = ((), {})
        view._own_lengths = True
        seg = view._segment(lo, n, column.codes.data[lo:n], column.words)
        if seg is not None:
            view._segments = view._segments + (seg,)
        view.n = n
        view._gen += 1
        if keep:
            self._cover = (lo, n, view)
        return view

    def add(self, lo: int, hi: int, codes: np.ndarray, words: list[str]) -> None:
        """Index rows [lo, hi): ``codes[i]`` is row lo+i's code into ``words`` (-1 null)."""
        seg = self._segment(lo, hi, codes, words)
        if seg is not None:
            self._segments = self._merged(self._segments + (seg,))
        self.n = hi
        self._gen += 1
        self._cover = None      # made for fewer rows indexed: never asked for again

    def _segment(self, lo: int, hi: int, codes: np.ndarray, words: list[str]
                 ) -> Segment | None:
        """Rows [lo, hi) analyzed: their lengths and new terms added, their segment
        returned (None: no tokens); ``n`` and the segments are the caller's."""
        codes = np.asarray(codes)
        if lo != self.n or hi - lo != len(codes):
            raise ValueError(f"fts: add({lo}, {hi}) with {len(codes)} codes at n={self.n}")
        if hi == lo:
            return None
        present = np.flatnonzero(codes >= 0)
        uniq = codes[present]
        if len(uniq) > 1 and not np.all(uniq[1:] > uniq[:-1]):
            uniq, inverse = np.unique(uniq, return_inverse=True)
        else:   # distinct and in order (a bulk load of new texts, one row): no sort
            inverse = np.arange(len(uniq))
        lengths = np.full(hi - lo, -1, np.int32)
        seg = None
        if len(uniq):
            batch = self.analyzer.analyze_batch([words[c] for c in uniq])
            ids = self._term_ids(list(batch.vocab))
            doc = np.ascontiguousarray(batch.doc, np.int32)
            pos = np.ascontiguousarray(batch.pos, np.int32)
            term = np.ascontiguousarray(batch.term, np.int32)
            if not bm25.in_order(doc, pos):
                order = np.lexsort((pos, doc))
                doc, pos, term = doc[order], pos[order], term[order]
            text_start = np.searchsorted(doc, np.arange(len(uniq) + 1))
            # a row's length is its tokens (the batch's lengths say the same)
            lengths[present] = np.diff(text_start)[inverse]
            self._append_lengths(lengths)
            text_of_row = np.full(hi - lo, -1, np.int64)
            text_of_row[present] = inverse
            n_tokens = int(lengths[present].sum(dtype=np.int64))
            if n_tokens:
                by_term = n_tokens * 8 >= len(self._terms)
                st, sr, sp = bm25.row_tokens(text_start, term, pos, ids, text_of_row, lo,
                                             len(self._terms), by_term)
                seg = self._encode(lo, hi, st, sr, sp, by_term)
        else:
            self._append_lengths(lengths)
        return seg

    def _append_lengths(self, new: np.ndarray) -> None:
        n = self.n
        need = n + len(new)
        if not self._own_lengths or need > len(self._lengths):
            buf = np.empty(max(need, 2 * len(self._lengths), 1024), np.int32)
            buf[:n] = self._lengths[:n]
            self._lengths = buf
            self._own_lengths = True
        self._lengths[n:need] = new

    def _encode(self, lo, hi, term, row, pos, by_term=False) -> Segment:
        """A segment of tokens whose rows ascend (and positions within a row),
        or already term-major (``by_term``)."""
        if by_term:
            pass
        elif len(term) * 8 >= len(self._terms):
            term, row, pos = bm25.sort_by_term(term, row, pos, len(self._terms))
        else:   # a few tokens against a large vocabulary: no pass over the vocabulary
            order = np.argsort(term, kind="stable")
            term, row, pos = term[order], row[order], pos[order]
        return Segment(lo, hi, bm25.encode_segment(term, row, pos, self._lengths, lo))

    def _tokens(self, seg: Segment, below: int):
        return bm25.segment_tokens(seg.term_ids, seg.term_df, seg.term_post, seg.term_pos,
                                   seg.post, seg.posb, seg.lo, seg.hi, below)

    def _merge(self, run: list) -> Segment:
        """One segment of consecutive segments (their rows ascend, so a stable
        sort by term of their tokens, concatenated, is sorted by term and row)."""
        tokens = [self._tokens(s, s.hi) for s in run]
        return self._encode(run[0].lo, run[-1].hi, *(np.concatenate(p) for p in zip(*tokens)))

    def _merged(self, segs: tuple) -> tuple:
        """Segments after the newest: small ones (a row or a few) wait in a run
        of up to SMALL_RUN and merge together, so a stream of one-row extends
        costs one merge per SMALL_RUN rows, not one per row; then a segment
        merges into the one before it while that one holds at most twice its
        postings (so sizes at least double towards the oldest: O(log P) segments)."""
        segs = list(segs)
        small = 0
        while small < len(segs) and segs[-1 - small].npost < SMALL_POSTINGS:
            small += 1
        if small >= SMALL_RUN or (small > 1 and sum(
                s.npost for s in segs[-small:]) >= SMALL_POSTINGS):
            segs[-small:] = [self._merge(segs[-small:])]
        while (len(segs) >= 2 and segs[-1].npost >= SMALL_POSTINGS
               and segs[-2].npost <= 2 * segs[-1].npost
               and len(segs[-2].post) + len(segs[-1].post) < _MAX_STREAM
               and len(segs[-2].posb) + len(segs[-1].posb) < _MAX_STREAM):
            segs[-2:] = [self._merge(segs[-2:])]
        return tuple(segs)

    def truncate(self, n: int) -> None:
        """Forget rows >= n (a rolled-back transaction)."""
        if n >= self.n:
            return
        if n < 0:
            raise ValueError(f"fts: truncate({n})")
        segs = []
        for seg in self._segments:
            if seg.hi <= n:
                segs.append(seg)
            elif seg.lo < n:
                tokens = self._tokens(seg, n)
                if len(tokens[0]):
                    segs.append(self._encode(seg.lo, n, *tokens))
        self._segments = tuple(segs)
        self.n = n
        # terms first seen in the forgotten rows go too (ids are given in order)
        keep = max((int(s.term_ids[-1]) + 1 for s in segs), default=0)
        if keep < len(self._terms):
            ids = self._id_map()
            for t in self._terms[keep:]:
                del ids[t]
                self._vocab_bytes -= len(t.encode()) + 1
            del self._terms[keep:]
            self._sorted = None
        self._gen += 1

    # ------------------------------------------------------------ statistics

    def _check_mask(self, mask, what) -> np.ndarray:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.ndim != 1 or len(mask) > self.n:
            raise ValueError(f"fts: {what} must be a bool array of at most n={self.n} rows")
        return mask

    def _stats_entry(self, visible: np.ndarray):
        """(visible rows with a text, their tokens, their mean length, (df, idf)
        cache by leaf key, every row below len(visible) visible) of a mask."""
        cache = self._stat_cache
        if cache is not None and cache[0] is visible and cache[1] == self._gen:
            return cache[2:]
        N, total, n_visible = bm25.mask_stats(visible, self._lengths)
        N, total = int(N), int(total)
        entry = (N, total, mean_length(N, total), {}, n_visible == len(visible))
        if not visible.flags.writeable:
            self._stat_cache = (visible, self._gen) + entry
        return entry

    def stats(self, visible: np.ndarray) -> CorpusStats:
        """The rows ``visible`` holds: their count and length (no leaf's df)."""
        N, total, _, _, _ = self._stats_entry(self._check_mask(visible, "visible"))
        return CorpusStats(docs=N, length=total, df={})

    def corpus(self, node, visible: np.ndarray) -> CorpusStats:
        """The statistics ``node`` is scored with over the rows ``visible`` holds:
        what a shard of a sharded collection reports, to be summed."""
        N, total, _, df = self._counts(self._leaves(node),
                                       self._check_mask(visible, "visible"), 0)
        return CorpusStats(docs=N, length=total, df=df)

    def _counts(self, leaves, visible, which: int, rows_of=None):
        """(N, tokens, avgdl, {scored leaf key: its df (which=0) or idf (1)}) over the
        rows ``visible`` holds; ``rows_of(key)`` gives a leaf's postings the caller
        decoded already (None: not decoded)."""
        N, total, avgdl, memo, everyone = self._stats_entry(visible)
        segs = self._segments
        out = {}
        for key, scored in leaves:
            if not scored or key in out:
                continue
            got = memo.get(key)
            if got is None:
                rows = None if rows_of is None else rows_of(key)
                if rows is None and key[0] == "Term":     # the segments' counts serve
                    g = self._id_map().get(key[1])
                    df = 0 if g is None else int(self._term_df(segs, g, visible, everyone))
                else:
                    if rows is None:
                        check_canceled()
                        rows = self._postings(segs, key)[0]
                    df = int(bm25.count_visible(rows, visible))
                got = memo[key] = (df, self._idf(N, df))
            out[key] = got[which]
        return N, total, avgdl, out

    def _weights(self, leaves, visible, corpus, rows_of=None):
        """(idf by scored leaf key, avgdl): from ``corpus`` (a query's own) or, None,
        from the rows ``visible`` holds (as ``corpus`` would report them)."""
        if corpus is None:
            _, _, avgdl, idf = self._counts(leaves, visible, 1, rows_of)
            return idf, avgdl
        idf = {}
        for key, scored in leaves:
            if scored and key not in idf:
                df = corpus.df.get(key)
                if df is None:
                    raise OptionError(f"the corpus statistics given count no rows for "
                                      f"{key[0].lower()} {key[1]!r} (they are another "
                                      "query's)")
                idf[key] = self._idf(corpus.docs, df)
        return idf, corpus.avgdl

    def _idf(self, N: int, df: int) -> float:
        return float(np.log(1.0 + (N - df + 0.5) / (df + 0.5)))

    # ------------------------------------------------------------ query leaves

    def _leaf_key(self, node):
        kind = type(node).__name__
        if kind == "Phrase":
            words = tuple(node.terms)
            return ("Term", words[0]) if len(words) == 1 else ("Phrase", words)
        if kind in ("Term", "Prefix"):
            return (kind, node.text)
        raise ValueError(f"fts: not a query node: {node!r}")

    def _postings(self, segs, key):
        """A leaf's postings over every segment: (rows int64 ascending, tfs int32)."""
        kind, what = key
        rows, tfs = [], []
        if kind == "Phrase":
            ids = self._id_map()
            gids = [ids.get(w) for w in what]
            if not gids or any(g is None for g in gids):
                return np.empty(0, np.int64), np.empty(0, np.int32)
            for seg in segs:
                at = [seg.find(np.array([g], np.int32)) for g in gids]
                if all(len(a) for a in at):
                    which = np.array([a[0] for a in at], np.int64)
                    r, t = bm25.phrase_rows(seg.post, seg.posb, seg.term_post, seg.term_pos,
                                            seg.term_df, which, seg.lo, seg.hi)
                    rows.append(r)
                    tfs.append(t)
        else:
            if kind == "Term":
                g = self._id_map().get(what)
                gids = np.array([] if g is None else [g], np.int32)
            else:
                gids = self._prefix_ids(what)
            if len(gids) == 0:
                return np.empty(0, np.int64), np.empty(0, np.int32)
            for seg in segs:
                which = seg.find(gids)
                if len(which) == 0:
                    continue
                r, t = bm25.decode_terms(seg.post, seg.term_post, seg.term_df,
                                         which.astype(np.int64), seg.lo, seg.hi)
                if len(which) > 1:
                    # a prefix: the terms' tfs summed per row
                    order = np.argsort(r, kind="stable")
                    r, t = r[order], t[order]
                    first = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
                    r, t = r[first], np.add.reduceat(t, first).astype(np.int32)
                rows.append(r)
                tfs.append(t)
        if not rows:
            return np.empty(0, np.int64), np.empty(0, np.int32)
        return np.concatenate(rows), np.concatenate(tfs)

    def _leaves(self, node, negated=False, out=None):
        """The tree's leaves in order: [(key, scored)]."""
        out = [] if out is None else out
        kind = type(node).__name__
        if kind in ("And", "Or"):
            if not node.children:
                raise ValueError(f"fts: an empty {kind}")
            for c in node.children:
                self._leaves(c, negated, out)
        elif kind == "Not":
            self._leaves(node.child, True, out)
        else:
            out.append((self._leaf_key(node), not negated))
        return out

    def _eval(self, node, present, it):
        """The tree's truth per row, ``present(i)`` giving leaf i's (in _leaves order)."""
        kind = type(node).__name__
        if kind in ("And", "Or"):
            # folded child by child: one mask per level, not one per child
            children = iter(node.children)
            out = self._eval(next(children), present, it).copy()
            for c in children:
                if kind == "And":
                    out &= self._eval(c, present, it)
                else:
                    out |= self._eval(c, present, it)
            return out
        if kind == "Not":
            return ~self._eval(node.child, present, it)
        i = next(it)
        if i & 1023 == 1023:
            check_canceled()
        return present(i)

    def _query(self, node, visible, corpus=None):
        """The leaves' postings and, with ``visible``, their idf and avgdl (of
        ``corpus``, else of the rows ``visible`` holds)."""
        segs = self._segments
        leaves = self._leaves(node)
        posting = {}
        for key, _ in leaves:
            if key not in posting:
                check_canceled()
                posting[key] = self._postings(segs, key)
        idf, avgdl = {}, None
        if visible is not None:
            idf, avgdl = self._weights(leaves, visible, corpus, lambda key: posting[key][0])
        return leaves, posting, idf, avgdl

    # ------------------------------------------------------------ answers

    def match(self, node, allow: np.ndarray) -> np.ndarray:
        """Rows allowed that match the query (boolean semantics), as a mask."""
        allow = self._check_mask(allow, "allow")
        leaves, posting, _, _ = self._query(node, None)
        return self._match(node, leaves, posting, len(allow)) & allow

    def _match(self, node, leaves, posting, m):
        def present(i):
            rows = posting[leaves[i][0]][0]
            mask = np.zeros(m, np.bool_)
            mask[rows[:np.searchsorted(rows, m)]] = True
            return mask

        # a null text matches nothing, not even a negation
        return self._eval(node, present, iter(range(len(leaves)))) & (self._lengths[:m] >= 0)

    def _scores_of(self, node, rows, leaves, posting, idf, avgdl):
        """BM25 of ``rows`` (ascending), 0 where the row does not match."""
        scores = np.zeros(len(rows), np.float64)
        for i, (key, scored) in enumerate(leaves):
            if i & 1023 == 1023:
                check_canceled()
            if scored:
                r, t = posting[key]
                bm25.add_scores(scores, rows, r, t, self._lengths, idf[key],
                                self.k1, self.b, avgdl)

        def present(i):
            r = posting[leaves[i][0]][0]
            at = np.searchsorted(r, rows)
            return r[np.minimum(at, len(r) - 1)] == rows if len(r) else np.zeros(len(rows), bool)

        hit = self._eval(node, present, iter(range(len(leaves))))
        scores[~hit | (self._lengths[rows] < 0)] = 0.0
        return scores

    def score_rows(self, node, rows: np.ndarray, visible: np.ndarray,
                   corpus: CorpusStats | None = None) -> np.ndarray:
        """BM25 of the given rows with ``corpus``'s statistics, None: ``visible``'s
        (0 where not matching)."""
        visible = self._check_mask(visible, "visible")
        rows = np.asarray(rows, np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.n):
            raise ValueError("fts: score_rows of rows out of range")
        order = np.argsort(rows, kind="stable")
        leaves, posting, idf, avgdl = self._query(node, visible, corpus)
        out = np.empty(len(rows), np.float32)
        out[order] = self._scores_of(node, rows[order], leaves, posting, idf, avgdl)
        return out

    def top_k(self, node, k: int, allow: np.ndarray, visible: np.ndarray,
              exhaustive: bool = False, corpus: CorpusStats | None = None):
        """The k best rows allowed that match, best first (ties by row ascending):
        (rows int64, scores float64 holding float32 values), scored with
        ``corpus``'s statistics, None: ``visible``'s (summed as float64, rounded to
        float32: the executor wants float64, and a conversion per query costs).

        Pruned unless ``exhaustive``: the same answer (held to it by the tests)
        from the kernel that skips what cannot reach the k best."""
        allow = self._check_mask(allow, "allow")
        visible = self._check_mask(visible, "visible")
        if k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        k = min(int(k), len(allow))
        if not exhaustive and k:
            found = self._top_k_pruned(node, k, allow, visible, corpus)
            if found is not None:
                return found
        leaves, posting, idf, avgdl = self._query(node, visible, corpus)
        rows = np.flatnonzero(self._match(node, leaves, posting, len(allow)) & allow)
        scores = self._scores_of(node, rows, leaves, posting, idf, avgdl).astype(np.float32)
        best = np.lexsort((rows, -scores))[:k]
        return rows[best].astype(np.int64), scores[best].astype(np.float64)

    def _compile(self, node, leaves, ops, args, negated=False):
        """The tree's leaves in order ([(key, scored)], as _leaves), its postfix
        program for the kernel ((0, leaf), (1, n) AND, (2, n) OR, (3, 0) NOT) and
        (every match holds a scored leaf, the scored leaves every match holds)."""
        kind = type(node).__name__
        if kind == "And" or kind == "Or":
            children = node.children
            if not children:
                raise ValueError(f"fts: an empty {kind}")
            holds, required = self._compile(children[0], leaves, ops, args, negated)
            for c in children[1:]:
                h, r = self._compile(c, leaves, ops, args, negated)
                # in place: a new set per child made a wide And quadratic
                if kind == "And":
                    holds = holds or h
                    required |= r
                else:
                    holds = holds and h
                    required &= r
            ops.append(1 if kind == "And" else 2)
            args.append(len(children))
            return holds, required
        if kind == "Not":
            self._compile(node.child, leaves, ops, args, True)
            ops.append(3)
            args.append(0)
            return False, set()
        i = len(leaves)
        if i & 4095 == 4095:
            check_canceled()
        ops.append(0)
        args.append(i)
        leaves.append((("Term", node.text) if kind == "Term" else self._leaf_key(node),
                       not negated))
        return True, {i}

    def _term_at(self, segs, gid):
        """Where term ``gid`` is in ``segs``: ([(segment, index, start, df, blk)], its
        df summed). Cached per segment tuple (a new tuple on every change of the
        segments), so a term is looked up once for all the queries holding it."""
        cache = self._at_cache
        if cache[0] is not segs:
            cache = self._at_cache = (segs, {})
        found = cache[1].get(gid)
        if found is None:
            out, total = [], 0
            for s, seg in enumerate(segs):
                ids = seg.term_ids
                t = int(ids.searchsorted(gid))
                if t < len(ids) and ids[t] == gid:
                    df = int(seg.term_df[t])
                    out.append((s, t, int(seg.term_post[t]), df, int(seg.term_blk[t])))
                    total += df
            if len(cache[1]) >= _AT_CACHE:
                cache[1].clear()
            found = cache[1][gid] = (out, total)
        return found

    def _term_df(self, segs, gid, visible, everyone) -> int:
        """Visible rows holding term ``gid``: with every row below len(visible)
        visible, the segments' own counts; else its rows decoded and counted."""
        m = len(visible)
        total = 0
        for s, t, _, df, _ in self._term_at(segs, gid)[0]:
            seg = segs[s]
            if seg.lo >= m:
                break
            if everyone and seg.hi <= m:
                total += df
                continue
            rows, _ = bm25.decode_terms(seg.post, seg.term_post, seg.term_df,
                                        np.array([t], np.int64), seg.lo, seg.hi)
            total += bm25.count_visible(rows, visible)
        return total

    def _top_k_pruned(self, node, k, allow, visible, corpus):
        segs = self._segments
        if type(node).__name__ == "Term":    # the commonest query: no tree to walk
            leaves, ops, args = [(("Term", node.text), True)], [0], [0]
            holds_leaf, required = True, (0,)
        else:
            leaves, ops, args = [], [], []
            holds_leaf, required = self._compile(node, leaves, ops, args)
        if not holds_leaf:
            return None       # a row can match by negations alone: score every match
        ids_of = self._id_map()
        m = len(allow)
        n_seg = 0
        while n_seg < len(segs) and segs[n_seg].lo < m:
            n_seg += 1
        L = len(leaves)
        # per segment, the kernel's plan: L kinds, starts, dfs, blks, doffs, scored
        # and required flags (then the program); a leaf not in a segment stays kind 2
        head = [2] * L + [0] * (2 * L) + [-1] * L + [0] * (3 * L)
        for i in range(L):
            if leaves[i][1]:
                head[5 * L + i] = 1
        for i in required:
            head[6 * L + i] = 1
        spec = [head]
        for _ in range(1, n_seg):
            spec.append(head.copy())
        cost = [0] * L
        decoded = {}
        d_rows, d_tfs, base = [], [], 0
        for i, (key, scored) in enumerate(leaves):
            if i & 1023 == 1023:
                check_canceled()
            if key[0] == "Term":
                g = ids_of.get(key[1])
                if g is None:
                    continue
                at, cost[i] = self._term_at(segs, g)
                for s, _, start, df, blk in at:
                    if s < n_seg:
                        col = spec[s]
                        col[i], col[L + i], col[2 * L + i], col[3 * L + i] = 0, start, df, blk
            else:
                if key not in decoded:
                    check_canceled()
                    rows, tfs = self._postings(segs, key)
                    decoded[key] = (base, rows)
                    d_rows.append(rows)
                    d_tfs.append(tfs)
                    base += len(rows)
                b0, rows = decoded[key]
                cost[i] = len(rows)
                if len(rows) and n_seg:
                    cut = np.searchsorted(rows, [r for seg in segs[:n_seg]
                                                 for r in (seg.lo, seg.hi)]).tolist()
                    for s in range(n_seg):
                        a, e = cut[2 * s], cut[2 * s + 1]
                        if e > a:
                            col = spec[s]
                            col[i], col[2 * L + i], col[4 * L + i] = 1, e - a, b0 + a
        weights, avgdl = self._weights(
            leaves, visible, corpus,
            (lambda key: decoded[key][1] if key in decoded else None) if decoded else None)
        idf = [weights[key] if scored else 0.0 for key, scored in leaves]
        lead = -1
        for i in required:      # the cheapest leaf every match holds, first if tied
            if lead < 0 or (cost[i], i) < (cost[lead], lead):
                lead = i
        # a segment holding no leaf (or not the lead, which every match holds)
        # matches nothing there
        runs = []
        for s in range(n_seg):
            if (spec[s][lead] if lead >= 0 else min(spec[s][:L])) != 2:
                runs.append(s)
        if not runs:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        prog = ops + args
        idf = np.array(idf + [self.k1, self.b, avgdl], np.float64)
        d_rows = np.concatenate(d_rows) if d_rows else _NO_ROWS
        d_tfs = np.concatenate(d_tfs) if d_tfs else _NO_TFS
        keys = np.empty(k, np.float64)     # -score: float32 values, compared exactly
        heap_ids = np.empty(k, np.int64)
        n = 0
        for s in runs:
            check_canceled()
            seg = segs[s]
            plan = np.array(spec[s] + prog + [seg.lo, lead, n, k, s == runs[-1]], np.int64)
            n = bm25.top_k_segment(seg.post, seg.blk_last, seg.blk_maxtf, seg.blk_minlen,
                                   seg.blk_post, plan, idf, d_rows, d_tfs, self._lengths,
                                   allow, keys, heap_ids)
        return heap_ids[:n], keys[:n]

    search = top_k      # the protocol's question: a text query's k best

    # ------------------------------------------------------------ checkpoint form

    def nbytes(self) -> int:
        return (sum(s.nbytes() for s in self._segments) + 4 * self.n + self._vocab_bytes)

    def to_arrays(self) -> dict[str, np.ndarray]:
        segs = self._segments
        out = {
            "lengths": self._lengths[:self.n].copy(),
            "vocab": np.frombuffer("\x00".join(self._terms).encode(), np.uint8).copy(),
            "seg_lo": np.array([s.lo for s in segs], np.int64),
            "seg_hi": np.array([s.hi for s in segs], np.int64),
        }
        for name, dtype in SEGMENT_FIELDS.items():
            parts = [getattr(s, name) for s in segs]
            out[name] = np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype)
            out["off_" + name] = np.cumsum([0] + [len(p) for p in parts]).astype(np.int64)
        return out

    def loaded(self, arrays: dict[str, np.ndarray], n: int) -> "FtsIndex":
        """This index's spec over a checkpoint's arrays (ValueError: they do not fit)."""
        if not arrays:
            raise ValueError("fts: no arrays")
        return FtsIndex.from_arrays(self.field, self.analyzer, self.k1, self.b, arrays, n)

    @classmethod
    def from_arrays(cls, field: str, analyzer, k1: float, b: float,
                    arrays: dict[str, np.ndarray], n: int) -> "FtsIndex":
        """The index ``to_arrays`` gave, over the arrays as they are (views, never
        written), for a table of at least the rows it covers (at most ``n``);
        raises ValueError on anything inconsistent."""
        def get(name, dtype):
            a = arrays.get(name)
            if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != 1:
                raise ValueError(f"fts: array {name!r} missing or not 1-D {np.dtype(dtype)}")
            return a

        self = cls(field, analyzer, k1, b)
        lengths = get("lengths", np.int32)
        if len(lengths) > n or (len(lengths) and lengths.min() < -1):
            raise ValueError("fts: lengths do not match the rows")
        n = len(lengths)    # the rows it covers: the maintainer indexes the rest
        raw = get("vocab", np.uint8)
        try:
            text = raw.tobytes().decode()
        except UnicodeDecodeError as e:
            raise ValueError("fts: vocabulary is not UTF-8") from e
        self._terms = text.split("\x00") if text else []
        if any(not t for t in self._terms):
            raise ValueError("fts: vocabulary holds an empty term")
        self._ids = None
        self._vocab_bytes = len(raw) + 1 if len(raw) else 0
        seg_lo, seg_hi = get("seg_lo", np.int64), get("seg_hi", np.int64)
        n_seg = len(seg_lo)
        if (len(seg_hi) != n_seg or np.any(seg_lo < 0) or np.any(seg_hi <= seg_lo)
                or np.any(seg_hi > n) or np.any(seg_lo[1:] < seg_hi[:-1])):
            raise ValueError("fts: segment row ranges damaged")
        flat = {}
        for name, dtype in SEGMENT_FIELDS.items():
            a = get(name, dtype)
            off = get("off_" + name, np.int64)
            if (len(off) != n_seg + 1 or off[0] != 0 or off[-1] != len(a)
                    or np.any(np.diff(off) < 0)):
                raise ValueError(f"fts: offsets of {name!r} damaged")
            flat[name] = (a, off)
        segs = []
        for s in range(n_seg):
            parts = [a[off[s]:off[s + 1]] for a, off in flat.values()]
            seg = dict(zip(SEGMENT_FIELDS, parts))
            if (len({len(seg[f]) for f in _TERM_FIELDS}) != 1
                    or len({len(seg[f]) for f in _BLOCK_FIELDS}) != 1
                    or len(seg["term_ids"]) == 0):
                raise ValueError("fts: segment arrays of unequal lengths")
            if (np.any(seg["term_post"][1:] < seg["term_post"][:-1])
                    or np.any(seg["term_pos"][1:] < seg["term_pos"][:-1])
                    or seg["term_post"][-1] > len(seg["post"])
                    or seg["term_pos"][-1] > len(seg["posb"])):
                raise ValueError("fts: segment offsets damaged")
            lo, hi = int(seg_lo[s]), int(seg_hi[s])
            if lo < 0 or hi > n:
                raise ValueError("fts: segment row ranges damaged")
            bm25.check_segment(*parts, lo, hi, len(self._terms), lengths)
            segs.append(Segment(lo, hi, parts))
        self._segments = tuple(segs)
        self._lengths = lengths
        self._own_lengths = False
        self.n = n
        return self
