"""Analyzer: text -> terms, for the full-text index and its queries.

Tokens are Unicode word runs (letters, digits and the combining marks between
them), case-folded, with Latin diacritics folded (é -> e, ß -> ss, æ -> ae);
CJK text (Han, Hiragana, Katakana, Hangul) gives overlapping character pairs,
a lone CJK character itself. Stemming (Snowball, through PyStemmer) runs after
folding when the field asks for it. No stopwords.

`Analyzer(config="english" | "simple")` reads text as PostgreSQL's text search
configuration of that name does (text/tsconfig.py): characters lowercased, not
folded further, no CJK pairs; 'english' drops its stop words (each still takes
its position) and stems the rest with the Snowball English stemmer. Positions
are then PostgreSQL's minus one.

Folding is defined per character (each character folds to a string, the same
wherever it stands), which is what lets one kernel fold and split every text of
a batch in a single pass (kernels/tokenize.py) and lets `spans` map each token
back to the characters it came from. The folding of a non-ASCII character is
computed from unicodedata once, the first time a batch holds it.
"""
from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from itertools import filterfalse

import numpy as np

from ..errors import OptionError
from ..kernels import tokenize as _kernel

# combining marks that fold away after a Latin letter (the diacritical-mark blocks)
_LATIN_MARKS = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF),
                (0x20D0, 0x20FF), (0xFE20, 0xFE2F))
_LATIN = ((0x0000, 0x024F), (0x1E00, 0x1EFF), (0x2C60, 0x2C7F), (0xA720, 0xA7FF),
          (0xAB30, 0xAB6F))
# letters that are not a base letter plus a mark, so NFKD leaves them alone
_LETTER_FOLDS = {"æ": "ae", "ø": "o", "đ": "d", "ð": "d", "ł": "l", "þ": "th",
                 "œ": "oe", "ħ": "h", "ı": "i", "ŧ": "t", "ŀ": "l"}
_CJK = ((0x1100, 0x11FF), (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029),
        (0x3031, 0x3035), (0x3040, 0x30FF), (0x3130, 0x318F), (0x31F0, 0x31FF),
        (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7FF),
        (0xF900, 0xFAFF), (0xFF66, 0xFFDC), (0x20000, 0x3FFFF))

_ASCII_FOLD = np.array([ord(chr(c).lower()) for c in range(128)], np.uint32)
_ASCII_CLASS = np.array([_kernel.WORD if chr(c).isalnum() else 0 for c in range(128)],
                        np.uint8)
_NO_KEYS = np.zeros(0, np.uint32)
_NO_OFF = np.zeros(1, np.int64)
_NO_CLASS = np.zeros(0, np.uint8)

_folds: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
_folds_lock = threading.Lock()


def _within(c: int, ranges) -> bool:
    return any(lo <= c <= hi for lo, hi in ranges)


def _strip_latin_marks(s: str) -> str:
    return "".join(x for x in s if not _within(ord(x), _LATIN_MARKS))


def fold_char(ch: str) -> str:
    """What one character folds to (possibly several characters, or none)."""
    latin = _strip_latin_marks(unicodedata.normalize("NFKD", ch))
    if all(_within(ord(x), _LATIN) for x in latin):
        out = "".join(_LETTER_FOLDS.get(x, x) for x in latin.casefold())
        return _strip_latin_marks(unicodedata.normalize("NFKD", out))
    # another script: compatibility forms unified, its own marks kept
    return unicodedata.normalize("NFC", unicodedata.normalize("NFKC", ch).casefold())


def char_class(ch: str) -> int:
    """0 separates tokens, WORD is part of a word run, CJK pairs up."""
    cat = unicodedata.category(ch)
    if _within(ord(ch), _CJK) and cat[0] in "LMN":
        return _kernel.CJK
    if ch.isalnum() or cat[0] == "M":
        return _kernel.WORD
    return 0


def _fold_entry(cp: int):
    entry = _folds.get(cp)
    if entry is None:
        out = fold_char(chr(cp))
        entry = (tuple(map(ord, out)), tuple(char_class(x) for x in out))
        with _folds_lock:
            _folds[cp] = entry
    return entry


def _lower_entry(cp: int):
    """A configuration's folding of one character: lowercased, no CJK pairs."""
    entry = _lowers.get(cp)
    if entry is None:
        out = chr(cp).lower()
        entry = (tuple(map(ord, out)),
                 tuple(_kernel.WORD if x.isalnum() or unicodedata.category(x)[0] == "M"
                       else 0 for x in out))
        with _folds_lock:
            _lowers[cp] = entry
    return entry


_lowers: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def _fold_tables(texts: list[str], entry_of=_fold_entry):
    """The kernel's folding of the non-ASCII characters in `texts`."""
    chars = set("".join(filterfalse(str.isascii, texts)))
    if not chars:
        return _NO_KEYS, _NO_OFF, _NO_KEYS, _NO_CLASS
    keys = np.array(sorted(ord(ch) for ch in chars if ord(ch) >= 128), np.uint32)
    entries = [entry_of(cp) for cp in keys.tolist()]
    off = np.zeros(len(entries) + 1, np.int64)
    np.cumsum([len(e[0]) for e in entries], out=off[1:])
    fold_cp = np.fromiter((c for e in entries for c in e[0]), np.uint32, int(off[-1]))
    fold_class = np.fromiter((c for e in entries for c in e[1]), np.uint8, int(off[-1]))
    return keys, off, fold_cp, fold_class


