"""PostgreSQL's tsvector, for many texts at once: to_tsvector's value.

`TsVectors` holds n tsvectors in one CSR block (what kernels/tsearch.py
reads): row r's entries ``row_off[r]:row_off[r+1]``, each a lexeme
(``vocab[lex[e]]``; the vocabulary sorted, so a row's entries are in
PostgreSQL's lexeme order) and its positions ``pos[ent_off[e]:ent_off[e+1]]``
(1-based, ascending, at most MAX_POSITIONS of them, none past MAX_POS: as
PostgreSQL keeps them). `tsvectors(config, texts)` analyzes the texts in one
batch (the tokenize kernel; stop words and stems per distinct word), never
a text at a time. The text form (`tolist`) is PostgreSQL's: `'fox':4
'quick':2`.
"""
from __future__ import annotations

import functools

import numpy as np

MAX_POS = 16383          # a later word takes this position (PostgreSQL's MAXENTRYPOS - 1)
MAX_POSITIONS = 256      # a lexeme keeps its first 256 positions (MAXNUMPOS)


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indices of every [starts[i], ends[i]) in order, concatenated."""
    lengths = (ends - starts).astype(np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.cumsum(lengths) - lengths
    out = np.ones(total, np.int64)
    nz = lengths > 0
    out[first[nz]] = starts[nz] - np.concatenate(([0], (ends[nz] - 1)[:-1]))
    out[0] = starts[nz][0]
    return np.cumsum(out)


class TsVectors:
    """n tsvectors (see the module's text)."""
    __slots__ = ("row_off", "lex", "ent_off", "pos", "vocab")

    def __init__(self, row_off, lex, ent_off, pos, vocab):
        self.row_off, self.lex, self.ent_off, self.pos = row_off, lex, ent_off, pos
        self.vocab = vocab

    def __len__(self) -> int:
        return len(self.row_off) - 1

    def most_positions(self) -> int:
        """The most positions one row holds."""
        if len(self) == 0:
            return 0
        return int(np.diff(self.ent_off[self.row_off]).max())

    def entries(self) -> np.ndarray:
        """Each row's number of distinct lexemes."""
        return np.diff(self.row_off)

    def positions(self) -> np.ndarray:
        """Each row's number of positions."""
        return np.diff(self.ent_off[self.row_off])

    def __getitem__(self, idx) -> "TsVectors":
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        ents = ranges(self.row_off[idx], self.row_off[idx + 1])
        row_off = np.zeros(len(idx) + 1, np.int64)
        np.cumsum(self.row_off[idx + 1] - self.row_off[idx], out=row_off[1:])
        pos = self.pos[ranges(self.ent_off[ents], self.ent_off[ents + 1])]
        ent_off = np.zeros(len(ents) + 1, np.int64)
        np.cumsum(self.ent_off[ents + 1] - self.ent_off[ents], out=ent_off[1:])
        return TsVectors(row_off, self.lex[ents], ent_off, pos, self.vocab)

    def tolist(self) -> list[str]:
        """PostgreSQL's text of each row (only for the rows a statement returns)."""
        quoted = [_quote(w) for w in self.vocab]
        pos = self.pos.tolist()
        ent_off = self.ent_off.tolist()
        lex = self.lex.tolist()
        out = []
        for r in range(len(self)):
            parts = []
            for e in range(int(self.row_off[r]), int(self.row_off[r + 1])):
                parts.append(quoted[lex[e]] + ":" +
                             ",".join(map(str, pos[ent_off[e]:ent_off[e + 1]])))
            out.append(" ".join(parts))
        return out


def _quote(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


@functools.lru_cache(maxsize=4)
def _analyzer(config: str):
    from .analyzer import Analyzer
    return Analyzer(config=config)


def tsvectors(config: str, texts: list) -> TsVectors:
    """to_tsvector(config, text) of each text (None: an empty one; the caller
    keeps the NULLs). The last 4 batches of at most KEPT_TEXTS texts and
    KEPT_CHARS characters are kept: a statement that ranks its rows in a window
    and in ORDER BY (pgvector's hybrid search) analyzes the same texts twice,
    and the second time is a lookup."""
    if len(texts) > KEPT_TEXTS or sum(len(t) for t in texts if t is not None) > KEPT_CHARS:
        return _analyzed(config, texts)      # a large table's texts: not held on to
    return _kept(config, tuple(texts))


KEPT_TEXTS = 50_000
KEPT_CHARS = 4_000_000


@functools.lru_cache(maxsize=4)
def _kept(config: str, texts: tuple) -> TsVectors:
    return _analyzed(config, texts)


def _analyzed(config: str, texts) -> TsVectors:
    batch = _analyzer(config).analyze_batch(["" if t is None else t for t in texts])
    vocab = batch.vocab
    order = sorted(range(len(vocab)), key=vocab.__getitem__)
    rank = np.empty(len(vocab), np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(len(vocab), dtype=np.int64)
    v = max(len(vocab), 1)
    # one int64 per token, (text, lexeme, position), sorted: each row's entries in
    # lexeme order, each entry's positions ascending; equal keys (positions past
    # MAX_POS) once
    key = ((batch.doc.astype(np.int64) * v + rank[batch.term]) * (MAX_POS + 1)
           + np.minimum(batch.pos.astype(np.int64) + 1, MAX_POS))
    key.sort()
    if len(key) > 1:
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    pos = (key % (MAX_POS + 1)).astype(np.int32)
    entry = key // (MAX_POS + 1)                    # text * v + lexeme
    new_entry = np.ones(len(key), bool)
    new_entry[1:] = entry[1:] != entry[:-1]
    ent_start = np.flatnonzero(new_entry)
    counts = np.diff(np.append(ent_start, len(key)))
    if len(counts) and counts.max() > MAX_POSITIONS:    # a lexeme keeps its first 256
        nth = np.arange(len(key)) - np.repeat(ent_start, counts)
        keep = nth < MAX_POSITIONS
        pos, entry, new_entry = pos[keep], entry[keep], new_entry[keep]
        ent_start = np.flatnonzero(new_entry)
    ent_off = np.append(ent_start, len(pos)).astype(np.int64)
    first = entry[ent_start]
    row_off = np.searchsorted(first // v, np.arange(len(texts) + 1)).astype(np.int64)
    return TsVectors(row_off, (first % v).astype(np.int32), ent_off, pos,
                     [vocab[i] for i in order])
