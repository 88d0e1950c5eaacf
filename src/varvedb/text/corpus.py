"""BM25's corpus statistics, as a value a search can carry (module of its own:
the request, the full-text index and a sharded collection's coordinator all
use it, and the request must not load the analyzer's kernels to name it)."""
from __future__ import annotations

import msgspec

from ..errors import FieldTypeError


class CorpusStats(msgspec.Struct, frozen=True, kw_only=True):
    """BM25's statistics of a corpus: `docs` rows with a text, `length` their
    tokens summed, `df` per leaf of a text query the rows holding it (read-only),
    a leaf keyed as the full-text index names it: ("Term", word), ("Prefix",
    text) or ("Phrase", words), as the field's analyzer made them.

    A score depends on the corpus as well as on the row, so a collection sharded
    over several files scores every shard with the whole corpus's statistics:
    each shard reports its own (Collection.corpus_stats), the coordinator sums
    them (`+`: integers, so exactly what one collection holding every row would
    count) and sends the sum in the search's text leg (query/request.py
    TextLeg.corpus). A collection alone is scored with its own (index/fts.py
    computes the same value)."""
    docs: int
    length: int
    df: dict

    def __post_init__(self):
        if not (_count(self.docs) and _count(self.length) and type(self.df) is dict
                and all(_count(v) and v <= self.docs for v in self.df.values())):
            raise FieldTypeError("corpus statistics are counts: docs, length and each "
                                 "leaf's df non-negative integers, df at most docs")

    @property
    def avgdl(self) -> float:
        return mean_length(self.docs, self.length)

    def __add__(self, other: "CorpusStats") -> "CorpusStats":
        """Two disjoint corpora's statistics as one's (a leaf one lacks counts 0 there)."""
        df = dict(self.df)
        for key, n in other.df.items():
            df[key] = df.get(key, 0) + n
        return CorpusStats(docs=self.docs + other.docs, length=self.length + other.length,
                           df=df)


def mean_length(docs: int, length: int) -> float:
    """The mean length (1.0 for no tokens: no row is scored then)."""
    return length / docs if docs and length else 1.0


def _count(v) -> bool:
    return type(v) is int and v >= 0