def _utf8(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-8, joined, and where each text starts in it."""
    try:
        encoded = list(map(str.encode, texts))
    except UnicodeEncodeError:     # a lone surrogate: carried, and never in a token
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    starts = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(texts)), out=starts[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), starts


@dataclass(frozen=True)
class TokenBatch:
    """Every token of a batch of texts: token i is term `vocab[term[i]]`, at
    position `pos[i]` of text `doc[i]` (doc non-decreasing)."""
    doc: np.ndarray       # int32
    pos: np.ndarray       # int32, 0-based within its text
    term: np.ndarray      # int32, index into vocab
    vocab: list[str]      # the distinct terms
    lengths: np.ndarray   # int32 per text: its number of tokens


def stem_languages() -> list[str]:
    """The Snowball languages `Analyzer(stem=...)` takes."""
    import Stemmer
    return sorted(Stemmer.algorithms())


@dataclass(frozen=True)
class Analyzer:
    """A field's tokenizer: `stem` is a Snowball language ("english") or None;
    `config` a PostgreSQL text search configuration (tsconfig.CONFIGS) instead."""
    stem: str | None = None
    config: str | None = None

    def __post_init__(self):
        if self.config is not None:
            from .tsconfig import check_config
            check_config(self.config)
            if self.stem is not None:
                raise OptionError("an analyzer takes stem= or config=, not both")
        if self.stem is not None and self.stem not in stem_languages():
            raise OptionError(f"no stemmer for {self.stem!r}; the languages are "
                              f"{', '.join(stem_languages())}")

    def analyze_batch(self, texts: list[str]) -> TokenBatch:
        """The tokens of every text, in one pass over all of them."""
        doc, pos, term, lengths, _, _, vocab = self._run(texts, False)
        return TokenBatch(doc, pos, term, vocab, lengths)

    def analyze(self, text: str) -> list[str]:
        """One text's terms, in order."""
        batch = self.analyze_batch([text])
        vocab = batch.vocab
        return [vocab[t] for t in batch.term.tolist()]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, term) per token: text[start:end] is what the term came from."""
        _, _, term, _, ostart, oend, vocab = self._run([text], True)
        return [(s, e, vocab[t]) for s, e, t in
                zip(ostart.tolist(), oend.tolist(), term.tolist())]

    def spans_batch(self, texts: list[str]) -> list[list[tuple[int, int, str]]]:
        """`spans` of every text, in one pass over all of them."""
        doc, _, term, _, ostart, oend, vocab = self._run(texts, True)
        cut = np.searchsorted(doc, np.arange(len(texts) + 1)).tolist()
        triples = list(zip(ostart.tolist(), oend.tolist(), map(vocab.__getitem__, term.tolist())))
        return [triples[a:b] for a, b in zip(cut, cut[1:])]

    def _run(self, texts, want_spans):
        data, starts = _utf8(texts)
        keys, off, fold_cp, fold_class = _fold_tables(
            texts, _fold_entry if self.config is None else _lower_entry)
        doc, pos, term, lengths, ostart, oend, pool, t_start = _kernel.tokenize(
            data, starts, _ASCII_FOLD, _ASCII_CLASS, keys, off, fold_cp, fold_class,
            want_spans)
        buf = _kernel.term_code_points(pool, t_start)
        vocab = buf.tobytes().decode("utf-32-le").split("\x00")[:-1]
        if self.config is not None and vocab:
            from .tsconfig import stop_words, stemmer_of
            stops = stop_words(self.config)
            if stops:
                drop = np.fromiter((w in stops for w in vocab), bool, len(vocab))
                if drop.any():
                    keep = ~drop[term]
                    doc, pos, term = doc[keep], pos[keep], term[keep]
                    lengths = np.bincount(doc, minlength=len(texts)).astype(np.int32)
                    if want_spans:
                        ostart, oend = ostart[keep], oend[keep]
                    used = np.zeros(len(vocab), bool)     # the stop words leave the vocabulary
                    used[term] = True
                    vocab = [w for w, u in zip(vocab, used.tolist()) if u]
                    term = (np.cumsum(used, dtype=np.int32) - 1)[term]
            stem = stemmer_of(self.config)
            if stem is not None and vocab:
                vocab, term = self._stemmed(vocab, term, stem)
        elif self.stem is not None and vocab:
            vocab, term = self._stemmed(vocab, term, self.stem)
        return doc, pos, term, lengths, ostart, oend, vocab

    def _stemmed(self, vocab, term, language):
        """Stem the distinct terms only, then renumber the tokens' terms."""
        import Stemmer
        stemmer = Stemmer.Stemmer(language)
        stemmer.maxCacheSize = 0    # its cache only slows distinct words (3x)
        stems = stemmer.stemWords(vocab)
        distinct = dict.fromkeys(stems)
        if len(distinct) == len(stems):
            return stems, term
        index = {s: i for i, s in enumerate(distinct)}
        remap = np.fromiter(map(index.__getitem__, stems), np.int32, len(stems))
        return list(distinct), remap[term]
